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

SCHEMA = """\
version: 1
dataset: sym
privacy:
  neighbouring: add_remove
  epsilon: 1.0
  delta: 1e-5
  budget: {{epsilon: 1000, delta: 1e-3}}
tables:
  t:
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      id: {{type: integer}}
      x: {{type: integer, lower: {lo}, upper: {hi}}}
"""


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
    catalog = parse_catalog(SCHEMA.format(lo=lo, hi=hi), source="sym.yaml")
    engine = Engine(catalog, DuckDBBackend(path), noise=NoNoise())
    try:
        (got,) = engine.run(f"SELECT {agg}(x) FROM t", analyst="a").released.rows[0]
    finally:
        engine.close()
    assert math.isclose(got, exact, rel_tol=1e-9, abs_tol=1e-9), (got, exact)
