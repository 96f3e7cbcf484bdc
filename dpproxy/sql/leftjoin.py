"""The LEFT JOIN inside a per-unit subquery (``sql/perunit.py``): ``T LEFT [OUTER] JOIN U ON
T.unit = U.unit [AND <conditions on U>]``, as in TPC-H Q13.

Why every joined row still belongs to exactly one unit: T and U both hold the privacy unit as a
column, and the ON clause equates them, so a row of T is paired only with rows of U of the same
unit; a row of T without such rows gets one row of NULLs for U, and a row of U without a partner
does not appear at all. Every output row is therefore a row of T (one unit, ``T.unit``) with
rows of U of that same unit. Further ON conditions may read U only: they are applied to U's rows
before the join, so they cannot make a row of T depend on another person. Any other outer join
(RIGHT, FULL, ON other columns, conditions on T, CTEs or subqueries as T or U) is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dpproxy.catalog.model import Column, Table
from dpproxy.errors import GroupingError, UnsupportedQuery
from dpproxy.sql.joinparts import conjuncts
from dpproxy.sql.scope import Scope
from dpproxy.sql.types import COLUMN_TYPES

FromScope = Callable[[exp.Select], Scope]


@dataclass(frozen=True, slots=True)
class LeftJoin:
    """``left LEFT JOIN right ON left.unit = right.unit AND <right_filters>``."""

    left: Table
    right: Table
    left_unit: str
    right_unit: str
    right_filters: tuple[exp.Expression, ...]


def no_subqueries(node: exp.Expression, where: str) -> None:
    if any(isinstance(n, exp.Subquery | exp.Select | exp.Exists) for n in node.walk()):
        raise UnsupportedQuery(f"a subquery in {where} is not supported")


def row_level(node: exp.Expression, where: str) -> None:
    for n in node.walk():
        if isinstance(n, exp.AggFunc):
            raise GroupingError(f"aggregate functions are not allowed in {where}")
        if isinstance(n, exp.Window):
            raise UnsupportedQuery(f"window functions are not allowed in {where}")


def left_join_scope(inner: exp.Select, from_scope: FromScope) -> tuple[Scope, LeftJoin]:
    """``T LEFT JOIN U ON T.unit = U.unit [AND <conditions on U>]`` (module docstring)."""
    joins = inner.args.get("joins") or []
    from_ = inner.args.get("from_") or inner.args.get("from")
    join = joins[0]
    if (
        from_ is None
        or len(joins) != 1
        or join.side.upper() != "LEFT"
        or join.args.get("using")
        or not isinstance(from_.this, exp.Table)
        or not isinstance(join.this, exp.Table)
    ):
        raise UnsupportedQuery(
            "outer joins are supported only as T LEFT JOIN U ON T.unit = U.unit inside a "
            "per-unit subquery (GROUP BY the privacy unit): other outer joins could give a row "
            "no person or two people",
        )
    left_scope = from_scope(exp.select("*").from_(from_.this.copy()))
    right_scope = from_scope(exp.select("*").from_(join.this.copy()))
    lt, rt = left_scope.table, right_scope.table
    if not (_plain(left_scope) and _plain(right_scope)):
        raise UnsupportedQuery(
            "a LEFT JOIN in a per-unit subquery must join tables of the schema, not CTEs",
            hint="write the tables themselves in the LEFT JOIN",
        )
    if (
        left_scope.source is not None
        or right_scope.source is not None
        or not (lt.privacy_unit and rt.privacy_unit)
    ):
        raise UnsupportedQuery(
            "a LEFT JOIN in a per-unit subquery must join two private tables that each hold "
            "the privacy unit as a column"
        )
    shared = {c.name for c in lt.columns} & {c.name for c in rt.columns}
    if shared:
        raise UnsupportedQuery(
            f"a LEFT JOIN of tables sharing column names ({', '.join(sorted(shared))}) is not "
            "supported in a per-unit subquery"
        )
    lq = {from_.this.alias_or_name.lower(), lt.name.lower()}
    rq = {join.this.alias_or_name.lower(), rt.name.lower()}
    tied = False
    right_filters: list[exp.Expression] = []
    for c in conjuncts(join.args.get("on")):
        cols = list(c.find_all(exp.Column))
        owners = {_owner(col, lt, rt, lq, rq) for col in cols}
        if isinstance(c, exp.EQ) and owners == {"left", "right"} and len(cols) == 2:
            a, b = cols if _owner(cols[0], lt, rt, lq, rq) == "left" else cols[::-1]
            if a.name.lower() == lt.privacy_unit.lower() and b.name.lower() == (
                rt.privacy_unit.lower()
            ):
                tied = True
                continue
        if owners - {"right"}:
            raise UnsupportedQuery(
                "the ON clause of a LEFT JOIN in a per-unit subquery may equate the two "
                "tables' privacy units and add conditions on the right table only",
                hint=f"ON {lt.privacy_unit} = {rt.privacy_unit} AND <conditions on {rt.name}>",
            )
        no_subqueries(c, "the ON clause")
        row_level(c, "JOIN/ON")
        right_filters.append(right_scope.resolve(c))
    if not tied:
        raise UnsupportedQuery(
            "a LEFT JOIN in a per-unit subquery must equate the two tables' privacy units "
            f"(ON {lt.privacy_unit} = {rt.privacy_unit}): otherwise a joined row could hold "
            "another person's rows"
        )
    columns = lt.columns + tuple(
        Column(c.name, c.type, c.lower, c.upper, True, c.domain) for c in rt.columns
    )
    table = Table(
        name=f"{lt.name} ⟕ {rt.name}",
        private=True,
        columns=columns,
        privacy_unit=lt.privacy_unit,
    )
    names: dict[str, exp.Expression] = {c.name.lower(): exp.column(c.name) for c in columns}
    for q in lq:
        names.update({f"{q}.{c.name.lower()}": exp.column(c.name) for c in lt.columns})
    for q in rq:
        names.update({f"{q}.{c.name.lower()}": exp.column(c.name) for c in rt.columns})
    types = {c.name: COLUMN_TYPES[c.type] for c in columns}
    scope = Scope(table, names, lq | rq, [], types, None, set(), True)
    left = LeftJoin(lt, rt, lt.privacy_unit, rt.privacy_unit, tuple(right_filters))
    return scope, left


def _plain(scope: Scope) -> bool:
    """Is the scope a table of the schema as it is (no CTE's filters or computed columns)?"""
    own = {c.name.lower(): exp.column(c.name) for c in scope.table.columns}
    return not scope.filters and scope.names == own


def _owner(col: exp.Column, lt: Table, rt: Table, lq: set[str], rq: set[str]) -> str:
    if col.table:
        if col.table.lower() in lq:
            return "left"
        if col.table.lower() in rq:
            return "right"
        return "?"
    if lt.column(col.name.lower()) is not None or lt.column(col.name) is not None:
        return "left"
    if rt.column(col.name.lower()) is not None or rt.column(col.name) is not None:
        return "right"
    return "?"
