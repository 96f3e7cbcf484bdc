"""The SQL of a per-unit relation (``sql/perunit.py``): one row per unit, built from the plan.

``SELECT unit AS __unit_of_row, unit AS <name>, COUNT(…) AS n, SUM(…) AS s … FROM <inner>
WHERE <guarded filters> AND unit IS NOT NULL GROUP BY unit``, printed as a subquery in the FROM
of ``__rows`` (``rewrite/rows.py``).

Totality: every row value is guarded and clamped as in ``__rows`` (``guard_row_expression``,
``clamp_values``, ``finite_arithmetic``). COUNT is a BIGINT on both engines. SUM and AVG add
DOUBLEs: a measure whose interval (``analysis/bounds.py``) is not within ±SUM_LIMIT is clamped
to it first, so that at most 2⁶³ summands stay below 10³⁰⁰ and PostgreSQL, which raises on
float8 overflow, never does (``rewrite/floats.py``); AVG's group is never empty (a unit's
group has at least one row). MIN and MAX of numbers are DOUBLEs too; of dates, DATEs.
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from dpproxy.analysis.bounds import bounds_of
from dpproxy.catalog.model import Table
from dpproxy.rewrite.clamps import clamp, clamp_values
from dpproxy.rewrite.floats import finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression, is_double
from dpproxy.rewrite.nodes import table as table_ref
from dpproxy.sql.perunit import UNIT_OF_ROW, Derived, PerUnit

SUM_LIMIT = Fraction(10) ** 250  # as rewrite/aggregate.py: 2⁶³ summands stay below 10³⁰⁰

_DOUBLE = exp.DataType.Type.DOUBLE


def per_unit_relation(per_unit: PerUnit) -> exp.Subquery:
    """The derived relation as ``(SELECT …) AS __derived``."""
    inner = per_unit.inner
    unit = per_unit.unit
    select = exp.select(exp.alias_(unit.copy(), UNIT_OF_ROW, copy=False))
    if per_unit.unit_output is not None:
        select = select.select(exp.alias_(unit.copy(), per_unit.unit_output), copy=False)
    for d in per_unit.columns:
        select = select.select(exp.alias_(_aggregate(d, inner), d.name, copy=False), copy=False)
    select = select.from_(_inner_from(per_unit), copy=False)
    for f in per_unit.filters:
        guarded = finite_arithmetic(guard_row_expression(f, inner), inner)
        select = select.where(exp.Paren(this=guarded), copy=False)
    select = select.where(exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null())), copy=False)
    select = select.group_by(unit.copy(), copy=False)
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier("__derived")))


def _inner_from(per_unit: PerUnit) -> exp.Expression:
    if per_unit.source is not None:  # an inner join: its relation (sql/joins.py)
        return exp.Subquery(
            this=per_unit.source.select.copy(),
            alias=exp.TableAlias(this=exp.to_identifier("__joined")),
        )
    lj = per_unit.left_join
    if lj is None:
        return table_ref(per_unit.inner.name)
    right: exp.Expression = _declared(lj.right)
    for f in lj.right_filters:
        guarded = finite_arithmetic(guard_row_expression(f, lj.right), lj.right)
        right = right.where(exp.Paren(this=guarded), copy=False)  # type: ignore[attr-defined]
    on = exp.EQ(
        this=exp.column(lj.left_unit, table="__left"),
        expression=exp.column(lj.right_unit, table="__right"),
    )
    left = exp.Subquery(
        this=_declared(lj.left),
        alias=exp.TableAlias(this=exp.to_identifier("__left")),
    )
    joined = (
        exp.select(exp.Star())
        .from_(left, copy=False)
        .join(
            exp.Subquery(this=right, alias=exp.TableAlias(this=exp.to_identifier("__right"))),
            on=on,
            join_type="LEFT",
            copy=False,
        )
    )
    return exp.Subquery(this=joined, alias=exp.TableAlias(this=exp.to_identifier("__joined")))


def _declared(t: Table) -> exp.Select:
    """``SELECT <the schema's columns> FROM t``: the join's columns, never an undeclared one."""
    cols = [exp.column(c.name) for c in t.columns]
    return exp.select(*cols).from_(table_ref(t.name), copy=False)


def _aggregate(d: Derived, table: Table) -> exp.Expression:
    if d.measure is None:
        return exp.Count(this=exp.Star())
    if d.kind in ("count", "count_distinct"):
        m = finite_arithmetic(guard_row_expression(d.measure, table), table)
        if d.kind == "count_distinct":
            return exp.Count(this=exp.Distinct(expressions=[m]))
        return exp.Count(this=m)
    if d.date:  # MIN/MAX of dates: guarded (rewrite/guard.py's portable date forms), a DATE
        guarded = guard_row_expression(d.measure, table)
        return exp.Min(this=guarded) if d.kind == "min" else exp.Max(this=guarded)
    m = guard_row_expression(clamp_values(d.measure, table), table, copy=False)
    m = finite_arithmetic(m, table)
    if not is_double(m, table):
        m = exp.Cast(this=m, to=exp.DataType(this=_DOUBLE))
    if d.kind in ("sum", "avg"):
        iv = bounds_of(d.measure, table)
        wide = iv is not None and (
            iv.lo is None or iv.hi is None or max(abs(iv.lo), abs(iv.hi)) > SUM_LIMIT
        )
        if wide:
            made = m
            m = clamp(lambda: made.copy(), -SUM_LIMIT, SUM_LIMIT)
    if d.kind == "sum":
        return exp.Sum(this=m)
    if d.kind == "avg":
        return exp.Avg(this=m)
    return exp.Min(this=m) if d.kind == "min" else exp.Max(this=m)
