"""Semi- and anti-joins end to end on TPC-H scale 0.01, on DuckDB and PostgreSQL.

TPC-H Q4 (EXISTS over the order's line items), Q19 (the join equality repeated in every OR
branch) and Q21 (a line item with EXISTS and NOT EXISTS over the other line items of its order),
and IN / NOT IN over private and public rows (``dpproxy/sql/semijoins.py``): with the noise off
and a bound that never binds, the released answers equal the plain SQL on DuckDB, and
PostgreSQL releases the same numbers from its own rewritten SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.engine import Engine
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tpch"

Q4 = """
SELECT o_orderpriority, COUNT(*) AS order_count FROM orders
WHERE o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01'
  AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey
              AND l_commitdate < l_receiptdate)
GROUP BY o_orderpriority ORDER BY o_orderpriority
"""
QUERIES = {
    "q4": Q4,
    "in_lineitem": "SELECT o_orderstatus, COUNT(*), SUM(o_totalprice) FROM orders "
    "WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem WHERE l_shipmode = 'MAIL' "
    "AND l_discount > 0.05) GROUP BY o_orderstatus",
    "not_in_lineitem": "SELECT COUNT(*) FROM orders o WHERE o.o_orderkey NOT IN "
    "(SELECT l.l_orderkey FROM lineitem l WHERE l.l_returnflag = 'R')",
    "customers_without_orders": "SELECT c_mktsegment, COUNT(*) FROM customer "
    "WHERE NOT EXISTS (SELECT 1 FROM orders WHERE o_custkey = c_custkey) GROUP BY c_mktsegment",
    "public_not_in": "SELECT SUM(l_quantity) FROM lineitem WHERE l_suppkey NOT IN "
    "(SELECT ps_suppkey FROM partsupp WHERE ps_partkey = l_partkey AND ps_supplycost > 500)",
    "public_join_in": "SELECT c_mktsegment, COUNT(*), AVG(c_acctbal) FROM customer "
    "WHERE c_nationkey IN (SELECT n_nationkey FROM nation JOIN region "
    "ON n_regionkey = r_regionkey WHERE r_name = 'EUROPE') GROUP BY c_mktsegment",
    "chain_inside": "SELECT c_mktsegment, COUNT(*) FROM customer c WHERE EXISTS "
    "(SELECT 1 FROM orders o JOIN lineitem l ON l.l_orderkey = o.o_orderkey "
    "WHERE o.o_custkey = c.c_custkey AND l.l_quantity > 49) GROUP BY c_mktsegment",
}


def _corpus(name: str) -> str:
    return (CORPUS / f"{name}.sql").read_text(encoding="utf-8").strip().rstrip(";")


def _all_queries() -> dict[str, str]:
    out = dict(QUERIES)
    for name in ("q19", "q21"):
        if (CORPUS / f"{name}.sql").exists():
            out[name] = _corpus(name)
    return out


def hinted(sql: str) -> str:
    head, rest = sql.strip().split(None, 1)
    return f"{head} /*+ dpproxy max_rows=100000 */ {rest}"


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
        return a == pytest.approx(b, rel=1e-9, abs=1e-6)
    return bool(a == b)


@pytest.mark.parametrize("name", sorted(_all_queries()))
def test_noise_free_answers_equal_plain_sql(name: str, duck: Engine, tpch_db: Any) -> None:
    """Every released group equals the plain SQL's; public groups the plain SQL does not
    return (no rows) are released with zero counts."""
    sql = _all_queries()[name]
    answer = duck.run(hinted(sql), analyst="t")
    assert "EXISTS" in (duck.prepare(hinted(sql), secret=1).sql or "") or name == "q19"
    con = duckdb.connect(str(tpch_db.path), read_only=True)
    try:
        exact = con.execute(sql).fetchall()
    finally:
        con.close()
    keys = len(answer.plan.query.keys)
    released = {tuple(r[:keys]): r for r in answer.released.rows}
    assert exact, "the query should match rows at scale 0.01"
    for row in exact:
        got = released[tuple(row[:keys])]
        assert all(_close(a, b) for a, b in zip(got, row, strict=True)), (name, got, row)
    missing = set(released) - {tuple(r[:keys]) for r in exact}
    for key in missing:
        assert all(v in (0, None) for v in released[key][keys:]), (name, released[key])


def test_postgres_gives_the_same_noise_free_answers(
    pg_dsn: str, tpch_db: Any, duck: Engine
) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    pg = _engine(PostgresBackend(pg_dsn), tpch_db)
    try:
        for name, sql in sorted(_all_queries().items()):
            a = sorted(duck.run(hinted(sql), analyst="t").released.rows, key=str)
            b = sorted(pg.run(hinted(sql), analyst="t").released.rows, key=str)
            assert len(a) == len(b), name
            for x, y in zip(a, b, strict=True):
                assert all(_close(u, v) for u, v in zip(x, y, strict=True)), (name, x, y)
    finally:
        pg.close()
