"""Privacy audit of the exponential mechanism's interpolated-position scores, end to end:
data → the cell summaries the SQL returns (count, least and greatest value per cell) →
``release/stats.py`` (``mechanisms/quantile.py``'s positions, scores and flooring) →
``release/local.exponential_index`` → OpenDP noise (``tests/audit/harness.py``).

The neighbours audited are the worst pair of an exhaustive search: over every dataset of at
most five values from a small grid and every value added to it, the exact permute-and-flip
probabilities of the floored scores (``test_audit_order._permute_and_flip``) are compared.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

from dpproxy.analysis import local
from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms import quantile
from dpproxy.planning.plan import Method, StatPlan
from dpproxy.release import stats as release_stats
from dpproxy.sql.scope import AggKind
from dpproxy.values import Interval
from tests.audit.estimator import equals
from tests.audit.harness import (
    NOISE,
    Audit,
    Draw,
    Neighbours,
    assert_has_power,
    assert_within_claim,
    calibrate,
    claim,
    repeat,
    run_audit,
)
from tests.audit.test_audit_order import _permute_and_flip

Q = Fraction(9, 10)
LO, HI = Fraction(0), Fraction(3)
VALUES = (0.0, 0.5, 1.0, 1.75, 2.5, 3.0)


def summaries(plan: StatPlan, data: Sequence[float]) -> list[tuple[int, int, float, float]]:
    """What the cell GROUP BY returns: (cell, count, least, greatest) per non-empty cell."""
    assert plan.bounds.lo is not None and plan.bounds.hi is not None
    cells = local.quantile_cells(plan.bounds.lo, plan.bounds.hi, False, plan.cells - 1)
    by_cell: dict[int, list[float]] = {}
    for x in data:
        by_cell.setdefault(cells.index(Fraction(x)), []).append(x)
    return [(c, len(v), min(v), max(v)) for c, v in sorted(by_cell.items())]


def floored_scores(plan: StatPlan, data: Sequence[float]) -> list[int]:
    """The integer scores ``release/stats.py`` hands to the selection (same functions)."""
    assert plan.bounds.lo is not None and plan.bounds.hi is not None
    cells = local.quantile_cells(plan.bounds.lo, plan.bounds.hi, False, plan.cells - 1)
    counts = [0] * cells.count
    mins: list[Fraction | None] = [None] * cells.count
    maxs: list[Fraction | None] = [None] * cells.count
    for c, n, least, most in summaries(plan, data):
        counts[c], mins[c], maxs[c] = n, Fraction(least), Fraction(most)
    cut = quantile.edges(cells.lo, cells.width, cells.bins, cells.integer)
    rho = quantile.positions(cut, counts, mins, maxs, cells.lo, cells.hi)
    delta = local.score_sensitivity(plan.neighbouring, plan.rows, Q)
    return quantile.floored(quantile.scores(rho, len(data), Q), delta)


@functools.cache
def position_quantile_audit() -> Audit:
    """The 90th percentile under add/remove, ε = 2 (Δ = 9/10, scale 0.9), cells [0,1), [1,2),
    [2,3), {3}. The exhaustive search must stay within ε exactly; the audit then samples the
    worst pair through the production release."""
    plan = calibrate(
        Method.EXPONENTIAL,
        AggKind.PERCENTILE_CONT,
        Interval(LO, HI),
        epsilon=Fraction(2),
        q=Q,
        bins=3,
        neighbouring=Neighbouring.ADD_REMOVE,
    )
    delta = local.score_sensitivity(Neighbouring.ADD_REMOVE, 1, Q)
    assert plan.scale == 2 * delta / plan.epsilon and plan.cells == 4
    unit_scale = float(plan.scale * quantile.GRID_STEPS / delta)
    worst: tuple[float, tuple[float, ...], float] = (0.0, (), 0.0)
    for size in range(6):
        for data in itertools.combinations_with_replacement(VALUES, size):
            p1 = _permute_and_flip([Fraction(m) for m in floored_scores(plan, data)], unit_scale)
            for y in VALUES:
                added = floored_scores(plan, [*data, y])
                p2 = _permute_and_flip([Fraction(m) for m in added], unit_scale)
                loss = max(abs(math.log(a / b)) for a, b in zip(p1, p2, strict=True))
                worst = max(worst, (loss, data, y))
    assert worst[0] <= float(plan.epsilon), worst  # exactly, not only sampled
    assert worst[0] > 1.0, worst  # the search reaches far enough to make the audit mean much
    _, d, y = worst

    def on(data: Sequence[float]) -> Draw:
        rows = summaries(plan, data)
        return repeat(lambda: release_stats._from_rows(plan, list(rows), NOISE)[0])

    reps = [0.5, 1.5, 2.5, 3.0]
    pair = Neighbours("exponential 90th percentile, positions", on(d), on([*d, y]), *claim(plan))
    print(worst)  # the exact worst loss, shown with pytest -s
    return run_audit(pair, pilot=0, main=20_000, candidates=lambda _: [equals(v) for v in reps])


def test_position_quantile_within_claim() -> None:
    assert_within_claim(position_quantile_audit())


def test_position_quantile_audit_has_power() -> None:
    assert_has_power(position_quantile_audit(), 0.3)
