"""The imperative shell: parse → validate → plan → check → rewrite → reserve → execute → noise →
commit → post-process. The only owner of a backend, an accountant and a noise source; its
planning half (parse … rewrite) is :class:`~dpproxy.engine_plans.EnginePlans`."""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import secrets
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpproxy.accounting.ledger import MEMORY, Ledger, ReleaseRecord
from dpproxy.accounting.memory import Accountant, MemoryAccountant
from dpproxy.backends import Backend, CancelToken
from dpproxy.catalog.model import Catalog, MechanismKind
from dpproxy.catalog.public import attach_public
from dpproxy.composed import Options, composed_key, run_composed
from dpproxy.composed import plan_summary as _plan_summary
from dpproxy.drawn import DrawnBounds, draw_rows
from dpproxy.engine_plans import EnginePlans, before_the_data
from dpproxy.errors import (
    BackendUnavailable,
    CanceledBeforeStart,
    DPProxyError,
    InternalError,
    InvalidParameter,
)
from dpproxy.mechanisms.noise import NoiseSource, OpenDPNoise
from dpproxy.planning.hints import parse_hints
from dpproxy.planning.plan import Method, QueryPlan, one_method
from dpproxy.planning.public import MAX_PUBLIC_ROWS, PublicPlan
from dpproxy.prefetch import prefetcher_for
from dpproxy.release.answer import Answer as Answer
from dpproxy.release.answer import Prepared as Prepared
from dpproxy.release.answer import Progress
from dpproxy.release.encoding import decode_released, encode_released
from dpproxy.release.exact import ExactResult
from dpproxy.release.failure import PASSED_ON, log_failure
from dpproxy.release.failure import PrivateQueryFailed as PrivateQueryFailed
from dpproxy.release.memo import per_plan
from dpproxy.release.noise import apply_noise
from dpproxy.release.postprocess import Released, postprocess
from dpproxy.release.public import public_failure, release_public
from dpproxy.sql.parse import dated, normalised_text
from dpproxy.sql.pgnames import spellings
from dpproxy.sql.qualify import table_schemas
from dpproxy.union import run_union
from dpproxy.values import Cost

log = logging.getLogger("dpproxy")
_summary = per_plan(_plan_summary)  # the release log's plan text, once per plan object



class Engine(EnginePlans):
    """dpproxy in-process: a catalog, a backend (DuckDB or PostgreSQL), an accountant and a
    noise source. Building one attaches the catalog to the backend, which refuses, before any
    query, a schema that does not fit its database (``backends/fit.py``: 42P01, 42703, 42804)."""

    def __init__(
        self,
        catalog: Catalog,
        backend: Backend,
        *,
        accountant: Accountant | None = None,
        noise: NoiseSource | None = None,
        public_max_rows: int = MAX_PUBLIC_ROWS,
    ) -> None:
        self.backend = backend
        self.public_max_rows = public_max_rows  # the most rows of a public-only answer
        self.catalog = attach_public(
            backend.attach_catalog(catalog),
            lambda sql: backend.execute(sql).rows,
            backend.dialect,
        )
        self.schemas = table_schemas(self.catalog.tables)
        self.names = spellings(self.catalog.tables) if backend.dialect == "postgres" else {}
        self.accountant = accountant or MemoryAccountant(catalog.policy.budget)
        self.noise = noise or OpenDPNoise()
        self._drawn = DrawnBounds(self.accountant)  # DP rows-per-unit bounds, reused free
        self._shown: Engine | None = None  # see canonical
        self._ahead = prefetcher_for(self.noise)  # noise drawn while the SQL runs, or None

    def canonical(self) -> Engine:
        """The engine planning without the facts read from the rows (``Column.scanned``,
        ``Catalog.shown``): its SQL is the same on every database that satisfies the schema,
        so EXPLAIN shows it (and tests that run one statement on many datasets use it). This
        engine, or a copy sharing backend, accountant and noise, with a plan cache its own."""
        if self._shown is None:
            view = self.catalog.shown()
            self._shown = self if view is self.catalog else copy.copy(self)
            self._shown.catalog, self._shown._shown = view, self._shown
        return self._shown

    def _run_public(self, plan: PublicPlan, analyst: str, cancel: CancelToken | None) -> Answer:
        """Nothing is reserved, charged or written to the ledger: public rows cost no privacy.
        A failure depends on public data alone: the database's message is passed on."""
        try:
            exact = self.backend.execute(plan.sql, cancel)
        except Exception as e:
            if not isinstance(e, DPProxyError):
                log.error("a public query failed: %s", type(e).__name__, exc_info=e)
            raise public_failure(e) from None
        released = release_public(plan, exact)
        log.info("released %d exact rows of public tables for %s", len(released.rows), analyst)
        return Answer(released, Cost.zero(), self.accountant.remaining(analyst), plan)

    def run(
        self,
        sql: str,
        *,
        analyst: str,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
        cancel: CancelToken | None = None,
        method: Method | None = None,
    ) -> Answer:
        """Answer one query with differential privacy, charging ``analyst``'s budget — or,
        when it reads public tables only, exactly and at no cost (:meth:`_run_public`).

        Failures once the budget is reserved (SECURITY.md, "defence in depth"):

        * ``BackendUnavailable`` or ``CanceledBeforeStart`` before any statement reached the
          database: re-raised, refunded (the query provably read nothing);
        * ``QueryCanceled`` (``cancel``, from another thread, or the statement timeout) and
          ``StabilityTestFailed`` (propose-test-release's refusal, itself a DP release):
          re-raised as they are, charged;
        * anything else — whatever the backend or dpproxy raised, on either engine: charged,
          and raised as the one fixed :class:`PrivateQueryFailed`. Its cause goes only to the
          operator's log (``dpproxy``, ERROR), with a ``dpproxy.sidechannel`` WARNING naming
          the analyst, the normalised query and the plan (never a value)."""
        sql = dated(sql)  # CURRENT_DATE: today's plans and answers, cached for today only
        public = self.public_plan(sql)
        if public is not None:
            return self._run_public(public, analyst, cancel)
        opts = (epsilon, delta, mechanism, method)
        union = self._union(sql, *opts)
        if union is not None:
            return run_union(self, union, analyst, opts, cancel)
        composed = self._composed(sql, *opts)
        if composed is not None:
            return run_composed(self, composed, analyst, opts, cancel)
        prepared = self._prepared(sql, opts, analyst)
        plan = prepared.plan
        assert isinstance(plan, QueryPlan)  # public plans were answered above
        query_text, normalised = self._normalised(sql, plan, mechanism, method)
        record = ReleaseRecord(query_text, _summary(plan), self._noise_name(mechanism))
        key = self.accountant.cache_key(analyst, normalised)
        return self._spend(
            analyst,
            plan,
            plan.cost,
            (key, record),
            cancel,
            lambda progress: self._execute(sql, prepared, analyst, opts, cancel, progress),
        )

    def _spend(
        self,
        analyst: str,
        plan: QueryPlan | PublicPlan,
        cost: Cost,
        release: tuple[str, ReleaseRecord],
        cancel: CancelToken | None,
        body: Callable[[Progress], tuple[Released, QueryPlan | PublicPlan]],
    ) -> Answer:
        """Reserve ``cost`` (one reservation), run ``body``, commit: the failure rules of
        :meth:`run`. ``plan`` is the answer's plan when it comes from the cache."""
        accountant = self.accountant
        key, record = release
        # Single flight (Accountant.claim): an identical query in flight (any process) is awaited
        hit = accountant.cached(key)
        claim = (
            hit if hit is not None else accountant.claim(analyst, cost, key, record, _poll(cancel))
        )
        if isinstance(claim, str):
            log.info("answered %s from the cache at no cost", analyst)
            return Answer(
                decode_released(claim), Cost.zero(), accountant.remaining(analyst), plan, True
            )
        reservation = claim
        progress = Progress()
        failure: PrivateQueryFailed | None = None
        try:
            released, plan = body(progress)
        except BaseException as e:
            if isinstance(e, (BackendUnavailable, CanceledBeforeStart)) and not progress.touched:
                accountant.rollback(reservation)  # provably never reached the data
                raise
            if not isinstance(e, Exception) or isinstance(e, PASSED_ON):
                accountant.commit(reservation, failed=getattr(e, "sqlstate", "XX000"))
                raise
            # Anything else may depend on the data: one fixed error, charged (see
            # PrivateQueryFailed); the cause goes to the operator's log only.
            failure = PrivateQueryFailed()
            accountant.commit(reservation, failed=failure.sqlstate)
            log_failure(e, analyst, record.query, record.plan)
        if failure is not None:
            raise failure  # raised outside the handler: no cause or context is chained to it
        keeps = getattr(accountant, "cache_scope", None) != "off"  # else the payload is unused
        answer = (key, encode_released(released) if keeps else "")
        accountant.commit(reservation, answer, tuple(progress.drawn))
        log.info("released %d rows for %s at %s", len(released.rows), analyst, cost)
        return Answer(released, cost, accountant.remaining(analyst), plan)

    def _execute(
        self,
        sql: str,
        prepared: Prepared,
        analyst: str,
        opts: Options,
        cancel: CancelToken | None,
        progress: Progress,
    ) -> tuple[Released, QueryPlan]:
        """Run one planned DP query (the budget is reserved): draw its rows-per-unit bound if
        it needs one, run its statements, add noise. ``progress`` records what was touched."""
        first = prepared.plan
        assert isinstance(first, QueryPlan)
        plan = first
        if prepared.truncation is not None:
            tau = draw_rows(self.backend, self.noise, plan, prepared.truncation, cancel)
            progress.touched = True
            choice = self._drawn.choice(plan, prepared.truncation, analyst)
            progress.drawn.append((self._drawn.ledger_key(choice), str(tau)))
            self._drawn.remember(choice, tau)
            plan = self._plan_chosen(sql, *opts, tau, False)
            reserved = first.cost
            if not reserved.covers(plan.cost) and (same := one_method(first)):
                # At the drawn bound the planner preferred a dearer method (a smooth
                # plan's δ): keep the method that was reserved for.
                plan = self._plan_chosen(sql, *opts[:3], same, tau, False)
            # A cheaper plan at the drawn bound (joint instead of smooth) is charged what
            # was reserved: the reservation is never exceeded, only not refunded.
            if not plan.requested.covers(plan.cost) or not reserved.covers(plan.cost):
                raise InternalError("the chosen bound changed the cost of the plan")
            prepared = self._rewrite(plan, secrets.randbits(62))
        ahead = self._ahead and self._ahead.start(prepared.sql, prepared.extra, self.noise)
        exact = None
        if prepared.sql is not None:
            exact = self.backend.execute(prepared.sql, cancel)
            progress.touched = True
        extras: dict[str, ExactResult] = {}
        done: dict[str, ExactResult] = {}  # equal statements (median and p90 of x) run once
        for name, statement in prepared.extra:
            if statement not in done:
                done[statement] = self.backend.execute(statement, cancel)
                progress.touched = True
            extras[name] = done[statement]
        groups = apply_noise(plan, exact, ahead or self.noise, extras)
        return postprocess(plan, groups), plan

    @before_the_data
    def is_cached(
        self,
        sql: str,
        *,
        analyst: str,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
        method: Method | None = None,
    ) -> bool:
        """Would :meth:`run` answer this from the cache, at no cost? (Spends nothing.)"""
        sql = dated(sql)
        if self.public_plan(sql) is not None:
            return False  # answered afresh every time, and always at no cost
        opts = (epsilon, delta, mechanism, method)
        union = self._union(sql, *opts)
        composed = None if union is not None else self._composed(sql, *opts)
        if union is not None:
            _, normalised = self._normalised(union.query, union.dp_plan, mechanism, method)
        elif composed is not None:  # its outer query may be public: the release is DP
            if composed.empty is not None:
                return False  # exact, at no cost
            _, normalised = composed_key(self, composed, opts)
        else:
            _, normalised = self._normalised(sql, self._dp_plan(sql, opts), mechanism, method)
        return self.accountant.cached(self.accountant.cache_key(analyst, normalised)) is not None

    def _noise_name(self, mechanism: MechanismKind | None) -> str:
        return (mechanism or self.catalog.policy.mechanism).value

    @before_the_data
    def _normalised(
        self,
        sql: str,
        plan: QueryPlan,
        mechanism: MechanismKind | None,
        method: Method | None,
    ) -> tuple[str, str]:
        """The normalised SQL, and what makes two queries the same release: that SQL, the
        hints and forced plan, the privacy parameters and the noise. Equal → equal answer."""
        requested = plan.requested
        return self._release_identity(sql, requested.epsilon, requested.delta, mechanism, method)

    @functools.lru_cache(maxsize=512)  # noqa: B019 (the engine lives as long as its cache)
    def _release_identity(self, sql: str, *opts: Any) -> tuple[str, str]:
        """:meth:`_normalised` from (ε, δ, mechanism, method): a pure function of those and
        the catalog's policy, kept like the plans (a text is normalised once, not per run)."""
        epsilon, delta, mechanism, method = opts
        text = normalised_text(sql)
        key = [text, repr(parse_hints(sql, method)), str(epsilon), str(delta)]
        return text, json.dumps([*key, self._noise_name(mechanism)], ensure_ascii=False)

    def remaining(self, analyst: str) -> Cost:
        return self.accountant.remaining(analyst)

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
        self.backend.close()


def _poll(cancel: CancelToken | None) -> Callable[[], bool] | None:
    """Has ``cancel`` been cancelled? (for a query waiting on an identical one's answer)"""
    return None if cancel is None else lambda: cancel.cancelled


def path_argument(value: str | os.PathLike[str] | None, name: str) -> str | None:
    """A path or DSN argument of the Python API as text: a ``str`` or an ``os.PathLike``
    (``pathlib.Path``); anything else is refused with 22023 (not an AttributeError deep in
    the opener)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        text = os.fspath(value)
        if isinstance(text, str):
            return text
    raise InvalidParameter(
        f"{name} must be a path or a string, not {type(value).__name__}",
        hint=f"pass {name} as a str or a pathlib.Path",
    )


def open_engine(
    database: str | os.PathLike[str] | None = None,
    schema: str | os.PathLike[str] | None = None,
    *,
    noise: NoiseSource | None = None,
    budget: Cost | None = None,
    progress: bool = False,
    statement_timeout: float | None = None,
    ledger: str | os.PathLike[str] | None = None,
    cache: str = "analyst",
) -> Engine:
    """An engine over a database and a schema file; both default to the bundled demo.

    ``database`` is a DuckDB file, CSV/Parquet files or globs (views: ``backends/files.py``) or
    a ``postgresql://`` DSN (``backends/opener.py``)."""
    from dpproxy.backends.opener import half_given, open_database
    from dpproxy.catalog.load import load_catalog
    from dpproxy.demo import demo_database_path, demo_schema_path

    database = path_argument(database, "database")
    schema = path_argument(schema, "schema")
    ledger = path_argument(ledger, "ledger")
    if (database is None) != (schema is None):
        raise half_given(database)
    catalog = load_catalog(schema or demo_schema_path())
    path = database or str(demo_database_path(progress=progress))
    default = budget or catalog.policy.budget
    accountant: Accountant
    if ledger is None or ledger == MEMORY:
        accountant = MemoryAccountant(default, cache=cache)
    else:
        accountant = Ledger(ledger, catalog.dataset, default, cache=cache)
    tables = tuple(t.name for t in catalog.tables)
    backend = open_database(path, tables=tables, statement_timeout=statement_timeout)
    try:  # the backend refuses a schema that does not fit it, every mismatch at once
        return Engine(catalog, backend, accountant=accountant, noise=noise)
    except BaseException:
        backend.close()
        raise
