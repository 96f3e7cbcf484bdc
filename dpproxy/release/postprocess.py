"""Noisy primitives → released rows: aggregates, select-list arithmetic, HAVING, ORDER, LIMIT.

Everything here is post-processing of differentially private values, so it costs no budget.
Conventions (also in docs/sql.md, "Post-processing conventions"):

* COUNT values are rounded to integers and made non-negative; over a single table that declares
  ``public_max_rows`` (a public upper bound on its rows), they are also clipped to that bound.
* SUM of a measure whose interval is non-negative (non-positive) is clipped at 0.
* AVG = noisy centred sum / max(noisy count, 1) + centre, clipped to the measure's interval.
* VAR_POP = S₂/n − (S₁/n)² from centred sums, clipped to [0, (width/2)²]; VAR_SAMP multiplies by
  n/(n−1); STDDEV is the square root. With a noisy n ≤ 1 the sample versions are NULL.
* A COUNT read off a JOINT mean (``planning/derived.py``) is A + B of that release, rounded
  and clipped like any count; its error bound comes from the law of the sum of the two noises.
* Aggregates released by another method (``planning/methods.py``) arrive whole: JOINT, PTR and
  SMOOTH means and order statistics are clipped to the measure's interval; PTR's refusal in a
  group is NULL. Their error bound is known only where the noise scale is public (PTR, SAA);
  smooth sensitivity and the exponential mechanism report none (NULL), since the noise there
  depends on the data.
* Each cell carries a 95% error bound: the half-width of an interval that holds the noiseless
  value with probability ≥ 95% (a union bound over the noisy primitives it is made of).
* The select list, HAVING and ORDER BY are typed statically (``sql/validate.py``), and their
  evaluation (``release/evaluation.py``) is total: an operation that has no value — an
  overflow, a rounding or cast of ±∞ or NaN, a text that does not read as the cast's type (the
  grammar the rewrite uses for row-level casts, ``rewrite/dialect.py``), an integer out of its
  type's range — is NULL, never an error, since the query is already charged when this runs.
  Integers beyond 64 bits become doubles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpproxy.planning.plan import AggregatePlan, QueryPlan
from dpproxy.release.cells import bare_column, bare_half_widths
from dpproxy.release.cells import half_width as _half_width
from dpproxy.release.evaluation import evaluate, evaluate_span
from dpproxy.release.intervals import interval_ends
from dpproxy.release.layout import layout
from dpproxy.release.memo import per_plan
from dpproxy.release.noise import NoisyGroup, derived_name, drawn_half_width
from dpproxy.release.windows import compute_windows
from dpproxy.sql.scope import COUNT_KINDS
from dpproxy.sql.types import SqlType
from dpproxy.sql.validate import AggKind, OrderItem

CONFIDENCE = 0.95
_COUNTS = COUNT_KINDS


@dataclass(frozen=True, slots=True)
class OutputColumn:
    name: str
    type: str  # "integer" | "double" | "text" | "boolean" | "date"


@dataclass(frozen=True, slots=True)
class Released:
    columns: tuple[OutputColumn, ...]
    rows: tuple[tuple[Any, ...], ...]
    errors: tuple[tuple[float | None, ...], ...]  # 95% half-width per cell (0: exact key)


Span = tuple[float, float]


def _clip(v: float, lo: float, hi: float) -> float:
    return min(max(v, lo), hi)


def _div_span(a: Span, b: Span) -> Span:
    lo_b, hi_b = max(b[0], 1.0), max(b[1], 1.0)
    cands = [a[0] / lo_b, a[0] / hi_b, a[1] / lo_b, a[1] / hi_b]
    return min(cands), max(cands)


def _sq_span(a: Span) -> Span:
    hi = max(a[0] ** 2, a[1] ** 2)
    lo = 0.0 if a[0] <= 0 <= a[1] else min(a[0] ** 2, a[1] ** 2)
    return lo, hi


def aggregate_value(
    agg: AggregatePlan, v: dict[str, float | None], max_count: int | None = None
) -> float | int | None:
    """One aggregate from noisy primitive values (see the module docstring); ``max_count`` is
    a public upper bound on any count (post-processing: clipping to a public constant)."""
    if agg.stat is not None:
        return v[agg.stat.name]  # released whole by release/stats.py (None: PTR refused)
    if agg.derived is not None:  # A + B of a JOINT mean (planning/derived.py)
        raw = v.get(derived_name(agg.derived.name))
        if raw is None:
            return None
        count = max(0, round(raw))
        return count if max_count is None else min(count, max_count)
    return _from_primitives(agg, {p: x for p, x in v.items() if x is not None}, max_count)


def _from_primitives(
    agg: AggregatePlan, v: dict[str, float], max_count: int | None
) -> float | int | None:
    k = agg.kind
    if k in _COUNTS:
        count = max(0, round(v[agg.parts[0]]))
        return count if max_count is None else min(count, max_count)
    if k is AggKind.SUM:
        s = v[agg.parts[0]]
        assert agg.bounds is not None and agg.bounds.lo is not None and agg.bounds.hi is not None
        if agg.bounds.lo >= 0:
            s = max(0.0, s)
        if agg.bounds.hi <= 0:
            s = min(0.0, s)
        return s
    assert agg.bounds is not None and agg.bounds.lo is not None and agg.bounds.hi is not None
    lo, hi, c = float(agg.bounds.lo), float(agg.bounds.hi), float(agg.center)
    n = max(v[agg.parts[0]], 1.0)
    mean_c = v[agg.parts[1]] / n
    if k is AggKind.AVG:
        return _clip(mean_c + c, lo, hi)
    half = (hi - lo) / 2
    var = _clip(v[agg.parts[2]] / n - mean_c**2, 0.0, half * half)
    if k in (AggKind.VAR_SAMP, AggKind.STDDEV_SAMP):
        raw_n = v[agg.parts[0]]
        if raw_n <= 1:
            return None
        var = var * raw_n / (raw_n - 1)
    return math.sqrt(var) if k in (AggKind.STDDEV_POP, AggKind.STDDEV_SAMP) else var


def aggregate_span(agg: AggregatePlan, v: dict[str, float], half: dict[str, float]) -> Span | None:
    """An interval that holds the noiseless aggregate with probability ≥ 95% (union bound)."""
    spans = {p: (v[p] - half[p], v[p] + half[p]) for p in agg.parts}
    k = agg.kind
    if k in _COUNTS or k is AggKind.SUM:
        return spans[agg.parts[0]]
    assert agg.bounds is not None and agg.bounds.lo is not None and agg.bounds.hi is not None
    lo, hi, c = float(agg.bounds.lo), float(agg.bounds.hi), float(agg.center)
    mean = _div_span(spans[agg.parts[1]], spans[agg.parts[0]])
    if k is AggKind.AVG:
        return _clip(mean[0] + c, lo, hi), _clip(mean[1] + c, lo, hi)
    second = _div_span(spans[agg.parts[2]], spans[agg.parts[0]])
    sq = _sq_span(mean)
    cap = ((hi - lo) / 2) ** 2
    var = (_clip(second[0] - sq[1], 0.0, cap), _clip(second[1] - sq[0], 0.0, cap))
    if k in (AggKind.VAR_SAMP, AggKind.STDDEV_SAMP):
        n_lo = spans[agg.parts[0]][0]
        if n_lo <= 1:
            return None
        var = (var[0], var[1] * n_lo / (n_lo - 1))
    if k in (AggKind.STDDEV_POP, AggKind.STDDEV_SAMP):
        return math.sqrt(var[0]), math.sqrt(var[1])
    return var


def output_columns(plan: QueryPlan) -> tuple[OutputColumn, ...]:
    """Names and types of the released columns (known before execution, e.g. for Describe)."""
    out = []
    for item in plan.query.outputs:
        e = item.expr
        if isinstance(e, exp.Column) and e.name.startswith("__agg_"):
            kind = plan.aggregates[int(e.name[6:])].kind
            out.append(OutputColumn(item.name, "integer" if kind in _COUNTS else "double"))
        elif isinstance(e, exp.Column) and e.name.startswith("__win_"):
            from dpproxy.sql.windows import INTEGRAL  # imported by a query with a window

            w = plan.query.windows[int(e.name[6:])]
            integral = w.function in INTEGRAL or (
                w.function in ("min", "max", "lag", "lead")
                and w.argument is not None
                and _integral(plan, w.argument)
            )
            name = "integer" if integral else _TYPE_NAMES.get(w.type, "text")
            out.append(OutputColumn(item.name, name))
        elif item.type is SqlType.NUMERIC:
            key_type = "double"
            if isinstance(e, exp.Column) and e.name.startswith("__key_"):
                key_type = "integer" if _integral_key(plan, int(e.name[6:])) else "double"
            out.append(OutputColumn(item.name, key_type))
        else:
            mapping = {SqlType.TEXT: "text", SqlType.BOOLEAN: "boolean", SqlType.DATE: "date"}
            out.append(OutputColumn(item.name, mapping.get(item.type, "text")))
    return tuple(out)


_TYPE_NAMES = {
    SqlType.NUMERIC: "double",
    SqlType.TEXT: "text",
    SqlType.BOOLEAN: "boolean",
    SqlType.DATE: "date",
}


def _integral(plan: QueryPlan, e: exp.Expression) -> bool:
    """Is this post-processing expression an integer column: a count, or an integral key?"""
    if isinstance(e, exp.Column) and e.name.startswith("__agg_"):
        return plan.aggregates[int(e.name[6:])].kind in _COUNTS
    if isinstance(e, exp.Column) and e.name.startswith("__key_"):
        return _integral_key(plan, int(e.name[6:]))
    return False


def _integral_key(plan: QueryPlan, i: int) -> bool:
    key = plan.query.keys[i]
    if key.domain is not None:
        return all(
            isinstance(v, int) and not isinstance(v, bool) for v in key.domain if v is not None
        )
    if isinstance(key.expr, exp.Column):
        col = plan.query.table.column(key.expr.name)
        return col is not None and col.type.value == "integer"
    return False


def _halves(plan: QueryPlan) -> list[dict[str, float]]:
    """Each aggregate's parts share its α (a union bound), so the same primitive can carry a
    different half-width in different aggregates."""
    alpha = 1 - CONFIDENCE
    return [
        {}
        if agg.stat is not None or agg.derived is not None
        else {
            p: drawn_half_width(plan, plan.release_for(p), alpha / len(agg.parts))
            for p in agg.parts
        }
        for agg in plan.aggregates
    ]


# Products of the plan alone, once per plan object (release/memo.py); never mutated.
_part_halves = per_plan(_halves)
_output_columns = per_plan(output_columns)


def postprocess(plan: QueryPlan, groups: list[NoisyGroup]) -> Released:
    """Assemble released rows from noisy groups (pure)."""
    q = plan.query
    part_halves = _part_halves(plan)
    names = layout(plan)
    # A count over one table holds at most its rows (not so for a join or a flat map).
    max_count = q.table.public_max_rows if q.source is None else None
    kept_groups: list[tuple[dict[str, Any], dict[str, Span | None]]] = []
    exact_key = (0.0, 0.0)
    for g in groups:
        env: dict[str, Any] = dict(zip(names.keys, g.key, strict=True))
        spans: dict[str, Span | None] = dict.fromkeys(names.keys, exact_key)
        known: dict[str, float] | None = None
        for i, agg in enumerate(plan.aggregates):
            name, span_name, ends = names.aggregates[i]
            part = names.counts[i]
            raw = None if part is None else g.values.get(part)
            if part is not None and raw is not None:  # a COUNT's one part: the calls below, inlined
                count = max(0, round(raw))
                env[name] = count if max_count is None else min(count, max_count)
                h = part_halves[i][part]
                spans[name] = (raw - h, raw + h)
            elif span_name is not None:  # a stat's, or a count read off a JOINT mean
                env[name] = aggregate_value(agg, g.values, max_count)
                spans[name] = g.spans.get(span_name)
            else:
                env[name] = aggregate_value(agg, g.values, max_count)
                if known is None:
                    known = {p: x for p, x in g.values.items() if x is not None}
                spans[name] = aggregate_span(agg, known, part_halves[i])
            # DP_INTERVAL_LOW/HIGH (release/intervals.py): the same release, no extra cost.
            if ends is not None:
                env[ends[0]], env[ends[1]] = interval_ends(agg, spans[name], max_count)
        if q.having is not None and evaluate(q.having, env) is not True:
            continue
        kept_groups.append((env, spans))
    # Window functions read the rows that survived HAVING (release/windows.py); their values
    # carry no error bound (evaluate_span knows no __win_ name).
    compute_windows(q.windows, [env for env, _ in kept_groups], evaluate)
    # Column by column (one pass over the groups per output, the per-cell calls inlined for
    # a bare column: release/cells.py), then transposed: the values and bounds cell by cell.
    envs = [env for env, _ in kept_groups]
    columns: list[list[Any]] = []
    bounds: list[list[float | None]] = []
    for o, bare in zip(q.outputs, names.outputs, strict=True):
        values = (
            [evaluate(o.expr, env) for env in envs] if bare is None else bare_column(bare, envs)
        )
        columns.append(values)
        if o.is_key:
            bounds.append([0.0] * len(values))
        elif bare is None:
            bounds.append(
                [
                    _half_width(evaluate_span(o.expr, spans), v)
                    for (_, spans), v in zip(kept_groups, values, strict=True)
                ]
            )
        else:
            bounds.append(bare_half_widths(bare, kept_groups, values))
    rows: list[tuple[tuple[Any, ...], tuple[float | None, ...], dict[str, Any]]]
    if columns:
        rows = list(zip(zip(*columns, strict=True), zip(*bounds, strict=True), envs, strict=True))
    else:  # no output column (`SELECT FROM t GROUP BY k`, as PostgreSQL allows): empty rows
        rows = [((), (), env) for env in envs]
    for item in reversed(q.order):
        rows.sort(key=_order_key(item), reverse=item.desc)
    start = q.offset
    stop = None if q.limit is None else start + q.limit
    kept = rows[start:stop]
    return Released(_output_columns(plan), tuple(r[0] for r in kept), tuple(r[1] for r in kept))


def _order_key(item: OrderItem) -> Callable[[tuple[Any, Any, dict[str, Any]]], tuple[int, Any]]:
    def key(row: tuple[Any, Any, dict[str, Any]]) -> tuple[int, Any]:
        return _sort_key(evaluate(item.expr, row[2]), item.nulls_first, item.desc)

    return key


def _sort_key(v: Any, nulls_first: bool, desc: bool) -> tuple[int, Any]:
    # With reverse=True the tuple order flips, so NULL placement is pre-flipped for desc.
    null_rank = 0 if nulls_first != desc else 1
    if v is None:
        return (null_rank, 0)
    return (1 - null_rank, v)
