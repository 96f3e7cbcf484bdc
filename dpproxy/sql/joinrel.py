"""The parts of a joined relation that follow from a join's instances and equalities alone,
shared by ``sql/joins.py``, ``sql/twounits.py`` and ``sql/outer.py``: the virtual column names,
the FROM and WHERE of a set of instances, the check that the equalities connect every instance,
and the proof from the database's constraints that an inner join has at most one row per unit
(:func:`unit_unique`).
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.catalog.model import Column
from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.joinparts import (
    Edges,
    Instance,
    OuterJoin,
    UnionFind,
    column_names,
    column_of,
    from_item,
)


def instance(instances: list[Instance], alias: str) -> Instance:
    return next(i for i in instances if i.alias == alias)


def virtual_columns(
    visible: list[Instance],
) -> tuple[dict[tuple[str, str], str], dict[str, exp.Expression], set[str], list[Column]]:
    counts: dict[str, int] = {}
    for inst in visible:
        for name in column_names(inst):
            counts[name] = counts.get(name, 0) + 1
    vnames: dict[tuple[str, str], str] = {}
    names: dict[str, exp.Expression] = {}
    ambiguous: set[str] = set()
    columns: list[Column] = []
    for inst in visible:
        for name in column_names(inst):
            vname = name if counts[name] == 1 else f"{inst.alias}__{name}"
            vnames[(inst.alias, name)] = vname
            c = column_of(inst, name)
            columns.append(Column(vname, c.type, c.lower, c.upper, c.nullable, c.domain))
            names[f"{inst.alias}.{name}"] = exp.column(vname)
            if counts[name] == 1:
                names[name] = exp.column(vname)
            else:
                ambiguous.add(name)
    return vnames, names, ambiguous, columns


def from_where(select: exp.Select, members: list[Instance], edges: Edges) -> exp.Select:
    """FROM the members, WHERE the equalities among them (dpproxy's own, never the text)."""
    aliases = {i.alias for i in members}
    select = select.from_(from_item(members[0]), copy=False)
    for inst in members[1:]:
        select = select.join(
            from_item(inst), join_type="CROSS" if inst.unnest else None, copy=False
        )
    done: set[frozenset[tuple[str, str]]] = set()
    for a, b in edges:
        if a[0] not in aliases or b[0] not in aliases or frozenset((a, b)) in done:
            continue
        done.add(frozenset((a, b)))
        cond = exp.EQ(
            this=exp.column(column_of(instance(members, a[0]), a[1]).name, table=a[0]),
            expression=exp.column(column_of(instance(members, b[0]), b[1]).name, table=b[0]),
        )
        select = select.where(cond, copy=False)
    return select


def check_connected(
    instances: list[Instance], edges: Edges, flat_links: list[tuple[str, str]]
) -> None:
    groups = UnionFind()
    for a, b in edges:
        groups.union((a[0], ""), (b[0], ""))
    for flat, owner in flat_links:
        groups.union((flat, ""), (owner, ""))
    roots = {groups.find((i.alias, "")) for i in instances}
    if len(roots) > 1:
        names = ", ".join(i.alias for i in instances if not i.hidden)
        raise UnsupportedQuery(
            f"cross join: no equality condition connects all of {names}; the fan-out of a "
            "cross join cannot be bounded",
            hint="join on keys: JOIN t ON a.key = t.key (or USING (key))",
        )


def unit_unique(
    instances: list[Instance], outer: list[OuterJoin], uf: UnionFind, unit_class: tuple[str, str]
) -> bool:
    """Does the database prove at most one joined row per unit, so that contribution
    bounding would provably remove nothing (``planning/planner.py`` then skips it)?

    Yes when every table of the inner join is private, its unit column is UNIQUE NOT NULL or
    the PRIMARY KEY in the database (``Table.unit_is_unique``, read from the backend's
    constraints when it attaches the catalog) and it is joined on that column (the column
    is in the unit's class of equalities); no public table, flat map, table joined only to
    reach a unit, or outer join. Proof: a joined row combines one row of each table, all
    with the same unit u; each table has at most one row with unit u, so at most one
    joined row has unit u (a NULL unit equals nothing, so it joins no row). WHERE and ON
    filters only remove rows. Adding or removing one unit therefore changes at most one
    row of the relation, as for one table with a unique unit column. Nothing is trusted
    beyond the constraint, which the database enforces on every write; the schema's
    ``max_rows_per_unit`` is not used (a declared bound is enforced by the truncation)."""
    if outer:
        return False
    for inst in instances:
        t = inst.table
        if t is None or inst.hidden or not t.private or not t.unit_is_unique:
            return False
        if t.unit_via is not None or t.privacy_unit is None:
            return False
        if uf.find((inst.alias, t.privacy_unit.lower())) != unit_class:
            return False
    return True
