"""Running a query planned as several parts — scalar subqueries, keyed subqueries, released
relations (``planning/scalars.py``, ``planning/keyed.py``, ``planning/relations.py``) — on an
engine (``engine.py``; ``engine_plans.py`` plans them: ``EnginePlans._composed``).

Privacy: the parts are separate DP releases over the same data, run under ONE reservation of
their summed cost (``ComposedPlan.cost``: sequential composition). The outer query is then
either planned again with the released values as literals (post-processing of released
values; its plan must be the one reserved for, :func:`~dpproxy.planning.scalars.same_outer`)
or, when it reads public tables only once the parts are released, answered exactly at no
further cost. Exact public parts (keys of a keyed subquery) are computed before the budget is
reserved: they depend on public data only.

Never charged for nothing (SECURITY.md). A public outer query runs only after the parts were
released and charged, so it must not fail then. :func:`check_outer_binds` proves, before the
budget is reserved, that it binds on the database: it has the backend EXPLAIN the outer query
with the parts' placeholders (a relation's typed ``SELECT CAST(NULL AS t) … WHERE FALSE``, a
keyed lookup's VALUES of the public keys with 0 for each value), which is the statement run
after the releases but for the literals of the released values: each is written under a cast
to its column's type, so both bind alike, and any static error (a type, a grouping, a
function, ``MAX`` of a boolean on PostgreSQL) is refused with :class:`OuterQueryInvalid`
(42000), nothing charged. The outer query's text at the released values is parsed again after
the charge, so its length is bounded first (:meth:`ComposedPlan.longest`: every key kept,
every value as wide as a float's text can be) and refused beyond the parser's limit (54001).
What could still fail on a value at run time is kept out by the
total subset (``planning/released.py``). How many rows the public outer query returns can depend
on the released rows, so its row cap (``public_max_rows``, 53400 beyond) is proved before the
budget is reserved too (:func:`check_outer_rows`: ``planning/rowbound.py`` bounds the rows with
every released relation at all its keys, from the sizes of the public tables it reads, counted
first). Privacy of the dry run: the statement reads public
tables only (``PublicPath.check_reads``, ``plan_public``) and no released value, and EXPLAIN
binds and plans without running it, so its outcome depends on the query text, the schema and
public data alone. A private outer query is not EXPLAINed: it is planned by the DP planner, whose
rewrite is total by construction as any single query's, and its plan at the released values
must be the one reserved for (:func:`~dpproxy.planning.scalars.same_outer`).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

from sqlglot import exp

from dpproxy.accounting.ledger import ReleaseRecord
from dpproxy.accounting.memory import Accountant
from dpproxy.backends import Backend, CancelToken
from dpproxy.catalog.model import MechanismKind
from dpproxy.errors import DPProxyError, InternalError, OuterQueryInvalid, PublicResultTooLarge
from dpproxy.planning.plan import Method, QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.relations import RelationPart, substitute_relations
from dpproxy.planning.rowbound import most_rows
from dpproxy.planning.scalars import ComposedPlan, outer_query, public_values, same_outer
from dpproxy.release.answer import Answer, Prepared, Progress
from dpproxy.release.postprocess import Released
from dpproxy.sql.parse import MAX_QUERY_LENGTH, parse, too_complex
from dpproxy.values import Cost

Options = tuple[Fraction | None, Fraction | None, MechanismKind | None, Method | None]


class EngineCore(Protocol):
    """What running a composed query needs of the engine (``engine.Engine``)."""

    accountant: Accountant

    def _run_public(self, plan: PublicPlan, analyst: str, cancel: CancelToken | None) -> Answer: ...

    def _dp_plan(self, sql: str, opts: Options) -> QueryPlan: ...

    def _prepared(self, sql: str, opts: Options, analyst: str | None) -> Prepared: ...

    def _execute(
        self,
        sql: str,
        prepared: Prepared,
        analyst: str,
        opts: Options,
        cancel: CancelToken | None,
        progress: Progress,
    ) -> tuple[Released, QueryPlan]: ...

    def _normalised(
        self, sql: str, plan: QueryPlan, mechanism: MechanismKind | None, method: Method | None
    ) -> tuple[str, str]: ...

    def _noise_name(self, mechanism: MechanismKind | None) -> str: ...

    def _spend(
        self,
        analyst: str,
        plan: QueryPlan | PublicPlan,
        cost: Cost,
        release: tuple[str, ReleaseRecord],
        cancel: CancelToken | None,
        body: Callable[[Progress], tuple[Released, QueryPlan | PublicPlan]],
    ) -> Answer: ...


def composed_key(engine: EngineCore, composed: ComposedPlan, opts: Options) -> tuple[str, str]:
    """The normalised text of a composed query and what makes two of them the same release
    (the requested (ε, δ) is the DP part's, whether the outer query is DP or public)."""
    return engine._normalised(composed.query, composed.dp_plan, opts[2], opts[3])


def run_composed(
    engine: EngineCore,
    composed: ComposedPlan,
    analyst: str,
    opts: Options,
    cancel: CancelToken | None,
) -> Answer:
    """The parts first, then the outer query, under one reservation (planning/scalars.py)."""
    if composed.empty is not None:
        return engine._run_public(composed.empty, analyst, cancel)
    text, normalised = composed_key(engine, composed, opts)
    parts = " | ".join(plan_summary(p) for p in composed.plans)
    record = ReleaseRecord(text, f"scalars first: {parts}", engine._noise_name(opts[2]))
    public = lambda p: engine._run_public(p, analyst, cancel).released.rows[0][0]  # noqa: E731
    exact = public_values(composed, public)  # before the budget is reserved: free

    def body(progress: Progress) -> tuple[Released, QueryPlan | PublicPlan]:
        def one(sql: str) -> tuple[Released, QueryPlan]:
            prepared = engine._prepared(sql, opts, analyst)
            return engine._execute(sql, prepared, analyst, opts, cancel, progress)

        outer = outer_query(composed, exact, lambda s: one(s)[0].rows)
        plan = composed.replan(outer) or engine._dp_plan(outer, opts)
        if not same_outer(composed, plan):
            raise InternalError("a released scalar value changed the plan of the query")
        if isinstance(plan, PublicPlan):  # post-processing of released values: exact
            return engine._run_public(plan, analyst, cancel).released, plan
        return one(outer)

    key = engine.accountant.cache_key(analyst, normalised)
    return engine._spend(analyst, composed.outer, composed.cost, (key, record), cancel, body)


def check_outer_binds(backend: Backend, composed: ComposedPlan) -> None:
    """Before the budget is reserved (see the module docstring): refuse (54001) an outer query
    whose text at the released values could be too long to parse, and (42000) a public outer
    query that does not bind on the database; a private one is the planner's."""
    if composed.empty is not None:
        return  # no outer query runs after a charge (an empty key domain: exact and free)
    longest = composed.longest()  # the outer query's text at any released values
    if longest > MAX_QUERY_LENGTH:  # else the parser refuses it after the charge (54001)
        raise too_complex(f"up to {longest:,} characters with the released values written in")
    parse(composed.deepest_text())  # nor too deep for the parser (54001) at any values
    outer = composed.outer
    if not isinstance(outer, PublicPlan):
        return
    try:
        shown = backend.execute(f"EXPLAIN {outer.sql}")
    except DPProxyError as e:
        if e.sqlstate != "XX000":  # unreachable, cancelled: nothing was reserved either
            raise
        raise _does_not_bind(e.log_detail or e.message, e.log_detail) from None
    text = "\n".join(str(v) for row in shown.rows for v in row)
    marker = "Error occurred during query planning:"
    # Spark's EXPLAIN reports the error in its rows, it does not raise; a plan begins with
    # "== Physical Plan ==", so a string literal holding the marker is no error
    if text.startswith(marker):
        raise _does_not_bind(text.split(marker, 1)[1], text[:2000])
    check_outer_rows(backend, composed)


def check_outer_rows(backend: Backend, composed: ComposedPlan) -> None:
    """Before the budget is reserved: refuse (53400) a public outer query that could return
    more rows than the engine's cap on a public answer, at any released values
    (``planning/rowbound.py``: every released relation with all its keys, each public table
    it reads with its rows, counted now; its own LIMIT when that bounds it alone)."""
    outer, public = composed.outer, composed.public
    if not isinstance(outer, PublicPlan) or public is None:
        return
    cap = outer.max_rows
    relations = [p for p in composed.scalars if isinstance(p, RelationPart)]
    tree = composed.tree
    if relations:
        bodies = [p.body([(k, [0.0] * len(p.items)) for k in p.keys]) for p in relations]
        tree = substitute_relations(tree, public.catalog, bodies)
    limited = most_rows(tree, lambda name: None)  # a LIMIT of its own, no table counted
    if limited is not None and limited <= cap:
        return
    counted: dict[str, int] = {}

    def size(name: str) -> int | None:
        table = public.catalog.table(name)
        if table is None or table.private:
            return None
        if name not in counted:
            quoted = exp.to_identifier(table.name, quoted=True).sql("postgres")
            plan = public.plan(f"SELECT COUNT(*) FROM {quoted}")  # public rows: free
            counted[name] = int(backend.execute(plan.sql).rows[0][0])
        return counted[name]

    def columns(name: str) -> set[str] | None:
        table = public.catalog.table(name)
        return None if table is None else {c.name.lower() for c in table.columns}

    bound = most_rows(tree, size, columns)
    if bound is not None and bound <= cap:
        return
    could = "an unknown number of" if bound is None else f"up to {bound:,}"
    raise PublicResultTooLarge(
        f"the query around the parts released first could return {could} rows, more than "
        f"the {cap:,} an answer over public tables and released rows may have; refused before "
        "anything is charged",
        hint=f"add ORDER BY … LIMIT {cap} (or less) to the query, or join fewer rows",
    )


def _does_not_bind(said: str, detail: str | None) -> OuterQueryInvalid:
    """The refusal of an outer query the database cannot bind, quoting its first line."""
    first = said.strip().splitlines() or [""]
    return OuterQueryInvalid(
        "the query around the parts released first does not run on the database",
        hint=f"the database said: {first[0][:300]}; nothing was charged",
        log_detail=detail,
    )


def plan_summary(plan: QueryPlan | PublicPlan) -> str:
    """The plan for the release log: each aggregate with its method, and the bound."""
    if isinstance(plan, PublicPlan):
        return "public tables, exact"
    parts = [f"{a.kind.value}:{a.method.value}" for a in plan.aggregates]
    s = plan.stability
    return f"{', '.join(parts)}; {s.rows} row(s)/unit, {s.groups} group(s)/unit"
