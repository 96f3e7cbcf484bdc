"""Audit of the noise drawn ahead (``prefetch.py``): the release is x + Z with Z
drawn by OpenDP's integer sampler before x is known, added exactly. Checked with production
noise, each release through its own one-query source, as the engine makes them:

* an ε audit of a count (Δ = 1, b = 1: ε = 1) with its noise drawn ahead;
* an ε audit of a SUM release on the lattice (Δ = 10, b = 10: ε = 1, the neighbours of
  ``test_audit_lattice.py``) with its noise drawn ahead;
* the same law as OpenDP's own call: values drawn ahead against OpenDP's lattice draw on the
  same value (two-sample Kolmogorov–Smirnov, 20,000 each), and their scale (MAD = b).
"""

from __future__ import annotations

import functools
from concurrent.futures import Future
from fractions import Fraction

import numpy as np
from scipy import stats

from dpproxy.mechanisms.noise import _scale_up, lattice_exponent
from dpproxy.prefetch import Law, Prefetched, draw
from dpproxy.release.noise import _noise_releases
from tests.audit.harness import (
    NOISE,
    Audit,
    Neighbours,
    assert_has_power,
    assert_laplace_scale,
    assert_within_claim,
    repeat,
    run_audit,
    tails,
)
from tests.audit.test_audit_lattice import BITS, SUM_SCALE, _sum_release


def _ahead(law: Law, n: int = 1) -> Prefetched:
    """A one-query source whose draws of ``law`` were made ahead (by the worker's function)."""
    done: Future[dict[Law, list[int]]] = Future()
    done.set_result(draw({law: n}))
    return Prefetched(NOISE, done)


COUNT_LAW = ("int", _scale_up(Fraction(1)))
SUM_LAW = ("lattice", _scale_up(SUM_SCALE), lattice_exponent(SUM_SCALE, BITS))


def _count(exact: float) -> float:
    source = _ahead(COUNT_LAW)
    (out,) = source.laplace([exact], Fraction(1), integer=True)
    assert source.served == 1
    return out


def _sum(exact: float) -> float:
    source = _ahead(SUM_LAW)
    noisy = _noise_releases((_sum_release(),), [()], lambda _k, _n: exact, source, {"s": BITS})
    assert source.served == 1
    return noisy["s"][0]


@functools.cache
def count_ahead_audit() -> Audit:
    pair = Neighbours(
        "count drawn ahead", repeat(lambda: _count(0.0)), repeat(lambda: _count(1.0)), 1.0, 0.0
    )
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


@functools.cache
def sum_ahead_audit() -> Audit:
    pair = Neighbours(
        "sum drawn ahead", repeat(lambda: _sum(0.0)), repeat(lambda: _sum(10.0)), 1.0, 0.0
    )
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_a_count_drawn_ahead_is_within_claim() -> None:
    assert_within_claim(count_ahead_audit())


def test_the_count_audit_has_power() -> None:
    assert_has_power(count_ahead_audit(), 0.5)


def test_a_sum_drawn_ahead_is_within_claim() -> None:
    assert_within_claim(sum_ahead_audit())


def test_the_sum_audit_has_power() -> None:
    assert_has_power(sum_ahead_audit(), 0.5)


def test_values_drawn_ahead_have_opendps_law() -> None:
    """KS at α = 10⁻⁶ between 20,000 values drawn ahead and 20,000 of OpenDP's lattice call on
    the same exact value; the MAD of the former is the scale."""
    n, exact = 20_000, 3.25
    k = SUM_LAW[2]
    source = _ahead(SUM_LAW, n)
    ahead = np.array(source.laplace_lattice([exact] * n, SUM_SCALE, k)) - exact
    assert source.served == n
    direct = np.array(NOISE.laplace_lattice([exact] * n, SUM_SCALE, k)) - exact
    assert stats.ks_2samp(ahead, direct).pvalue > 1e-6
    assert_laplace_scale(ahead, 0.0, float(SUM_SCALE))


def _stair(exact: float) -> float:
    from tests.audit.test_audit_staircase import _law, _release

    source = _ahead(("stair", _law()))
    noisy = _noise_releases((_release(),), [()], lambda _k, _n: exact, source, {"s": BITS})
    assert source.served == 1
    return noisy["s"][0]


@functools.cache
def staircase_ahead_audit() -> Audit:
    """The staircase SUM of ``test_audit_staircase.py`` (ε = 1, totals a whole step apart)."""
    from tests.audit.test_audit_staircase import _law

    law = _law()
    far = float(Fraction(law.shift) * Fraction(2) ** law.k)
    on_d, on_d2 = repeat(lambda: _stair(0.0)), repeat(lambda: _stair(far))
    pair = Neighbours("staircase drawn ahead", on_d, on_d2, 1.0, 0.0)
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_a_staircase_drawn_ahead_is_within_claim() -> None:
    assert_within_claim(staircase_ahead_audit())


def test_the_staircase_ahead_audit_has_power() -> None:
    assert_has_power(staircase_ahead_audit(), 0.5)


def test_staircase_values_drawn_ahead_have_the_release_time_law() -> None:
    """KS at α = 10⁻⁶ between 20,000 staircase values drawn ahead and 20,000 of
    ``OpenDPNoise.staircase`` on the same exact value."""
    from tests.audit.test_audit_staircase import _law

    n, exact, law = 20_000, 3.25, _law()
    source = _ahead(("stair", law), n)
    ahead = np.array(source.staircase([exact] * n, law)) - exact
    assert source.served == n
    direct = np.array(NOISE.staircase([exact] * n, law)) - exact
    assert stats.ks_2samp(ahead, direct).pvalue > 1e-6
