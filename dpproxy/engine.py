"""The imperative shell: parse → validate → plan → check → rewrite → reserve → execute → noise →
commit → post-process. The only owner of a backend, an accountant and a noise source.
"""

from __future__ import annotations

import functools
import logging
import secrets
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.accounting.memory import Accountant, MemoryAccountant
from dpproxy.backends import Backend, CancelToken, open_backend
from dpproxy.catalog.model import Catalog, MechanismKind
from dpproxy.errors import BackendUnavailable, InvalidParameter
from dpproxy.mechanisms.noise import NoiseSource, OpenDPNoise
from dpproxy.planning.check import check_plan
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.release.noise import apply_noise
from dpproxy.release.postprocess import Released, postprocess
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import Cost

log = logging.getLogger("dpproxy")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A planned query: the plan and the exact SQL the backend would run."""

    plan: QueryPlan
    sql: str


@dataclass(frozen=True, slots=True)
class Answer:
    released: Released
    cost: Cost
    remaining: Cost
    plan: QueryPlan


class Engine:
    """dpproxy in-process: a catalog, a backend (DuckDB or PostgreSQL), an accountant and a
    noise source."""

    def __init__(
        self,
        catalog: Catalog,
        backend: Backend,
        *,
        accountant: Accountant | None = None,
        noise: NoiseSource | None = None,
    ) -> None:
        self.backend = backend
        self.catalog = backend.attach_catalog(catalog)
        self.accountant = accountant or MemoryAccountant(catalog.policy.budget)
        self.noise = noise or OpenDPNoise()

    def prepare(
        self,
        sql: str,
        *,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
        secret: int | None = None,
    ) -> Prepared:
        """Steps parse … rewrite; pure, touches neither the data nor the budget.

        Plans are cached per (SQL text, ε, δ, mechanism): planning is a pure function of those
        and the catalog. The rewrite is redone for every call that needs a fresh secret.
        """
        plan, unkeyed_sql = self._plan(sql, epsilon, delta, mechanism)
        if unkeyed_sql is not None:
            return Prepared(plan, unkeyed_sql)
        key = secrets.randbits(62) if secret is None else secret
        return Prepared(plan, self._rewrite(plan, key))

    @functools.lru_cache(maxsize=512)  # noqa: B019 (the engine lives as long as its cache)
    def _plan(
        self,
        sql: str,
        epsilon: Fraction | None,
        delta: Fraction | None,
        mechanism: MechanismKind | None,
    ) -> tuple[QueryPlan, str | None]:
        """The checked plan, and its SQL when the rewrite needs no secret (nothing to bound)."""
        query = validate(parse(sql), self.catalog, sql)
        plan = plan_query(
            query, self.catalog.policy, epsilon=epsilon, delta=delta, mechanism=mechanism
        )
        check_plan(plan)
        unkeyed = None if plan.needs_bounding else self._rewrite(plan, 0)
        return plan, unkeyed

    def plan(
        self,
        sql: str,
        *,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
    ) -> QueryPlan:
        """The checked plan alone (cached; no rewrite, no secret): what Describe needs."""
        return self._plan(sql, epsilon, delta, mechanism)[0]

    def _rewrite(self, plan: QueryPlan, secret: int) -> str:
        backend = self.backend
        return rewrite(plan, secret, backend.dialect, portable_hash=backend.portable_hash)

    def run(
        self,
        sql: str,
        *,
        analyst: str,
        epsilon: Fraction | None = None,
        delta: Fraction | None = None,
        mechanism: MechanismKind | None = None,
        cancel: CancelToken | None = None,
    ) -> Answer:
        """Answer one query with differential privacy, charging ``analyst``'s budget.

        ``cancel`` lets another thread stop the query (``QueryCanceled``; still charged: it
        may have read the data)."""
        prepared = self.prepare(sql, epsilon=epsilon, delta=delta, mechanism=mechanism)
        plan = prepared.plan
        reservation = self.accountant.reserve(analyst, plan.cost)
        try:
            exact = self.backend.execute(prepared.sql, cancel)
        except BackendUnavailable:
            self.accountant.rollback(reservation)  # provably never reached the data
            raise
        except BaseException:
            self.accountant.commit(reservation)  # a data-dependent failure is charged
            raise
        try:
            groups = apply_noise(plan, exact, self.noise)
        finally:
            self.accountant.commit(reservation)
        released = postprocess(plan, groups)
        log.info("released %d rows for %s at %s", len(released.rows), analyst, plan.cost)
        return Answer(released, plan.cost, self.accountant.remaining(analyst), plan)

    def remaining(self, analyst: str) -> Cost:
        return self.accountant.remaining(analyst)

    def close(self) -> None:
        self.backend.close()


def open_engine(
    database: str | None = None,
    schema: str | None = None,
    *,
    noise: NoiseSource | None = None,
    budget: Cost | None = None,
    progress: bool = False,
    statement_timeout: float | None = None,
) -> Engine:
    """An engine over a database and a schema file; both default to the bundled demo.

    ``database`` is a DuckDB file or a ``postgresql://`` DSN (``backends.open_backend``).
    """
    from dpproxy.catalog.load import load_catalog
    from dpproxy.demo import demo_database_path, demo_schema_path

    if (database is None) != (schema is None):
        raise InvalidParameter(
            "give both a database and a schema, or neither (for the bundled demo)",
            hint="--database FILE.duckdb --schema FILE.yaml",
        )
    catalog = load_catalog(schema or demo_schema_path())
    path = database or str(demo_database_path(progress=progress))
    accountant = MemoryAccountant(budget or catalog.policy.budget)
    backend = open_backend(path, statement_timeout=statement_timeout)
    try:
        return Engine(catalog, backend, accountant=accountant, noise=noise)
    except BaseException:
        backend.close()
        raise
