"""Audit of DP partition selection: how often a group of one unit is released, against δ.

A neighbour holds up to N groups the other has not, each with one unit (N = G under add/remove,
2G under substitution); the selection is (ε, δ)-DP only if such a group is released with
probability at most δ/N (``planning/plan.py``'s :class:`Selection`). Each audit plans a private
GROUP BY with the real planner (``plan_query``: calibration and threshold), checks the plan,
and runs the real release (``release/noise.py``'s ``apply_noise`` with OpenDP's discrete
Laplace, ``OpenDPNoise``) on a D' holding one large shared group and many units of one-unit
groups (their noise is independent, so each call gives one draw per unit). It then bounds the
release probability with a one-sided Clopper–Pearson interval:

* within claim: the *lower* bound at confidence 1 − 10⁻⁸ on the probability that any group of
  a unit is released stays at or below δ (and, per group, at or below δ/N);
* noise law: the release rate matches p^τ/(1 + p), p = e^{-1/s}, within six standard errors
  (the model the threshold was derived from is the noise OpenDP draws);
* power: the threshold of the previous planner, 1 + b·ln(G/(2δ)) (ln(G/δ) under substitution,
  a continuous-Laplace formula), run through the same code, is caught exceeding δ.

The pairs (ε, δ, G) are chosen where the continuous formula is off by a large factor (a large δ
keeps the probabilities measurable in 10⁴ draws; the bug does not depend on δ's size).
Reliability: six within-claim bounds at 10⁻⁸ each and six law checks at ≈ 2·10⁻⁹ each; the power
checks sit more than seven standard errors past the confidence margin. A correct implementation
fails this file with probability below 10⁻⁷. Run time ≈ 5 s (OpenDP's exact sampler takes about
30 µs a draw; 10⁵ draws in all).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from fractions import Fraction

from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms.base import Laplace
from dpproxy.mechanisms.selection import exclusive_groups
from dpproxy.planning.plan import QueryPlan
from dpproxy.release.exact import ExactResult
from dpproxy.release.noise import apply_noise
from dpproxy.values import float_up, ln_up
from tests.audit.estimator import cp_lower
from tests.audit.harness import NOISE, SIGMAS
from tests.unit.test_selection_threshold import plan_for

ALPHA = 1e-8  # each within-claim bound is wrong with probability ≤ ALPHA
UNITS = 1_000  # units of one-unit groups per call


def plan(epsilon: Fraction, delta: Fraction, groups: int, rel: Neighbouring) -> QueryPlan:
    """The checked plan of a private GROUP BY key (the unit test's schema and query)."""
    p = plan_for(epsilon, delta, groups, rel)
    assert p.selection is not None and [q.name for q in p.primitives] == ["__units"]
    return p


def old_threshold(p: QueryPlan) -> int:
    """The previous planner's τ = 1 + b·ln(G/(2δ)) (ln(G/δ) under substitution) and release rule
    (noisy count > float_up(τ)), as the equivalent integer threshold ⌊float_up(τ)⌋."""
    sel = p.selection
    assert sel is not None
    lap = sel.release.mechanism
    assert isinstance(lap, Laplace)
    g, dlt = Fraction(p.stability.groups), sel.release.cost.delta
    ratio = g / dlt if p.neighbouring is Neighbouring.SUBSTITUTE else g / (2 * dlt)
    tau = float_up(1 + lap.scale * ln_up(ratio))
    assert tau != math.floor(tau)  # a fractional τ: "> τ" is "> ⌊τ⌋" on integers
    return math.floor(tau)


@dataclass(frozen=True, slots=True)
class Measured:
    units: int  # draws of "any group of the unit released"
    unit_hits: int
    groups: int  # draws of "this one-unit group released"
    group_hits: int
    delta: float  # δ charged
    share: float  # δ/N: the planned per-group probability bound
    expected: float  # p^τ/(1 + p): the exact per-group probability of the noise drawn

    def unit_lower(self) -> float:
        return cp_lower(self.unit_hits, self.units, ALPHA)

    def group_lower(self) -> float:
        return cp_lower(self.group_hits, self.groups, ALPHA)

    def __str__(self) -> str:
        return (
            f"released {self.unit_hits}/{self.units} units (≥ {self.unit_lower():.4f}) vs "
            f"δ = {self.delta:.4g}; per group {self.group_hits / self.groups:.4f} "
            f"(≥ {self.group_lower():.4f}, exact {self.expected:.4f}) vs δ/N = {self.share:.4g}"
        )


def measure(p: QueryPlan, calls: int) -> Measured:
    """Run the release ``calls`` times on D': a shared group of 1000 units and UNITS units with
    G one-unit groups each; count the units of which some group was released."""
    sel = p.selection
    assert sel is not None
    g = p.stability.groups
    rows = [("shared", 1000)] + [(f"u{i}-g{j}", 1) for i in range(UNITS) for j in range(g)]
    exact = ExactResult(("__key_0", "__units"), tuple(rows))
    units = [[f"u{i}-g{j}" for j in range(g)] for i in range(UNITS)]
    unit_hits = group_hits = 0
    for _ in range(calls):
        kept = {grp.key[0] for grp in apply_noise(p, exact, NOISE)}
        group_hits += len(kept) - ("shared" in kept)
        unit_hits += sum(any(k in kept for k in keys) for keys in units)
    lap = sel.release.mechanism
    assert isinstance(lap, Laplace)
    base = math.exp(-1 / float_up(lap.scale))  # p = e^{-1/s}
    n = exclusive_groups(g, p.neighbouring)
    dlt = float(sel.release.cost.delta)
    expected = base**sel.threshold / (1 + base)
    return Measured(calls * UNITS, unit_hits, calls * UNITS * g, group_hits, dlt, dlt / n, expected)


def audit(
    epsilon: str, delta: str, groups: int, rel: Neighbouring, calls: int
) -> tuple[Measured, Measured]:
    """(the planner's threshold, the previous planner's threshold) on the same pair."""
    p = plan(Fraction(epsilon), Fraction(delta), groups, rel)
    assert p.selection is not None
    old = replace(p, selection=replace(p.selection, threshold=old_threshold(p)))
    new, broken = measure(p, calls), measure(old, calls)
    print(f"{rel.value} ε={epsilon} δ={delta} G={groups} τ={p.selection.threshold}: {new}")
    print(f"  old τ={old_threshold(p)}: {broken}")
    return new, broken


@functools.cache
def add_remove_one_group() -> tuple[Measured, Measured]:
    """ε = 1, δ = 0.07, G = 1: b = 1, p = 1/e. τ = 3 releases a one-unit group with probability
    p³/(1 + p) ≈ 0.036 = 0.52·δ; the old τ = 1 + ln(1/0.14) ≈ 2.97 released it at p²/(1 + p)
    ≈ 0.099 = 1.41·δ (2·10⁴ draws: 13 standard errors above δ)."""
    return audit("1", "0.07", 1, Neighbouring.ADD_REMOVE, calls=20)


@functools.cache
def add_remove_two_groups() -> tuple[Measured, Measured]:
    """ε = 4, δ = 0.14, G = 2: b = 1/2, p = e^{-2}. τ = 2: each group p²/(1 + p) ≈ 0.016,
    either of the unit's two ≈ 0.032; the old τ = 1 + ln(1/0.14)/2 ≈ 1.98 kept Z ≥ 1: each
    p/(1 + p) ≈ 0.119, either ≈ 0.224 = 1.6·δ (10⁴ units: 20 standard errors above δ)."""
    return audit("4", "0.14", 2, Neighbouring.ADD_REMOVE, calls=10)


@functools.cache
def substitute_one_group() -> tuple[Measured, Measured]:
    """Substitution, ε = 4, δ = 0.14, G = 1: b = 2/ε = 1/2, N = 2 (the replaced unit's group
    vanishes, the new one's appears). τ = 2: ≈ 0.016 ≤ δ/2 = 0.07; the old τ = 1 + ln(1/δ)/2
    ≈ 1.98: ≈ 0.119 = 1.7·δ/2 (10⁴ draws: 15 standard errors above δ/2)."""
    return audit("4", "0.14", 1, Neighbouring.SUBSTITUTE, calls=10)


AUDITS = [add_remove_one_group, add_remove_two_groups, substitute_one_group]


def test_selection_within_claim() -> None:
    for run in AUDITS:
        new, _ = run()
        assert new.unit_lower() <= new.delta, f"privacy violation found: {new}"
        assert new.group_lower() <= new.share, f"privacy violation found: {new}"


def test_selection_noise_law() -> None:
    """The per-group release rate is the discrete Laplace tail the threshold was derived from."""
    for run in AUDITS:
        for m in run():
            rate = m.group_hits / m.groups
            se = math.sqrt(m.expected * (1 - m.expected) / m.groups)
            assert abs(rate - m.expected) <= SIGMAS * se, m


def test_the_continuous_threshold_is_caught() -> None:
    """The previous threshold, through the same release, is proved to exceed δ (the per-unit
    event under add/remove; the per-group share δ/N under substitution)."""
    one, two, sub = (run()[1] for run in AUDITS)
    assert one.unit_lower() > one.delta, f"audit missed the old threshold: {one}"
    assert two.unit_lower() > two.delta, f"audit missed the old threshold: {two}"
    assert sub.group_lower() > sub.share, f"audit missed the old threshold: {sub}"
