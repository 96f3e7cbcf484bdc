"""Named attack: a PostgreSQL ``real`` (float4) column declared ``float``.

A schema ``float`` fits a PostgreSQL ``real`` column. The rewrite writes SQL for a double:
``rewrite/floats.py`` tames a float leaf under arithmetic as ``CASE WHEN ABS(x) < 1e-150 THEN
0.0 WHEN x > 1e150 AND ... THEN 1e150 ... ELSE x END``, and PostgreSQL types that CASE as
float4 (its numeric constants are unified with the float4 column), so ``1e150`` is cast to
float4 and fails, 22003, when the statement is planned: ``SELECT COUNT(*) FROM t WHERE
COALESCE(x, 1) * 10 > 0`` was XX000 after the charge on every database with such a column,
the empty one included. Now every statement reads such a column as ``CAST(x AS DOUBLE
PRECISION)`` in a derived table of the table's name (``sql/widenum.read_as_double``): exact
and total, so every answer is the answer over a ``double precision`` column holding the same
values. Real PostgreSQL, the noise off, a database and its neighbour without unit 3.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
import pytest

from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.noise import NoNoise

SCHEMA = """\
version: 1
dataset: realcolumn
privacy: {epsilon: 1, delta: 1.0e-6, budget: {epsilon: 1000000000, delta: 0.5}}
tables:
  t:
    privacy_unit: uid
    max_rows_per_unit: 3
    columns:
      uid: {type: integer}
      x: {type: float, nullable: true}
      g: {type: text, nullable: true}
"""
QUERIES = (
    "SELECT COUNT(*) FROM t WHERE COALESCE(x, 1) * 10 > 0",
    "SELECT COUNT(*) FROM t WHERE CASE WHEN g = 'a' THEN x ELSE 1 END * 10 > 0",
    "SELECT COUNT(*) FROM t WHERE x * x > 1e70",
    "SELECT COUNT(*) FROM t WHERE CAST(x AS REAL) * 2 > 0",
    "SELECT SUM(LEAST(GREATEST(COALESCE(x, 0) * 2, 0), 1)) FROM t",
    "SELECT COUNT(*) FROM t WHERE x > 3e38",
)
Row = tuple[int, str | None, str | None]
BASE: list[Row] = [(1, "1.5", "a"), (2, "2.5", "b"), (4, None, "a")]
UNIT_3: list[Row] = [(3, "3e38", "a"), (3, "1e-44", "b"), (3, "NaN", None)]


def answers(dsn: str, column_type: str, rows: Sequence[Row]) -> object:
    """Every query's released rows over ``t`` with ``x`` of ``column_type``, or the first
    error's SQLSTATE."""
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS t")
        con.execute(f"CREATE TABLE t (uid int NOT NULL, x {column_type}, g text)")
        for row in rows:
            con.execute("INSERT INTO t VALUES (%s, %s::real, %s)", row)
    backend = PostgresBackend(dsn)
    try:
        try:
            engine = Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
            return [list(engine.run(q, analyst="a").released.rows) for q in QUERIES]
        except DPProxyError as e:
            return e.sqlstate
    finally:
        backend.close()


@pytest.mark.parametrize("rows", [BASE + UNIT_3, BASE, []], ids=["database", "neighbour", "empty"])
def test_a_real_column_is_read_as_a_double(pg_dsn: str, rows: list[Row]) -> None:
    """Before: XX000 (charged) on all three for the first two queries; the values are
    inserted as float4 in both columns, so the double column holds the same numbers."""
    got = answers(pg_dsn, "real", rows)
    assert isinstance(got, list), got
    assert got == answers(pg_dsn, "double precision", rows)


def test_the_sql_reads_the_column_widened(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("CREATE TABLE t (uid int NOT NULL, x real, g text)")
    backend = PostgresBackend(pg_dsn)
    try:
        engine = Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
        sql = engine.prepare(QUERIES[0]).sql
        assert sql is not None
        assert 'CAST("x" AS DOUBLE PRECISION) AS "x"' in sql, sql
        assert 'FROM "public"."t") AS "t"' in sql, sql
    finally:
        backend.close()
