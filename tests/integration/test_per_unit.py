"""Per-unit subqueries (``sql/perunit.py``) end to end on TPC-H scale 0.01, DuckDB and PostgreSQL.

With the noise off, PostgreSQL releases the same answers as DuckDB from its own rewritten SQL
(the derived relation, its LEFT JOIN and its guarded aggregates print and run on both), and the
ungrouped answers equal the plain SQL run on PostgreSQL itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.engine import Engine
from dpproxy.errors import UnboundedColumn
from dpproxy.explain import explain_data
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
Q13 = (Path(__file__).resolve().parents[1] / "corpus" / "tpch" / "q13.sql").read_text()

PER_CUSTOMER = "SELECT o_custkey, COUNT(*) AS n, SUM(o_totalprice) AS spent FROM orders"
# name → (query, ungrouped: compare with the plain SQL on PostgreSQL too)
QUERIES = {
    "histogram": (
        f"SELECT n, COUNT(*) FROM ({PER_CUSTOMER} GROUP BY o_custkey) t GROUP BY n",
        False,
    ),
    "spent": (
        f"SELECT COUNT(*) FROM ({PER_CUSTOMER} GROUP BY o_custkey) t WHERE spent > 100000",
        True,
    ),
    "avg_least": (
        "SELECT AVG(LEAST(n, 50)) FROM (SELECT c_custkey, COUNT(*) AS n FROM customer "
        "JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey) t",
        True,
    ),
    "cte_having": (
        "WITH pc AS (SELECT o_custkey, COUNT(*) AS n FROM orders WHERE "
        "o_orderstatus <> 'P' GROUP BY o_custkey HAVING MAX(o_totalprice) > 300000) "
        "SELECT SUM(LEAST(n, 40)), COUNT(*) FROM pc",
        True,
    ),
    "min_avg": (
        "SELECT AVG(lo), AVG(mean) FROM (SELECT o_custkey, MIN(o_totalprice) AS lo, "
        "AVG(o_totalprice) AS mean FROM orders GROUP BY o_custkey) t",
        True,
    ),
    "buckets": (
        "SELECT CASE WHEN n >= 20 THEN 'many' ELSE 'few' END AS b, COUNT(*) FROM "
        f"({PER_CUSTOMER} GROUP BY o_custkey) t GROUP BY 1",
        False,
    ),
    "revenue": (
        "SELECT COUNT(*), SUM(LEAST(GREATEST(revenue, 0), 1000000)) FROM (SELECT "
        "o_custkey, SUM(l_extendedprice * (1 - l_discount)) AS revenue FROM orders JOIN "
        "lineitem ON l_orderkey = o_orderkey GROUP BY o_custkey) t",
        True,
    ),
    "arithmetic": (
        "SELECT AVG(LEAST(GREATEST(mean, 0), 1000000)), SUM(spread) FROM (SELECT "
        "o_custkey, SUM(o_totalprice) / COUNT(*) AS mean, MAX(o_totalprice) - "
        "MIN(o_totalprice) AS spread FROM orders GROUP BY o_custkey) t",
        True,
    ),
    "dates": (
        "SELECT EXTRACT(YEAR FROM first_order) AS y, COUNT(*) FROM (SELECT o_custkey, "
        "MIN(o_orderdate) AS first_order, MAX(o_orderdate) AS last_order FROM orders "
        "GROUP BY o_custkey) t WHERE last_order - first_order > 365 GROUP BY 1",
        False,
    ),
    "q13": (Q13.strip().rstrip(";"), False),
    "hinted": (
        "SELECT /*+ dpproxy max_rows=3 */ COUNT(*) FROM "
        f"({PER_CUSTOMER} GROUP BY o_custkey) t WHERE n > 10",
        True,
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


def test_postgres_gives_the_same_noise_free_answers(
    pg_dsn: str, tpch_db: Any, duck: Engine
) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    pg = _engine(PostgresBackend(pg_dsn), tpch_db)
    try:
        with psycopg.connect(pg_dsn) as con:
            for name, (sql, ungrouped) in sorted(QUERIES.items()):
                a = sorted(duck.run(sql, analyst="t").released.rows, key=str)
                b = sorted(pg.run(sql, analyst="t").released.rows, key=str)
                assert a, name
                assert len(a) == len(b), name
                for x, y in zip(a, b, strict=True):
                    assert all(_close(u, v) for u, v in zip(x, y, strict=True)), (name, x, y)
                if ungrouped:
                    plain = con.execute(sql.replace("/*+ dpproxy max_rows=3 */ ", "")).fetchall()
                    assert all(_close(u, v) for u, v in zip(b[0], plain[0], strict=True)), (
                        name,
                        b,
                        plain,
                    )
    finally:
        pg.close()


def test_explain_shows_the_derived_relation(duck: Engine) -> None:
    """The plan names the per-unit relation and how it was derived, and needs no bounding."""
    prepared = duck.prepare(QUERIES["q13"][0], secret=1)
    data = explain_data(prepared.plan, QUERIES["q13"][0])
    assert data["relation"] == "c_orders (one row per unit: customer ⟕ orders GROUP BY c_custkey)"
    assert not prepared.plan.needs_bounding and prepared.plan.stability.rows == 1
    assert "LEFT JOIN" in (prepared.sql or "") and "AS __derived" in (prepared.sql or "")
    assert data["contribution_bound"]["how"] == "one row per unit: the per-unit subquery"


def test_an_unclamped_per_unit_value_is_refused_with_the_clamp_hint(duck: Engine) -> None:
    """A per-unit COUNT has no upper bound, and the schema cannot give it one: the hint says
    to clamp it, not to declare bounds in the schema."""
    sql = (
        "SELECT SUM(n) FROM (SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY o_custkey) t"
    )
    with pytest.raises(UnboundedColumn) as refused:
        duck.plan(sql)
    assert refused.value.hint is not None
    assert refused.value.hint.startswith("clamp it with LEAST(GREATEST(x, lo), hi)")
    assert "schema" in refused.value.hint and "declare" not in refused.value.hint
