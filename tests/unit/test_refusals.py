"""Every refusal has its SQLSTATE, happens before any SQL reaches the database, and costs nothing.

The cases live in ``tests/fixtures/reject/*.sql`` (one statement each, with ``-- sqlstate:`` and
optionally ``-- message:`` (a substring), ``-- position:``, ``-- delta:`` and ``-- epsilon:``).
Each runs through :meth:`Engine.run` over a :class:`RecordingBackend`, a real DuckDB backend
that records every ``execute`` call, so "no SQL reached the backend" is observed, not assumed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends import CancelToken
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import BudgetExhausted, DPProxyError
from dpproxy.release.noise import ExactResult
from dpproxy.values import Cost
from tests.fixtures import Case, load_cases
from tests.noise import NoNoise

CASES = load_cases("reject/*.sql")
BUDGET = Cost(Fraction(10), Fraction(1, 10**5))

# Every refusal class of the issue, with the SQLSTATE it must carry.
REQUIRED_CODES = {"42501", "0A000", "42P01", "42703", "ZD002", "ZD003", "42883", "42804",
                  "42601", "42803"}


class RecordingBackend(DuckDBBackend):
    """A real DuckDB backend that records the SQL of every ``execute`` call."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.executed: list[str] = []

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self.executed.append(sql)
        return super().execute(sql, cancel)


Factory = Callable[[str], tuple[Engine, RecordingBackend]]


@pytest.fixture
def make_engine(
    demo_db: Path, demo_catalog: Catalog, multi_db: Any, tpch_db: Any
) -> Iterator[Factory]:
    """A fresh engine (budget ε=10, δ=1e-5, no noise) over a recording backend, per schema."""
    made: list[Engine] = []

    def make(schema: str) -> tuple[Engine, RecordingBackend]:
        if schema == "adult":
            catalog, path = demo_catalog, demo_db
        elif schema == "tpch":
            catalog, path = tpch_db.catalog(), tpch_db.path
        else:
            catalog, path = multi_db.catalog(schema), multi_db.path
        backend = RecordingBackend(path)
        # no answer cache: the budget tests repeat identical queries and expect them charged
        accountant = MemoryAccountant(BUDGET, cache="off")
        engine = Engine(catalog, backend, accountant=accountant, noise=NoNoise())
        backend.executed.clear()  # opening reads the public tables (catalog/public.py)
        made.append(engine)
        return engine, backend

    yield make
    for e in made:
        e.close()


def _refuse(engine: Engine, sql: str, **kw: Any) -> DPProxyError:
    with pytest.raises(DPProxyError) as info:
        engine.run(sql, analyst="alice", **kw)
    return info.value


def _assert_nothing_happened(engine: Engine, backend: RecordingBackend) -> None:
    assert backend.executed == [], "a refused query reached the backend"
    assert engine.accountant.spent("alice") == Cost.zero()
    assert engine.remaining("alice") == BUDGET


# ------------------------------------------------------------------------------ fixtures


def test_every_refusal_class_has_fixtures() -> None:
    assert {c.get("sqlstate") for c in CASES} >= REQUIRED_CODES
    for c in CASES:
        assert len(c.statements) == 1, c.id
        assert c.get("schema") in ("adult", "visits_rows", "visits_groups", "tpch"), c.id
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refusal(case: Case, make_engine: Factory) -> None:
    engine, backend = make_engine(case.get("schema") or "")
    kw: dict[str, Fraction] = {}
    if (d := case.get("delta")) is not None:
        kw["delta"] = Fraction(d)
    if (e := case.get("epsilon")) is not None:
        kw["epsilon"] = Fraction(e)
    err = _refuse(engine, case.statements[0], **kw)
    assert err.sqlstate == case.get("sqlstate"), f"{type(err).__name__}: {err.message}"
    assert type(err) is not DPProxyError and type(err).sqlstate == err.sqlstate
    if message := case.get("message"):
        assert message in err.message
    if (position := case.get("position")) is not None:
        assert err.position == int(position)
    assert err.message and "\n" not in err.message
    _assert_nothing_happened(engine, backend)
    # prepare() (what explain uses) refuses the same way
    with pytest.raises(DPProxyError) as again:
        engine.prepare(case.statements[0], **kw)
    assert again.value.sqlstate == err.sqlstate


@pytest.mark.parametrize("sql", ["", "   ", ";", "  ;  ", "\n\t;\n", "-- only a comment",
                                 "/* a block comment */"])
def test_empty_query_is_a_syntax_error(sql: str, make_engine: Factory) -> None:
    """Whitespace, a lone semicolon or only comments: 42601 "empty query", nothing executed."""
    engine, backend = make_engine("adult")
    err = _refuse(engine, sql)
    assert err.sqlstate == "42601"
    assert "empty" in err.message
    _assert_nothing_happened(engine, backend)


def test_syntax_error_position_points_into_the_query(make_engine: Factory) -> None:
    engine, backend = make_engine("adult")
    sql = "SELECT COUNT(*)\nFROM adult\nWHERE age >> > 3"
    err = _refuse(engine, sql)
    assert err.sqlstate == "42601"
    assert err.position is not None and 1 <= err.position <= len(sql)
    assert sql[err.position - 1 :].lstrip().startswith((">", "3"))
    _assert_nothing_happened(engine, backend)


def test_text_literal_that_is_not_a_number_is_refused_before_the_database(
    make_engine: Factory,
) -> None:
    """``age > 'abc'``: Postgres refuses the literal (22P02); it must never reach DuckDB, whose
    cast error would surface as an internal error and be charged to the analyst."""
    engine, backend = make_engine("adult")
    err = _refuse(engine, "SELECT COUNT(*) FROM adult WHERE age > 'abc'")
    assert err.sqlstate in ("22P02", "42804")
    _assert_nothing_happened(engine, backend)


def test_a_number_in_quotes_is_accepted(make_engine: Factory) -> None:
    engine, _ = make_engine("adult")
    answer = engine.run("SELECT COUNT(*) FROM adult WHERE age > '40'", analyst="alice")
    assert answer.released.rows == engine.run(
        "SELECT COUNT(*) FROM adult WHERE age > 40", analyst="alice").released.rows


# ------------------------------------------------------------------------------ budget


@pytest.mark.parametrize("epsilon", [Fraction(1), Fraction(3), Fraction(7, 2), Fraction(10)])
def test_budget_runs_out_after_exactly_floor_budget_over_epsilon_queries(
    epsilon: Fraction, make_engine: Factory
) -> None:
    engine, backend = make_engine("adult")
    allowed = math.floor(BUDGET.epsilon / epsilon)
    sql = "SELECT COUNT(*) FROM adult"
    for i in range(allowed):
        before = engine.remaining("alice")
        # distinct queries: an identical one would come from the answer cache at no cost
        answer = engine.run(f"{sql} WHERE age > {i}", analyst="alice", epsilon=epsilon)
        assert answer.cost == Cost(epsilon)
        assert answer.remaining == Cost(before.epsilon - epsilon, BUDGET.delta)
        assert answer.remaining.epsilon >= 0
        assert len(backend.executed) == i + 1
    left = engine.remaining("alice")
    assert left.epsilon == BUDGET.epsilon - allowed * epsilon
    assert 0 <= left.epsilon < epsilon
    for _ in range(3):  # refused again and again, never going negative
        err = _refuse(engine, sql, epsilon=epsilon)
        assert isinstance(err, BudgetExhausted)
        assert err.sqlstate == "ZD001"
        assert engine.remaining("alice") == left
    assert len(backend.executed) == allowed  # the refused queries never ran
    # another analyst has a budget of their own
    assert engine.run(sql, analyst="bob", epsilon=epsilon).remaining.epsilon >= 0


def test_what_is_left_can_still_be_spent(make_engine: Factory) -> None:
    engine, _ = make_engine("adult")
    for _ in range(3):
        engine.run("SELECT COUNT(*) FROM adult", analyst="alice", epsilon=Fraction(3))
    assert _refuse(engine, "SELECT COUNT(*) FROM adult", epsilon=Fraction(3)).sqlstate == "ZD001"
    answer = engine.run("SELECT COUNT(*) FROM adult", analyst="alice", epsilon=Fraction(1))
    assert answer.remaining.epsilon == 0
    assert _refuse(engine, "SELECT COUNT(*) FROM adult",
                   epsilon=Fraction(1, 10**9)).sqlstate == "ZD001"


def test_delta_budget_runs_out_too(make_engine: Factory) -> None:
    """Private groups spend δ: with δ = 4e-6 per query, two fit in a δ budget of 1e-5."""
    engine, _ = make_engine("adult")
    sql = "SELECT age, COUNT(*) FROM adult GROUP BY age"
    delta = Fraction(4, 10**6)
    for _ in range(2):
        assert engine.run(sql, analyst="alice", epsilon=Fraction(1, 10), delta=delta).cost.delta
    err = _refuse(engine, sql, epsilon=Fraction(1, 10), delta=delta)
    assert err.sqlstate == "ZD001"
    assert engine.remaining("alice").delta >= 0


@pytest.mark.parametrize("epsilon,delta", [(Fraction(0), None), (Fraction(-1), None),
                                           (None, Fraction(1)), (None, Fraction(-1, 10))])
def test_invalid_privacy_parameters_are_refused_for_free(
    epsilon: Fraction | None, delta: Fraction | None, make_engine: Factory
) -> None:
    engine, backend = make_engine("adult")
    err = _refuse(engine, "SELECT COUNT(*) FROM adult", epsilon=epsilon, delta=delta)
    assert err.sqlstate == "ZD003"
    _assert_nothing_happened(engine, backend)


# ------------------------------------------------------------- no data-dependent failures

DATA_DEPENDENT = [
    # division by a column that is 0 on most rows
    ("adult", "SELECT COUNT(*) FROM adult WHERE capital_gain / capital_loss > 1"),
    ("adult", "SELECT COUNT(*) FROM adult WHERE capital_gain % capital_loss = 0"),
    ("visits_rows", "SELECT SUM(amount / duration) FROM visits"),
    ("visits_rows", "SELECT duration / duration AS r, COUNT(*) FROM visits GROUP BY r"),
    ("adult", "SELECT COUNT(*) FROM adult WHERE age / 0 > 1"),
    # casting text to int (most notes are not numbers)
    ("visits_rows", "SELECT COUNT(*) FROM visits WHERE CAST(note AS INTEGER) > 5"),
    ("visits_rows", "SELECT SUM(LEAST(GREATEST(CAST(note AS INTEGER), 0), 10)) FROM visits"),
    ("visits_rows", "SELECT CAST(note AS INTEGER) > 0 AS numeric_note, COUNT(*) FROM visits "
                    "GROUP BY 1"),
    ("visits_groups", "SELECT COUNT(*) FROM visits WHERE CAST(note AS DATE) > DATE '2020-01-01'"),
    # multiplying large integers
    ("adult", "SELECT COUNT(*) FROM adult WHERE fnlwgt * fnlwgt * fnlwgt > 0"),
    ("adult", "SELECT SUM(LEAST(capital_gain * capital_gain, 1000)) FROM adult"),
    ("visits_rows", "SELECT COUNT(*) FROM visits WHERE duration * duration * duration * duration "
                    "* duration * duration * duration > 0"),
    ("adult", "SELECT COUNT(*) FROM adult "
              "WHERE CAST(capital_gain AS INTEGER) * CAST(capital_gain AS INTEGER) > 0"),
    ("adult", "SELECT COUNT(*) FROM adult WHERE -CAST(hours_per_week AS SMALLINT) * 1000 < 0"),
]


@pytest.mark.parametrize("schema,sql", DATA_DEPENDENT, ids=[s for _, s in DATA_DEPENDENT])
def test_row_values_cannot_make_the_database_fail(
    schema: str, sql: str, make_engine: Factory
) -> None:
    """A value in one row must never raise a database error: the error would be an output."""
    engine, backend = make_engine(schema)
    answer = engine.run(sql, analyst="alice")
    assert len(backend.executed) == 1
    assert answer.released.columns
    for row in answer.released.rows:
        assert all(v is None or not isinstance(v, float) or math.isfinite(v) for v in row)
