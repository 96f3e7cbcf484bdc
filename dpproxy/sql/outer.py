r"""Outer joins: ``LEFT``, ``RIGHT`` and ``FULL [OUTER] JOIN`` as one relation (``sql/joins.py``).

One outer join per query, the last join of its FROM clause (inner joins before it form its left
side), with an ON clause (or USING) of column equalities only. Its relation is printed with the
outer join itself, so the rows it keeps with NULLs are the ones the query text asks for.

Which rows a unit changes (the neighbouring relation adds or removes one unit with all its rows,
``../shared/reading/002_*`` AddRowsWithID). Call the side whose unmatched rows are kept the
*preserved* side and the other the *nullable* side.

1. **Private preserved, private nullable, tied on the unit** (``customer LEFT JOIN orders ON
   c_custkey = o_custkey``; RIGHT mirrored; FULL both ways). The ON clause must equate a column of
   each side that determines the unit in the same way (:func:`dpproxy.sql.unitkeys.unit_key`:
   both *are* the unit, or both are the key a table's unit is referenced through). Then a
   preserved row is paired only with rows of its own unit, and whether it is kept with NULLs
   depends only on its own unit's rows. Every output row is a row of one unit — the preserved
   row's (FULL: ``COALESCE`` of both sides' units) — and a function of that unit's rows alone,
   so the relations of two neighbours differ in the rows of the one unit that differs, exactly as
   for an inner join, and the keyed truncation to τ rows per unit of ``rewrite/bound.py``
   applies unchanged. Rows per unit: each preserved row appears max(1, m) times, m its matches,
   at most the nullable side's fan-out f (1 through a unique key, else its declared rows per
   unit): k_p · max(1, f); FULL adds the nullable side's own unmatched rows, + k_n.
2. **Private preserved, public nullable** (``customer LEFT JOIN nation ON c_nationkey =
   n_nationkey``): public rows are the same in both neighbours, so a preserved row's output rows
   (max(1, f) of them, f the public fan-out) depend on that row alone: k_p · max(1, f).
3. **Public preserved, private nullable** (``customer RIGHT JOIN nation ON c_nationkey =
   n_nationkey``). A public row without a match is kept with NULLs, and *whether* it is kept
   depends on the private data: adding a customer of a nation that had none removes that
   nation's NULL row and adds the customer's rows. Per group of public keys, COUNT(*) is
   Σ_p max(1, m_p) over the group's public rows p (m_p: private rows matching p); max(1, ·) is
   1-Lipschitz, so COUNT(*) would move by at most the change of Σ_p m_p — *if* m_p counted the
   truncated rows. It does not here: the truncation runs on the joined relation, after the outer
   join decided which public rows are unmatched, and one unit with many raw rows could empty
   many NULL rows while keeping only τ rows. dpproxy therefore accepts this shape only when the
   unmatched rows cannot reach the answer: every aggregate reads a column of the private side
   (``COUNT(c_custkey)``, ``SUM(c_acctbal)``: NULL on an unmatched row, so it is ignored) and
   every GROUP BY key is a column of the public side with a declared domain (the groups released
   are the domain's, never decided by the data). The aggregates then equal those of the inner
   join — whose rows are unit rows, bounded as in 1 — group by group. ``COUNT(*)`` and other
   shapes are refused (0A000) with that reason.

Refused, each with its reason: two outer joins, an outer join before an inner one, RIGHT or FULL
joins with more than two tables, a private nullable side not tied to the preserved side's unit
by the ON clause (whether a row is kept with NULLs would depend on other people's rows), a unit
reached through a table the join may leave NULL (``lineitem LEFT JOIN orders``), FULL joins with
a public table, and UNNEST.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, ContributionBound, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.joinparts import (
    UNIT_OF_ROW,
    Instance,
    JoinSource,
    OuterJoin,
    column_of,
    factor,
    from_item,
)
from dpproxy.sql.joinrel import check_connected, from_where, virtual_columns
from dpproxy.sql.joins import JoinBuilder
from dpproxy.sql.unitkeys import unit_key

Built = tuple[Table, JoinSource, dict[str, exp.Expression], set[str]]
_NULL_IGNORING = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def build_relation(builder: JoinBuilder, select: exp.Select) -> Built:
    """The joined relation of a FROM clause: inner joins by ``JoinBuilder.build``, a FROM
    clause with an outer join by :func:`_outer` (module docstring)."""
    if not builder.outer:
        return builder.build()
    return _outer(builder, select)


def _refuse(message: str, hint: str | None = None) -> UnsupportedQuery:
    return UnsupportedQuery(
        message,
        hint=hint
        or "join on the privacy unit (customer LEFT JOIN orders ON c_custkey = "
        "o_custkey), or aggregate per unit in a subquery",
    )


def _outer(b: JoinBuilder, select: exp.Select) -> Built:
    if len(b.outer) > 1:
        raise _refuse("only one outer join per query is supported")
    oj = b.outer[0]
    side = oj.side
    if b.instances[-1].alias != oj.alias:
        raise _refuse(
            f"a {side} JOIN must be the last join of the FROM clause",
            hint="write the inner joins first and the outer join last",
        )
    if any(i.unnest is not None for i in b.instances):
        raise _refuse(f"a {side} JOIN together with UNNEST is not supported")
    if side in ("RIGHT", "FULL") and len(b.instances) != 2:
        raise _refuse(f"a {side} JOIN is supported between two tables only")
    last = b.instances[-1]
    preserved = {
        "LEFT": b.instances[:-1],
        "RIGHT": [last],
        "FULL": list(b.instances),
    }[side]
    nullable = {"LEFT": [last], "RIGHT": b.instances[:1], "FULL": list(b.instances)}[side]
    private = [i for i in b.instances if i.table is not None and i.table.private]
    if not private:
        b.build()  # refuses a join of public tables only, with its hint
    kept_private = [i for i in preserved if i.table is not None and i.table.private]
    if side == "FULL" and len(kept_private) != 2:
        raise _refuse(
            "a FULL JOIN with a public table keeps the public rows without a match, and how "
            "many there are depends on the private data",
            hint="write LEFT JOIN or RIGHT JOIN with the private table's rows kept",
        )
    for n in nullable:
        if n.table is None or not n.table.private:
            continue
        others = [p for p in preserved if p is not n]
        if not any(p.table is not None and p.table.private for p in others):
            continue  # a public preserved side: case 3, checked below
        if not _tied(b.catalog, b, oj, n, others):
            raise _refuse(
                f"the ON clause of the {side} JOIN does not tie {n.table.name} to the privacy "
                "unit of the rows it is joined to: whether a row is kept with NULLs would "
                "depend on other people's rows",
            )
    units = {i.alias: b._unit_of(i) for i in private}
    if any(i.hidden for i in b.instances):
        raise _refuse(
            f"a {side} JOIN of a table whose privacy unit is reached through a table that is "
            "not in the join, or that the outer join may leave NULL, is not supported",
            hint="join the table that holds the unit on the preserved side",
        )
    if len({b.uf.find(u) for u in units.values()}) != 1:
        raise _refuse(
            f"the {side} JOIN mixes the rows of two people",
            hint="join private tables on the privacy unit or on the keys that lead to it",
        )
    check_connected(b.instances, b.edges, b.flat_links)
    if kept_private:
        roots = [units[i.alias] for i in kept_private]
        if any(r[0] not in {i.alias for i in kept_private} for r in roots):
            raise _refuse(
                f"the privacy unit of a row kept by the {side} JOIN is reached through the "
                "table the join may leave NULL",
                hint="put the table that holds the unit on the kept side",
            )
        kind = "full" if side == "FULL" else "private"
    else:
        _check_public_preserved(b, select, preserved, nullable)
        roots = [units[private[0].alias]]
        kind = "public"
    return _relation(b, oj, preserved, nullable, roots, kind)


def _tied(
    catalog: Catalog, b: JoinBuilder, oj: OuterJoin, inst: Instance, others: list[Instance]
) -> bool:
    """Does an equality of the ON clause tie ``inst``'s unit to the unit of one of ``others``?"""
    aliases = {o.alias for o in others}
    for x, y in oj.edges:
        for mine, theirs in ((x, y), (y, x)):
            if mine[0] != inst.alias or theirs[0] not in aliases:
                continue
            mt, tt = b._inst(mine[0]).table, b._inst(theirs[0]).table
            if mt is None or tt is None or not tt.private:
                continue
            key = unit_key(catalog, mt, mine[1])
            if key is not None and key == unit_key(catalog, tt, theirs[1]):
                return True
    return False


def _check_public_preserved(
    b: JoinBuilder, select: exp.Select, preserved: list[Instance], nullable: list[Instance]
) -> None:
    """Case 3 of the module docstring: every aggregate reads a column of the private side, and
    every group key is a column of the public side with a declared domain."""
    hint = (
        "count a column of the private table (COUNT(c_custkey) instead of COUNT(*)) and group "
        "by columns of the public table that declare a domain; or write an inner join"
    )
    kept = {i.alias for i in preserved}
    dropped = {i.alias for i in nullable}
    parts: list[exp.Expression] = list(select.expressions)
    for key in ("having", "order"):
        if (node := select.args.get(key)) is not None:
            parts.append(node)
    for part in parts:
        for node in part.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Select)):
            if not isinstance(node, exp.AggFunc):
                continue
            arg = node.this
            if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1:
                arg = arg.expressions[0]
            owner = b._owner(arg) if isinstance(arg, exp.Column) else None
            if not isinstance(node, _NULL_IGNORING) or owner is None or owner[0] not in dropped:
                raise _refuse(
                    f"{node.sql('postgres')[:60]} over a public table's outer join with a private "
                    "one would count the public rows without a match, whose number depends on "
                    "the private data",
                    hint=hint,
                )
    group = select.args.get("group")
    for g in group.expressions if group is not None else []:
        if isinstance(g, exp.Literal) and g.is_int and 1 <= int(g.name) <= len(select.expressions):
            g = select.expressions[int(g.name) - 1].unalias()
        owner = b._owner(g) if isinstance(g, exp.Column) else None
        inst = b._inst(owner[0]) if owner is not None and owner[0] in kept else None
        column = inst.table.column(owner[1]) if inst and inst.table and owner else None
        if column is None or column.domain is None:
            raise _refuse(
                f"GROUP BY {g.sql('postgres')[:40]} over a public table's outer join with a "
                "private one: the groups must come from a public column with a declared domain",
                hint=hint,
            )


def _relation(
    b: JoinBuilder,
    oj: OuterJoin,
    preserved: list[Instance],
    nullable: list[Instance],
    roots: list[tuple[str, str]],
    kind: str,
) -> Built:
    visible = list(b.instances)
    vnames, names, ambiguous, columns = virtual_columns(visible)
    dropped = {i.alias for i in nullable}
    nullable_names = {v for (alias, _), v in vnames.items() if alias in dropped}
    columns = [replace(c, nullable=True) if c.name in nullable_names else c for c in columns]
    select = exp.select()
    for (alias, name), vname in vnames.items():
        source = column_of(b._inst(alias), name).name
        select = select.select(exp.alias_(exp.column(source, table=alias), vname), copy=False)
    unit_exprs = [exp.column(r[1], table=r[0]) for r in roots]
    unit: exp.Expression = (
        unit_exprs[0]
        if len(unit_exprs) == 1
        else exp.Coalesce(this=unit_exprs[0], expressions=unit_exprs[1:])
    )
    select = select.select(exp.alias_(unit, UNIT_OF_ROW), copy=False)
    first = [i for i in b.instances if i.alias != oj.alias]
    select = from_where(select, first, b.edges)
    last = b._inst(oj.alias)
    on = exp.and_(
        *(
            exp.EQ(
                this=exp.column(column_of(b._inst(x[0]), x[1]).name, table=x[0]),
                expression=exp.column(column_of(b._inst(y[0]), y[1]).name, table=y[0]),
            )
            for x, y in oj.edges
        )
    )
    select = select.join(from_item(last), on=on, join_type=oj.side, copy=False)
    derived, derivation = _bound(b, oj, preserved, nullable, kind)
    mark = {"LEFT": "⟕", "RIGHT": "⟖", "FULL": "⟗"}[oj.side]
    described = " ⋈ ".join(_name(i) for i in first) + f" {mark} {_name(last)}"
    described += {
        "private": f" ({oj.side} JOIN: each row is one unit's, the kept side's)",
        "full": " (FULL JOIN on the unit: each row is one unit's)",
        "public": f" ({oj.side} JOIN keeping public rows: their unmatched rows are NULL in "
        "every aggregate)",
    }[kind]
    unit_type = b._inst(roots[0][0]).table
    assert unit_type is not None
    root_column = unit_type.column(roots[0][1]) or next(
        c for c in unit_type.columns if c.name.lower() == roots[0][1]
    )
    columns.append(Column(UNIT_OF_ROW, root_column.type))
    kept = {i.alias for i in preserved}
    unit_class = b.uf.find(roots[0])
    unit_columns = (
        ()
        if kind != "private"
        else tuple(
            v for key, v in vnames.items() if key[0] in kept and b.uf.find(key) == unit_class
        )
    )
    table = Table(
        name=described,
        private=True,
        columns=tuple(columns),
        privacy_unit=UNIT_OF_ROW,
        bound=ContributionBound(max_rows=derived) if derived is not None else ContributionBound(),
        unit_columns=unit_columns,
    )
    origins = tuple(
        (vname, inst.table.name, name)
        for (alias, name), vname in vnames.items()
        if (inst := b._inst(alias)).table is not None
    )
    joined = JoinSource(select, described, derived, derivation, origins=origins)
    return table, joined, names, ambiguous


def _name(inst: Instance) -> str:
    assert inst.table is not None
    return inst.table.name + ("" if inst.alias == inst.table.name.lower() else f" {inst.alias}")


def _bound(
    b: JoinBuilder, oj: OuterJoin, preserved: list[Instance], nullable: list[Instance], kind: str
) -> tuple[int | None, str]:
    """Rows of one unit in the outer join (module docstring): k_p · max(1, f), FULL + k_n;
    public preserved rows: those of the inner join (the unmatched rows belong to no unit)."""
    if kind == "public":
        derived, why = b._derived_bound()
        return derived, f"{why} (the unmatched public rows belong to no one)"
    if kind == "full":
        a, c = b.instances
        parts = []
        for p in (a, c):
            assert p.table is not None
            k = p.table.bound.rows_total()
            if k is None:
                return None, f"{p.table.name} declares no max_rows_per_unit"
            parts.append(k)
        ka, kc = parts
        f, why = factor(
            c, {m[1] for x, y in oj.edges for m in (x, y) if m[0] == c.alias}, b.catalog
        )
        if f is None:
            return None, why
        total = ka * max(1, f) + kc
        return total, f"{ka} × max(1, {why}) + {kc} (FULL JOIN: unmatched rows of both sides)"
    kept = [i for i in b.instances if i in preserved]
    k, why = b._derived_bound(kept)
    if k is None:
        return None, why
    last = b._inst(oj.alias) if oj.side == "LEFT" else b.instances[0]
    cols = {m[1] for x, y in oj.edges for m in (x, y) if m[0] == last.alias}
    f, fwhy = factor(last, cols, b.catalog)
    if f is None:
        return None, fwhy
    return k * max(1, f), f"{why} × max(1, {fwhy}) ({oj.side} JOIN: an unmatched row once)"
