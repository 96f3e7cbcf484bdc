"""Statements run without DuckDB's optimizer (``dpproxy/backends/light.py``).

* :func:`~dpproxy.backends.light.plain` takes exactly the statements that read small stored
  tables with no join, no ``EXISTS`` and no subquery but in FROM, WITH, UNION ALL or IN;
* the backend runs a repeated such statement on its unoptimised cursor, and only over tables
  of at most ``LIGHT_ROWS`` rows;
* differential: every statement dpproxy prepares for the totality families and for generated
  cases gives the same rows on the optimised and on the unoptimised cursor.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings

from dpproxy.backends import duckdb as duckdb_backend
from dpproxy.backends import light
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.property import test_totality_families as families
from tests.totality import Case, DuckDBWorld, NoNoise, cases, catalog, write_duckdb

SMALL = {"t", "u"}
SCHEMA = """
version: 1
dataset: light
privacy: {epsilon: 1.0, delta: 1.0e-6}
tables:
  t:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: integer, lower: 0, upper: 10}
"""


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS __p0 FROM t WHERE a > 1",
        "SELECT k, SUM(CAST(a * 4 AS BIGINT)) FROM (SELECT a, k FROM t) AS __rows GROUP BY k",
        "WITH __rows AS (SELECT uid AS __unit FROM t), __per_unit AS (SELECT __unit, COUNT(*) "
        "AS __n FROM __rows GROUP BY __unit) SELECT SUM(LEAST(__n, 3)) FROM __per_unit",
        "SELECT COUNT(*) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY uid ORDER BY h) AS rn "
        "FROM (SELECT *, HASH(uid) AS h FROM t) AS x) AS y WHERE rn <= 2",
        # contribution bounding (rewrite/bound.py): IN (SELECT …) and UNION ALL of CTEs
        "WITH __rows AS (SELECT uid AS __unit, a FROM t), __light AS (SELECT __unit FROM __rows "
        "GROUP BY __unit HAVING COUNT(*) <= 5), __bounded AS (SELECT __unit, a FROM __rows WHERE "
        "__unit IN (SELECT __unit FROM __light) UNION ALL SELECT __unit, a FROM __rows WHERE NOT "
        "__unit IN (SELECT __unit FROM __light)) SELECT SUM(a) FROM __bounded",
    ],
)
def test_small_tables_without_join_or_exists_are_plain(sql: str) -> None:
    assert light.plain(sql, SMALL)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM t, u WHERE t.uid = u.uid",  # how sql/joins.py prints a join
        "SELECT COUNT(*) FROM t JOIN u ON t.uid = u.uid",
        "SELECT COUNT(*) FROM t CROSS JOIN (SELECT COUNT(*) AS n FROM t) AS __n",
        "SELECT COUNT(*) FROM t WHERE EXISTS (SELECT 1 FROM t AS s WHERE s.uid = t.uid)",
        "SELECT COUNT(*) FROM t WHERE a > (SELECT MIN(a) FROM t)",
        "SELECT (SELECT COUNT(*) FROM t) AS n",
        "SELECT COUNT(*) FROM big",  # not a small table
        "SELECT COUNT(*) FROM other.t",  # another schema's table
        "SELECT COUNT(*) FROM t UNION SELECT COUNT(*) FROM u",  # UNION ALL only
        "SELECT COUNT(*) FROM t WHERE uid IN (SELECT uid FROM big)",
        "SELECT COUNT(*) FROM read_csv('x.csv')",
        "SELECT COUNT(*) FROM",  # not parsed
    ],
)
def test_anything_else_keeps_the_optimizer(sql: str) -> None:
    assert not light.plain(sql, SMALL)
    assert not light.plain("SELECT COUNT(*) FROM t", set())


def _optimizer_on(cur: Any) -> bool:
    plan = "\n".join(str(r[1]) for r in cur.execute("EXPLAIN SELECT 1 + 1").fetchall())
    return "1 + 1" not in plan  # the optimizer folds the constant


def _file(tmp: Path, rows: int) -> Path:
    path = tmp / f"t{rows}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t AS SELECT range AS uid, range % 7 AS a FROM range({rows})")
    con.close()
    return path


@pytest.mark.parametrize(
    ("rows", "plain"), [(1000, True), (light.LIGHT_ROWS, True), (light.LIGHT_ROWS + 1, False)]
)
def test_a_repeated_statement_runs_unoptimised_on_a_small_table_only(
    tmp_path: Path, rows: int, plain: bool
) -> None:
    backend = DuckDBBackend(_file(tmp_path, rows))
    backend.attach_catalog(parse_catalog(SCHEMA, source="light"))
    sql = "SELECT COUNT(*) AS __p0 FROM t WHERE a > 1"
    try:
        first = backend.execute(sql)  # a text run once is planned as before
        assert backend._statements.get(sql) is None
        assert backend.execute(sql) == first
        assert backend._statements[sql][1] is plain
        assert _optimizer_on(backend._cursor(True)) is False
        assert _optimizer_on(backend._cursor(False)) is True
    finally:
        backend.close()


def _same_rows(backend: DuckDBBackend, statements: tuple[str, ...]) -> None:
    for sql in statements:
        rows = []
        for cur in (backend._cursor(False), backend._cursor(True)):
            rows.append(sorted(cur.execute(sql).fetchall(), key=repr))
        assert repr(rows[0]) == repr(rows[1]), sql  # repr: a NaN (CORR of one row) equals itself


def _differential(engine: Engine, queries: list[str] | tuple[str, ...]) -> int:
    compared = 0
    backend = engine.backend
    assert isinstance(backend, DuckDBBackend)
    for sql in queries:
        try:
            prepared = engine.prepare(sql, secret=7)
        except DPProxyError:
            continue  # refused before the data: nothing runs
        statements = prepared.statements
        try:
            for s in statements:
                backend._cursor(False).execute(s).fetchall()
        except duckdb.Error:
            continue  # the totality tests judge a failing statement; here only equal rows
        _same_rows(backend, statements)
        compared += 1
    return compared


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBWorld]:
    w = DuckDBWorld(tmp_path_factory.mktemp("light"))
    yield w
    w.close()


def test_the_families_give_the_same_rows_without_the_optimizer(world: DuckDBWorld) -> None:
    engine, _ = world.engines("rows", False, families.FAMILY_ROWS, families.NEIGHBOUR_ROWS)
    queries = [p.values[1] for p in families.ALL]
    assert _differential(engine, queries) > len(queries) // 3


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_generated_queries_give_the_same_rows_without_the_optimizer(case: Case) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.duckdb"
        writer = duckdb.connect(":memory:")
        write_duckdb(writer, path, case.rows)
        writer.close()
        engine = Engine(catalog(case.bound), DuckDBBackend(path), noise=NoNoise())
        try:
            _differential(engine, case.queries)
        finally:
            engine.close()


def test_the_module_switch_for_the_totality_tests_exists() -> None:
    assert duckdb_backend.KEEP_AT_FIRST is False  # production: decided at the second run
