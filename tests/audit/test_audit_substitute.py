"""Audits of the releases whose substitute-neighbour calibration went from 2K to K
(``analysis/local.py``: the mean's local bound, the order statistics' radius and the quantile
scores all move by at most max(insertions, deletions) = K in one substitution).

Each samples the production release (``release/local.py``, OpenDP noise, the planner's
calibration) on D and on D' = D with one unit of K = 2 rows *substituted* — its rows moved from
lo to hi, the worst case for K — and bounds ε with confidence 1 − 10⁻⁷
(``tests/audit/harness.py``). Before the change these plans carried twice the noise; the audit
shows the halved noise stays within the claim and that the audit has power on these pairs.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from dpproxy.analysis import local
from dpproxy.catalog.model import Neighbouring
from dpproxy.planning.plan import Method
from dpproxy.release import local as release
from dpproxy.sql.scope import AggKind
from dpproxy.values import Interval
from tests.audit.harness import (
    NOISE,
    Audit,
    Draw,
    Neighbours,
    assert_has_power,
    assert_within_claim,
    calibrate,
    claim,
    indices,
    repeat,
    run_audit,
    tails,
)

K = 2
SUB = Neighbouring.SUBSTITUTE
HALF = Fraction(1, 2)


@functools.cache
def smooth_mean_audit() -> Audit:
    """(ε, δ) = (2, 10⁻⁶), AVG over [0, 1], K = 2. D: 1,000 rows at 0 (one unit owns two of
    them); D': that unit's two rows at 1. n is the same, so S(D) = S(D') = LS'(1000) = K/1000
    (the k = 0 term), the mean moves by exactly K/1000 = S, and the noise is Laplace(2S/ε): a
    true loss of ε/2 at the tails (with 2K, S was twice as large and the loss ε/4)."""
    lo, hi = Fraction(0), Fraction(1)
    plan = calibrate(
        Method.SMOOTH,
        AggKind.AVG,
        Interval(lo, hi),
        epsilon=Fraction(2),
        delta=Fraction(1, 10**6),
        rows=K,
        neighbouring=SUB,
    )
    s = local.mean_smooth(1000, hi - lo, plan.rows, plan.neighbouring, plan.beta)
    assert s == Fraction(K, 1000)

    def on(data: list[float]) -> Draw:
        mean = math.fsum(data) / len(data)
        return repeat(lambda: release.smooth(mean, s, plan.epsilon, NOISE))

    d = [0.0] * 1000
    d2 = [0.0] * (1000 - K) + [1.0] * K
    pair = Neighbours("smooth mean, substitution at K", on(d), on(d2), *claim(plan))
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_smooth_mean_within_claim() -> None:
    assert_within_claim(smooth_mean_audit())


def test_smooth_mean_audit_has_power() -> None:
    assert_has_power(smooth_mean_audit(), 0.25)


@functools.cache
def exponential_median_audit() -> Audit:
    """The median by the exponential mechanism end to end, ε = 2, K = 2, scale 2K/ε = 2 (it was
    4): cells [0,1), [1,2), [2,3), {3}; D has counts (4, 1, 0, 4), D' moves one unit's two rows
    from cell 0 to cell 3 (a substitution). Every score moves by at most 2 = K."""
    lo, hi = Fraction(0), Fraction(3)
    plan = calibrate(
        Method.EXPONENTIAL,
        AggKind.MEDIAN,
        Interval(lo, hi),
        epsilon=Fraction(2),
        q=HALF,
        bins=3,
        rows=K,
        neighbouring=SUB,
    )
    assert plan.scale == 2 * K / plan.epsilon
    s1 = local.quantile_scores([4, 1, 0, 4], HALF)
    s2 = local.quantile_scores([2, 1, 0, 6], HALF)
    assert max(abs(a - b) for a, b in zip(s1, s2, strict=True)) <= K

    def on(s: list[Fraction]) -> Draw:
        return repeat(lambda: release.exponential_index(s, plan.scale, NOISE))

    pair = Neighbours("exponential median, substitution at K", on(s1), on(s2), *claim(plan))
    return run_audit(pair, pilot=0, main=15_000, candidates=indices(4))


def test_exponential_median_within_claim() -> None:
    assert_within_claim(exponential_median_audit())


def test_exponential_median_audit_has_power() -> None:
    assert_has_power(exponential_median_audit(), 0.2)
