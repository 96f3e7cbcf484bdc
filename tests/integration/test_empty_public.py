"""Joins of a private table with EMPTY public tables, on real DuckDB files and PostgreSQL.

A public table that is empty when the engine attaches the catalog has a measured fan-out of 0
(``catalog/public.py``: no value has any row). It used to give a derived rows-per-unit bound
τ = 0 and an internal error, XX000 "stability bounds must be positive", for every join of a
one-row-per-unit private table with it. The factor of such a table is now taken as 1
(``sql/joinparts.py``, :func:`~dpproxy.sql.joinparts.factor`, which has the privacy argument):
the query is answered, with the plain SQL's answer (no row joins) plus noise calibrated at
τ = 1, and charged its ε; a query refused for another reason still gets its own SQLSTATE and is
charged nothing. On PostgreSQL, rows added to the public table after the catalog was read (two
per key, beyond the τ = 1 the plan was derived with) are truncated to τ per customer: the
bound, not the measurement, is what the sensitivity relies on.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends import Backend
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.planning.plan import QueryPlan
from dpproxy.values import Cost
from tests.noise import NoNoise

BUDGET = Cost(Fraction(10), Fraction(1, 10**5))
CUSTOMERS = 40  # c_custkey 1..40, c_nationkey = key % 5, c_acctbal 10

SCHEMA = """\
version: 1
dataset: empty_public
privacy:
  neighbouring: add_remove
  epsilon: 1
  delta: 1.0e-6
tables:
  customer:
    private: true
    privacy_unit: c_custkey
    max_rows_per_unit: 1
    columns:
      c_custkey: {type: integer}
      c_nationkey: {type: integer}
      c_acctbal: {type: float, lower: 0, upper: 100}
  nation:          # public, 5 rows with unique keys
    private: false
    columns:
      n_nationkey: {type: integer}
      n_regionkey: {type: integer}
  region:          # public, EMPTY; a declared domain makes GROUP BY r_name public
    private: false
    columns:
      r_regionkey: {type: integer}
      r_name: {type: text, domain: [AFRICA, EUROPE]}
  supplier:        # public, EMPTY
    private: false
    columns:
      s_suppkey: {type: integer}
      s_nationkey: {type: integer}
      s_acctbal: {type: float}
"""

DDL = (
    "CREATE TABLE customer (c_custkey BIGINT PRIMARY KEY, c_nationkey BIGINT NOT NULL, "
    "c_acctbal DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE nation (n_nationkey BIGINT NOT NULL, n_regionkey BIGINT NOT NULL)",
    "CREATE TABLE region (r_regionkey BIGINT NOT NULL, r_name TEXT NOT NULL)",
    "CREATE TABLE supplier (s_suppkey BIGINT NOT NULL, s_nationkey BIGINT NOT NULL, "
    "s_acctbal DOUBLE PRECISION NOT NULL)",
)
CUSTOMER_ROWS = [(k, k % 5, 10.0) for k in range(1, CUSTOMERS + 1)]
NATION_ROWS = [(k, k % 2) for k in range(5)]

# Queries joining the private customer with an empty public table, and their answers without
# noise: the plain SQL's (no row joins; released COUNTs and SUMs of no rows are 0).
ANSWERED: dict[str, tuple[str, tuple[tuple[Any, ...], ...]]] = {
    "join_on": (
        "SELECT COUNT(*) FROM customer JOIN supplier ON c_nationkey = s_nationkey",
        ((0,),),
    ),
    "comma_join_sum": (
        "SELECT COUNT(*), SUM(c_acctbal) FROM customer, supplier WHERE c_nationkey = s_nationkey",
        ((0, 0.0),),
    ),
    # customer ⋈ nation (fan-out 1) ⋈ region (empty), grouped by the declared domain: zero-filled
    "chain_by_domain": (
        "SELECT r_name, COUNT(*), SUM(c_acctbal) FROM customer "
        "JOIN nation ON c_nationkey = n_nationkey JOIN region ON n_regionkey = r_regionkey "
        "GROUP BY r_name ORDER BY r_name",
        (("AFRICA", 0, 0.0), ("EUROPE", 0, 0.0)),
    ),
    # no domain (the empty table gives none): private groups, of which there are none
    "grouped_private_keys": (
        "SELECT s_suppkey, COUNT(*) FROM customer JOIN supplier ON c_nationkey = s_nationkey "
        "GROUP BY s_suppkey",
        (),
    ),
    # public preserved side, private nullable side (sql/outer.py, case 3)
    "public_left_join": (
        "SELECT COUNT(c_custkey) FROM supplier LEFT JOIN customer ON c_nationkey = s_nationkey",
        ((0,),),
    ),
}
# A non-empty public table with unique keys: unchanged, every customer joins one nation.
CONTROL = "SELECT COUNT(*) FROM customer JOIN nation ON c_nationkey = n_nationkey"


def _duckdb_file(path: Path) -> Path:
    with duckdb.connect(str(path)) as con:
        for ddl in DDL:
            con.execute(ddl.replace("DOUBLE PRECISION", "DOUBLE"))
        con.executemany("INSERT INTO customer VALUES (?, ?, ?)", CUSTOMER_ROWS)
        con.executemany("INSERT INTO nation VALUES (?, ?)", NATION_ROWS)
    return path


def _postgres_database(dsn: str) -> None:
    with psycopg.connect(dsn) as con:
        for ddl in DDL:
            con.execute(ddl)
        with con.cursor() as cur:
            cur.executemany("INSERT INTO customer VALUES (%s, %s, %s)", CUSTOMER_ROWS)
            cur.executemany("INSERT INTO nation VALUES (%s, %s)", NATION_ROWS)


def _engine(backend: Backend) -> Engine:
    return Engine(
        parse_catalog(SCHEMA),
        backend,
        accountant=MemoryAccountant(BUDGET, cache="off"),
        noise=NoNoise(),
    )


@pytest.fixture
def duck_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = _engine(DuckDBBackend(_duckdb_file(tmp_path / "empty_public.duckdb")))
    yield engine
    engine.close()


@pytest.fixture
def pg_engine(pg_dsn: str) -> Iterator[Engine]:
    _postgres_database(pg_dsn)
    engine = _engine(PostgresBackend(pg_dsn))
    yield engine
    engine.close()


def _check_answers(engine: Engine) -> None:
    spent = Cost.zero()
    for name, (sql, want) in ANSWERED.items():
        plan = engine.prepare(sql).plan
        assert isinstance(plan, QueryPlan), name
        assert plan.truncation is not None and plan.truncation.source == "schema", name
        assert plan.stability.rows == 1, (name, plan.stability)
        assert "empty when read, taken as 1" in plan.truncation.derivation, name
        answer = engine.run(sql, analyst="ana")
        assert answer.released.rows == want, (name, answer.released.rows)
        assert answer.cost == plan.cost, name  # answered, so charged like any release
        spent = spent + answer.cost
    assert engine.remaining("ana") == BUDGET - spent
    assert engine.run(CONTROL, analyst="bob").released.rows == ((CUSTOMERS,),)


def _check_refusals(engine: Engine) -> None:
    """Refused for their own reasons, with their SQLSTATE, at no cost (never XX000)."""
    refused = {
        # COUNT(*) over a public table's outer join would count the unmatched public rows
        "SELECT COUNT(*) FROM supplier LEFT JOIN customer ON c_nationkey = s_nationkey": "0A000",
        # s_acctbal declares no bounds, and the empty table gives none
        "SELECT SUM(s_acctbal) FROM customer JOIN supplier ON c_nationkey = s_nationkey": "ZD002",
    }
    for sql, state in refused.items():
        with pytest.raises(DPProxyError) as info:
            engine.run(sql, analyst="eve")
        assert info.value.sqlstate == state, (sql, info.value)
    assert engine.remaining("eve") == BUDGET


def test_duckdb_answers_joins_with_empty_public_tables(duck_engine: Engine) -> None:
    _check_answers(duck_engine)


def test_duckdb_refusals_with_empty_public_tables_cost_nothing(duck_engine: Engine) -> None:
    _check_refusals(duck_engine)


def test_postgres_answers_joins_with_empty_public_tables(pg_engine: Engine) -> None:
    _check_answers(pg_engine)


def test_postgres_refusals_with_empty_public_tables_cost_nothing(pg_engine: Engine) -> None:
    _check_refusals(pg_engine)


def test_postgres_rows_added_after_the_catalog_was_read_are_truncated(
    pg_engine: Engine, pg_dsn: str
) -> None:
    """supplier was empty when the engine read it, so τ = 1 for customer ⋈ supplier. Two
    suppliers per nation added afterwards give every customer 2 joined rows; the rewrite keeps
    1 per customer, so the released count is the number of customers (not 2 × that) and the
    noise is the one planned for τ = 1."""
    sql = ANSWERED["join_on"][0]
    assert pg_engine.run(sql, analyst="ana").released.rows == ((0,),)
    with psycopg.connect(pg_dsn) as con, con.cursor() as cur:
        cur.executemany(
            "INSERT INTO supplier VALUES (%s, %s, 1.0)", [(s, s % 5) for s in range(10)]
        )
        assert cur.execute(
            "SELECT COUNT(*) FROM customer JOIN supplier ON c_nationkey = s_nationkey"
        ).fetchall() == [(2 * CUSTOMERS,)]
    plan = pg_engine.prepare(sql).plan
    assert isinstance(plan, QueryPlan) and plan.stability.rows == 1
    assert pg_engine.run(sql, analyst="ana").released.rows == ((CUSTOMERS,),)
