"""VAR and STDDEV are exact (noise off) whatever the bounds' centre, including centre 0.

The second moment is summed as Σ(x − c)²; with bounds symmetric around 0 the centre is 0 and
the rewrite must still square (a regression: it once summed x instead of x²).
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from tests.noise import NoNoise

HEADER = """\
version: 1
dataset: sym
privacy:
  neighbouring: add_remove
  epsilon: 1.0
  delta: 1e-5
  budget: {epsilon: 1000, delta: 1e-3}
tables:
  t:
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      id: {type: integer}
"""
X_COLUMN = "      x: {{type: integer, lower: {lo}, upper: {hi}}}\n"


@pytest.mark.parametrize(("lo", "hi"), [(-10, 10), (0, 20), (-30, 10), (5, 6)])
@pytest.mark.parametrize("agg", ["VAR_SAMP", "VAR_POP", "STDDEV_SAMP", "AVG"])
def test_moments_are_exact_without_noise(tmp_path: Path, lo: int, hi: int, agg: str) -> None:
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER)")
    # Values spread over the bounds, a few outside them (clamped in both answers below).
    con.execute(
        f"INSERT INTO t SELECT i, {lo} - 2 + (i * 7) % ({hi} - {lo} + 5) FROM range(500) r(i)"
    )
    clamped = f"LEAST(GREATEST(x, {lo}), {hi})"
    exact = con.execute(f"SELECT {agg}({clamped}) FROM t").fetchone()[0]
    con.close()
    catalog = parse_catalog(HEADER + X_COLUMN.format(lo=lo, hi=hi), source="sym.yaml")
    engine = Engine(catalog, DuckDBBackend(path), noise=NoNoise())
    try:
        (got,) = engine.run(f"SELECT {agg}(x) FROM t", analyst="a").released.rows[0]
    finally:
        engine.close()
    assert math.isclose(got, exact, rel_tol=1e-9, abs_tol=1e-9), (got, exact)


FLOAT_SCHEMA = HEADER + (
    "      x: {type: integer, lower: 0, upper: 100, nullable: true}\n"
    "      y: {type: float, lower: -2.5, upper: 7.25, nullable: true}\n"
)


@pytest.mark.parametrize("outside", [False, True])
@pytest.mark.parametrize("canonical", [False, True])
def test_moments_of_measures_written_centred_are_exact(
    tmp_path: Path, outside: bool, canonical: bool
) -> None:
    """A VAR's two sums read the measure once, written centred in the rows
    (``fixed.centred_measures`` for a DOUBLE, ``wholesum`` folds for a whole column): the
    released moments, noise off, are the clamped column's, NULLs skipped. With every value
    inside the bounds the SQL that runs leaves the clamps out (``backends/scanned.py``); the
    canonical SQL (EXPLAIN's) keeps them."""
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER, y DOUBLE)")
    spill = 20 if outside else 0  # values up to this far beyond the bounds
    con.execute(
        f"INSERT INTO t SELECT i, CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 37) % {101 + spill} "
        f"END, CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 7919) % 1000) / {103.0 - spill} - 2.5 "
        "END FROM range(400) r(i)"
    )
    moments = "VAR_POP(x), STDDEV_SAMP(x), VAR_SAMP(y), STDDEV_POP(y), AVG(y)"
    exact = con.execute(
        # (DuckDB's LEAST and GREATEST skip a NULL argument: a CASE keeps it NULL)
        f"SELECT {moments} FROM (SELECT CASE WHEN x < 0 THEN 0 WHEN x > 100 THEN 100 ELSE x "
        "END AS x, CASE WHEN y < -2.5 THEN -2.5 WHEN y > 7.25 THEN 7.25 ELSE y END AS y FROM t)"
    ).fetchone()
    con.close()
    assert exact is not None
    catalog = parse_catalog(FLOAT_SCHEMA, source="sym.yaml")
    engine = Engine(catalog, DuckDBBackend(path), noise=NoNoise())
    e = engine.canonical() if canonical else engine
    sql = f"SELECT {moments} FROM t"
    try:
        run = e.prepare(sql).sql
        assert run is not None and "__p0_m - " not in run  # the sums read the centred value
        assert ("CASE WHEN" in run) == (canonical or outside)
        (got,) = e.run(sql, analyst="a").released.rows
    finally:
        engine.close()
    for g, want in zip(got, exact, strict=True):
        assert math.isclose(g, want, rel_tol=1e-9, abs_tol=1e-9), (got, exact)
