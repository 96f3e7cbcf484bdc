"""Correlated scalar subqueries keyed on public columns: released first, once per public key.

TPC-H Q17 (``l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM lineitem WHERE l_partkey =
p_partkey)``) and Q20 (``ps_availqty > (SELECT 0.5 * SUM(l_quantity) FROM lineitem WHERE
l_partkey = ps_partkey AND l_suppkey = ps_suppkey AND ...)``) evaluate an aggregate of private
rows once per outer row. Evaluated that way, adding one person changes the aggregate of every
key they touch, hence the filter of every other person's rows, and no sensitivity bound
follows. But the subquery is a function of its **key** (the outer columns it equates inner
columns with, ``sql/correlated.py``), and when those columns belong to a public table the
function can be *released first*, as a table, and then used as public data. The query is
planned as parts (``planning/scalars.py`` runs them like its scalar parts):

1. **The key domain** (public, exact, free). The distinct key values of the public table's
   rows that pass the enclosing SELECT's conjuncts over that table alone (and public
   subqueries) are computed by the public path (``planning/public.py``) before any private
   row is read and before the budget is reserved. Every outer row the enclosing SELECT keeps
   has its key in this set. More than :data:`~dpproxy.planning.public.MAX_KEYS` keys (or the
   engine's public row cap, if smaller) are refused (53400) and nothing is charged.
2. **The keyed release** (DP). The subquery grouped by its key's code: for integer keys
   ``WHERE l_partkey IN (…) AND l_suppkey IN (…) AND l_partkey * W + l_suppkey IN (…) GROUP BY
   l_partkey * W + l_suppkey`` (one key: the column itself; ``sql/correlated.py``,
   :func:`~dpproxy.sql.correlated.coded_index`, which argues the code exact and injective on
   the rows kept), a group key whose domain is the last IN list (``sql/domains.py``), linear
   in the rows on both engines; for other keys the key's index ``CASE WHEN l_partkey = 5 THEN
   0 WHEN ... END``, whose domain is its literal branches. Either way a public domain written
   in the query text: the planner releases **every** key — empty ones too — with no
   partition selection, and bounds each unit's contribution across all keys the way every
   grouped release does (one customer's line items spread over many parts: the rows per unit
   bound, L1 over the groups, ``analysis/sensitivity.py``). When the value is NULL over no rows
   (SUM, AVG), a noisy ``COUNT(*)`` per key is released with it, and a key whose count rounds
   to 0 gets NULL, as the SQL subquery over no rows gives.
3. **The outer query** (DP, or exact when it then reads public tables only, as Q20's does), with
   the released table in place of the subquery as ``CASE WHEN p_partkey = 5 THEN 4.8 WHEN ...
   END`` over the outer columns (NULL for a key without a value) when it is DP (the planner's
   form), and as a lookup in a VALUES relation of (key…, value) when it is public
   (:func:`~dpproxy.sql.correlated.lookup_relation`: the same function of the outer row).

Size. The texts grow linearly with the keys (TPC-H Q20 at scale factor 1, 8,508 keys: the
keyed release 147,369 characters, the outer query 173,535), and dpproxy's own texts are parsed
under the same 1,000,000-character limit (54001) as the analyst's: at the cap of 10,000 keys
a domain of wide keys could reach it, and is then refused before anything is read or charged.

Privacy argument.

* **The domain is public.** It is a function of public rows and of the query text only, so the
  set of keys, the shape of the keyed release (its groups) and of the outer query (its CASE
  branches), and therefore every part's plan and cost, are fixed before any private data is
  read; a refusal of any part charges nothing.
* **The keyed release** is one grouped (ε₁, δ₁)-DP release over a public set of groups: its
  sensitivity is that of any grouped release of the planner (each unit's rows are bounded, and
  the sum over groups of a unit's influence is bounded by its rows), and releasing all groups
  of a public domain needs no partition selection (nothing about which keys have rows leaks
  through which groups appear).
* **Post-processing.** The released table, turned into NULLs and constants of a CASE, is a
  function of DP outputs; the outer query treats it as public data. Where the outer query is
  DP, its released values stand on one side of a comparison only (``sql/scalars.py``), so its
  plan is the same whatever they are — it is planned with 0 for every key before the data is
  read and checked to be the same plan after (adaptive sequential composition, the argument of
  ``planning/scalars.py``). Where it reads public tables only, it is an exact function of public
  rows and released values: post-processing, cost 0.
* **Composition.** The total is the sum of the parts' costs (basic composition, adaptive), the
  amount reserved and charged at once.
* **An empty domain** means no row of the enclosing SELECT can pass its WHERE, whatever the
  private tables hold. When the enclosing SELECT is the whole query, its answer is then the
  same on every database with these public rows: dpproxy computes it exactly on the public path
  with every private table of its FROM replaced by an empty relation, at no cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from dpproxy.catalog.model import Catalog, ColumnType
from dpproxy.errors import PublicResultTooLarge, UnsupportedQuery
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import MAX_KEYS, PublicPlan, plan_public, reads_public_only
from dpproxy.planning.released import key_depth
from dpproxy.sql.correlated import Correlation, Key, key_index, keyed_sql, lookup
from dpproxy.sql.correlated import key_case as key_case
from dpproxy.sql.parse import parse

KEYED_NOTE = (
    "a correlated subquery keyed on a public table is released first as one grouped query over "
    "the public set of keys (every key, empty ones too), then replaces the subquery as a public "
    "table of values (post-processing)"
)
_TYPES = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.FLOAT: "DOUBLE PRECISION",
    ColumnType.BOOLEAN: "BOOLEAN",
    ColumnType.DATE: "DATE",
}


@dataclass(frozen=True, slots=True, eq=False)
class KeyedPart:
    """A correlated subquery as one grouped release over its public key domain."""

    corr: Correlation = field(repr=False)
    keys: tuple[Key, ...]  # the public key domain, in the order of the key index
    sql: str  # the keyed release ("" when the domain is empty: nothing to release)
    plan: QueryPlan | None  # None when the domain is empty
    relation: bool = False  # the outer query is public: the lookup is a VALUES relation

    @property
    def placeholder(self) -> exp.Expression:
        """The released table as planned before the data is read: 0 for every key."""
        return lookup(self.corr, self.keys, [0.0] * len(self.keys), self.relation)

    def deepest(self, value: float) -> exp.Expression:
        """The released table at its most nested: one key, the one whose literal nests deepest
        (keys are siblings in the CASE or the VALUES), with ``value`` (``scalars.WIDEST``)."""
        if not self.keys:
            return exp.Null()
        key = max(self.keys, key=key_depth)
        return lookup(self.corr, [key], [value], self.relation)

    @property
    def groups(self) -> list[object]:
        """Each key's group in the keyed release's rows: its code, or its index."""
        at = key_index(self.keys)
        return list(at) if at is not None else list(range(len(self.keys)))

    def value(self, rows: Sequence[Sequence[object]]) -> exp.Expression:
        """The released rows (key index, value[, count]) in place of the subquery."""
        values: list[object] = [None] * len(self.keys)
        at = key_index(self.keys)
        for row in rows:
            index = row[0] if at is None else at.get(row[0], -1)
            if not isinstance(index, int) or not 0 <= index < len(self.keys):
                continue  # no other group is released (a public domain); never trusted
            value = row[1]
            if not self.corr.counts and (row[2] is None or float(row[2]) < 0.5):  # type: ignore[arg-type]
                value = None  # the subquery over no rows: NULL
            values[index] = value
        return lookup(self.corr, self.keys, values, self.relation)


def plan_keyed(
    corr: Correlation,
    domain_of: Callable[[str], Sequence[Key]],
    plan_of: Callable[[str], QueryPlan | PublicPlan],
    hints: str,
) -> KeyedPart:
    """The keyed part: its domain computed (public path), its release planned."""
    keys = tuple(tuple(k) for k in domain_of(corr.domain_sql))
    if not keys:
        return KeyedPart(corr, keys, "", None)
    text = hints + keyed_sql(corr, keys)
    plan = plan_of(text)
    if not isinstance(plan, QueryPlan) or plan.selection is not None:
        raise AssertionError("a keyed release is a DP plan over a public domain")
    return KeyedPart(corr, keys, text, plan)


def empty_query(tree: exp.Expression, catalog: Catalog) -> exp.Expression:
    """``tree`` (the whole query, its keyed subquery with an empty domain already replaced
    by NULL) with each private table of its FROM replaced by an empty relation of the same
    columns: its answer is the same on every database with these public rows."""
    copy = tree.copy()
    assert isinstance(copy, exp.Select)
    from_ = copy.args.get("from_") or copy.args.get("from")
    sources = ([from_.this] if from_ is not None else []) + [
        j.this for j in copy.args.get("joins") or []
    ]
    for src in sources:
        table = catalog.table(src.name.lower()) if isinstance(src, exp.Table) else None
        if table is None or not table.private:
            continue
        columns = [
            exp.alias_(
                exp.Cast(this=exp.Null(), to=exp.DataType.build(_TYPES.get(c.type, "TEXT"))),
                c.name,
            )
            for c in table.columns
        ]
        empty = exp.select(*columns).where(exp.false())
        alias = exp.TableAlias(this=exp.to_identifier(src.alias_or_name))
        src.replace(exp.Subquery(this=empty, alias=alias))
    return copy


def keyed_domain(
    sql: str,
    plan: Callable[[str], PublicPlan | None],
    run: Callable[[PublicPlan, str, None], Any],
) -> list[Key]:
    """The key domain's rows, run by the engine's public path (``run``: exact, free); more
    than its row cap is refused (53400) naming the key domain, and nothing is charged."""
    public = plan(sql)
    if public is None:
        raise UnsupportedQuery("the key domain of a correlated subquery must read public tables")
    try:
        rows = run(public, "", None).released.rows
    except PublicResultTooLarge:
        raise PublicResultTooLarge(
            f"the correlated subquery has more than {public.max_rows:,} keys (the distinct "
            f"values of {sql[:80]}…); it is released once per key",
            hint="restrict the outer query's public table with a WHERE clause on its own "
            "columns, so that fewer keys remain; nothing was charged",
        ) from None
    return [tuple(r) for r in rows]


class PublicPath:
    """The engine's public path as the parts need it: the rows of a key domain query, and the
    plan of a query that, once released values replace its private parts, reads public tables
    or released values only (``engine`` is the :class:`~dpproxy.engine.Engine`)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.catalog: Catalog = engine.catalog

    def rows(self, sql: str) -> list[Key]:
        return keyed_domain(sql, self._domain_plan, self.engine._run_public)

    def _domain_plan(self, sql: str) -> PublicPlan | None:
        """The key domain query's public plan, capped at :data:`MAX_KEYS` rows: each key costs a
        noisy value and a literal of the keyed release."""
        tree = parse(sql)
        if not reads_public_only(tree, self.catalog):
            return None
        e = self.engine
        return plan_public(tree, self.catalog, e.backend.dialect, min(e.public_max_rows, MAX_KEYS))

    def plan(self, text: str, total: bool = False) -> PublicPlan:
        """``total``: the query runs over released relations (``planning/released.py``)."""
        tree = parse(text)
        self.check_reads(tree)
        e = self.engine
        dialect, cap = e.backend.dialect, e.public_max_rows
        return plan_public(tree, self.catalog, dialect, cap, values=True, total=total)

    def check_reads(self, tree: exp.Expression) -> None:
        """Refuse a query that reads a private table (once released values replace parts)."""
        for t in tree.find_all(exp.Table):
            table = self.catalog.table(t.name.lower())
            if table is not None and table.private:
                raise UnsupportedQuery(
                    f"an aggregate subquery is released first and then read as public data, "
                    f"but the rest of the query reads the private table {table.name} too",
                    hint="aggregate the private rows in the subquery only, and read its "
                    "released rows and public tables around it",
                )
