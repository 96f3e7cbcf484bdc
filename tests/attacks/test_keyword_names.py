"""Named attack: a PostgreSQL column named like a keyword (``user``, ``order``, ``end``).

Such a name is all lower case, so PostgreSQL does not fold it and ``sql/pgnames.quoted_names``
did not quote it, and sqlglot writes an identifier bare. The SQL dpproxy sent then read
``user AS __unit``: PostgreSQL's ``user`` is ``current_user``, so every row was one unit, the
contribution bounding kept ``max_rows_per_unit`` rows of the whole table (COUNT(*) answered
2 over 3 units of 2 rows; which rows a SUM kept depended on every unit's rows, so adding one
unit could replace another's: a sensitivity twice the one charged), and ``order`` or ``end``
bare was a syntax error after the charge (XX000, on the database and its neighbour). DuckDB
answered correctly (sqlglot's DuckDB dialect quotes its reserved words).

Now every statement sent to PostgreSQL writes each catalog name in double quotes with the
catalog's spelling (``sql/qualify.py``): a quoted identifier is always a name to PostgreSQL,
never a keyword, a function such as ``user`` or ``current_date``, or syntax. Real PostgreSQL
and DuckDB, the noise off, on a database and its neighbour without unit 3.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import psycopg
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: keywords
privacy: {epsilon: 1, delta: "1e-6", budget: {epsilon: 100000, delta: 0.5}}
tables:
  t:
    privacy_unit: user
    max_rows_per_unit: 2
    columns:
      user: {type: integer}
      order: {type: integer, lower: -10, upper: 10}
      end: {type: text, domain: [a, b]}
      current_date: {type: integer, lower: 0, upper: 5}
      c: {type: text}
"""
DDL = (
    'CREATE TABLE t ("user" int NOT NULL, "order" int NOT NULL, "end" text NOT NULL, '
    '"current_date" int NOT NULL, c text NOT NULL)'
)
BASE = [(1, 10, "a", 1, "a"), (1, 10, "a", 1, "a"), (2, 10, "b", 1, "z"), (2, 10, "b", 1, "z")]
UNIT_3 = [(3, -10, "a", 1, "a"), (3, -10, "b", 1, "a")]
# (query, answer on the database with unit 3, answer on its neighbour without it)
CASES = [
    ("SELECT COUNT(*) FROM t", [(6,)], [(4,)]),
    ('SELECT COUNT(DISTINCT "user") FROM t', [(3,)], [(2,)]),
    ('SELECT SUM("order") FROM t', [(20.0,)], [(40.0,)]),
    (
        'SELECT "end", COUNT(*) FROM t GROUP BY "end" ORDER BY "end"',
        [("a", 3), ("b", 3)],
        [("a", 2), ("b", 2)],
    ),
    ('SELECT SUM("current_date") FROM t WHERE "order" > 0', [(4.0,)], [(4.0,)]),
    # a text comparison is written (c) COLLATE "C" on PostgreSQL: the collation's name is not
    # the column's, and must not be rewritten to its spelling ("c": no such collation)
    ("SELECT COUNT(*) FROM t WHERE c < 'm'", [(4,)], [(2,)]),
]


def _duckdb(tmp: Path, rows: Sequence[tuple[object, ...]], name: str) -> Engine:
    path = tmp / f"{name}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(DDL)
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    con.close()
    return Engine(parse_catalog(SCHEMA), DuckDBBackend(path), noise=NoNoise())


def _postgres(dsn: str, rows: Sequence[tuple[object, ...]], schema: str) -> Engine:
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
        con.execute(f"SET search_path = {schema}")
        con.execute(DDL)
        with con.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, %s)", rows)
    backend = PostgresBackend(make_conninfo(dsn, options=f"-c search_path={schema}"))
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())


@pytest.fixture(params=["duckdb", "postgres"])
def engines(
    request: pytest.FixtureRequest, tmp_path: Path, pg_dsn_if_postgres: str | None
) -> Iterator[tuple[Engine, Engine]]:
    if request.param == "duckdb":
        pair = (_duckdb(tmp_path, BASE + UNIT_3, "d"), _duckdb(tmp_path, BASE, "nb"))
    else:
        assert pg_dsn_if_postgres is not None
        pair = (
            _postgres(pg_dsn_if_postgres, BASE + UNIT_3, "d"),
            _postgres(pg_dsn_if_postgres, BASE, "nb"),
        )
    yield pair
    for e in pair:
        e.close()


@pytest.fixture
def pg_dsn_if_postgres(request: pytest.FixtureRequest) -> str | None:
    """``pg_dsn`` for the PostgreSQL case only (DuckDB runs without a server)."""
    if request.node.callspec.params.get("engines") != "postgres":
        return None
    dsn: str = request.getfixturevalue("pg_dsn")
    return dsn


@pytest.mark.parametrize(("sql", "answer", "neighbour_answer"), CASES)
def test_a_keyword_named_column_is_read_as_the_column(
    engines: tuple[Engine, Engine],
    sql: str,
    answer: list[tuple[object, ...]],
    neighbour_answer: list[tuple[object, ...]],
) -> None:
    """Before, on PostgreSQL: COUNT(*) 2 and 2, COUNT(DISTINCT "user") 1 and 1 (every row one
    unit, current_user), the SUM and GROUP BY queries XX000 on both (charged)."""
    engine, neighbour = engines
    assert list(engine.run(sql, analyst="a").released.rows) == answer
    assert list(neighbour.run(sql, analyst="a").released.rows) == neighbour_answer


def test_postgres_sql_quotes_every_catalog_name(pg_dsn: str) -> None:
    engine = _postgres(pg_dsn, BASE, "q")
    try:
        sql = engine.prepare('SELECT SUM("order") FROM t').sql
        assert sql is not None
        assert '"user" AS __unit' in sql and 'CAST("order" AS' in sql, sql
        assert 'FROM "q"."t"' in sql, sql
    finally:
        engine.close()
