"""Aggregate CTEs and derived tables grouped by a public-domain key: released first, then read
by the rest of the query as public data.

TPC-H Q15 computes ``revenue`` per ``l_suppkey`` in a CTE, joins it to ``supplier`` and keeps the
supplier whose revenue is ``(SELECT MAX(total_revenue) FROM revenue)``; an analyst averages the
sizes of the occupation groups, ``SELECT AVG(n) FROM (SELECT occupation, COUNT(*) AS n FROM
adult GROUP BY occupation) t``. Each such relation — a CTE or a derived table whose SELECT reads
a private table and groups by columns, none of them the privacy unit — is planned as a part:

1. **Its key domain is public**: for each group key, the schema's domain of the column (a
   declared ``domain``, a boolean; NULL too when the column is nullable), or else the distinct
   values of a public table column the rest of the query equates the relation's key output with
   (Q15: ``s_suppkey = supplier_no``), computed exactly by the public path before any private row
   is read. The keys are their product, at most :data:`MAX_KEYS` (53400 beyond, nothing
   charged). Rows whose key is not in the domain are left out of the release (for a key read
   from a public table through a foreign key, such as ``l_suppkey``, there are none).
2. **The relation is one grouped DP release** over exactly those keys, grouped by the key's
   index (``GROUP BY CASE WHEN l_suppkey = 1 THEN 0 ... END``: a public domain, every key
   released, no partition selection; each unit's rows bounded across keys as in every grouped
   release), with a noisy ``COUNT(*)`` per key: a key whose count rounds to 0 is left out, as
   SQL's GROUP BY has no group without rows.
3. **The rest of the query is post-processing**: the released rows replace the relation's
   SELECT as a ``VALUES`` list (its columns cast to the relation's types), and the query, which
   must then read public tables only, is answered exactly by the public path
   (``planning/public.py``).

Privacy argument: the key domain is a function of the schema, the query text and public rows,
so every part's plan and cost are fixed before private data is read; each relation's release is
(ε_i, δ_i)-DP by the planner's argument for a grouped release over a public set of groups; the
final answer is a function of those releases and public rows only (post-processing), so the
whole is (Σ ε_i, Σ δ_i)-DP by sequential composition, reserved and charged at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product

from sqlglot import exp

from dpproxy.catalog.model import Catalog, ColumnType
from dpproxy.errors import PublicResultTooLarge, UnsupportedQuery
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import MAX_KEYS, PublicPlan
from dpproxy.planning.released import VALUE_WIDTH, bigint, key_depth, literal_width, written
from dpproxy.sql.aggregates import default_name
from dpproxy.sql.correlated import (
    Key,
    coded_index,
    group_by_index,
    key_index,
    literal,
    number,
    owner,
)

_TYPES = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.FLOAT: "DOUBLE PRECISION",
    ColumnType.BOOLEAN: "BOOLEAN",
    ColumnType.DATE: "DATE",
}


@dataclass(frozen=True, slots=True, eq=False)
class RelationPart:
    """An aggregate CTE or derived table, released first over its public key domain."""

    name: str  # the CTE's name or the derived table's alias
    keys: tuple[Key, ...]  # the public key domain (the product of each key's domain)
    items: tuple[tuple[str, int, bool, str], ...]  # (name, key or value index, is key, type)
    sql: str  # the grouped release
    plan: QueryPlan
    domains: tuple[str, ...]  # where each key's domain comes from (for explain)

    @property
    def placeholder(self) -> exp.Select:
        """The relation as planned before the data is read: no rows."""
        return self.body([])

    def value(self, rows: Sequence[Sequence[object]]) -> exp.Select:
        """The released rows (key index, values..., count) as the relation's SELECT; a key
        whose noisy count rounds to 0 is left out (SQL has no group without rows)."""
        kept = []
        at = key_index(self.keys)
        for row in rows:
            index, count = (row[0] if at is None else at.get(row[0], -1)), row[-1]
            if not isinstance(index, int) or not 0 <= index < len(self.keys):
                continue
            if count is None or float(count) < 0.5:  # type: ignore[arg-type]
                continue
            kept.append((self.keys[index], row[1:-1]))
        return self.body(kept)

    def widest(self) -> int:
        """An upper bound on the characters the released relation adds to the outer query's
        text over its placeholder: every key kept, every value :data:`VALUE_WIDTH` wide."""
        one = self.body([(self.keys[0], [0.0] * len(self.items))]) if self.keys else None
        width = len(one.sql("postgres")) if one is not None else 0
        for key in self.keys:
            cells = [
                literal_width(key[at]) if is_key else VALUE_WIDTH for _, at, is_key, _ in self.items
            ]
            width += sum(cells) + 2 * len(cells) + 4  # (…, …) and the comma between rows
        return width

    def deepest(self, value: float) -> exp.Select:
        """The released relation at its most nested: one row (rows are siblings), of the key
        whose literals nest deepest, every aggregate ``value`` (``scalars.WIDEST``)."""
        if not self.keys:
            return self.placeholder
        return self.body([(max(self.keys, key=key_depth), [value] * len(self.items))])

    def body(self, rows: Sequence[tuple[Key, Sequence[object]]]) -> exp.Select:
        def cell(key: Key, values: Sequence[object], item: tuple[str, int, bool, str]) -> exp.Expr:
            _, at, is_key, _ = item
            if is_key:
                return literal(key[at])
            v = values[at]
            if v is None:
                return exp.Null()
            if item[3] == "BIGINT":  # cast to BIGINT below: kept within its range (released.py)
                return number(bigint(v))  # type: ignore[arg-type]
            return number(written(v))  # type: ignore[arg-type]

        if not rows:
            casts = [
                exp.alias_(exp.Cast(this=exp.Null(), to=exp.DataType.build(t)), n, quoted=True)
                for n, _, _, t in self.items
            ]
            return exp.select(*casts).where(exp.false())
        names = [f"c{i}" for i in range(len(self.items))]
        values = exp.Values(
            expressions=[
                exp.Tuple(expressions=[cell(k, v, it) for it in self.items]) for k, v in rows
            ],
            alias=exp.TableAlias(
                this=exp.to_identifier("released"), columns=[exp.to_identifier(n) for n in names]
            ),
        )
        casts = [
            exp.alias_(exp.Cast(this=exp.column(c), to=exp.DataType.build(t)), n, quoted=True)
            for c, (n, _, _, t) in zip(names, self.items, strict=True)
        ]
        return exp.select(*casts).from_(values)


def find_relations(tree: exp.Expression, catalog: Catalog) -> list[exp.CTE | exp.Subquery]:
    """The aggregate CTEs and derived tables over private data grouped by columns none of
    which is the privacy unit (those are per-unit subqueries, answered elsewhere)."""
    found: list[exp.CTE | exp.Subquery] = []
    for node in tree.walk():
        if isinstance(node, exp.CTE) or (
            isinstance(node, exp.Subquery) and isinstance(node.parent, exp.From | exp.Join)
        ):
            select = node.this
            if not isinstance(select, exp.Select) or select.args.get("group") is None:
                continue
            if any(isinstance(n, exp.Subquery | exp.CTE) for n in select.walk() if n is not select):
                continue  # subqueries inside (per-unit ones, say): the validator's
            tables = [catalog.table(t.name.lower()) for t in select.find_all(exp.Table)]
            if not any(t is not None and t.private for t in tables):
                continue
            keys = [k for k in select.args["group"].expressions]
            if any(
                isinstance(k, exp.Column)
                and (o := owner(k, select, catalog)) is not None
                and o[1].is_unit(k.name)
                for k in keys
            ):
                continue
            found.append(node)
    return found


def _refuse(name: str, why: str, hint: str | None = None) -> UnsupportedQuery:
    return UnsupportedQuery(f"the aggregate subquery {name} {why}", hint=hint)


def plan_relation(
    node: exp.CTE | exp.Subquery,
    tree: exp.Expression,
    catalog: Catalog,
    rows_of: Callable[[str], Sequence[Key]],
    plan_of: Callable[[str], QueryPlan | PublicPlan],
    prefix: Callable[[exp.Select], exp.Select],
    hints: str,
) -> RelationPart:
    """The release of one relation of :func:`find_relations` over its public key domain."""
    select = node.this
    assert isinstance(select, exp.Select)
    name = node.alias_or_name
    if select.args.get("having") is not None or any(
        isinstance(n, exp.Subquery) for n in select.walk() if n is not select
    ):
        raise _refuse(name, "may not have HAVING or subqueries to be released first")
    for clause in ("limit", "offset", "qualify"):  # not applied to the release
        if select.args.get(clause) is not None:
            raise _refuse(
                name,
                f"may not have {clause.upper()} to be released first",
                hint="apply it in the outer query (… FROM g ORDER BY n DESC LIMIT 2)",
            )
    group_by = list(select.args["group"].expressions)
    aliases = {i.alias.lower(): i.unalias() for i in select.expressions if i.alias}
    keys: list[exp.Column] = []
    for g in group_by:
        if isinstance(g, exp.Literal) and g.is_int and 0 < int(g.name) <= len(select.expressions):
            g = select.expressions[int(g.name) - 1].unalias()
        elif (  # an output name, unless a column of the FROM has it (as PostgreSQL reads it)
            isinstance(g, exp.Column)
            and not g.table
            and g.name.lower() in aliases
            and owner(g, select, catalog) is None
        ):
            g = aliases[g.name.lower()]
        if not isinstance(g, exp.Column) or owner(g, select, catalog) is None:
            raise _refuse(name, f"must group by columns of its tables, not {g.sql('postgres')}")
        keys.append(g)
    columns = _output_names(node, select)
    items: list[tuple[str, int, bool, str]] = []
    aggregates: list[exp.Expression] = []
    for out, item in zip(columns, select.expressions, strict=True):
        expr = item.unalias()
        at = next((i for i, k in enumerate(keys) if k == expr), None)
        if at is not None:
            found = owner(keys[at], select, catalog)
            assert found is not None
            column = found[1].column(keys[at].name.lower())
            assert column is not None
            items.append((out, at, True, _TYPES.get(column.type, "TEXT")))
        elif any(isinstance(n, exp.AggFunc) for n in expr.walk()):
            counts = all(isinstance(a, exp.Count) for a in expr.find_all(exp.AggFunc))
            items.append((out, len(aggregates), False, "BIGINT" if counts else "DOUBLE PRECISION"))
            aggregates.append(expr)
        else:
            raise _refuse(name, f"may output its group keys and aggregates only, not {out}")
    if select.args.get("distinct") is not None and len({at for _, at, k, _ in items if k}) < len(
        keys
    ):  # rows that differ only in a key not output would be merged: not applied either
        raise _refuse(name, "may not have DISTINCT without all its group keys in its output")
    domains: list[tuple[object, ...]] = []
    sources: list[str] = []
    for i, key in enumerate(keys):
        found = owner(key, select, catalog)
        assert found is not None
        column = found[1].column(key.name.lower())
        assert column is not None
        if column.domain is not None or column.type is ColumnType.BOOLEAN:
            values = column.domain if column.domain is not None else (False, True)
            domains.append(tuple(values) + ((None,) if column.nullable else ()))
            sources.append(f"{key.name}: the schema's domain")
            continue
        outputs = [n for n, at, is_key, _ in items if is_key and at == i]
        query = _public_join(tree, node, name, outputs, catalog)
        if query is None:
            raise _refuse(
                name,
                f"groups by {key.name}, which has no public domain",
                hint=f"give {key.name} a domain in the schema, or join the subquery's "
                f"{key.name} to a column of a public table (supplier_no = s_suppkey)",
            )
        domains.append(tuple(r[0] for r in rows_of(query)))
        sources.append(f"{key.name}: {query}")
    size = 1
    for d in domains:
        size *= len(d)
    if size > MAX_KEYS:
        raise PublicResultTooLarge(
            f"the aggregate subquery {name} has {size:,} keys (at most {MAX_KEYS:,}); it is "
            "released once per key",
            hint="group by fewer columns, or restrict the public table it is joined to",
        )
    domain = tuple(product(*domains))
    if not domain:
        raise _refuse(name, "has no key in its public domain", hint="; ".join(sources))
    release = _release(select, keys, aggregates, domains, domain)
    text = hints + prefix(release).sql("postgres", comments=False)
    plan = plan_of(text)
    if not isinstance(plan, QueryPlan) or plan.selection is not None:
        raise AssertionError("a relation is released over a public domain")
    return RelationPart(name, domain, tuple(items), text, plan, tuple(sources))


def _output_names(node: exp.CTE | exp.Subquery, select: exp.Select) -> list[str]:
    alias = node.args.get("alias")
    listed = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    # an output without AS gets PostgreSQL's name (COUNT(*): count), as at top level
    names = [i.alias or default_name(i, n) for n, i in enumerate(select.expressions)]
    if len(listed) > len(names):
        raise _refuse(node.alias_or_name, "names more columns than it outputs")
    return listed + names[len(listed) :]  # a shorter list renames the first outputs


def _public_join(
    tree: exp.Expression,
    node: exp.CTE | exp.Subquery,
    name: str,
    outputs: Sequence[str],
    catalog: Catalog,
) -> str | None:
    """``SELECT DISTINCT col FROM t`` for a public ``t.col`` that the query outside the
    relation equates with one of its ``outputs`` (None: there is none)."""
    wanted = {o.lower() for o in outputs}
    for eq in tree.find_all(exp.EQ):
        if _within(eq, node):
            continue
        for mine, other in ((eq.this, eq.expression), (eq.expression, eq.this)):
            if not (isinstance(mine, exp.Column) and isinstance(other, exp.Column)):
                continue
            if mine.name.lower() not in wanted or mine.table.lower() not in ("", name.lower()):
                continue
            select = other.find_ancestor(exp.Select)
            found = owner(other, select, catalog) if select is not None else None
            if found is None or found[1].private:
                continue
            col = exp.column(other.name)
            query = exp.select(col).distinct().from_(found[1].name)
            query = query.where(exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null())))
            return query.sql("postgres")
    return None


def _within(node: exp.Expression, outer: exp.Expression) -> bool:
    p: exp.Expr | None = node
    while p is not None:
        if p is outer:
            return True
        p = p.parent
    return False


def _release(
    select: exp.Select,
    keys: Sequence[exp.Column],
    aggregates: Sequence[exp.Expression],
    domains: Sequence[tuple[object, ...]],
    domain: Sequence[Key],
) -> exp.Select:
    index, coded = coded_index(keys, domain)  # integer keys: by their code (correlated.py)
    release = select.copy()
    items = [exp.alias_(index, "key_index")]
    items += [exp.alias_(a.copy(), f"value_{i}") for i, a in enumerate(aggregates)]
    items.append(exp.alias_(exp.Count(this=exp.Star()), "key_rows"))
    release.set("expressions", items)
    release.set("order", None)
    release.set("limit", None)
    filters: list[exp.Expression] = []
    for key, values in zip(keys, domains, strict=True):  # rows of the domain only
        listed: exp.Expression = exp.In(
            this=key.copy(), expressions=[literal(v) for v in values if v is not None]
        )
        if None in values:
            listed = exp.Paren(
                this=exp.Or(this=listed, expression=exp.Is(this=key.copy(), expression=exp.Null()))
            )
        filters.append(listed)
    return group_by_index(release, index, filters + coded, len(domain))


def substitute_relations(
    tree: exp.Expression, catalog: Catalog, bodies: Sequence[exp.Select]
) -> exp.Expression:
    """A copy of ``tree`` with its relations' SELECTs replaced by ``bodies``, in order."""
    copy = tree.copy()
    found = find_relations(copy, catalog)
    if len(found) != len(bodies):
        raise ValueError("one body per relation")
    for node, body in zip(found, bodies, strict=True):
        node.set("this", body.copy())
    return copy
