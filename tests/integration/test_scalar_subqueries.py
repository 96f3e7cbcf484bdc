"""Scalar subqueries over private data, released first with DP (``planning/scalars.py``).

TPC-H Q22 and the Adult analyst's ``age > (SELECT AVG(age) FROM adult)`` (in WHERE, in a
FILTER, in a CASE): with the noise off the substituted constant is the exact inner aggregate,
so the answer equals the plain SQL on DuckDB, and PostgreSQL releases the same numbers. The
cost is the sum of the parts, charged once; a refusal of any part charges nothing; a
correlated subquery is refused naming the obstacle; explain shows every part; the wire works.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends import CancelToken
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.model import Catalog
from dpproxy.demo import load_demo_postgres
from dpproxy.engine import Engine, PrivateQueryFailed
from dpproxy.errors import BackendUnavailable, BudgetExhausted, DPProxyError
from dpproxy.explain import explain_json, explain_text
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.scalars import ComposedPlan
from dpproxy.release.exact import ExactResult
from dpproxy.release.public import columns_of
from dpproxy.sql.scalars import constant
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.integration.test_server import start_server, stop_server
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
EPS = Fraction(1000)  # private groups of a few customers pass the selection threshold
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tpch"
Q22 = (CORPUS / "q22.sql").read_text(encoding="utf-8").strip().rstrip(";")
HINT = "/*+ dpproxy max_rows=1 */ "  # a customer is one row of customer

ADULT = {
    "where": "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult)",
    "filter": "SELECT COUNT(*) FILTER (WHERE hours_per_week > "
    "(SELECT AVG(hours_per_week) FROM adult)) FROM adult",
    "case_grouped": "SELECT sex, SUM(CASE WHEN age > (SELECT AVG(age) FROM adult) THEN 1 "
    "ELSE 0 END) FROM adult GROUP BY sex",
    "two_scalars": "SELECT COUNT(*) FROM adult WHERE age >= (SELECT AVG(age) FROM adult) "
    "AND (SELECT AVG(hours_per_week) FROM adult WHERE age < 30) < hours_per_week",
    "outer_cte": "WITH young AS (SELECT age, hours_per_week FROM adult WHERE age < 30) "
    "SELECT COUNT(*) FROM young WHERE hours_per_week > (SELECT AVG(hours_per_week) FROM young)",
    "between": "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND "
    "(SELECT AVG(age) FROM adult WHERE sex = 'Male')",
    # arithmetic over the outer query's released aggregates: post-processing
    "share": "SELECT sex, COUNT(*) * 1.0 / (SELECT COUNT(*) FROM adult) AS share FROM adult "
    "GROUP BY sex",
    "post_having_order": "SELECT sex, AVG(age) - (SELECT AVG(age) FROM adult) AS diff FROM adult "
    "GROUP BY sex HAVING COUNT(*) > (SELECT COUNT(*) FROM adult) / 10 "
    "ORDER BY SUM(age) / (SELECT SUM(age) FROM adult)",
}


def _engine(backend: Any, catalog: Catalog, budget: Cost = HUGE) -> Engine:
    return Engine(
        catalog, backend, accountant=MemoryAccountant(budget, cache="off"), noise=NoNoise()
    )


def _exact(path: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(con.execute(sql).fetchall(), key=str)
    finally:
        con.close()


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            if isinstance(u, int | float) and isinstance(v, int | float):
                if u != pytest.approx(v, rel=1e-9, abs=1e-6):
                    return False
            elif u != v:
                return False
    return True


@pytest.fixture(scope="module")
def tpch(tpch_db: Any) -> Iterator[Engine]:
    engine = _engine(DuckDBBackend(tpch_db.path), tpch_db.catalog())
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def adult(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    engine = _engine(DuckDBBackend(demo_db), demo_catalog)
    yield engine
    engine.close()


def test_q22_equals_the_plain_sql_and_costs_the_sum(tpch: Engine, tpch_db: Any) -> None:
    sql = HINT + Q22
    composed = tpch.prepare(sql, epsilon=EPS).plan
    assert isinstance(composed, ComposedPlan) and len(composed.scalars) == 1
    before = tpch.remaining("q22")
    answer = tpch.run(sql, analyst="q22", epsilon=EPS)
    exact = _exact(tpch_db.path, Q22)
    assert len(exact) == 7
    assert _same(sorted(answer.released.rows, key=str), exact)
    parts = composed.scalars[0].plan.cost + composed.outer.cost
    assert answer.cost == parts == composed.cost
    assert parts.epsilon == 2 * EPS
    assert before - tpch.remaining("q22") == parts  # charged once, the sum


@pytest.mark.parametrize("name", sorted(ADULT))
def test_adult_examples_equal_the_plain_sql(name: str, adult: Engine, demo_db: Path) -> None:
    sql = ADULT[name]
    answer = adult.run(sql, analyst="a", epsilon=Fraction(10))
    assert _same(sorted(answer.released.rows, key=str), _exact(demo_db, sql))
    scalars = {"two_scalars": 2, "post_having_order": 3}.get(name, 1)
    assert answer.cost.epsilon == 10 * (scalars + 1)


PUBLIC = [  # (bound hint, query): the bound never binds at scale 0.01
    (
        "/*+ dpproxy max_rows=100000 */ ",
        "SELECT COUNT(*) AS items FROM lineitem JOIN part ON l_partkey = p_partkey "
        "WHERE p_retailprice > (SELECT AVG(p_retailprice) FROM part)",
    ),
    (
        HINT,
        "SELECT c_mktsegment, COUNT(*) FROM customer WHERE c_nationkey = "
        "(SELECT MAX(n_nationkey) FROM nation WHERE n_name < 'M') GROUP BY c_mktsegment",
    ),
]


@pytest.mark.parametrize(("hint", "sql"), PUBLIC)
def test_public_scalars_are_exact_and_free(hint: str, sql: str, tpch: Engine, tpch_db: Any) -> None:
    composed = tpch.prepare(hint + sql, epsilon=EPS).plan
    assert isinstance(composed, ComposedPlan)
    assert isinstance(composed.scalars[0].plan, PublicPlan)
    assert composed.cost == composed.outer.cost  # the public part costs nothing
    answer = tpch.run(hint + sql, analyst="pub", epsilon=EPS)
    assert answer.cost == composed.outer.cost
    assert _same(sorted(answer.released.rows, key=str), _exact(tpch_db.path, sql))
    assert "exact, free" in explain_text(composed, "")


def test_postgres_gives_the_same_answers(
    pg_dsn: str, tpch_db: Any, tpch: Engine, adult: Engine, demo_catalog: Catalog
) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    load_demo_postgres(pg_dsn)
    pg_tpch = _engine(PostgresBackend(pg_dsn), tpch_db.catalog())
    pg_adult = _engine(PostgresBackend(pg_dsn), demo_catalog)
    try:
        cases = [(pg_tpch, tpch, HINT + Q22, EPS)]
        cases += [(pg_tpch, tpch, hint + sql, EPS) for hint, sql in PUBLIC]
        cases += [(pg_adult, adult, sql, Fraction(10)) for sql in ADULT.values()]
        for pg, duck, sql, eps in cases:
            a = sorted(duck.run(sql, analyst="d", epsilon=eps).released.rows, key=str)
            b = sorted(pg.run(sql, analyst="p", epsilon=eps).released.rows, key=str)
            assert a and _same(a, b), (sql, a, b)
        assert _same(_extremes(adult, "d"), _extremes(pg_adult, "p"))
    finally:
        pg_tpch.close()
        pg_adult.close()


EXTREMES = [1.7e308, -1.7e308, 1e-300, -4.9e-324, 0, 10**20, -(10**18), 38.581646755, None]


def _extremes(engine: Engine, analyst: str) -> list[tuple[Any, ...]]:
    """Every ADULT query answered with each extreme value in place of its subqueries (the
    substituted constants cannot make the rewritten SQL fail)."""
    out = []
    for sql in ADULT.values():
        composed = engine.prepare(sql).plan
        assert isinstance(composed, ComposedPlan)
        for value in EXTREMES:
            text = composed.outer_text([constant(value)] * len(composed.scalars))
            out += sorted(engine.run(text, analyst=analyst).released.rows, key=str)
    return out


def test_extreme_values_run(adult: Engine) -> None:
    assert len(_extremes(adult, "x")) >= len(ADULT) * len(EXTREMES)


def _refused(engine: Engine, sql: str, analyst: str) -> DPProxyError:
    before = engine.remaining(analyst)
    with pytest.raises(DPProxyError) as info:
        engine.run(sql, analyst=analyst)
    assert engine.remaining(analyst) == before  # nothing charged
    return info.value


def test_a_refused_outer_query_charges_nothing(tpch: Engine) -> None:
    """The scalar subquery alone is answerable; the outer query groups by the privacy unit."""
    tpch.plan("SELECT AVG(c_acctbal) FROM customer")
    err = _refused(
        tpch,
        "SELECT c_custkey, COUNT(*) FROM customer "
        "WHERE c_acctbal > (SELECT AVG(c_acctbal) FROM customer) GROUP BY c_custkey",
        "r",
    )
    assert err.sqlstate == "42501"


def test_the_total_must_fit_the_budget(demo_db: Path, demo_catalog: Catalog) -> None:
    """ε = 1.5 left: each part (ε = 1) fits, the sum (ε = 2) does not: refused, nothing spent."""
    engine = _engine(DuckDBBackend(demo_db), demo_catalog, Cost(Fraction(3, 2), Fraction(1, 10)))
    try:
        err = _refused(engine, ADULT["where"], "b")
        assert isinstance(err, BudgetExhausted)
        assert engine.accountant.spent("b") == Cost.zero()
        engine.run("SELECT AVG(age) FROM adult", analyst="b")  # a part alone fits
    finally:
        engine.close()


class FailingDuckDB(DuckDBBackend):
    """The real DuckDB backend, whose ``fail_at``-th statement raises ``error`` instead."""

    def __init__(self, path: Path, fail_at: int, error: Exception) -> None:
        super().__init__(path)
        self.calls, self.fail_at, self.error = 0, fail_at, error

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error
        return super().execute(sql, cancel)


def test_a_failure_after_the_scalar_ran_charges_the_sum(
    demo_db: Path, demo_catalog: Catalog
) -> None:
    """The scalar's statement ran (data read); the outer statement fails: the one fixed
    error, and the whole reservation is charged."""
    engine = _engine(FailingDuckDB(demo_db, 2, RuntimeError("boom")), demo_catalog)
    try:
        with pytest.raises(PrivateQueryFailed):
            engine.run(ADULT["where"], analyst="f", epsilon=Fraction(1))
        assert engine.accountant.spent("f").epsilon == 2
    finally:
        engine.close()


def test_unavailable_before_any_statement_is_refunded(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = _engine(FailingDuckDB(demo_db, 1, BackendUnavailable("down")), demo_catalog)
    try:
        with pytest.raises(BackendUnavailable):
            engine.run(ADULT["where"], analyst="u", epsilon=Fraction(1))
        assert engine.accountant.spent("u") == Cost.zero()
        assert engine.remaining("u") == HUGE
    finally:
        engine.close()


def test_correlated_on_a_private_table_is_refused(tpch: Engine) -> None:
    """Keyed on a private table (orders), the key set itself is private: refused, free.
    Keyed on a public table (Q17, Q20): tests/integration/test_keyed_subqueries.py."""
    sql = (
        "SELECT COUNT(*) FROM orders WHERE o_totalprice > "
        "(SELECT 10 * AVG(l_extendedprice) FROM lineitem WHERE l_orderkey = o_orderkey)"
    )
    err = _refused(tpch, sql, "c")
    assert err.sqlstate == "0A000"
    assert "reads a column of the outer query" in err.message
    assert "no bounded sensitivity" in err.message
    assert err.hint is not None and "uncorrelated" in err.hint and "public" in err.hint


def test_explain_shows_every_part_and_the_total(adult: Engine) -> None:
    prepared = adult.prepare(ADULT["two_scalars"], epsilon=Fraction(1))
    plan = prepared.plan
    assert isinstance(plan, ComposedPlan)
    text = explain_text(plan, ";\n".join(prepared.statements))
    assert "cost:         ε = 3, δ = 0 (the sum of the 3 parts below)" in text
    assert "released first with differential privacy" in text
    assert text.count("released first with noise: SELECT AVG(") == 2
    assert "the outer query, planned with 0 in place of each scalar subquery" in text
    assert "age >= 0" in text  # the placeholder
    data = json.loads(explain_json(plan, ""))
    assert len(data["scalar_subqueries"]) == 2 and data["cost"]["epsilon"] == 3
    assert "FROM adult" in data["outer"]["rewritten_sql"]
    # Describe (Engine.plan) has the outer query's columns; nothing was spent
    assert [c.type for c in columns_of(adult.plan(ADULT["two_scalars"]))] == ["integer"]
    assert adult.accountant.spent("nobody") == Cost.zero()


def test_an_answer_is_cached_as_one_release(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = Engine(
        demo_catalog,
        DuckDBBackend(demo_db),
        accountant=MemoryAccountant(HUGE),
        noise=NoNoise(),
    )
    try:
        first = engine.run(ADULT["filter"], analyst="k")
        again = engine.run(ADULT["filter"], analyst="k")
        assert again.cached and again.cost == Cost.zero()
        assert again.released.rows == first.released.rows
        assert engine.is_cached(ADULT["filter"], analyst="k")
    finally:
        engine.close()


def test_over_the_wire(tmp_path: Path, demo_db: Path) -> None:
    run = start_server(tmp_path)
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as con:
            (before,) = con.execute("SHOW dpproxy.budget").fetchone()  # type: ignore[misc]
            rows = con.execute(ADULT["where"]).fetchall()
            assert len(rows) == 1 and 10_000 < rows[0][0] < 30_000
            (after,) = con.execute("SHOW dpproxy.budget").fetchone()  # type: ignore[misc]
            assert after != before
            plan = [r[0] for r in con.execute("EXPLAIN " + ADULT["where"]).fetchall()]
            assert any("released first with noise" in line for line in plan)
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                con.execute(
                    "SELECT COUNT(*) FROM adult a WHERE age > "
                    "(SELECT AVG(age) FROM adult b WHERE b.sex = a.sex)"
                )
    finally:
        stop_server(run)
