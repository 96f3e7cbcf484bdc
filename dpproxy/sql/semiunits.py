"""The proof that a semi-join's subquery reads only the outer row's unit: every private table of
the subquery is *tied* to the outer row's privacy unit by equalities between unit keys (cases
(a) and (b) of ``sql/semijoins.py``'s module docstring), or the subquery is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.factor import bare
from dpproxy.sql.scope import Scope
from dpproxy.sql.unitkeys import unit_key


@dataclass
class Source:
    """One table of a subquery: how the user names it, and how the rewrite names it and its
    columns (``__sqN`` and ``__sqN_col`` for the first, ``__sqN_k`` and ``__sqN_k_col`` for
    the k-th; a column name never starts with a digit, so no two names collide)."""

    user_alias: str
    table: Table
    alias: str
    used: dict[str, Column] = field(default_factory=dict)  # column (lower) → renamed Column

    def has(self, name: str) -> bool:
        return any(c.name.lower() == name for c in self.table.columns)


def prove_tied(
    conds: list[exp.Expression], sources: list[Source], outer: Scope, catalog: Catalog, word: str
) -> None:
    """Case (a) or (b) of ``sql/semijoins.py``'s module docstring, or a refusal naming the obstacle.

    A private table of the subquery is *tied* when an AND-ed equality equates one of its
    columns with an outer column of the same unit key, or with a column of the same unit
    key of a table already tied: then each of its rows that can satisfy the WHERE
    belongs to the outer row's unit. Every private table must end up tied."""
    private = [s for s in sources if s.table.private]
    if not private:
        return
    source = outer.source
    if source is not None and source.sides is not None:
        raise UnsupportedQuery(
            f'{word} over the private table "{private[0].table.name}" in a join of two '
            "people's rows is not supported: the outer row has no single privacy unit to "
            "tie the subquery to",
            hint=f"{word} over public tables is supported there",
        )
    pairs = []
    for c in conds:
        c = bare(c)
        if isinstance(c, exp.EQ):
            a, b = bare(c.this), bare(c.expression)
            if isinstance(a, exp.Column) and isinstance(b, exp.Column):
                pairs += [(a, b), (b, a)]
    tied: set[str] = set()
    changed = True
    while changed:
        changed = False
        for mine, theirs in pairs:
            found = _inner_key(sources, catalog, mine)
            if found is None or found[0].alias in tied:
                continue
            other = _inner_key(sources, catalog, theirs)
            if other is not None:
                key = other[1] if other[0].alias in tied else None
            else:
                key = _outer_key(outer, catalog, theirs)
            if key is not None and key == found[1]:
                tied.add(found[0].alias)
                changed = True
    loose = [s for s in private if s.alias not in tied]
    if not loose:
        return
    t = loose[0].table
    keys = [c.name for c in t.columns if unit_key(catalog, t, c.name)]
    raise UnsupportedQuery(
        f'{word} over the private table "{t.name}" must be tied to the outer row\'s privacy '
        "unit: without an equality between a column of the subquery and a column of the "
        "outer row that lead to the same person, the condition would depend on other "
        "people's rows",
        hint=f"correlate on a unit key of {t.name} ({', '.join(keys) or 'none'}), e.g. "
        f"WHERE {loose[0].user_alias}.{keys[0] if keys else 'key'} = <the matching column "
        "of the outer table>; or filter with a public table",
    )


def _inner_key(
    sources: list[Source], catalog: Catalog, col: exp.Column
) -> tuple[Source, tuple[str, ...]] | None:
    """The subquery table of a renamed column and the column's unit key, if any."""
    for s in sources:
        if col.table != s.alias:
            continue
        for name, renamed in s.used.items():
            if renamed.name == col.name:
                key = unit_key(catalog, s.table, name)
                return (s, key) if key is not None else None
    return None


def _outer_key(outer: Scope, catalog: Catalog, col: exp.Column) -> tuple[str, ...] | None:
    if col.table:
        return None
    origin = _origin(outer, catalog, col.name)
    return unit_key(catalog, *origin) if origin is not None else None


def _origin(outer: Scope, catalog: Catalog, name: str) -> tuple[Table, str] | None:
    """The schema table and column behind a column of the outer relation."""
    if outer.source is not None:
        for vname, table, column in outer.source.origins:
            t = catalog.table(table)
            if vname == name and t is not None:
                return t, column
        return None
    if outer.table.column(name) is not None:
        return outer.table, name
    return None
