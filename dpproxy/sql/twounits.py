"""A join of two units' rows (reading/002's private join, ``people p JOIN shops s ON p.city =
s.city``): its two sides, each bounded to its rows per unit and truncated per join key, and the
relation that joins them. ``sql/joins.py`` builds it when the private tables of a join fall into
exactly two classes of units.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, ContributionBound, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.joinparts import (
    SIDE_UNIT,
    UNIT_OF_ROW,
    Edges,
    Instance,
    JoinSource,
    Side,
    UnionFind,
    column_names,
    column_of,
    derived_bound,
    unique_key,
)
from dpproxy.sql.joinrel import from_where, instance, virtual_columns


def two_units(
    instances: list[Instance],
    edges: Edges,
    flat_links: list[tuple[str, str]],
    uf: UnionFind,
    catalog: Catalog,
    units: dict[str, tuple[str, str]],  # private instance's alias → its unit (alias, column)
    unit_of: Callable[[Instance], tuple[str, str]],  # JoinBuilder._unit_of
) -> tuple[Table, JoinSource, dict[str, exp.Expression], set[str]]:
    """Private tables of two different units joined on other columns (reading/002's private
    join): each side is bounded to its rows per unit M, then truncated per join key value —
    DropNonUnique when the key is unique on that side (T = 1, stability 1), DropExcess(T)
    otherwise (T rows per key value, stability 2) — and the join then changes by at most
    T_a·S_b·M_b + T_b·S_a·M_a rows when one unit (with all its rows on both sides) is added
    or removed. Its rows belong to no single unit, so the plan needs no further bounding
    but answers only what row-level stability supports (``planning/planner.py``)."""
    if any(i.table is None or not i.table.private for i in instances):
        raise UnsupportedQuery(
            "a join of two people's rows with public tables or UNNEST is not supported",
            hint="join the two private tables alone, or join private tables on their unit",
        )
    side_of = {i.alias: uf.find(unit_of(i)) for i in instances}
    roots = list(dict.fromkeys(side_of.values()))
    groups = [[i for i in instances if side_of[i.alias] == r] for r in roots]
    pairs: list[tuple[tuple[str, str], tuple[str, str]]] = []
    for a, b in edges:
        if side_of[a[0]] == side_of[b[0]]:
            continue
        pair = (a, b) if side_of[a[0]] == roots[0] else (b, a)
        if pair not in pairs:
            pairs.append(pair)
    if any(instance(instances, c[0]).hidden for pair in pairs for c in pair):
        raise UnsupportedQuery("join the two units' tables on columns of the tables named")
    visible = [i for i in instances if not i.hidden]
    vnames, names, ambiguous, columns = virtual_columns(visible)
    sides: list[Side] = []
    for n, members in enumerate(groups):
        bound, why = derived_bound(members, edges, flat_links, catalog)
        tables = " ⋈ ".join(i.table.name for i in members if i.table and not i.hidden)
        if bound is None:
            raise UnsupportedQuery(
                f"a join of two people's rows needs declared rows per unit for {tables}: {why}",
                hint="declare max_rows_per_unit in the schema (schemas/README.md)",
            )
        keys = tuple(vnames[pair[n]] for pair in pairs)
        unique = any(
            (t := instance(instances, pair[n][0]).table) is not None
            and unique_key(t, pair[n][1], catalog)
            for pair in pairs
        )
        own = [vnames[(i.alias, c)] for i in members if not i.hidden for c in column_names(i)]
        select = exp.select()
        for inst in members:
            if inst.hidden:
                continue
            for c in column_names(inst):
                value = exp.column(column_of(inst, c).name, table=inst.alias)
                select = select.select(exp.alias_(value, vnames[(inst.alias, c)]), copy=False)
        unit = units.get(members[0].alias) or unit_of(members[0])
        select = select.select(
            exp.alias_(exp.column(unit[1], table=unit[0]), SIDE_UNIT), copy=False
        )
        select = from_where(select, members, edges)
        sides.append(Side(select, tuple(own), keys, bound, unique, tables))
    first_side, second_side = sides
    joined = exp.select(
        *[exp.column(c, table="__a") for c in first_side.columns],
        *[exp.column(c, table="__b") for c in second_side.columns],
        exp.alias_(exp.column(SIDE_UNIT, table="__a"), UNIT_OF_ROW),
    )
    described = " ⋈ ".join(
        i.table.name + ("" if i.alias == i.table.name.lower() else f" {i.alias}")
        for i in visible
        if i.table is not None
    )
    first = groups[0][0]
    root = units.get(first.alias) or unit_of(first)
    unit_type = column_of(instance(instances, root[0]), root[1]).type
    columns.append(Column(UNIT_OF_ROW, unit_type))
    table = Table(
        name=described,
        private=True,
        columns=tuple(columns),
        privacy_unit=UNIT_OF_ROW,
        bound=ContributionBound(max_rows=1),  # unused: the plan takes the join's stability
    )
    on = ", ".join(f"{x} = {y}" for x, y in zip(first_side.keys, second_side.keys, strict=True))
    derivation = f"two units' rows joined on {on}"
    source = JoinSource(joined, described, None, derivation, sides=(first_side, second_side))
    return table, source, names, ambiguous
