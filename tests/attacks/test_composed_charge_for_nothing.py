"""Named attack: a query planned in parts fails after its parts were released and charged.

A query around an aggregate relation or a keyed subquery (``planning/relations.py``,
``planning/keyed.py``) reserves the parts' cost, releases them, and then runs the rest of the
query exactly over public tables and the released rows. That outer query was never run, nor
bound, before the charge: a static error in it, one the database raises on every database
(``SELECT s FROM (…) d GROUP BY cat``, an aggregate in WHERE, ``MAX(COUNT(*))``, and on
PostgreSQL ``MAX`` of a boolean or ``SELECT DISTINCT … ORDER BY`` a column not selected),
surfaced as XX000 once the budget was spent: the analyst paid for nothing. Now the outer
query, with the parts' typed placeholders, is EXPLAINed on the backend before the budget is
reserved (``composed.check_outer_binds``; it reads public tables only) and a static error is
refused with 42000, nothing charged.

Three failures depended on the released rows, so no dry run over placeholders sees them; they
are refused up front or made total:

* a scalar subquery over released rows that returns more than one row fails when more than
  one key survives the noise (``s > (SELECT s FROM (…) e)``): it must be an aggregate without
  GROUP BY or LIMIT 1 (0A000, ``planning/released.check_total``);
* the analyst's own look-alike of dpproxy's keyed lookup, ``(SELECT CAST(released.v AS DOUBLE
  PRECISION) FROM (VALUES (5, 'x')) AS released(k0, v) WHERE released.k0 = d.s)``, was not
  checked (the check trusts dpproxy's VALUES) and failed exactly when a released value matched
  its key: the analyst's VALUES are refused in a query planned in parts (0A000);
* a relation column whose aggregates are all COUNTs is cast to BIGINT, and ``COUNT(*) * 1e30``
  overflowed that cast whenever a key was kept: the value is now written within ±9·10¹⁸.

Every case was charged on the code before (XX000 on the database; the data-dependent ones were
answered on its neighbour without unit 1); each is now refused before the budget is reserved
(nothing charged) or answered, on DuckDB and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: composed
privacy:
  epsilon: 1.0
  delta: 1.0e-6
  budget: {epsilon: 1000, delta: 0.5}
tables:
  t:
    private: true
    privacy_unit: uid
    max_rows_per_unit: 3
    columns:
      uid: {type: integer}
      k: {type: integer, lower: 0, upper: 10}
      x: {type: float, lower: 0, upper: 100}
      cat: {type: text, domain: [a, b]}
  p:
    private: false
    columns:
      k: {type: integer}
      name: {type: text}
      y: {type: float}
"""
ROWS = ((1, 1, 5.0, "a"), (2, 2, 50.0, "b"))
NEIGHBOUR = ROWS[1:]  # without unit 1
PUBLIC = ((1, "one", 1.5), (2, "two", 2.5), (3, "three", 3.5))
DDL = {
    "duckdb": ("INTEGER", "DOUBLE", "VARCHAR"),
    "postgres": ("integer", "double precision", "text"),
}

D = "(SELECT cat, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY cat) d"
KEYED = "(SELECT SUM(x) FROM t WHERE t.k = p.k)"
STATIC = (  # fail on every database: refused with 42000 before the charge
    f"SELECT s FROM {D} GROUP BY cat",
    f"SELECT COUNT(*) FROM {D} WHERE COUNT(*) > 1",
    f"SELECT MAX(COUNT(*)) FROM {D}",
    f"SELECT cat FROM {D} GROUP BY cat HAVING s > 0",
    f"SELECT name FROM p WHERE y > {KEYED} GROUP BY k",
)
POSTGRES_STATIC = (  # PostgreSQL refuses what DuckDB runs
    f"SELECT MAX(s > 0) FROM {D}",
    f"SELECT DISTINCT cat FROM {D} ORDER BY s",
    f"SELECT MAX(y > 1) FROM p WHERE y > {KEYED}",
)
REFUSED = (  # could fail on the released rows (or on public ones): 0A000 before the charge
    f"SELECT cat FROM {D} WHERE s > (SELECT s FROM (SELECT cat, SUM(x) AS s FROM t "
    "GROUP BY cat) e)",
    f"SELECT cat FROM {D} WHERE s = (SELECT y FROM p)",
    f"SELECT COUNT(*) FROM {D} WHERE s > (SELECT CAST(released.v AS DOUBLE PRECISION) "
    "FROM (VALUES (5, 'x')) AS released(k0, v) WHERE released.k0 = d.s)",
)
ANSWERED = (  # total: answered on the database and on its neighbour
    "SELECT MAX(n) FROM (SELECT cat, COUNT(*) * 1e30 AS n FROM t GROUP BY cat) d",
    "SELECT COUNT(*) FROM (SELECT cat, COUNT(*) * 1e30 AS n FROM t GROUP BY cat) d WHERE n > 0",
)


def _duckdb(path: Path, rows: tuple[tuple[Any, ...], ...]) -> Engine:
    i, f, s = DDL["duckdb"]
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t(uid {i}, k {i}, x {f}, cat {s})")
    con.execute(f"CREATE TABLE p(k {i}, name {s}, y {f})")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [list(r) for r in rows])
    con.executemany("INSERT INTO p VALUES (?, ?, ?)", [list(r) for r in PUBLIC])
    con.close()
    return Engine(parse_catalog(SCHEMA), DuckDBBackend(path), noise=NoNoise())


def _postgres(dsn: str, schema: str, rows: tuple[tuple[Any, ...], ...]) -> Engine:
    import psycopg
    from psycopg.conninfo import make_conninfo

    i, f, s = DDL["postgres"]
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        con.execute(f"CREATE SCHEMA {schema}")
        con.execute(f"CREATE TABLE {schema}.t(uid {i}, k {i}, x {f}, cat {s})")
        con.execute(f"CREATE TABLE {schema}.p(k {i}, name {s}, y {f})")
        with con.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.t VALUES (%s, %s, %s, %s)", rows)
            cur.executemany(f"INSERT INTO {schema}.p VALUES (%s, %s, %s)", PUBLIC)
    backend = PostgresBackend(make_conninfo(dsn, options=f"-c search_path={schema}"))
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def engines(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Engine]]:
    if request.param == "duckdb":
        tmp = tmp_path_factory.mktemp("composed")
        pair = (_duckdb(tmp / "d.duckdb", ROWS), _duckdb(tmp / "nb.duckdb", NEIGHBOUR))
    else:
        dsn = request.getfixturevalue("pg_session_dsn")
        pair = (_postgres(dsn, "cd", ROWS), _postgres(dsn, "cnb", NEIGHBOUR))
    yield pair
    for e in pair:
        e.close()


def outcome(engine: Engine, sql: str) -> tuple[str | None, bool]:
    """The SQLSTATE of the refusal (None: answered) and whether the attempt charged."""
    before = engine.remaining("mallory")
    try:
        engine.run(sql, analyst="mallory")
        state = None
    except DPProxyError as e:
        state = e.sqlstate
    return state, engine.remaining("mallory") != before


@pytest.mark.parametrize("sql", STATIC)
def test_a_static_error_around_released_parts_is_refused_uncharged(
    engines: tuple[Engine, Engine], sql: str
) -> None:
    for engine in engines:
        assert outcome(engine, sql) == ("42000", False)


@pytest.mark.parametrize("sql", POSTGRES_STATIC)
def test_what_postgres_cannot_bind_is_refused_uncharged(
    engines: tuple[Engine, Engine], sql: str
) -> None:
    """PostgreSQL refuses these before the charge; DuckDB binds them and answers (charged)."""
    expected = ("42000", False) if engines[0].backend.dialect == "postgres" else (None, True)
    for engine in engines:
        assert outcome(engine, sql) == expected


@pytest.mark.parametrize("sql", REFUSED)
def test_what_could_fail_on_released_rows_is_refused_uncharged(
    engines: tuple[Engine, Engine], sql: str
) -> None:
    for engine in engines:
        assert outcome(engine, sql) == ("0A000", False)


@pytest.mark.parametrize("sql", ANSWERED)
def test_the_total_outer_query_is_answered_on_both_neighbours(
    engines: tuple[Engine, Engine], sql: str
) -> None:
    for engine in engines:
        assert outcome(engine, sql) == (None, True)
