"""Queries with scalar subqueries over private data: each scalar released first with DP.

A query such as TPC-H Q22, ``... WHERE c_acctbal > (SELECT AVG(c_acctbal) FROM customer
WHERE ...)``, is planned as k + 1 ordinary DP queries (``sql/scalars.py`` finds and checks the
subqueries):

* each scalar subquery, as a query of its own: an ungrouped aggregate, so one noisy number;
* the outer query with a placeholder constant (0) in place of each subquery.

A scalar subquery over public tables only is computed exactly, at no cost, by the public path
(``planning/public.py``) before the budget is reserved: public rows hold no one's private data,
so its value is a public constant like any other.

Everything is planned before any data is read, so a refusal of any part (the outer query
groups by the privacy unit, the subquery is correlated, the budget does not cover the sum)
charges nothing. ``Engine.run`` then reserves the total cost at once, runs the scalar
queries, writes their released values into the outer query (:meth:`ComposedPlan.outer_text`),
plans that text again, checks that its plan is the placeholder plan (same cost, same
mechanisms and bounds; otherwise an internal error, charged, as any failure after the data
was read), runs it, and commits the one reservation.

Privacy argument.

* **Sequential composition.** The scalar releases M_1 … M_k and the outer release M_0 are
  each (ε_i, δ_i)-DP with respect to the same neighbouring relation (one privacy unit added
  or removed, the schema's); the analyst sees (M_1, …, M_k, M_0), so by basic composition
  the whole is (Σ ε_i, Σ δ_i)-DP, which is :attr:`ComposedPlan.cost`, the amount reserved
  and charged. Each part is planned at the analyst's requested (ε, δ), so a query with k
  scalar subqueries costs k + 1 times a plain one; ``explain`` shows each part's cost.
* **Adaptivity.** M_0 is chosen after M_1 … M_k are known: its query text contains their
  values. Basic composition holds for adaptively chosen mechanisms (Dwork, Rothblum and Vadhan
  2010; Dwork and Roth 2014, Theorem 3.16 and §3.5.1), provided each M_0(v) is (ε_0, δ_0)-DP
  for every value v it may be given, with ε_0, δ_0 fixed in advance. That is why the outer
  query is planned with a placeholder before the data is read and the plan at the released
  values must have the same cost (checked, refused otherwise).
* **The values are public constants for the outer query.** A released value is a function of
  DP outputs only (post-processing): the outer query's sensitivity analysis may treat it like
  any constant the analyst typed, because conditioned on it M_0's sensitivity bound holds for
  every pair of neighbouring databases. The constant stands only as one side of a comparison
  (``sql/scalars.py``), where it decides which rows match and nothing else, or in arithmetic
  over the outer query's released aggregates, which dpproxy computes after the noise: types,
  clamping bounds, totality arguments and the plan do not depend on it.
* **No NULL surprises.** The released value of an ungrouped COUNT, SUM or AVG is always a
  finite number (an AVG released by JOINT or GS is clipped into the column's bounds); a value
  that is NULL is substituted as NULL (SQL comparisons with it are unknown, so no row
  matches: what the plain SQL does when the subquery reads no rows), and a
  propose-test-release refusal (ZD005) of a scalar part ends the whole query, charged, as PTR's
  refusal of any query is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from sqlglot import exp

from dpproxy.catalog.model import Catalog
from dpproxy.errors import UnsupportedQuery
from dpproxy.planning.keyed import KeyedPart, PublicPath, empty_query, plan_keyed
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.relations import (
    RelationPart,
    find_relations,
    plan_relation,
    substitute_relations,
)
from dpproxy.planning.released import VALUE_WIDTH, refuse_values
from dpproxy.sql.correlated import correlation
from dpproxy.sql.ctes import unshadow_ctes
from dpproxy.sql.parse import parse, peek
from dpproxy.sql.scalars import (
    check_scalar,
    compared,
    constant,
    find_scalars,
    outer_columns,
    placeholder,
    refuse_arithmetic,
    substitute,
)
from dpproxy.values import Cost

WIDEST = -2.2250738585072014e-308  # a released number at its longest and most nested text
_HINT = re.compile(r"/\*\+\s*dpproxy\b.*?\*/", re.DOTALL | re.IGNORECASE)
FIRST_NOTE = (
    "each scalar subquery is released first with differential privacy, as a query of its own; "
    "its noisy value then replaces the subquery in the outer query as a public constant "
    "(post-processing). The cost is the sum of the parts (sequential composition)"
)


@dataclass(frozen=True, slots=True)
class ScalarPart:
    """One scalar subquery as a query of its own, and its plan."""

    sql: str
    plan: QueryPlan | PublicPlan  # PublicPlan: over public tables only, computed exactly, free


Part = ScalarPart | KeyedPart | RelationPart


@dataclass(frozen=True, slots=True, eq=False)
class ComposedPlan:
    """The plan of a query with scalar subqueries: the parts, in the order they run."""

    query: str  # the analyst's query
    scalars: tuple[Part, ...]  # Keyed: correlated, per public key; Relation: an aggregate CTE
    outer_sql: str  # the outer query with a placeholder for each scalar subquery
    outer: QueryPlan | PublicPlan  # Public: only after keyed parts (post-processing, exact)
    tree: exp.Expression = field(repr=False)  # the analyst's query, parsed
    hints: str = ""  # the query's /*+ dpproxy ... */ hints, given to every part
    # the statements each part runs, scalars first then the outer query (for explain)
    statements: tuple[tuple[str, ...], ...] = ()
    # the exact answer's plan when a keyed part's public domain is empty (keyed.py)
    empty: PublicPlan | None = None
    public: PublicPath | None = field(default=None, repr=False)  # the engine's public path

    @property
    def parts(self) -> tuple[Part, ...]:
        """The parts that release something (a keyed part over an empty domain does not)."""
        return tuple(p for p in self.scalars if p.plan is not None)

    @property
    def plans(self) -> tuple[QueryPlan | PublicPlan, ...]:
        """Every part's plan, in the order they run: the scalars, then the outer query."""
        return (*(p.plan for p in self.parts if p.plan is not None), self.outer)

    @property
    def texts(self) -> tuple[str, ...]:
        """Every part as a query of its own (the outer one with placeholders)."""
        return (*(p.sql for p in self.parts), self.outer_sql)

    def statements_of(self, prepare: Callable[[str], Any]) -> tuple[tuple[str, ...], ...]:
        """Every part's statements (``prepare``: the engine's), then the outer query's."""
        outer = self.outer
        last = (outer.sql,) if isinstance(outer, PublicPlan) else prepare(self.outer_sql).statements
        return (*(prepare(p.sql).statements for p in self.parts), last)

    @property
    def dp_plan(self) -> QueryPlan:
        """The plan whose (ε, δ) was requested: the outer one, or the first DP part."""
        plans = [p for p in (self.outer, *self.plans) if isinstance(p, QueryPlan)]
        return plans[0]

    @property
    def cost(self) -> Cost:
        total = self.outer.cost
        for part in self.parts:
            assert part.plan is not None
            total = total + part.plan.cost
        return total

    def outer_text(self, values: Sequence[exp.Expression]) -> str:
        """The outer query with ``values`` in place of the scalar subqueries (or of the
        relations' SELECTs, ``planning/relations.py``)."""
        if self.public is not None and any(isinstance(p, RelationPart) for p in self.scalars):
            bodies = [v for v in values if isinstance(v, exp.Select)]
            tree = substitute_relations(self.tree, self.public.catalog, bodies)
            return self.hints + tree.sql("postgres", comments=False)
        return self.hints + substitute(self.tree, values).sql("postgres", comments=False)

    def longest(self) -> int:
        """An upper bound on the length of :meth:`outer_text` at any released values: the
        placeholders' text, and for each part what its released values may add (every key
        kept, every number :data:`~dpproxy.planning.released.VALUE_WIDTH` characters, as
        ``sql/correlated.number`` and ``sql/scalars.constant`` write them)."""
        total = len(self.outer_sql)
        for p in self.scalars:
            if isinstance(p, RelationPart):
                total += p.widest()
            elif isinstance(p, KeyedPart):
                total += VALUE_WIDTH * len(p.keys)  # each 0.0 becomes a released number
            else:
                total += VALUE_WIDTH
        return total

    def deepest_text(self) -> str:
        """The outer query at its most nested released values: each relation with one row,
        each keyed part with one key (rows and keys are siblings), of the deepest key literal,
        every value :data:`WIDEST` (negative: written ``(-…)``, two levels below a number).
        The text written after the releases nests no deeper, so parsing this one before the
        budget is reserved proves the parser's nesting and depth limits (54001) cannot refuse
        that one after the charge (its length: :meth:`longest`)."""
        values: list[exp.Expression] = []
        for p in self.scalars:
            if isinstance(p, RelationPart | KeyedPart):
                values.append(p.deepest(WIDEST) if p.plan is not None else exp.Null())
            else:
                values.append(constant(WIDEST))
        return self.outer_text(values)

    def replan(self, text: str) -> PublicPlan | None:
        """The plan of the outer query at the released values, when it is public."""
        public = isinstance(self.outer, PublicPlan) and self.public is not None
        return self.public.plan(text) if public and self.public is not None else None


def _in_parts(tree: exp.Expression, catalog: Catalog, public: PublicPath | None) -> bool:
    """Has the query aggregate relations or scalar subqueries (:func:`compose` plans those
    in parts)? Reads ``tree`` only; refuses a scalar subquery under row-level arithmetic.
    Each of the three tests below looks only at CTEs and subqueries: a tree with neither (most
    queries) is answered by one walk, not three (issue 21: a first query's planning)."""
    if tree.find(exp.CTE, exp.Subquery) is None:
        return False
    if public is not None and find_relations(tree, catalog):
        return True
    refuse_arithmetic(tree)
    return bool(find_scalars(tree))


def compose(
    sql: str,
    catalog: Catalog,
    plan_of: Callable[[str], QueryPlan | PublicPlan],
    numeric: Callable[[QueryPlan | PublicPlan], bool],
    public: PublicPath | None = None,
) -> ComposedPlan | None:
    """The plan of ``sql`` when it has scalar subqueries (None when it has none); every part
    planned with ``plan_of`` (the engine's checked planner), so any refusal happens here.
    ``numeric``: does a plan release a number (its one output column)? ``public``: the
    engine's public path, for key domains and public outer queries (without it, correlated
    subqueries and aggregate relations are refused)."""
    if not _in_parts(peek(sql), catalog, public):  # most queries: read, not copied
        return None
    tree = unshadow_ctes(parse(sql), (t.name for t in catalog.tables))  # a name, a relation
    hints = "".join(m + " " for m in _HINT.findall(sql))
    relations = find_relations(tree, catalog) if public is not None else []
    if relations and public is not None:
        return _released_relations(sql, tree, relations, catalog, plan_of, public, hints)
    refuse_arithmetic(tree)
    found = find_scalars(tree)
    if not found:
        return None
    refuse_values(tree)  # VALUES in the outer query are dpproxy's (released.py)
    domain_of = public.rows if public is not None else None
    outer_cols = [outer_columns(n.this, catalog, n.root()) for n in found]
    correlations = [
        correlation(n, cols, catalog) if cols and domain_of is not None else None
        for n, cols in zip(found, outer_cols, strict=True)
    ]
    public_outer = False  # the outer query reads public tables only: lookups as relations
    if any(c is not None for c in correlations):  # the outer query's shape, before any read
        shape = plan_of(
            hints
            + substitute(
                tree, [exp.Null() if c is not None else placeholder() for c in correlations]
            ).sql("postgres", comments=False)
        )
        public_outer = isinstance(shape, PublicPlan) and public is not None
    parts: list[ScalarPart | KeyedPart] = []
    for node, corr in zip(found, correlations, strict=True):
        if corr is not None:
            assert domain_of is not None
            if not compared(node):
                raise UnsupportedQuery(
                    "a correlated scalar subquery is supported as one side of a comparison "
                    f"only (in {node.sql('postgres')[:60]})",
                    hint="l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM lineitem "
                    "WHERE l_partkey = p_partkey)",
                )
            check_scalar(node, catalog, correlated=True)
            keyed = replace(plan_keyed(corr, domain_of, plan_of, hints), relation=public_outer)
            if keyed.plan is not None and not numeric(keyed.plan):
                raise UnsupportedQuery(
                    f"a scalar subquery must compute a number (in {node.sql('postgres')[:60]})",
                    hint="compare with (SELECT AVG(x) FROM t WHERE ...)",
                )
            parts.append(keyed)
            continue
        select = _with_outer_ctes(check_scalar(node, catalog), tree)
        text = hints + select.sql("postgres", comments=False)
        plan = plan_of(text)
        if not numeric(plan):
            raise UnsupportedQuery(
                f"a scalar subquery must compute a number (in {node.sql('postgres')[:60]})",
                hint="compare with (SELECT AVG(x) FROM t WHERE ...)",
            )
        parts.append(ScalarPart(text, plan))
    keyed_parts = [p for p in parts if isinstance(p, KeyedPart)]
    plan_outer = plan_of
    if public_outer and public is not None:  # over released values: total (released.py)
        plan_outer = partial(public.plan, total=True)
    only_keyed = len(keyed_parts) == len(parts)  # no scalar value to release (keyed.py)
    empty = None
    if only_keyed and any(not p.keys and p.corr.enclosing is tree for p in keyed_parts):
        values = [_placeholder(p) for p in parts]
        exact = plan_outer(empty_query(substitute(tree, values), catalog).sql("postgres"))
        empty = exact if isinstance(exact, PublicPlan) else None
    outer_sql = hints + substitute(tree, [_placeholder(p) for p in parts]).sql(
        "postgres", comments=False
    )
    outer = plan_outer(outer_sql)
    relational = all(p.relation for p in keyed_parts)
    if isinstance(outer, PublicPlan) and keyed_parts and public is not None and not relational:
        # public outer query: each keyed part's values as a VALUES relation (keyed.py)
        parts = [replace(p, relation=True) if isinstance(p, KeyedPart) else p for p in parts]
        values = [_placeholder(p) for p in parts]
        outer_sql = hints + substitute(tree, values).sql("postgres", comments=False)
        outer = public.plan(outer_sql, total=True)
    if not isinstance(outer, QueryPlan) and not keyed_parts:
        raise UnsupportedQuery("a query with scalar subqueries must read a private table")
    if isinstance(outer, PublicPlan) and only_keyed and all(p.plan is None for p in parts):
        empty = outer  # only empty key domains, then public tables only: exact and free
    return ComposedPlan(
        sql, tuple(parts), outer_sql, outer, tree, hints, empty=empty, public=public
    )


def _released_relations(
    sql: str,
    tree: exp.Expression,
    relations: Sequence[exp.CTE | exp.Subquery],
    catalog: Catalog,
    plan_of: Callable[[str], QueryPlan | PublicPlan],
    public: PublicPath,
    hints: str,
) -> ComposedPlan:
    """Aggregate CTEs and derived tables released first, the rest exact (relations.py)."""
    refuse_values(tree)  # VALUES in the outer query are dpproxy's (released.py)
    public.check_reads(substitute_relations(tree, catalog, [exp.select("1") for _ in relations]))
    prefix = lambda s: _with_outer_ctes(s, tree)  # noqa: E731
    parts = [
        plan_relation(n, tree, catalog, public.rows, plan_of, prefix, hints) for n in relations
    ]
    outer_sql = hints + substitute_relations(tree, catalog, [p.placeholder for p in parts]).sql(
        "postgres", comments=False
    )
    outer = public.plan(outer_sql, total=True)  # over released rows: total (released.py)
    return ComposedPlan(sql, tuple(parts), outer_sql, outer, tree, hints, public=public)


def _placeholder(part: Part) -> exp.Expression:
    return part.placeholder if isinstance(part, KeyedPart) else placeholder()


def _with_outer_ctes(select: exp.Select, tree: exp.Expression) -> exp.Select:
    """``select`` as a query of its own: with the outer query's WITH when it reads one of its
    CTEs (``... (SELECT MAX(total_revenue) FROM revenue)`` of TPC-H Q15)."""
    key = "with_" if "with_" in tree.args else "with"  # the name differs by sqlglot version
    ctes = tree.args.get(key)
    if ctes is None or select.args.get(key) is not None:
        return select
    names = {c.alias_or_name.lower() for c in ctes.expressions}
    if not any(t.name.lower() in names for t in select.find_all(exp.Table)):
        return select
    own = select.copy()
    own.set(key, ctes.copy())
    return own


def public_values(composed: ComposedPlan, run: Callable[[PublicPlan], object]) -> dict[str, object]:
    """The exact value of each scalar part over public tables (``run``: the engine's public
    path), by its text: computed before the budget is reserved, at no cost."""
    return {p.sql: run(p.plan) for p in composed.scalars if isinstance(p.plan, PublicPlan)}


def outer_query(
    composed: ComposedPlan,
    exact: dict[str, object],
    release: Callable[[str], Sequence[Sequence[object]]],
) -> str:
    """Release each DP part (``release``: the engine's run of one planned query, returning
    its released rows) in order, with the ``exact`` public values; the outer query's text
    with those values (a keyed part's released table as a CASE over its key)."""
    values: list[exp.Expression] = []
    for p in composed.scalars:
        if isinstance(p, RelationPart):
            values.append(p.value(release(p.sql)))
        elif isinstance(p, KeyedPart):
            values.append(p.value(release(p.sql)) if p.plan is not None else exp.Null())
        else:
            values.append(constant(exact[p.sql] if p.sql in exact else release(p.sql)[0][0]))
    return composed.outer_text(values)


def same_outer(composed: ComposedPlan, plan: QueryPlan | PublicPlan | None) -> bool:
    """Is ``plan`` (the outer query's at the released values) the one reserved for?"""
    before = composed.outer
    if isinstance(before, PublicPlan) or isinstance(plan, PublicPlan) or plan is None:
        return (
            isinstance(before, PublicPlan)
            and isinstance(plan, PublicPlan)
            and before.columns == plan.columns
        )
    return same_plan(before, plan)


def same_plan(placeholder_plan: QueryPlan, plan: QueryPlan) -> bool:
    """Does ``plan`` (at the released values) release what was reserved for, the same way:
    cost, contribution bound, noisy primitives, selection and aggregate methods?"""

    def shape(p: QueryPlan) -> tuple[object, ...]:
        methods = tuple((a.kind, a.method, a.bounds) for a in p.aggregates)
        noise = tuple(
            (r.primitive.name, r.primitive.kind, r.primitive.values, r.sensitivity, r.mechanism)
            for r in p.releases
        )  # a primitive's measure holds the constant itself
        return (p.cost, p.stability, noise, p.selection, methods)

    return shape(placeholder_plan) == shape(plan)
