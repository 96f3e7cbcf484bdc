"""What dpproxy reads from public tables: join fan-outs, and domains and bounds not declared.

Public tables are data the analyst may see (``schemas/README.md``), so reading them costs no
privacy. When a backend attaches the catalog, each column of each public table gets

* its **fan-out**: the most rows sharing one value — the factor *m* by which a join on that
  column can multiply a unit's rows (``../shared/reading/002_*``: a public join has
  sensitivity n·m), used to derive the bound on rows per unit of a join (``sql/joins.py``);
* its **domain** (at most :data:`MAX_DOMAIN` distinct values), unless the schema declares one,
  so that grouping by a public column releases every value, zero-filled, with no partition
  selection;
* its **bounds** (numeric columns), unless declared, so that public values can be aggregated.

Nothing here is trusted for privacy: the rewrite still truncates every unit to its bound in SQL
and clamps every value, so a public table that changes later cannot break a guarantee — at
worst a new value is missing from a domain until the catalog is attached again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, ColumnType, Table

MAX_DOMAIN = 1000

Execute = Callable[[str], Sequence[Sequence[Any]]]


def _table(table: Table, dialect: str) -> exp.Table:
    """A reference to ``table``; for PostgreSQL with the schema it was found in
    (``sql/qualify.py``)."""
    ref = exp.Table(this=exp.to_identifier(table.name, quoted=True))
    if dialect == "postgres" and table.schema is not None:
        ref.set("db", exp.Identifier(this=table.schema, quoted=True))
    return ref


def _facts_sql(table: Table, column: Column, dialect: str) -> str:
    col = exp.column(exp.to_identifier(column.name, quoted=True))
    per_value = (
        exp.select(exp.alias_(col.copy(), "__v"), exp.alias_(exp.Count(this=exp.Star()), "__n"))
        .from_(_table(table, dialect))
        .group_by(col.copy())
    )
    v = exp.column("__v")
    query = exp.select(
        exp.Count(this=v.copy()),
        exp.Max(this=exp.column("__n")),
        exp.Min(this=v.copy()),
        exp.Max(this=v.copy()),
    ).from_(exp.Subquery(this=per_value, alias=exp.TableAlias(this=exp.to_identifier("__f"))))
    return query.sql(dialect=dialect)


def _domain_sql(table: Table, column: Column, dialect: str) -> str:
    col = exp.column(exp.to_identifier(column.name, quoted=True))
    query = (
        exp.select(col.copy())
        .distinct()
        .from_(_table(table, dialect))
        .where(exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null())))
        .order_by(col.copy())
    )
    return query.sql(dialect=dialect)


def attach_public(catalog: Catalog, execute: Execute, dialect: str) -> Catalog:
    """The catalog with every public table's fan-outs, and its undeclared domains and bounds."""
    tables: list[Table] = []
    for t in catalog.tables:
        if t.private:
            tables.append(t)
            continue
        fan: list[tuple[str, int]] = []
        columns: list[Column] = []
        for c in t.columns:
            ((distinct, most, low, high),) = execute(_facts_sql(t, c, dialect))
            fan.append((c.name, int(most or 0)))
            if c.domain is None and c.type is not ColumnType.FLOAT and 0 < distinct <= MAX_DOMAIN:
                values = tuple(_plain(r[0]) for r in execute(_domain_sql(t, c, dialect)))
                c = replace(c, domain=values)
            if c.type.numeric and not c.bounded and low is not None and high is not None:
                c = replace(c, lower=Fraction(low), upper=Fraction(high))
            columns.append(c)
        tables.append(replace(t, columns=tuple(columns), multiplicity=tuple(fan)))
    return replace(catalog, tables=tuple(tables))


def _plain(v: Any) -> Any:
    """Domain values as the schema loader would have them (dates as ISO text)."""
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v
