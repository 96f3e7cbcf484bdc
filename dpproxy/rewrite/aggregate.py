"""The aggregate that computes one primitive of a plan, in the SQL of each engine.

``COUNT(*)``, ``COUNT(m)``, ``COUNT(DISTINCT …)`` or the ``SUM`` of a fixed-point term
(``rewrite/fixed.py`` for doubles, ``rewrite/wholesum.py`` for whole numbers) over the measure
column of the rows ``rewrite/rows.py`` builds. Every SUM is a bare ``SUM``: NULL when no
row has a value, which the release reads as 0 (``release/noise.py``).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.errors import UnsupportedQuery
from dpproxy.planning.plan import Primitive, QueryPlan
from dpproxy.rewrite.fixed import summand
from dpproxy.rewrite.wholesum import WholeTerm, whole_summand

UNIT = "__unit"  # the rows' privacy unit column

SUM_LIMIT = Fraction(10) ** 250  # 2⁶³ summands of this size stay below 10³⁰⁰
_NOT_SUMMED = (PrimitiveKind.UNITS, PrimitiveKind.COUNT, PrimitiveKind.DISTINCT)


def refuse_wide_sum(p: Primitive) -> None:
    """0A000 for a summed primitive whose values reach past ±:data:`SUM_LIMIT`: PostgreSQL
    raises when a float8 SUM overflows (``rewrite/floats.py``), so such a sum is refused on
    every backend alike. A function of the plan alone."""
    if p.kind in _NOT_SUMMED or p.measure is None or p.values is None or not p.values.bounded:
        return
    if p.values.max_abs() > SUM_LIMIT:
        raise UnsupportedQuery(
            "the bounds of this sum are too wide for double precision",
            hint="narrow the column's lower/upper bounds in the schema (to within ±1e250)",
        )


def refuse_wide_sums(plan: QueryPlan) -> None:
    """:func:`refuse_wide_sum` of every primitive of ``plan``: the engine calls it while
    planning, before it works out the laws noise is drawn from (``release/noise.drawn_laws``,
    whose SUM guard has no double for such bounds and raised XX000 first: a refusal's
    SQLSTATE must not depend on which check runs first)."""
    for p in plan.primitives:
        refuse_wide_sum(p)


def primitive_aggregate(
    p: Primitive,
    alias_of: dict[str, str],
    plan: QueryPlan,
    whole: set[str] | None = None,
    terms: dict[int, WholeTerm | None] | None = None,
    *,
    dialect: str = "duckdb",
    centred: set[str] | None = None,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> exp.Expression:
    """The aggregate that computes primitive ``p`` in ``dialect``'s SQL (a fixed-point sum's
    rounding: ``rewrite/fixed.summand``); ``centred``: the measure columns written centred
    (``fixed.centred_measures``); ``ranges``: measure column → an interval of doubles
    holding each row's value of its measure (``rewrite/ranges.row_range``)."""
    if p.kind is PrimitiveKind.UNITS:
        if plan.query.table.unit_is_unique:
            # One row per unit (a PRIMARY KEY/UNIQUE constraint): counting non-NULL units is
            # counting distinct ones, without DISTINCT's hash table (≈ 16x faster at 1M rows).
            return exp.Count(this=exp.column(UNIT))
        return exp.Count(this=exp.Distinct(expressions=[exp.column(UNIT)]))
    if p.measure is None:
        return exp.Count(this=exp.Star())
    column = alias_of[p.name]
    table = plan.query.table
    is_whole = whole is not None and column in whole
    is_centred = centred is not None and column in centred

    def term_of(prim: Primitive) -> exp.Expression:
        if is_whole:
            return whole_summand(prim, column, table)
        row = ranges.get(column) if ranges else None
        return summand(prim, column, table, dialect=dialect, centred=is_centred, row=row)

    if p.kind is PrimitiveKind.COUNT:
        return exp.Count(this=exp.column(column))
    if p.kind is PrimitiveKind.DISTINCT and p.distinct:  # AVG(DISTINCT): its sum's terms q
        q = term_of(replace(p, kind=PrimitiveKind.SUM))
        return exp.Count(this=exp.Distinct(expressions=[q]))
    if p.kind is PrimitiveKind.DISTINCT:  # over the bounded rows: at most K values per unit
        return exp.Count(this=exp.Distinct(expressions=[exp.column(column)]))
    assert p.values is not None and p.values.lo is not None and p.values.hi is not None
    refuse_wide_sum(p)
    # Integers on a fixed-point grid (rewrite/fixed.py): an exact, order-independent total.
    # SUM(DISTINCT ...): the distinct terms q (planning/plan.py Primitive), on both engines.
    known = terms.get(id(p)) if terms and is_whole else None
    term = whole_summand(p, column, table, known) if known is not None else term_of(p)
    # A bare SUM: NULL over no rows (or only NULL terms), read as 0 by the release
    # (release/noise.py, apply_noise). COALESCE(SUM(…), 0) cost DuckDB 0.05-0.1 ms a sum to
    # bind and optimise at 1,000 rows (benchmarks/SQL_AB_COALESCE.json).
    return exp.Sum(this=exp.Distinct(expressions=[term]) if p.distinct else term)
