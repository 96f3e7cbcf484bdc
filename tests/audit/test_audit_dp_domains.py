"""Audit of the DP domains of ``schema init --dp-bounds`` (``mechanisms/dp_domains.py``): how
often a value that only one neighbour holds is listed, against δ.

Such a value has exactly one unit (tests/property/test_dp_domains_bruteforce.py), and a
neighbour holds at most N = ``EXCLUSIVE`` = 2 of them, so the domain is (ε, δ)-DP only if a
one-unit value is listed with probability at most δ/N. Each audit runs the real choice
(``choose_domain`` with OpenDP's discrete Laplace, ``OpenDPNoise``) on counts holding one value
of 1000 units, :data:`VALUES` values of one unit and as many of two units (their noise is
independent, so each call gives one draw per value), then:

* within claim: the *lower* Clopper–Pearson bound at confidence 1 − 10⁻⁸ on the probability
  that a one-unit value is listed stays at or below δ/N;
* noise law: the listing rates of one- and two-unit values match p^τ/(1 + p) and
  p^(τ−1)/(1 + p), p = e^{-1/s}, s the scale OpenDP draws with, within six standard errors (the
  model the threshold was derived from is the noise drawn);
* power: a two-unit value is listed when a one-unit value would be under the threshold τ − 1;
  at (ε, δ) = (4, 0.14) that rate is proved to exceed δ/N, so the audit would catch a threshold
  one too low (τ is the smallest that keeps the claim).

Large δ keep the probabilities measurable in 10⁴ draws; the threshold's derivation does not
depend on δ's size. Reliability: two within-claim bounds at 10⁻⁸ each, four law checks at
≈ 2·10⁻⁹ each; in the power check the rate (≈ 0.119) is 15 standard errors above δ/N = 0.07,
the bound at 10⁻⁸ about 9. Run time about 3 s.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.mechanisms.dp_domains import EXCLUSIVE, choose_domain, scale, threshold
from dpproxy.values import float_up
from tests.audit.estimator import cp_lower
from tests.audit.harness import NOISE, SIGMAS

ALPHA = 1e-8  # each within-claim bound is wrong with probability ≤ ALPHA
VALUES = 1_000  # one-unit values (and two-unit values) per call


@dataclass(frozen=True, slots=True)
class Measured:
    epsilon: Fraction
    delta: Fraction
    tau: int
    draws: int  # per kind of value
    one_hits: int  # one-unit values listed
    two_hits: int  # two-unit values listed
    p: float  # e^{-1/s}

    @property
    def share(self) -> float:
        return float(self.delta) / EXCLUSIVE  # δ/N

    def one_lower(self) -> float:
        return cp_lower(self.one_hits, self.draws, ALPHA)

    def two_lower(self) -> float:
        return cp_lower(self.two_hits, self.draws, ALPHA)

    def expected(self, units: int) -> float:
        return self.p ** (self.tau - units + 1) / (1 + self.p)  # P(Z ≥ τ − c + 1)

    def __str__(self) -> str:
        return (
            f"ε={self.epsilon} δ={self.delta} τ={self.tau}: one-unit values listed "
            f"{self.one_hits}/{self.draws} (≥ {self.one_lower():.4f}, exact "
            f"{self.expected(1):.4f}) vs δ/N = {self.share:.4g}; two-unit {self.two_hits}/"
            f"{self.draws} (≥ {self.two_lower():.4f}, exact {self.expected(2):.4f})"
        )


def measure(epsilon: str, delta: str, calls: int) -> Measured:
    eps, dlt = Fraction(epsilon), Fraction(delta)
    counts = [("shared", 1000)] + [(f"one{i}", 1) for i in range(VALUES)]
    counts += [(f"two{i}", 2) for i in range(VALUES)]
    one = two = 0
    for _ in range(calls):
        chosen = choose_domain(counts, eps, dlt, NOISE, cap=10 * VALUES)
        assert "shared" in chosen.values and list(chosen.values) == sorted(chosen.values)
        one += sum(v.startswith("one") for v in chosen.values)
        two += sum(v.startswith("two") for v in chosen.values)
    p = math.exp(-1 / float_up(scale(eps)))
    m = Measured(eps, dlt, threshold(eps, dlt), calls * VALUES, one, two, p)
    print(m)
    return m


@functools.cache
def steep() -> Measured:
    """ε = 4, δ = 0.14: s = 1/2, p = e^{-2}, τ = 2. A one-unit value is listed with probability
    p²/(1 + p) ≈ 0.016 ≤ δ/N = 0.07; at τ − 1 it would be p/(1 + p) ≈ 0.119 = 1.7·δ/N."""
    return measure("4", "0.14", calls=10)


@functools.cache
def flat() -> Measured:
    """ε = 1, δ = 0.1: s = 2, p = e^{-1/2}, τ = 6: p⁶/(1 + p) ≈ 0.031 ≤ δ/N = 0.05."""
    return measure("1", "0.1", calls=10)


AUDITS = [steep, flat]


def test_dp_domains_within_claim() -> None:
    for run in AUDITS:
        m = run()
        assert m.expected(1) <= m.share, m  # the model itself
        assert m.one_lower() <= m.share, f"privacy violation found: {m}"


def test_dp_domains_noise_law() -> None:
    for run in AUDITS:
        m = run()
        for units, hits in ((1, m.one_hits), (2, m.two_hits)):
            e = m.expected(units)
            se = math.sqrt(e * (1 - e) / m.draws)
            assert abs(hits / m.draws - e) <= SIGMAS * se, m


def test_a_threshold_one_lower_is_caught() -> None:
    m = steep()
    assert m.tau == 2
    assert m.two_lower() > m.share, f"audit missed the threshold τ − 1: {m}"
