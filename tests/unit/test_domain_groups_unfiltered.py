"""Public text and boolean GROUP BY keys without contribution bounding: the rewritten SQL has
no domain filter (rewrite/pipeline.py), the release reads exactly the domain's groups
(release/noise.py) and ignores every other group the database returns. A numeric key keeps
the filter. The released groups are the domain's whatever the data holds outside it."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.values import Cost
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**9), Fraction(1, 2))
SCHEMA = """
version: 1
dataset: unfiltered
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  t:
    privacy_unit: pid
    max_rows_per_unit: 1
    columns:
      pid: {type: integer}
      k: {type: text, domain: ["a", "b", "z"]}
      flag: {type: boolean, domain: [true]}
      n: {type: float, domain: [1, 2]}
      x: {type: integer, lower: 0, upper: 100}
"""


def _engine(tmp_path: Path, extra: int) -> Engine:
    """pid a PRIMARY KEY (nothing bounded); ``extra`` rows with keys outside every domain."""
    db = tmp_path / f"t{extra}.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE t (pid BIGINT PRIMARY KEY, k VARCHAR, flag BOOLEAN, n DOUBLE, x BIGINT)"
    )
    rows = [
        (1, "a", True, 1.0, 10),
        (2, "a", False, 2.0, 20),
        (3, "b", True, 1.0000000000000002, 30),
        (4, None, None, None, 40),
    ]
    rows += [(100 + i, f"out{i}", False, 3.0 + i, 1) for i in range(extra)]
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    con.close()
    return Engine(
        parse_catalog(SCHEMA), DuckDBBackend(db), accountant=MemoryAccountant(HUGE), noise=NoNoise()
    )


def _released(engine: Engine, sql: str) -> list[tuple[object, ...]]:
    return sorted(
        (tuple(r) for r in engine.run(sql, analyst="a").released.rows),
        key=lambda r: tuple((v is not None, str(v)) for v in r),
    )


def test_text_keys_have_no_filter_and_release_the_domain(tmp_path: Path) -> None:
    sql = "SELECT k, COUNT(*), SUM(x) FROM t GROUP BY k"
    few, many = _engine(tmp_path, 0), _engine(tmp_path, 500)
    text = few.prepare(sql).sql or ""
    assert "__domain" not in text and " IN (" not in text
    expected = [("a", 2, 30), ("b", 1, 30), ("z", 0, 0)]
    assert _released(few, sql) == expected
    # 500 more groups outside the domain change nothing released
    assert _released(many, sql) == expected


def test_boolean_and_case_keys_have_no_filter(tmp_path: Path) -> None:
    engine = _engine(tmp_path, 3)
    sql = "SELECT flag, COUNT(*) FROM t GROUP BY flag"
    assert "__domain" not in (engine.prepare(sql).sql or "")
    assert _released(engine, sql) == [(True, 2)]  # FALSE and NULL are outside the domain
    band = "SELECT CASE WHEN x < 25 THEN 'low' ELSE 'high' END AS b, COUNT(*) FROM t GROUP BY b"
    assert "__domain" not in (engine.prepare(band).sql or "")
    assert _released(engine, band) == [("high", 2), ("low", 5)]


def test_a_numeric_key_keeps_the_filter(tmp_path: Path) -> None:
    # 1.0000000000000002 is not the domain's 1 for the database, but would read as 1.0 if it
    # came back: the filter keeps it out in SQL.
    engine = _engine(tmp_path, 3)
    sql = "SELECT n, COUNT(*) FROM t GROUP BY n"
    text = engine.prepare(sql).sql or ""
    assert "__domain" in text
    assert _released(engine, sql) == [(1.0, 1), (2.0, 1)]
    mixed = "SELECT k, n, COUNT(*) FROM t GROUP BY k, n"
    assert "__domain" in (engine.prepare(mixed).sql or "")
