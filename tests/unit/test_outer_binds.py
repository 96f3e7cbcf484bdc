"""``composed.check_outer_binds`` with a stand-in backend, for what a real database does not
show on demand: the exact statement sent (EXPLAIN of the outer query, nothing else), an
unreachable database staying unreachable (08001: nothing was reserved), and a private outer
query never EXPLAINed (it could consult statistics of private rows). The database's refusal
becoming 42000 — raised by DuckDB and PostgreSQL, reported in EXPLAIN's rows by Spark, and a
bound query whose literal holds Spark's words answered — is proven on the real engines in
``tests/attacks/test_composed_charge_for_nothing.py``; the two refusal cases here only pin
the translation itself."""

from __future__ import annotations

from typing import Any

import pytest
from sqlglot import exp

from dpproxy.backends import CancelToken
from dpproxy.composed import check_outer_binds
from dpproxy.errors import BackendUnavailable, InternalError, OuterQueryInvalid
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.scalars import ComposedPlan
from dpproxy.release.exact import ExactResult

OUTER = PublicPlan(
    "q", 'SELECT "p"."k" FROM "p" AS "p" LIMIT 101', (("k", "integer"),), ("p",), 100
)


class FakeBackend:
    dialect = "duckdb"
    portable_hash = False

    def __init__(self, answer: ExactResult | Exception) -> None:
        self.answer = answer
        self.ran: list[str] = []

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self.ran.append(sql)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def composed(outer: Any = OUTER) -> ComposedPlan:
    return ComposedPlan("q", (), "q", outer, exp.select("1"))


def test_a_bound_outer_query_passes_and_is_explained_only() -> None:
    backend = FakeBackend(ExactResult(("plan",), (("Seq Scan on p",),)))
    check_outer_binds(backend, composed())  # type: ignore[arg-type]
    assert backend.ran == [f"EXPLAIN {OUTER.sql}"]


def test_the_database_refusing_to_bind_is_42000() -> None:
    said = "GroupingError (42803): column d.s must appear in the GROUP BY clause"
    backend = FakeBackend(InternalError("the database failed to run the query", log_detail=said))
    with pytest.raises(OuterQueryInvalid) as refused:
        check_outer_binds(backend, composed())  # type: ignore[arg-type]
    assert refused.value.sqlstate == "42000"
    assert refused.value.hint is not None and "must appear in the GROUP BY" in refused.value.hint


def test_spark_reporting_the_error_in_its_rows_is_42000() -> None:
    """The shape of Spark's report; real Spark: the attack test's ``spark`` engine."""
    rows = (("Error occurred during query planning: ",), ("[MISSING_AGGREGATION] name",))
    backend = FakeBackend(ExactResult(("plan",), rows))
    with pytest.raises(OuterQueryInvalid) as refused:
        check_outer_binds(backend, composed())  # type: ignore[arg-type]
    assert refused.value.hint is not None and "MISSING_AGGREGATION" in refused.value.hint


def test_an_unreachable_database_stays_08001() -> None:
    backend = FakeBackend(BackendUnavailable("not reachable"))
    with pytest.raises(BackendUnavailable):
        check_outer_binds(backend, composed())  # type: ignore[arg-type]


def test_a_private_outer_query_is_not_explained() -> None:
    backend = FakeBackend(InternalError("must not run"))
    check_outer_binds(backend, composed(outer=object()))  # type: ignore[arg-type]
    assert backend.ran == []
