"""DuckDB generated columns: computed at each reference to them, so neither a scan when the file
is opened (``Column.scanned``, ``backends/scanned.py``) nor the clamp itself holds them unless
the expression gives the same value at every read.

A VOLATILE expression (``random()``, ``current_query()``, a macro) gives another value at each
reference: the clamp ``CASE WHEN a > 100 THEN 100 ELSE a END`` compared one draw and returned
another (``a = CASE WHEN random() < 0.5 THEN 1000 ELSE 50 END`` over 1,000 rows, bounds
[0, 100]: SUM released 305,100, above the 100,000 any clamped sum can reach). Such a column of
a schema table is refused when the database is opened. An expression fixed within a query but
not across queries (``now()``, ``today()``: an age from a birth date) passed the scan at
opening and then lost its clamp once its values had moved: a generated column is never marked
``scanned`` (nor ``bigint``). Each case runs end to end with the noise off.
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import SchemaError
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: generated
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  w:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: integer, lower: 0, upper: 100}
      f: {type: float, lower: 0, upper: 100}
"""
UNITS = 10


def _database(path: Path, a: str, f: str) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(
            f"CREATE TABLE w (uid INT PRIMARY KEY, a INT GENERATED ALWAYS AS ({a}), "
            f"f DOUBLE GENERATED ALWAYS AS ({f}))"
        )
        con.execute(f"INSERT INTO w (uid) SELECT i FROM range({UNITS}) r(i)")


@pytest.mark.parametrize(
    "expression",
    [
        "CASE WHEN random() < 0.5 THEN 1000 ELSE 50 END",
        "CASE WHEN contains(current_query(), '__') THEN 1000 ELSE 50 END",
    ],
)
def test_a_generated_column_that_changes_at_each_read_is_refused(
    tmp_path: Path, expression: str
) -> None:
    path = tmp_path / "g.duckdb"
    _database(path, expression, "1.0")
    backend = DuckDBBackend(path)
    try:
        with pytest.raises(SchemaError, match='column "a" of table "w" is generated'):
            Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
    finally:
        backend.close()


def test_a_generated_column_of_the_clock_is_not_proved_by_a_scan(tmp_path: Path) -> None:
    """50 while the backend opens the file (the scan sees every value within [0, 100]), 1000
    from ``moment`` on: the sums are clamped to 100 a unit (they were 1000 a unit)."""
    path = tmp_path / "g.duckdb"
    moment = int(time.time()) + 3
    late = f"CASE WHEN epoch(now()) >= {moment} THEN 1000 ELSE 50 END"
    _database(path, late, f"CAST({late} AS DOUBLE)")
    e = Engine(parse_catalog(SCHEMA), DuckDBBackend(path), noise=NoNoise())
    try:
        if time.time() >= moment:
            pytest.skip("the database took too long to open")
        w = e.catalog.table("w")
        assert w is not None
        assert not any(c.scanned or c.bigint for c in w.columns)
        time.sleep(max(0.0, moment - time.time()) + 0.2)
        for q in ("SELECT SUM(a) FROM w", "SELECT SUM(f) FROM w"):
            (row,) = e.run(q, analyst="a").released.rows
            assert row[0] == 100 * UNITS, q
    finally:
        e.close()


def test_a_generated_column_of_the_stored_values_is_summed_as_usual(tmp_path: Path) -> None:
    path = tmp_path / "g.duckdb"
    _database(path, "CAST(uid * 30 AS INT)", "uid * 30.0")  # 0, 30, ..., 270: clamped to 100
    e = Engine(parse_catalog(SCHEMA), DuckDBBackend(path), noise=NoNoise())
    try:
        for q in ("SELECT SUM(a) FROM w", "SELECT SUM(f) FROM w"):
            (row,) = e.run(q, analyst="a").released.rows
            assert row[0] == 0 + 30 + 60 + 90 + 100 * 6, q
    finally:
        e.close()
