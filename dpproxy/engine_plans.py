"""The planning half of the engine (``engine.py``): a query's text → its checked plan and
rewritten SQL (parse → validate → plan → check → rewrite), cached per engine. Reads neither
the data nor the budget: the one statement it has the database run is the EXPLAIN dry run of a
composed query's public outer query (``composed.check_outer_binds``), which reads no rows.

:class:`EnginePlans` is a mixin of :class:`~dpproxy.engine.Engine`, which sets the attributes
it declares."""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from dpproxy.backends import Backend
from dpproxy.catalog.model import Catalog, MechanismKind
from dpproxy.composed import Options, check_outer_binds
from dpproxy.drawn import DrawnBounds
from dpproxy.errors import DPProxyError, InternalError
from dpproxy.planning.check import check_plan
from dpproxy.planning.hints import parse_hints
from dpproxy.planning.keyed import PublicPath
from dpproxy.planning.plan import Method, QueryPlan, needs_choice
from dpproxy.planning.planner import plan_query
from dpproxy.planning.public import PublicPlan, plan_public, reads_public_only
from dpproxy.planning.scalars import ComposedPlan, compose
from dpproxy.release.answer import Prepared
from dpproxy.release.noise import drawn_laws
from dpproxy.release.public import columns_of
from dpproxy.rewrite.aggregate import refuse_wide_sums
from dpproxy.rewrite.context import RewriteContext
from dpproxy.rewrite.pipeline import rewrite_sql, truncation_sql
from dpproxy.rewrite.stats import stat_statements
from dpproxy.sql.parse import dated, parse, peek, too_complex
from dpproxy.sql.pgnames import check_names
from dpproxy.sql.qualify import TableSchemas
from dpproxy.sql.validate import validate
from dpproxy.union import plan_union

if TYPE_CHECKING:  # imported by union.py for a UNION only
    from dpproxy.planning.union_plan import UnionPlan
log = logging.getLogger("dpproxy")

Composed = ComposedPlan | None
_P = ParamSpec("_P")
_R = TypeVar("_R")


def before_the_data(step: Callable[_P, _R]) -> Callable[_P, _R]:
    """Planning (parse … rewrite) raises only DPProxyErrors. The second line behind the
    limits of ``sql/parse.py``: a recursion too deep is 54001; any other exception is a bug,
    logged, and XX000 for the client. Nothing is charged: no data was touched."""

    @functools.wraps(step)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return step(*args, **kwargs)
        except DPProxyError:
            raise
        except RecursionError:
            raise too_complex("planning ran out of stack") from None
        except Exception as e:
            log.error("planning failed (nothing charged): %s", type(e).__name__, exc_info=True)
            raise InternalError(
                "internal error while planning the query; nothing was charged"
            ) from None

    return guarded


class EnginePlans:
    """The engine's planning methods: a query's checked plan, its rewritten SQL, and the plans
    of its parts (a UNION's branches, a composed query's parts)."""

    # set by Engine.__init__
    backend: Backend
    catalog: Catalog
    schemas: TableSchemas
    names: dict[str, str]
    public_max_rows: int
    _drawn: DrawnBounds

    @before_the_data
    def prepare(
        self,
        sql: str,
        *,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
        secret: int | None = None,
        method: Method | None = None,
        analyst: str | None = None,
    ) -> Prepared:
        """Steps parse … rewrite; pure, touches neither the data nor the budget.

        Plans are cached per (SQL text, ε, δ, mechanism, method): planning is a pure function
        of those and the catalog. The rewrite is redone for every call that needs a fresh
        secret. ``method`` forces a plan (``SET dpproxy.mechanism``); a ``/*+ dpproxy ... */``
        hint in the SQL overrides it. A query over public tables only has a
        :class:`PublicPlan` and its SQL."""
        sql = dated(sql)
        public = self.public_plan(sql)
        if public is not None:
            return Prepared(public, public.sql)
        union = self._union(sql, epsilon, delta, mechanism, method)
        part = functools.partial(self.prepare, epsilon=epsilon, delta=delta, mechanism=mechanism,
                                 secret=secret, method=method, analyst=analyst)  # fmt: skip
        if union is not None:  # each branch prepared as a query of its own (for explain)
            statements = tuple(part(t).statements for t in union.branches)
            extra = tuple((f"branch {i}", s) for i, st in enumerate(statements) for s in st)
            return Prepared(replace(union, statements=statements), None, extra)
        composed = self._composed(sql, epsilon, delta, mechanism, method)
        if composed is not None and composed.empty is not None:
            return Prepared(composed.empty, composed.empty.sql)
        if composed is not None:
            statements = composed.statements_of(part)
            extra = tuple((f"part {i}", s) for i, st in enumerate(statements) for s in st)
            return Prepared(replace(composed, statements=statements), None, extra)
        plan, unkeyed, statement = self._plan(sql, epsilon, delta, mechanism, method)
        if statement is not None:
            tau = self._drawn.reusable(plan, statement, analyst)
            if tau is not None:
                plan = self._plan_chosen(sql, epsilon, delta, mechanism, method, tau, True)
                unkeyed = None
            else:
                key = secrets.randbits(62) if secret is None else secret
                return replace(self._rewrite(plan, key), truncation=statement)
        if unkeyed is not None:
            return unkeyed
        key = secrets.randbits(62) if secret is None else secret
        return self._rewrite(plan, key)

    def _plan_chosen(
        self,
        sql: str,
        epsilon: Fraction | None,
        delta: Fraction | None,
        mechanism: MechanismKind | None,
        method: Method | None,
        rows: int | None = None,
        reused: bool = False,
    ) -> QueryPlan:
        """The checked plan; with ``rows``, calibrated at that drawn (or reused) bound."""
        options = parse_hints(sql, method)
        query = validate(check_names(parse(sql), self.names), self.catalog, sql)
        plan = plan_query(
            query,
            self.catalog.policy,
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            options=options,
            chosen_rows=rows,
            reused=reused,
        )
        check_plan(plan)
        refuse_wide_sums(plan)  # 0A000, as the rewrite would, before the guards' XX000 below
        drawn_laws(plan)  # the laws noise is drawn from: any failure here, before the data
        return plan

    @functools.lru_cache(maxsize=512)  # noqa: B019 (the engine lives as long as its cache)
    def _plan(
        self,
        sql: str,
        epsilon: Fraction | None,
        delta: Fraction | None,
        mechanism: MechanismKind | None,
        method: Method | None = None,
    ) -> tuple[QueryPlan, Prepared | None, str | None]:
        """The checked plan; its SQL when the rewrite needs no secret (nothing to bound and no
        sample-and-aggregate chunks to draw); and when its rows per unit are to be drawn with
        DP, the statement behind that choice (built once here, not per query)."""
        plan = self._plan_chosen(sql, epsilon, delta, mechanism, method)
        if needs_choice(plan):
            return plan, None, truncation_sql(plan, self.backend.dialect, self.schemas)
        two_units = plan.query.source is not None and plan.query.source.sides is not None
        keyless = (
            not plan.needs_bounding
            and not two_units
            and not any(s.method is Method.SAA for s in plan.stats)
        )
        return plan, (self._rewrite(plan, 0) if keyless else None), None

    @before_the_data
    def plan(
        self,
        sql: str,
        *,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
        method: Method | None = None,
    ) -> QueryPlan | PublicPlan:
        """The checked plan alone (cached; no rewrite, no secret): what Describe needs (for a
        query with scalar subqueries, the outer query's plan: its columns are the answer's)."""
        sql = dated(sql)
        public = self.public_plan(sql)
        if public is not None:
            return public
        union = self._union(sql, epsilon, delta, mechanism, method)
        if union is not None:  # Describe: the first branch names the columns
            return union.first
        composed = self._composed(sql, epsilon, delta, mechanism, method)
        if composed is not None:
            return composed.empty or composed.outer
        return self._plan(sql, epsilon, delta, mechanism, method)[0]

    @before_the_data
    @functools.lru_cache(maxsize=512)  # noqa: B019 (the engine lives as long as its cache)
    def public_plan(self, sql: str) -> PublicPlan | None:
        """The plan of a query that reads public tables only (answered exactly, at no cost:
        ``planning/public.py``); None when it reads a private table, or no table."""
        seen = check_names(peek(sql), self.names)  # every query's first step (prepare, run…)
        if not reads_public_only(seen, self.catalog):  # read only: the tree is the memo's
            return None
        return plan_public(parse(sql), self.catalog, self.backend.dialect, self.public_max_rows)

    def _rewrite(self, plan: QueryPlan, secret: int) -> Prepared:
        b = self.backend
        ctx = RewriteContext(plan, secret, b.dialect, b.portable_hash, self.schemas)
        return Prepared(plan, rewrite_sql(ctx) if plan.primitives else None, stat_statements(ctx))

    @before_the_data
    @functools.lru_cache(maxsize=512)  # noqa: B019 (the engine lives as long as its cache)
    def _composed(self, sql: str, *opts: Fraction | MechanismKind | Method | None) -> Composed:
        """A query with scalar subqueries, every part planned (planning/scalars.py), or None."""
        plan_of = lambda text: self.public_plan(text) or self._plan(text, *opts)[0]  # noqa: E731
        numeric = lambda p: columns_of(p)[0].type in ("integer", "double")  # noqa: E731
        composed = compose(sql, self.catalog, plan_of, numeric, PublicPath(self))  # keys: exact
        if composed is not None:  # before any reservation: the outer query binds (42000)
            check_outer_binds(self.backend, composed)
        return composed

    @before_the_data
    @functools.lru_cache(maxsize=512)  # noqa: B019 (the engine lives as long as its cache)
    def _union(self, sql: str, *opts: Fraction | MechanismKind | Method | None) -> UnionPlan | None:
        """A UNION [ALL] of aggregate SELECTs, every branch planned (union.py), or None."""
        plan_of = lambda text: self.public_plan(text) or self._plan(text, *opts)[0]  # noqa: E731
        return plan_union(sql, plan_of, lambda text: self._composed(text, *opts) is not None)

    def _prepared(self, sql: str, opts: Options, analyst: str | None) -> Prepared:
        e, d, m, method = opts
        return self.prepare(sql, epsilon=e, delta=d, mechanism=m, method=method, analyst=analyst)

    def _dp_plan(self, sql: str, opts: Options) -> QueryPlan:
        return self._plan(sql, *opts)[0]
