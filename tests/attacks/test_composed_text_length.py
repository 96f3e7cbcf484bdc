"""Named attack: the text of a query planned in parts outgrows the parser after the charge.

Around aggregate relations released first (``planning/relations.py``), the outer query is
written again with the released rows as VALUES lists and parsed again, after the parts were
charged; the parser refuses a text beyond 1,000,000 characters (54001). Four relations of
10,000 keys each (a key domain read from a public table) passed every check before the
charge, and their released text was over the limit: XX000, charged, nothing released. How long
that text is depends on which keys survive the noise and on the digits of the noisy values.
Now an upper bound of its length (every key kept, every value as wide as a float's text) is
checked before the budget is reserved (``ComposedPlan.longest``, ``composed.check_outer_binds``):
54001, nothing charged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
dataset: long
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
      k2: {type: integer}
      x: {type: float, lower: 0, upper: 100}
  q:
    private: false
    columns:
      k: {type: integer}
"""
KEYS = 10_000
PRIVATE = f"SELECT i AS uid, i % {KEYS} AS k2, CAST(i % 97 AS DOUBLE PRECISION) AS x"
R = "(SELECT k2, SUM(x) AS s{i}, COUNT(*) AS n{i}, AVG(x) AS a{i} FROM t GROUP BY k2) r{i}"
LONG = (
    "SELECT COUNT(*) FROM q, "
    + ", ".join(R.format(i=i) for i in range(4))
    + " WHERE "
    + " AND ".join(f"r{i}.k2 = q.k" for i in range(4))
)


def _duckdb(path: Path) -> Engine:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t AS {PRIVATE} FROM range({5 * KEYS}) r(i)")
    con.execute(f"CREATE TABLE q AS SELECT i AS k FROM range({KEYS}) r(i)")
    con.close()
    return Engine(parse_catalog(SCHEMA), DuckDBBackend(path), noise=NoNoise())


def _postgres(dsn: str) -> Engine:
    import psycopg
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("DROP SCHEMA IF EXISTS long CASCADE")
        con.execute("CREATE SCHEMA long")
        con.execute(f"CREATE TABLE long.t AS {PRIVATE} FROM generate_series(0, {5 * KEYS - 1}) i")
        con.execute(f"CREATE TABLE long.q AS SELECT i AS k FROM generate_series(0, {KEYS - 1}) i")
    backend = PostgresBackend(make_conninfo(dsn, options="-c search_path=long"))
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    if request.param == "duckdb":
        e = _duckdb(tmp_path_factory.mktemp("long") / "long.duckdb")
    else:
        e = _postgres(request.getfixturevalue("pg_session_dsn"))
    yield e
    e.close()


def test_a_released_text_beyond_the_parser_is_refused_uncharged(engine: Engine) -> None:
    before = engine.remaining("mallory")
    with pytest.raises(DPProxyError) as refused:
        engine.run(LONG, analyst="mallory")
    assert refused.value.sqlstate == "54001"
    assert engine.remaining("mallory") == before
