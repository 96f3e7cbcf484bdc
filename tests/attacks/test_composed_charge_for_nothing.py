"""Named attack: a query planned in parts fails after its parts were released and charged.

A query around an aggregate relation or a keyed subquery (``planning/relations.py``,
``planning/keyed.py``) reserves the parts' cost, releases them, and then runs the rest of the
query exactly over public tables and the released rows. That outer query was never run, nor
bound, before the charge: a static error in it, one the database raises on every database
(``SELECT s FROM (…) d GROUP BY cat``, an aggregate in WHERE, ``MAX(COUNT(*))``), on
PostgreSQL and Spark ``SELECT DISTINCT … ORDER BY`` a column not selected, and on PostgreSQL
``MAX`` of a boolean, surfaced as XX000 once the budget was spent: the analyst paid for
nothing. Now the outer query, with the parts' typed placeholders, is EXPLAINed on the backend
before the budget is reserved (``composed.check_outer_binds``; it reads public tables only)
and a static error is refused with 42000, nothing charged: DuckDB and PostgreSQL raise it,
Spark's EXPLAIN reports it in its result rows ("Error occurred during query planning:"),
which only a plan's first line may say (a bound query's string literal holding those words
is printed in its plan, and is answered).

Four failures depended on the released rows, so no dry run over placeholders sees them; they
are refused up front or made total:

* a scalar subquery over released rows that returns more than one row fails when more than
  one key survives the noise (``s > (SELECT s FROM (…) e)``): it must be an aggregate without
  GROUP BY or LIMIT 1 (0A000, ``planning/released.check_total``);
* the analyst's own look-alike of dpproxy's keyed lookup, ``(SELECT CAST(released.v AS DOUBLE
  PRECISION) FROM (VALUES (5, 'x')) AS released(k0, v) WHERE released.k0 = d.s)``, was not
  checked (the check trusts dpproxy's VALUES) and failed exactly when a released value matched
  its key: the analyst's VALUES are refused in a query planned in parts (0A000);
* a relation column whose aggregates are all COUNTs is cast to BIGINT, and ``COUNT(*) * 1e30``
  overflowed that cast whenever a key was kept: the value is now written within ±9·10¹⁸;
* on Spark (ANSI), ``SUM`` of that column is a BIGINT, which two kept keys of 9·10¹⁸ overflow
  (XX000 on the database, answered on its neighbour, which keeps one): a total outer query
  sums integers in ``DECIMAL(38, 0)`` on Spark (``planning/public._exact_sums``), exactly, as
  DuckDB and PostgreSQL do.

Every case was charged on the code before (XX000 on the database; the data-dependent ones were
answered on its neighbour without unit 1), but the last two answered ones: the SUM was charged
on Spark only, and the literal was refused on Spark as if it did not bind (42000). Each is now
refused before the budget is reserved (nothing charged) or answered, on DuckDB, PostgreSQL and
Spark (local, the tables as Parquet
files exported from DuckDB; it skips without PySpark or Java, and fails under CI).
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
from tests.spark import export_parquet, small_data

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
BY_DIALECT = (  # static errors on some databases (refused, 42000), bound and answered on others
    (f"SELECT MAX(s > 0) FROM {D}", {"postgres"}),
    (f"SELECT DISTINCT cat FROM {D} ORDER BY s", {"postgres", "spark"}),
    (f"SELECT MAX(y > 1) FROM p WHERE y > {KEYED}", {"postgres"}),
)
REFUSED = (  # could fail on the released rows (or on public ones): 0A000 before the charge
    f"SELECT cat FROM {D} WHERE s > (SELECT s FROM (SELECT cat, SUM(x) AS s FROM t "
    "GROUP BY cat) e)",
    f"SELECT cat FROM {D} WHERE s = (SELECT y FROM p)",
    f"SELECT COUNT(*) FROM {D} WHERE s > (SELECT CAST(released.v AS DOUBLE PRECISION) "
    "FROM (VALUES (5, 'x')) AS released(k0, v) WHERE released.k0 = d.s)",
)
N = "(SELECT cat, COUNT(*) * 1e30 AS n FROM t GROUP BY cat) d"
ANSWERED = (  # total: answered on the database and on its neighbour
    f"SELECT MAX(n) FROM {N}",
    f"SELECT COUNT(*) FROM {N} WHERE n > 0",
    f"SELECT SUM(n) FROM {N}",  # 2 · 9e18 on the database: past BIGINT, Spark's SUM of BIGINTs
    # Spark's EXPLAIN of a bound query prints the literal in its plan: no error
    f"SELECT name FROM p WHERE name <> 'Error occurred during query planning:' AND y < {KEYED}",
)


def _duckdb_file(path: Path, rows: tuple[tuple[Any, ...], ...]) -> Path:
    i, f, s = DDL["duckdb"]
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t(uid {i}, k {i}, x {f}, cat {s})")
    con.execute(f"CREATE TABLE p(k {i}, name {s}, y {f})")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [list(r) for r in rows])
    con.executemany("INSERT INTO p VALUES (?, ?, ?)", [list(r) for r in PUBLIC])
    con.close()
    return path


def _duckdb(path: Path, rows: tuple[tuple[Any, ...], ...]) -> Engine:
    backend = DuckDBBackend(_duckdb_file(path, rows))
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())


def _spark(master: str, tmp: Path, rows: tuple[tuple[Any, ...], ...]) -> Engine:
    """The same tables as Parquet files (exported from DuckDB) on the session's Spark local."""
    from dpproxy.backends.spark import SparkBackend

    data = export_parquet(_duckdb_file(tmp / "source.duckdb", rows), tmp / "data")
    backend = small_data(SparkBackend(f"{master}?parquet_dir={data}"))
    try:
        return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
    except BaseException:
        backend.close()
        raise


def _spark_pair(master: str, database: Path, neighbour: Path) -> tuple[Engine, Engine]:
    """Spark engines over ROWS in ``database`` and NEIGHBOUR in ``neighbour`` (two folders)."""
    first = _spark(master, database, ROWS)
    try:
        return first, _spark(master, neighbour, NEIGHBOUR)
    except BaseException:
        first.close()
        raise


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


@pytest.fixture(scope="module", params=["duckdb", "postgres", "spark"])
def engines(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Engine]]:
    if request.param == "duckdb":
        tmp = tmp_path_factory.mktemp("composed")
        pair = (_duckdb(tmp / "d.duckdb", ROWS), _duckdb(tmp / "nb.duckdb", NEIGHBOUR))
    elif request.param == "spark":  # skips without PySpark or Java, fails under CI
        master = request.getfixturevalue("spark_master")
        d, nb = tmp_path_factory.mktemp("composed-spark"), tmp_path_factory.mktemp("composed-nb")
        pair = _spark_pair(master, d, nb)
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


@pytest.mark.parametrize(("sql", "refused_by"), BY_DIALECT)
def test_what_one_database_cannot_bind_is_refused_uncharged(
    engines: tuple[Engine, Engine], sql: str, refused_by: set[str]
) -> None:
    """A database that cannot bind these refuses them before the charge; one that binds them
    answers (charged): PostgreSQL refuses all three, Spark the ORDER BY of a column DISTINCT
    leaves out, DuckDB none (it orders by any of the group's values)."""
    refused = engines[0].backend.dialect in refused_by
    expected = ("42000", False) if refused else (None, True)
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
