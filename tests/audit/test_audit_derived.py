"""Audit of a COUNT read off a JOINT mean (``planning/derived.py``), and of its error bound.

The released pair (mean, count) is a function of the joint release's two noisy parts, so the
claim is the joint release's ε. The audit samples the count alone, through the production path
(``release/local.py``'s ``joint_release`` with OpenDP noise, the planner's calibration), on
D: 500 units of K = 2 rows at lo and D': one more unit (A + B moves by K, the whole L1
sensitivity), and bounds ε with confidence 1 − 10⁻⁷ (``tests/audit/harness.py``). A broken
variant — the same count with the noise of one part only, as if the sum had the sensitivity of
a single coordinate at half the scale — is caught by the same audit. The reported 95% interval
is checked for coverage: the share of draws whose interval holds the exact count is within six
standard errors of at least 95%.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from dpproxy.release import local as release
from tests.audit.harness import (
    NOISE,
    SIGMAS,
    Audit,
    Neighbours,
    assert_has_power,
    assert_within_claim,
    claim,
    repeat,
    run_audit,
    tails,
)
from tests.audit.test_audit_mean import JM_HI, JM_LO, JM_ROWS, joint_mean_plan


def derived_count(units: int, scale: Fraction) -> float:
    """All rows at lo: the exact sum is 0, the count K per unit."""
    n = float(units * JM_ROWS)
    _, _, count, _ = release.joint_release(n, 0.0, JM_LO, JM_HI, scale, NOISE)
    return count


@functools.cache
def derived_audit() -> Audit:
    plan = joint_mean_plan()
    on_d = repeat(lambda: derived_count(500, plan.scale))
    on_d2 = repeat(lambda: derived_count(501, plan.scale))
    pair = Neighbours("count read off the joint mean", on_d, on_d2, *claim(plan))
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_derived_count_within_claim() -> None:
    assert_within_claim(derived_audit())


def test_derived_count_audit_has_power() -> None:
    assert_has_power(derived_audit(), 0.3)


def test_a_count_with_half_the_noise_is_caught() -> None:
    """The broken variant: one part's noise at half the scale added to the exact count."""
    plan = joint_mean_plan()
    half = plan.scale / 2

    def broken(units: int) -> float:
        (v,) = NOISE.laplace([float(units * JM_ROWS)], half, integer=False)
        return v

    pair = Neighbours(
        "count with half the noise",
        repeat(lambda: broken(500)),
        repeat(lambda: broken(501)),
        *claim(plan),
    )
    audit = run_audit(pair, pilot=2_000, main=15_000, candidates=tails)
    assert audit.bound.epsilon > audit.pair.epsilon, f"not caught: {audit}"


def test_the_interval_covers_the_count() -> None:
    plan = joint_mean_plan()
    n = 1000.0
    draws = 4_000
    covered = 0
    for _ in range(draws):
        _, _, _, (lo, hi) = release.joint_release(n, 0.0, JM_LO, JM_HI, plan.scale, NOISE)
        covered += lo <= n <= hi
    rate = covered / draws
    se = math.sqrt(0.95 * 0.05 / draws)
    assert rate >= 0.95 - SIGMAS * se, rate
    assert rate <= 0.95 + SIGMAS * se, rate  # exact law, not a loose union bound
    assert np.isfinite(rate)
