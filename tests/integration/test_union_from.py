"""UNION ALL of private relations in FROM (``sql/unionrel.py``) end to end on TPC-H scale 0.01,
DuckDB and PostgreSQL.

With the noise off and a row bound that keeps every row (``max_rows=1000``: at this scale no
customer has that many rows across customer, orders and line items), the released answers
equal the plain SQL run on each engine itself, and both engines release the same answers from
their own rewritten SQL. What stays refused is refused before any read, with its SQLSTATE.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import duckdb
import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.explain import explain_data
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
HINT = "/*+ dpproxy max_rows=1000 */ "
CUST_ORDERS = (
    "(SELECT 'cust' AS src, c_acctbal AS v FROM customer UNION ALL "
    "SELECT 'order', o_totalprice FROM orders WHERE o_orderdate < DATE '1995-01-01') u"
)
QUERIES = {
    "count_sum": f"SELECT {HINT}COUNT(*), SUM(v) FROM {CUST_ORDERS}",
    "tagged": f"SELECT {HINT}src, COUNT(*), SUM(v), AVG(v) FROM {CUST_ORDERS} GROUP BY src",
    "three_branches": f"SELECT {HINT}src, COUNT(*) FROM (SELECT 'cust' AS src FROM customer "
    "UNION ALL SELECT 'order' FROM orders UNION ALL SELECT 'item' FROM lineitem "
    "WHERE l_quantity > 10) u GROUP BY src",
    "int_and_float": f"SELECT {HINT}SUM(q), MAX(q) FROM (SELECT l_quantity AS q FROM lineitem "
    "UNION ALL SELECT l_linenumber FROM lineitem WHERE l_shipmode = 'AIR') u",
    "cte": f"WITH u AS (SELECT c_custkey AS k, c_acctbal AS v FROM customer WHERE c_acctbal > 0 "
    f"UNION ALL SELECT o_custkey, o_totalprice FROM orders) SELECT {HINT}COUNT(*), "
    "COUNT(DISTINCT k) FROM u WHERE v < 5000",
    "nulls": f"SELECT {HINT}COUNT(*), COUNT(v) FROM (SELECT c_acctbal AS v FROM customer UNION "
    "ALL SELECT NULL FROM orders) u",
    "column_list": f"SELECT {HINT}s, COUNT(*) FROM (SELECT c_mktsegment FROM customer UNION ALL "
    "SELECT 'ORDER' FROM orders) AS u(s) GROUP BY s",
    "outer_filter": f"SELECT {HINT}src, SUM(v) FROM {CUST_ORDERS} WHERE v BETWEEN 100 AND 900 "
    "GROUP BY src",
}
REFUSED = {
    "union_distinct": (
        "SELECT COUNT(*) FROM (SELECT c_custkey AS k FROM customer UNION "
        "SELECT o_custkey FROM orders) u",
        "0A000",
        "UNION in FROM",
    ),
    "intersect": (
        "SELECT COUNT(*) FROM (SELECT c_custkey AS k FROM customer INTERSECT "
        "SELECT o_custkey FROM orders) u",
        "0A000",
        "INTERSECT in FROM",
    ),
    "types": (
        "SELECT COUNT(*) FROM (SELECT c_name AS v FROM customer UNION ALL "
        "SELECT o_custkey FROM orders) u",
        "42804",
        "UNION types integer and text cannot be matched",
    ),
    "expression": (
        "SELECT COUNT(*) FROM (SELECT c_acctbal * 2 AS v FROM customer UNION ALL "
        "SELECT o_totalprice FROM orders) u",
        "0A000",
        "columns and constants only",
    ),
    "star": (
        "SELECT COUNT(*) FROM (SELECT * FROM customer UNION ALL SELECT * FROM customer) u",
        "0A000",
        "SELECT *",
    ),
    "width": (
        "SELECT COUNT(*) FROM (SELECT c_custkey, c_acctbal FROM customer UNION ALL "
        "SELECT o_custkey FROM orders) u",
        "0A000",
        "same number of columns",
    ),
    "grouped_branch": (
        "SELECT COUNT(*) FROM (SELECT o_custkey FROM orders GROUP BY o_custkey UNION ALL "
        "SELECT c_custkey FROM customer) u",
        "0A000",
        "GROUP in a branch",
    ),
    "public_branch": (
        "SELECT COUNT(*) FROM (SELECT n_nationkey AS k FROM nation UNION ALL "
        "SELECT c_nationkey FROM customer) u",
        "0A000",
        "public",
    ),
    "unit_groups": (
        "SELECT k, COUNT(*) FROM (SELECT c_custkey AS k FROM customer UNION ALL "
        "SELECT o_custkey FROM orders) u GROUP BY k",
        "42501",
        "",
    ),
}


def _engine(backend: Any, tpch_db: Any) -> Engine:
    return Engine(
        tpch_db.catalog(), backend, accountant=MemoryAccountant(HUGE, cache="off"), noise=NoNoise()
    )


@pytest.fixture(scope="module")
def duck(tpch_db: Any) -> Iterator[Engine]:
    engine = _engine(DuckDBBackend(tpch_db.path), tpch_db)
    yield engine
    engine.close()


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == pytest.approx(float(b), rel=1e-9, abs=1e-6)
    return bool(a == b)


def _same(a: list[Any], b: list[Any]) -> bool:
    x, y = sorted(map(tuple, a), key=str), sorted(map(tuple, b), key=str)
    return len(x) == len(y) and all(
        all(_close(u, v) for u, v in zip(r, s, strict=True)) for r, s in zip(x, y, strict=True)
    )


def test_duckdb_answers_equal_the_plain_sql(tpch_db: Any, duck: Engine) -> None:
    con = duckdb.connect(str(tpch_db.path), read_only=True)
    try:
        for name, sql in QUERIES.items():
            dp = duck.run(sql, analyst="u").released.rows
            assert dp, name
            assert _same(dp, con.execute(sql.replace(HINT, "")).fetchall()), name
    finally:
        con.close()


def test_postgres_gives_the_same_noise_free_answers(
    pg_dsn: str, tpch_db: Any, duck: Engine
) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    pg = _engine(PostgresBackend(pg_dsn), tpch_db)
    try:
        with psycopg.connect(pg_dsn) as con:
            for name, sql in QUERIES.items():
                a = duck.run(sql, analyst="u").released.rows
                b = pg.run(sql, analyst="u").released.rows
                assert _same(a, b), (name, a, b)
                plain = con.execute(sql.replace(HINT, "")).fetchall()  # type: ignore[arg-type]
                assert _same(b, plain), (name, b, plain)
    finally:
        pg.close()


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_stays_refused(duck: Engine, name: str) -> None:
    sql, sqlstate, words = REFUSED[name]
    with pytest.raises(DPProxyError) as info:
        duck.prepare(sql, secret=1)
    assert info.value.sqlstate == sqlstate, info.value
    assert words in info.value.message, info.value.message
    assert "__" not in info.value.message  # no internal name


def test_the_bound_is_the_sum_of_the_branches(duck: Engine) -> None:
    """customer declares one row per unit: a union of it with itself has two rows per unit,
    enforced in SQL and shown by explain; a branch without a declared bound makes the bound
    one chosen with DP."""
    sql = (
        "SELECT COUNT(*) FROM (SELECT c_acctbal AS v FROM customer UNION ALL "
        "SELECT c_acctbal FROM customer WHERE c_acctbal > 0) u"
    )
    prepared = duck.prepare(sql, secret=1)
    assert prepared.plan.needs_bounding and prepared.plan.stability.rows == 2
    data = explain_data(prepared.plan, sql)
    assert data["relation"] == "u (UNION ALL of customer ∪ customer)"
    assert data["contribution_bound"]["how"] == (
        "the sum of the UNION ALL branches' bounds declared in the schema"
    )
    assert "UNION ALL" in (prepared.sql or "") and "AS __union" in (prepared.sql or "")
    chosen = duck.prepare(f"SELECT COUNT(*) FROM {CUST_ORDERS}", secret=1)
    assert chosen.plan.truncation is not None and chosen.plan.truncation.source == "dp"
