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
  evaluation here is total: an operation that has no value — an overflow, a rounding or
  cast of ±∞ or NaN, a text that does not read as the cast's type (the grammar the rewrite
  uses for row-level casts, ``rewrite/dialect.py``), an integer out of its type's range — is
  NULL, never an error, since the query is already charged when this runs. Integers beyond
  64 bits become doubles.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from dpproxy.errors import InternalError
from dpproxy.planning.plan import AggregatePlan, QueryPlan
from dpproxy.release.cells import bare_column, bare_half_widths
from dpproxy.release.cells import half_width as _half_width
from dpproxy.release.cells import number as _number
from dpproxy.release.functions import apply_function, function_span
from dpproxy.release.intervals import interval_ends
from dpproxy.release.layout import layout
from dpproxy.release.memo import per_plan
from dpproxy.release.noise import NoisyGroup, derived_name, drawn_half_width
from dpproxy.release.windows import compute_windows
from dpproxy.rewrite.dialect import BOOL_TEXT, DATE_TEXT, FLOAT_TEXT, INTEGER_TEXT, MAX_CAST_TEXT
from dpproxy.rewrite.real import REAL, real_value
from dpproxy.sql.postmath import POST_FUNCS
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


_BINARY: dict[type[exp.Expression], Callable[[Any, Any], Any]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
    exp.Mod: lambda a, b: math.fmod(a, b) if b else None,
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
}


_INT_RANGES = {
    exp.DataType.Type.SMALLINT: 2**15,
    exp.DataType.Type.INT: 2**31,
    exp.DataType.Type.BIGINT: 2**63,
}
_TEXT_GRAMMAR = {
    "integer": re.compile(INTEGER_TEXT),
    "float": re.compile(FLOAT_TEXT, re.IGNORECASE),
    "boolean": re.compile(BOOL_TEXT, re.IGNORECASE),
    "date": re.compile(DATE_TEXT),
}


def _read_text(text: str, kind: str) -> Any:
    """A text as the row-level casts read it (``rewrite/dialect.py``), else None."""
    if len(text) > MAX_CAST_TEXT or not _TEXT_GRAMMAR[kind].search(text):
        return None
    if kind == "boolean":
        return text.lower() in ("t", "true", "y", "yes", "1")
    if kind == "date":
        try:
            day = datetime.date.fromisoformat(text)
        except ValueError:
            return None
        return day if day.year > 0 else None
    if kind == "float":
        return float(text)
    try:
        return Decimal(text.strip()).to_integral_value(ROUND_HALF_UP)
    except InvalidOperation:
        return None


def _cast(v: Any, to: exp.DataType) -> Any:
    """CAST on a released value, total: NULL where the row-level cast would be NULL."""
    t = to.this
    text = isinstance(v, str)
    if t in (*_INT_RANGES, exp.DataType.Type.TINYINT):
        if text:
            v = _read_text(v, "integer")
            if v is None:
                return None
        elif isinstance(v, float):
            if not math.isfinite(v):
                return None
            v = round(v)
        elif not isinstance(v, int | Decimal):
            return None
        limit = _INT_RANGES.get(t, 2**7)
        return int(v) if -limit <= v < limit else None
    if t in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL):
        if text:
            double = _read_text(v, "float")
        else:
            double = float(v) if isinstance(v, int | float) else None
        return real_value(double) if t is REAL else double  # REAL: as rewrite/real.py
    if t in (exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR):
        if isinstance(v, bool):
            return "true" if v else "false"
        return v.isoformat() if isinstance(v, datetime.date) else str(v)
    if t is exp.DataType.Type.BOOLEAN:
        if text:
            return _read_text(v, "boolean")
        return bool(v) if isinstance(v, int) else None
    if t is exp.DataType.Type.DATE:
        if text:
            return _read_text(v, "date")
        return v if isinstance(v, datetime.date) else None
    return v


def evaluate(node: exp.Expression, env: dict[str, Any]) -> Any:
    """Evaluate a post-processing expression with SQL NULL semantics; total (see the module
    docstring): an operation without a value is NULL.

    >>> evaluate(exp.maybe_parse("ROUND(__agg_0 / 2, 1) > 1"), {"__agg_0": 3})
    True
    >>> evaluate(exp.maybe_parse("CAST(__key_0 AS INTEGER)"), {"__key_0": "Male"}) is None
    True
    """
    try:
        return _number(_evaluate(node, env))
    except (ArithmeticError, ValueError):  # overflow, ±∞ or NaN where a number is needed
        return None


def _evaluate(node: exp.Expression, env: dict[str, Any]) -> Any:
    def ev(n: exp.Expression) -> Any:
        return evaluate(n, env)

    if isinstance(node, exp.Column):
        if node.name not in env:
            raise InternalError(f"unbound post-processing name {node.name}")
        return env[node.name]
    if isinstance(node, exp.Paren):
        return ev(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.name
        text = node.name
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        v = ev(node.this)
        return None if v is None else -v
    if isinstance(node, exp.Div):
        a, b = ev(node.this), ev(node.expression)
        if a is None or b is None or b == 0:
            return None
        return a / b
    if type(node) in _BINARY:
        a, b = ev(node.this), ev(node.expression)
        if a is None or b is None:
            return None
        return _BINARY[type(node)](a, b)
    if isinstance(node, exp.And):
        a, b = ev(node.this), ev(node.expression)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(node, exp.Or):
        a, b = ev(node.this), ev(node.expression)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(node, exp.Not):
        v = ev(node.this)
        return None if v is None else not v
    if isinstance(node, exp.Is):
        rhs = node.expression
        holds = ev(node.this) is (rhs.this if isinstance(rhs, exp.Boolean) else None)
        return not holds if node.args.get("negate") else holds  # IS NOT: sqlglot's negate
    if isinstance(node, exp.Between):
        v, lo, hi = ev(node.this), ev(node.args["low"]), ev(node.args["high"])
        return None if None in (v, lo, hi) else lo <= v <= hi
    if isinstance(node, exp.In):
        v = ev(node.this)
        return None if v is None else v in [ev(e) for e in node.expressions]
    if isinstance(node, exp.Case):
        for when in node.args.get("ifs") or []:
            if ev(when.this) is True:
                return ev(when.args["true"])
        default = node.args.get("default")
        return ev(default) if default is not None else None
    if isinstance(node, exp.If):
        if ev(node.this) is True:
            return ev(node.args["true"])
        false = node.args.get("false")
        return ev(false) if false is not None else None
    if isinstance(node, exp.Coalesce):
        for e in [node.this, *node.expressions]:
            v = ev(e)
            if v is not None:
                return v
        return None
    if isinstance(node, exp.Nullif):
        a, b = ev(node.this), ev(node.expression)
        return None if a == b else a
    if isinstance(node, exp.Greatest | exp.Least):
        vals = [v for v in (ev(e) for e in [node.this, *node.expressions]) if v is not None]
        if not vals:
            return None
        return max(vals) if isinstance(node, exp.Greatest) else min(vals)
    if isinstance(node, exp.Abs | exp.Floor | exp.Ceil | exp.Round):
        v = ev(node.this)
        if v is None:
            return None
        if isinstance(node, exp.Abs):
            return abs(v)
        if isinstance(v, float) and not math.isfinite(v):
            return v  # ±∞ and NaN round to themselves
        if isinstance(node, exp.Floor):
            return math.floor(v)
        if isinstance(node, exp.Ceil):
            return math.ceil(v)
        d = node.args.get("decimals")
        digits = int(ev(d)) if d is not None else 0
        return float(round(v, digits)) if d is not None else float(round(v))
    if isinstance(node, exp.Cast):
        v = ev(node.this)
        return None if v is None else _cast(v, node.to)
    if isinstance(node, POST_FUNCS):  # SQRT, LN, LOG, EXP, POWER ...: release/functions.py
        return apply_function(node, [ev(a) for a in _arguments(node)])
    raise InternalError(f"cannot post-process {node.key}")


def evaluate_span(node: exp.Expression, spans: dict[str, Span | None]) -> Span | None:
    """Interval evaluation of arithmetic over aggregates (None where not supported)."""
    if isinstance(node, exp.Column):
        return spans.get(node.name)
    if isinstance(node, exp.Paren):
        return evaluate_span(node.this, spans)
    if isinstance(node, exp.Literal) and not node.is_string:
        v = float(node.name)
        return v, v
    if isinstance(node, exp.Neg):
        s = evaluate_span(node.this, spans)
        return None if s is None else (-s[1], -s[0])
    if isinstance(node, exp.Round | exp.Cast):
        return evaluate_span(node.this, spans)
    if isinstance(node, POST_FUNCS):
        return function_span(node, [evaluate_span(a, spans) for a in _arguments(node)])
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        a, b = evaluate_span(node.this, spans), evaluate_span(node.expression, spans)
        if a is None or b is None:
            return None
        if isinstance(node, exp.Add):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(node, exp.Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(node, exp.Div):
            if b[0] <= 0 <= b[1]:
                return None
            b = (1 / b[1], 1 / b[0])
        c = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return min(c), max(c)
    return None


def _arguments(node: exp.Expression) -> list[exp.Expression]:
    """A function's arguments in order: ``this``, then ``expression`` (LOG's base first) or
    TRUNC's ``decimals``."""
    keys = ("this", "expression", "decimals")
    return [a for a in (node.args.get(k) for k in keys) if a is not None]
