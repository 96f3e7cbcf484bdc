"""Exact summaries → released values for every :class:`StatPlan` of a plan, group by group.

The calibration is the planner's (``planning/methods.py``); the data-dependent quantities the
mechanisms need — distances to instability, smooth sensitivities, cell scores — are computed
here from the exact summaries with ``analysis/local.py`` and never leave this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpproxy.analysis import local
from dpproxy.errors import InternalError, StabilityTestFailed
from dpproxy.mechanisms import quantile
from dpproxy.mechanisms.noise import NoiseSource
from dpproxy.planning.methods import quantile_form
from dpproxy.planning.plan import Method, QueryPlan, StatPlan
from dpproxy.release import local as mech
from dpproxy.release.exact import ExactResult, norm_key
from dpproxy.release.guard import changed_coordinates
from dpproxy.release.memo import per_plan
from dpproxy.rewrite.fixed import sum_grids

_Z95 = math.log(20)

Span = tuple[float, float]


@dataclass
class StatValues:
    """Released values (and 95% spans where the noise scale is public) per group key."""

    values: dict[tuple[Any, ...], float | None] = field(default_factory=dict)
    spans: dict[tuple[Any, ...], Span | None] = field(default_factory=dict)
    # JOINT means: the count A + B read off the same release, with its 95% span
    counts: dict[tuple[Any, ...], tuple[float, Span]] = field(default_factory=dict)


ExactLookup = Callable[[tuple[Any, ...], str], float]
ScaledLookup = Callable[[tuple[Any, ...], str], int]


def release_stats(
    plan: QueryPlan,
    keys: list[tuple[Any, ...]],
    exact_value: ExactLookup,
    extras: dict[str, ExactResult],
    noise: NoiseSource,
    exact_scaled: ScaledLookup | None = None,
    grids: dict[str, int] | None = None,
) -> dict[str, StatValues]:
    """Release every stat of ``plan`` for every group in ``keys`` (already selected).

    ``exact_scaled(key, name)`` is a SUM primitive's exact total as the integer T of the grid
    2^-``grids[name]`` (``rewrite/fixed.py``): with it, a JOINT mean whose bounds and centre lie
    on that grid has its parts noised exactly on the grid (``release/local.py``)."""
    out: dict[str, StatValues] = {}
    nk = len(plan.query.keys)
    for stat in plan.stats:
        result = StatValues()
        if stat.method is Method.JOINT:
            assert stat.count is not None
            lo, hi = stat.bounds.lo, stat.bounds.hi
            assert lo is not None and hi is not None
            on_grid = _joint_grids(plan).get(stat.name) if grids else None
            if exact_scaled is not None and on_grid is not None and stat.total is not None:
                scaled = [
                    joint_parts(
                        on_grid,
                        max(round(exact_value(key, stat.count)), 0),
                        exact_scaled(key, stat.total),
                    )
                    for key in keys
                ]
                released = mech.joint_releases_on_grid(
                    scaled,
                    on_grid[0],
                    lo,
                    hi,
                    stat.scale,
                    noise,
                    epsilon=stat.epsilon,
                    changed=changed_coordinates(plan),
                )
            else:
                inputs = [
                    _exact_mean_inputs(
                        stat, exact_value(key, stat.count), exact_value(key, stat.total or "")
                    )
                    for key in keys
                ]
                # Every group's parts in one draw (release/local.py: the law of one per group).
                released = mech.joint_releases(inputs, lo, hi, stat.scale, noise)
            for key, (mean, m_span, count, c_span) in zip(keys, released, strict=True):
                result.values[key], result.spans[key] = mean, m_span
                result.counts[key] = (count, c_span)
        elif stat.count is not None:
            for key in keys:
                v, span = _mean(
                    stat, exact_value(key, stat.count), exact_value(key, stat.total or ""), noise
                )
                result.values[key], result.spans[key] = v, span
        else:
            exact = extras.get(stat.name)
            if exact is None:
                raise InternalError(f"no exact result for {stat.name}")
            grouped = _by_key(exact, nk)
            for key in keys:
                rows = grouped.get(norm_key(key), [])
                v, span = _from_rows(stat, rows, noise)
                result.values[key], result.spans[key] = v, span
        if not plan.query.keys and result.values.get(()) is None and stat.method is Method.PTR:
            raise StabilityTestFailed(
                f"propose-test-release refused to answer {stat.kind.value.upper()}: the data is "
                f"too close to a dataset whose local sensitivity exceeds the proposed bound "
                f"{float(stat.bound or 0):.6g}",
                hint="the test still cost its share of the budget; propose a larger ptr_bound, "
                "or use another plan (SET dpproxy.mechanism = 'smooth', or let the planner choose)",
            )
        out[stat.name] = result
    return out


def joint_grid(stat: StatPlan, grids: dict[str, int]) -> tuple[int, int, int] | None:
    """A JOINT mean's fixed-point grid, when its parts can be computed on it exactly:
    (bits, (c − lo)·2^bits, (hi − lo)·2^bits) with both products integers, c the centre its
    SUM primitive is taken around (``rewrite/fixed.py``); else None. A function of the plan."""
    bits = None if stat.total is None else grids.get(stat.total)
    lo, hi = stat.bounds.lo, stat.bounds.hi
    if bits is None or lo is None or hi is None:
        return None
    unit = Fraction(2) ** bits
    below, width = (stat.center - lo) * unit, (hi - lo) * unit
    if below.denominator != 1 or width.denominator != 1:
        return None
    return bits, below.numerator, width.numerator


def _plan_joint_grids(plan: QueryPlan) -> dict[str, tuple[int, int, int] | None]:
    """:func:`joint_grid` of every JOINT stat of ``plan`` on the plan's own fixed-point grids
    (``rewrite/fixed.sum_grids``, which :func:`release_stats`' only caller, ``apply_noise``,
    passes as ``grids``): a product of the plan alone, kept per plan object
    (``release/memo.py``): its exact Fraction arithmetic costs about 15 µs a query."""
    grids = sum_grids(plan)
    return {s.name: joint_grid(s, grids) for s in plan.stats if s.method is Method.JOINT}


_joint_grids = per_plan(_plan_joint_grids)


def joint_parts(grid: tuple[int, int, int], n: int, total: int) -> tuple[int, int]:
    """(Σ(x − lo), Σ(hi − x))·2^bits, exactly, from the count n of the mean's rows and the
    integer total T = Σ(x − c)·2^bits of its centred SUM primitive (:func:`joint_grid`)."""
    _, below, width = grid
    aw = total + n * below
    return aw, n * width - aw


def _by_key(exact: ExactResult, nk: int) -> dict[tuple[Any, ...], list[tuple[Any, ...]]]:
    grouped: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for row in exact.rows:
        grouped.setdefault(norm_key(tuple(row[:nk])), []).append(tuple(row[nk:]))
    return grouped


def _exact_mean_inputs(stat: StatPlan, n_raw: float, centred: float) -> tuple[int, float]:
    """The exact count and (uncentred) sum of a mean's rows."""
    n = max(round(n_raw), 0)
    return n, centred + n * float(stat.center)


def _mean(
    stat: StatPlan, n_raw: float, centred: float, noise: NoiseSource
) -> tuple[float | None, Span | None]:
    lo, hi = stat.bounds.lo, stat.bounds.hi
    assert lo is not None and hi is not None
    width = hi - lo
    n, total = _exact_mean_inputs(stat, n_raw, centred)
    mean = total / n if n else float(stat.center)
    mean = min(max(mean, float(lo)), float(hi))
    if stat.method is Method.PTR:
        assert stat.bound is not None
        d = local.mean_distance(n, width, stat.rows, stat.neighbouring, stat.bound)
        released = mech.ptr(mean, d, stat.test_scale, stat.threshold, stat.scale, noise)
        if released is None:
            return None, None
        half = float(stat.scale) * _Z95
        return _clip(released, stat), (released - half, released + half)
    if stat.method is Method.SMOOTH:
        s = local.mean_smooth(n, width, stat.rows, stat.neighbouring, stat.beta)
        return _clip(mech.smooth(mean, s, stat.epsilon, noise), stat), None
    raise InternalError(f"{stat.method.value} is not a mean method")


def _finite(v: Any, otherwise: Fraction) -> Fraction:
    """A cell's least or greatest value, exactly; ``otherwise`` if it is not a finite number."""
    f = float(v)
    return Fraction(f) if math.isfinite(f) else otherwise


def _clip(v: float, stat: StatPlan) -> float:
    lo, hi = stat.bounds.lo, stat.bounds.hi
    if lo is None or hi is None:
        return v
    return min(max(v, float(lo)), float(hi))


def _from_rows(
    stat: StatPlan, rows: list[tuple[Any, ...]], noise: NoiseSource
) -> tuple[float | None, Span | None]:
    if stat.method is Method.SAA:
        assert stat.output is not None and stat.output.lo is not None
        assert stat.output.hi is not None
        chunks: list[float | None] = [None] * stat.chunks
        for chunk, value in rows:
            if value is not None and math.isfinite(float(value)):
                chunks[int(chunk)] = float(value)
        released = mech.sample_and_aggregate(
            chunks, stat.output.lo, stat.output.hi, stat.scale, noise
        )
        half = float(stat.scale) * _Z95
        return released, (released - half, released + half)
    lo, hi = stat.bounds.lo, stat.bounds.hi
    assert lo is not None and hi is not None and stat.q is not None
    if stat.method is Method.EXPONENTIAL:
        cells = local.quantile_cells(lo, hi, stat.integer_cells, stat.cells - 1)
        if cells.count != stat.cells:
            raise InternalError("cell layout differs from the plan")
        # Interpolated-position scores, floored to exact integers (mechanisms/quantile.py).
        counts = [0] * cells.count
        mins: list[Fraction | None] = [None] * cells.count
        maxs: list[Fraction | None] = [None] * cells.count
        for cell, n, least, most in rows:
            i = min(max(int(cell), 0), cells.count - 1)
            counts[i] += int(n)
            if least is not None:  # a NaN counts as lo here and as hi below: still a
                v, was = _finite(least, lo), mins[i]  # fixed monotone map of the values
                mins[i] = v if was is None else min(v, was)
            if most is not None:
                v, was = _finite(most, hi), maxs[i]
                maxs[i] = v if was is None else max(v, was)
        layout = (cells.lo, cells.width, cells.bins, cells.integer)
        delta = local.score_sensitivity(stat.neighbouring, stat.rows, stat.q)
        steps = quantile.selection_scores(
            layout, counts, mins, maxs, lo, hi, stat.q, delta, stat.scale
        )
        index = mech.exponential_index(
            [Fraction(m) for m in steps], stat.scale * quantile.GRID_STEPS / delta, noise
        )
        return float(cells.value(index)), None
    # PTR / SMOOTH over order statistics
    n = int(rows[0][0]) if rows else 0
    window = {int(rn): float(v) for _, rn, v in rows}
    flo, fhi = float(lo), float(hi)

    def order_stat(i: int) -> float:
        if i < 1:
            return flo
        if i > n:
            return fhi
        try:
            return min(max(window[i], flo), fhi)
        except KeyError:
            raise InternalError(f"order statistic {i} is outside the fetched window") from None

    form = quantile_form(stat.kind)
    a, b = local.quantile_ranks(stat.q, n, form)
    value = local.quantile_value(order_stat, stat.q, n, form)
    radius = local.row_radius(stat.neighbouring, stat.rows)
    if stat.method is Method.PTR:
        assert stat.bound is not None
        d = local.quantile_distance(
            order_stat, a, b, radius, stat.bound, lo=lo, hi=hi, kmax=stat.kmax
        )
        answer = mech.ptr(value, d, stat.test_scale, stat.threshold, stat.scale, noise)
        if answer is None:
            return None, None
        half = float(stat.scale) * _Z95
        return _clip(answer, stat), (answer - half, answer + half)
    s = local.quantile_smooth(order_stat, a, b, radius, stat.beta, lo=lo, hi=hi, kmax=stat.kmax)
    return _clip(mech.smooth(value, Fraction(s), stat.epsilon, noise), stat), None
