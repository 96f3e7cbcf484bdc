"""Queries over public tables only, end to end on TPC-H scale 0.01: exact answers equal to the
plain SQL on DuckDB and on PostgreSQL, at no cost, through the engine, ``dpproxy query``,
``dpproxy explain`` and ``dpproxy serve`` (psycopg over a real socket, with the column types a
client sees).
"""

from __future__ import annotations

import datetime
import json
import math
import subprocess
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.engine import Engine
from dpproxy.errors import PublicQueryFailed
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests import pg
from tests.commands import dpproxy_command
from tests.integration.test_server import start_server, stop_server

BUDGET = Cost(Fraction(10), Fraction(1, 10**5))
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tpch"
NOTE = "public tables only: answered exactly, no privacy cost"

# Our own queries over the public tables: joins, GROUP BY/HAVING, CTEs, IN and EXISTS
# subqueries, set operations, DISTINCT, scalar functions, dates; each has an ORDER BY that
# fixes the order of its rows, and means the same on both engines.
OWN = {
    "regions": "SELECT r_name, COUNT(*) AS nations FROM nation JOIN region "
    "ON n_regionkey = r_regionkey GROUP BY r_name ORDER BY r_name",
    "brands": "SELECT p_brand, AVG(p_retailprice) AS avg_price, MIN(p_size) AS lo, "
    "MAX(p_size) AS hi, COUNT(DISTINCT p_type) AS types FROM part GROUP BY p_brand "
    "HAVING COUNT(*) > 10 ORDER BY p_brand",
    "cte": "WITH cheap AS (SELECT ps_partkey, MIN(ps_supplycost) AS c FROM partsupp "
    "GROUP BY ps_partkey) SELECT COUNT(*) AS n, SUM(c) AS total FROM cheap WHERE c < 100",
    "in": "SELECT n_name FROM nation WHERE n_regionkey IN (SELECT r_regionkey FROM region "
    "WHERE r_name LIKE 'A%') ORDER BY n_name",
    "exists": "SELECT s_name FROM supplier s WHERE NOT EXISTS (SELECT 1 FROM partsupp "
    "WHERE ps_suppkey = s.s_suppkey AND ps_availqty < 100) ORDER BY s_name LIMIT 15",
    "union": "SELECT n_name AS name FROM nation UNION ALL SELECT r_name FROM region "
    "ORDER BY name LIMIT 7",
    "distinct": "SELECT DISTINCT p_mfgr FROM part ORDER BY p_mfgr",
    "filter": "SELECT p_mfgr, COUNT(*) FILTER (WHERE p_size > 25) AS big, COUNT(*) AS n "
    "FROM part WHERE p_type ILIKE '%brass' GROUP BY p_mfgr ORDER BY p_mfgr",
    "left join": "SELECT r_name, COUNT(n_nationkey) AS n FROM region LEFT JOIN nation "
    "ON n_regionkey = r_regionkey AND n_name LIKE 'A%' GROUP BY r_name ORDER BY r_name",
    "scalar": "SELECT s_suppkey, UPPER(SUBSTRING(s_phone FROM 1 FOR 2)) AS cc, "
    "ROUND(s_acctbal) AS bal, CASE WHEN s_acctbal < 0 THEN 'neg' ELSE 'pos' END AS sign, "
    "LENGTH(s_name) AS len, COALESCE(NULLIF(s_nationkey, 0), -1) AS nk FROM supplier "
    "ORDER BY s_suppkey LIMIT 20",
    "dates": "SELECT r_regionkey, CAST('1995-01-01' AS DATE) + CAST(r_regionkey AS INTEGER) AS d, "
    "EXTRACT(YEAR FROM CAST('1995-06-01' AS DATE)) AS y FROM region ORDER BY r_regionkey",
}
QUERIES = {name: (CORPUS / f"{name}.sql").read_text() for name in ("q02", "q11", "q16")} | OWN


def _same(got: tuple[tuple[Any, ...], ...], want: list[tuple[Any, ...]], name: str) -> None:
    assert len(got) == len(want), name
    for a, b in zip(got, want, strict=True):
        assert len(a) == len(b), name
        for x, y in zip(a, b, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                assert math.isclose(float(x), float(y), rel_tol=1e-9), (name, a, b)
            else:
                assert x == y, (name, a, b)


@pytest.fixture(scope="module")
def duck_engine(tpch_db: Any) -> Iterator[Engine]:
    e = Engine(tpch_db.catalog(), DuckDBBackend(tpch_db.path), accountant=MemoryAccountant(BUDGET))
    yield e
    e.close()


@pytest.fixture(scope="module")
def pg_tpch(pg_server: pg.Server, tpch_db: Any) -> Iterator[str]:
    with pg.temporary_database(pg_server.admin_dsn) as dsn:
        load_tpch_postgres(tpch_db.path, dsn)
        yield dsn


@pytest.fixture(scope="module")
def pg_engine(pg_tpch: str, tpch_db: Any) -> Iterator[Engine]:
    e = Engine(tpch_db.catalog(), PostgresBackend(pg_tpch), accountant=MemoryAccountant(BUDGET))
    yield e
    e.close()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_duckdb_answers_equal_the_plain_sql(name: str, duck_engine: Engine, tpch_db: Any) -> None:
    sql = QUERIES[name]
    answer = duck_engine.run(sql, analyst="ana")
    con = duckdb.connect(str(tpch_db.path), read_only=True)
    try:
        _same(answer.released.rows, con.execute(sql).fetchall(), name)
    finally:
        con.close()
    assert answer.cost == Cost.zero() and duck_engine.remaining("ana") == BUDGET


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_postgres_answers_equal_the_plain_sql(
    name: str, pg_engine: Engine, pg_tpch: str, duck_engine: Engine
) -> None:
    sql = QUERIES[name]
    answer = pg_engine.run(sql, analyst="ana")
    with psycopg.connect(pg_tpch) as con:
        want = [tuple(_plain(v) for v in row) for row in con.execute(sql).fetchall()]
    _same(answer.released.rows, want, name)
    assert answer.cost == Cost.zero() and pg_engine.remaining("ana") == BUDGET
    # the same rows and the same column types as on DuckDB
    duck = duck_engine.run(sql, analyst="ana")
    assert duck.released.columns == answer.released.columns
    _same(answer.released.rows, list(duck.released.rows), name)


def _plain(v: Any) -> Any:
    from decimal import Decimal

    return float(v) if isinstance(v, Decimal) else v


def test_a_postgres_error_is_clean(pg_engine: Engine) -> None:
    with pytest.raises(PublicQueryFailed) as info:
        pg_engine.run("SELECT CAST(n_name AS INTEGER) FROM nation", analyst="bob")
    assert "invalid input syntax" in (info.value.hint or "")
    assert info.value.__cause__ is None
    assert pg_engine.remaining("bob") == BUDGET


def _cli(tpch_db: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *dpproxy_command(),
            *args,
            "--database",
            str(tpch_db.path),
            "--schema",
            str(tpch_db.schema),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_query_and_explain(tpch_db: Any) -> None:
    res = _cli(tpch_db, "query", "--format", "json", QUERIES["regions"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # --format json: rows, notices and cost on stdout
    assert doc["rows"][0] == {"r_name": "AFRICA", "nations": 5}
    assert NOTE in doc["notices"] and doc["privacy_cost"]["epsilon"] == "0"
    res = _cli(tpch_db, "explain", QUERIES["q16"])
    assert res.returncode == 0, res.stderr
    assert NOTE in res.stdout and "ε = 0, δ = 0" in res.stdout
    res = _cli(tpch_db, "query", "SELECT random() FROM nation")
    assert res.returncode != 0 and "42501" in res.stderr and "Traceback" not in res.stderr


def test_dbapi(tpch_db: Any) -> None:
    from dpproxy.dbapi import connect

    with connect(str(tpch_db.path), schema=str(tpch_db.schema)) as con:
        cur = con.cursor().execute(QUERIES["dates"])
        assert [d[1] for d in cur.description or ()] == ["integer", "date", "integer"]
        assert cur.fetchone() == (0, datetime.date(1995, 1, 1), 1995)
        assert cur.privacy_cost == Cost.zero() and cur.notices == [NOTE]
        assert cur.error_bounds[0] == (0.0, 0.0, 0.0)
        assert "no privacy cost" in cur.explain("SELECT r_name FROM region")


def test_dpproxy_serve_over_psycopg(tmp_path: Path, tpch_db: Any) -> None:
    """Column types as psycopg sees them (RowDescription, on Describe and on Execute), a
    bound parameter, a notice, refusals and database errors with their SQLSTATE."""
    run = start_server(tmp_path, "--database", str(tpch_db.path), "--schema", str(tpch_db.schema))
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as con:
            notices: list[str] = []
            con.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            cur = con.execute(QUERIES["q16"])
            rows = cur.fetchall()
            assert len(rows) > 0 and isinstance(rows[0][0], str) and isinstance(rows[0][3], int)
            assert [d.type_code for d in cur.description or ()] == [25, 25, 20, 20]
            assert any(NOTE in n for n in notices), notices
            cur = con.execute(QUERIES["dates"])
            assert cur.fetchone() == (0, datetime.date(1995, 1, 1), 1995)
            cur = con.execute(QUERIES["q02"])
            assert isinstance(cur.fetchone()[0], float)  # type: ignore[index]
            # extended protocol with a parameter, prepared on the server
            cur = con.execute(
                "SELECT n_name, n_nationkey > 20 AS big FROM nation WHERE n_regionkey = %s "
                "ORDER BY n_name",
                (1,),
                prepare=True,
            )
            assert cur.fetchall() == [
                ("ARGENTINA", False),
                ("BRAZIL", False),
                ("CANADA", False),
                ("PERU", False),
                ("UNITED STATES", True),
            ]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute("SELECT random() FROM nation")
            with pytest.raises(psycopg.errors.SystemError) as info:
                con.execute("SELECT CAST(n_name AS INTEGER) FROM nation")
            assert info.value.sqlstate == "58000"
            assert con.execute("SELECT COUNT(*) FROM region").fetchone() == (5,)
            plan = [r[0] for r in con.execute("EXPLAIN SELECT r_name FROM region").fetchall()]
            assert any(NOTE in line for line in plan), plan
            # the analyst's budget is untouched
            assert notices[-1] == "dpproxy: this answer cost ε=0, δ=0; budget left ε=10, δ=1e-05"
    finally:
        err = stop_server(run)
    assert "Traceback" not in err
