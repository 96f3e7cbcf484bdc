"""The raw sum plus a correction (``rewrite/unclamp.py``) equals the clamped sum exactly.

Random DuckDB tables (seeded) whose bounded ``integer`` column x holds values inside its
bounds, on them, outside them up to the storage type's extremes, and NULL; for each query
the SQL dpproxy writes with the correction and the SQL it wrote before (the clamp's CASE,
:func:`unclamp` switched off) give the same rows, exactly, and neither raises. The
correction is taken where it should be (teeth) and nowhere else: not for a type BIGINT does
not hold, not below ``MIN_ROWS``, not on PostgreSQL or Spark. With the
data inside the bounds DuckDB plans the correction as an empty result (file and in-memory
tables); with one value outside, it reads only that value's row group.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import duckdb
import pytest

import dpproxy.rewrite.pipeline as pipeline
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.planning.planner import plan_query
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate

SECRET = 0x5EED
LO, HI = -7, 120  # AVG's centre 56.5: the term is 2x - 113

SCHEMA = """\
version: 1
dataset: unclamp
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  t:
    private: true
    privacy_unit: pid
    public_rows: PUBLIC_ROWS
    columns:
      pid: {type: integer}
      x: {type: integer, nullable: true, lower: -7, upper: 120}
      y: {type: integer, nullable: true, lower: 0, upper: 10}
      g: {type: text, nullable: true, domain: ["a", "b"]}
"""

TYPES = {  # DuckDB type → (its extremes, does the correction apply?)
    "BIGINT": ((-(2**63), 2**63 - 1), True),
    "INTEGER": ((-(2**31), 2**31 - 1), True),
    "SMALLINT": ((-(2**15), 2**15 - 1), True),
    "TINYINT": ((-(2**7), 2**7 - 1), True),
    "UTINYINT": ((0, 255), True),
    "USMALLINT": ((0, 2**16 - 1), True),
    "UINTEGER": ((0, 2**32 - 1), True),
    # (HUGEINT, once here as a type the correction leaves alone, does not fit the schema's
    # integer: the engine is refused, 42804, tests/attacks/test_direct_engine_fit.py)
    "UBIGINT": ((0, 2**64 - 1), False),
    "DECIMAL(18,0)": ((-(10**18) + 1, 10**18 - 1), False),
}

# (query, is the correction written for it when x's type allows?)
QUERIES = [
    ("SELECT SUM(x) FROM t", True),
    ("SELECT AVG(x) FROM t", True),
    ("SELECT AVG(x), COUNT(x), COUNT(*) FROM t", True),
    ("SELECT SUM(x), AVG(y) FROM t", True),
    ("SELECT AVG(x) FROM t WHERE y > 3", True),
    ("SELECT SUM(x) FROM t WHERE g = 'a' AND y IS NOT NULL", True),
    ("SELECT SUM(x), AVG(x) FROM t", False),  # two SUMs of x: the CASE stays
    ("SELECT g, SUM(x) FROM t GROUP BY g", False),  # grouped: the CASE stays
    ("SELECT VAR_SAMP(x) FROM t", False),  # squares
    ("SELECT COUNT(DISTINCT x), SUM(x) FROM t", False),
]
CORRECTION = "SELECT SUM(CASE WHEN x < -7 THEN -7 WHEN x > 120 THEN 120 ELSE x END) - SUM(x)"


def _value(rng: random.Random, low: int, high: int, inside: bool) -> int | None:
    pick = rng.random()
    if pick < 0.1:
        return None
    if inside or pick < 0.6:
        return rng.randint(max(LO, low), min(HI, high))
    choices = [low, high, LO - 1, HI + 1, LO, HI, rng.randint(low, high)]
    return min(max(rng.choice(choices), low), high)


def _database(path: Path, sql_type: str, seed: int, *, inside: bool = False) -> None:
    (low, high), _ = TYPES[sql_type]
    rng = random.Random(seed)
    rows = [
        (
            i,
            _value(rng, low, high, inside),
            rng.choice([None, *range(11)]),
            rng.choice([None, "a", "b", "c"]),
        )
        for i in range(rng.randint(1, 400))
    ]
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE t(pid BIGINT PRIMARY KEY, x {sql_type}, y INTEGER, g TEXT)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)


def _engine(path: Path, public_rows: int = 1_000_000) -> Engine:
    """The canonical engine (``Engine.canonical``): planned without what the rows prove
    (``backends/scanned.py`` would leave out the clamp, and with it the correction, on a
    file whose rows all lie within the bounds), so these tests see the correction itself."""
    schema = SCHEMA.replace("PUBLIC_ROWS", str(public_rows))
    return Engine(parse_catalog(schema), DuckDBBackend(path)).canonical()


def _both(e: Engine, sql: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(the SQL with the correction, the SQL without it) of ``sql`` on ``e``'s catalog."""
    plan = plan_query(validate(parse(sql), e.catalog, sql), e.catalog.policy)
    fast = pipeline.rewrite(plan, SECRET, "duckdb")
    with monkeypatch.context() as m:
        m.setattr(pipeline, "unclamp", lambda tree, table: tree)
        slow = pipeline.rewrite(plan, SECRET, "duckdb")
    return fast, slow


def _types(e: Engine, sql: str) -> list[str]:
    """The DuckDB types of ``sql``'s result columns."""
    return [str(r[1]) for r in e.backend.execute(f"DESCRIBE {sql}").rows]


@pytest.mark.parametrize("sql_type", list(TYPES))
@pytest.mark.parametrize("seed", range(5))
def test_the_correction_gives_the_clamped_sums_exactly(
    tmp_path: Path, sql_type: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "u.duckdb"
    _database(path, sql_type, seed)
    e = _engine(path)
    applies = TYPES[sql_type][1]
    try:
        for query, taken in QUERIES:
            fast, slow = _both(e, query, monkeypatch)
            assert (CORRECTION in fast) is (applies and taken), (query, fast)
            assert CORRECTION not in slow
            if applies and taken:  # x itself is summed, no CAST(x AS BIGINT) per row
                assert re.search(r"\bx AS __p\d+_m\b", fast), fast
                assert "CAST(x AS BIGINT)" not in fast, fast
            a, b = e.backend.execute(fast), e.backend.execute(slow)
            assert a.columns == b.columns
            assert sorted(a.rows, key=repr) == sorted(b.rows, key=repr), (query, fast)
            assert _types(e, fast) == _types(e, slow), query
    finally:
        e.close()


def test_not_below_min_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpproxy.rewrite.unclamp import MIN_ROWS

    path = tmp_path / "small.duckdb"
    _database(path, "BIGINT", 1)
    e = _engine(path, public_rows=MIN_ROWS - 1)
    try:
        fast, slow = _both(e, "SELECT AVG(x) FROM t", monkeypatch)
        assert fast == slow and "CASE WHEN x < -7" in fast
    finally:
        e.close()


def test_postgres_keeps_the_clamp(tmp_path: Path) -> None:
    rewrite = pipeline.rewrite
    path = tmp_path / "pg.duckdb"
    _database(path, "BIGINT", 2)
    e = _engine(path)
    try:
        sql = "SELECT AVG(x) FROM t"
        plan = plan_query(validate(parse(sql), e.catalog, sql), e.catalog.policy)
        assert CORRECTION in rewrite(plan, SECRET, "duckdb")
        for dialect in ("postgres", "spark"):
            text = rewrite(plan, SECRET, dialect)
            assert "SUM(x)" not in text.replace(" ", "") and "x < -7" in text, dialect
    finally:
        e.close()


def _corrected_sql(path: Path, seed: int, query: str) -> str:
    """The SQL dpproxy writes for ``query`` over a BIGINT table of in-bounds data at ``path``,
    which holds the correction."""
    _database(path, "BIGINT", seed, inside=True)
    e = _engine(path)
    try:
        fast = e.prepare(query, secret=SECRET).sql
    finally:
        e.close()
    assert fast is not None and CORRECTION in fast
    return fast


def test_in_bounds_data_plan_the_correction_as_empty(tmp_path: Path) -> None:
    """DuckDB's statistics prove the correction's filter false: no row group is read."""
    path = tmp_path / "in.duckdb"
    fast = _corrected_sql(path, 3, "SELECT AVG(x) FROM t")
    with duckdb.connect(str(path), read_only=True) as con:
        plan = con.execute("EXPLAIN " + fast).fetchall()[0][1]
    assert "EMPTY_RESULT" in plan.upper().replace(" ", "_"), plan


def test_an_in_memory_table_reads_only_the_row_group_out_of_bounds(tmp_path: Path) -> None:
    fast = _corrected_sql(tmp_path / "in.duckdb", 4, "SELECT SUM(x) FROM t")
    correction = fast[fast.index(CORRECTION) :].split("), 0))")[0]
    con = duckdb.connect()
    con.execute("CREATE TABLE t(pid BIGINT PRIMARY KEY, x BIGINT, y INTEGER, g TEXT)")
    con.execute("INSERT INTO t SELECT i, i % 100, 1, 'a' FROM range(1000000) r(i)")
    plan = con.execute("EXPLAIN " + correction).fetchall()[0][1]
    assert "EMPTY_RESULT" in plan.upper().replace(" ", "_"), plan
    con.execute("UPDATE t SET x = 500 WHERE pid = 999999")
    con.execute("PRAGMA enable_profiling = 'no_output'")
    profile = con.execute("EXPLAIN ANALYZE " + correction).fetchall()[0][1]
    assert "Row Groups Scanned: 1 / 9" in profile, profile
    assert con.execute(correction).fetchall() == [(120 - 500,)]


def test_a_view_keeps_the_clamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A view (here over a CSV file, as ``dpproxy query --database data.csv`` makes) has no
    zone maps: the correction would read the file again, so only stored tables get it."""
    csv = tmp_path / "t.csv"
    csv.write_text("pid,x,y,g\n1,5,2,a\n2,500,3,b\n", encoding="utf-8")
    path = tmp_path / "view.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE VIEW t AS SELECT CAST(pid AS BIGINT) AS pid, CAST(x AS BIGINT) AS x, "
            f"CAST(y AS INTEGER) AS y, CAST(g AS TEXT) AS g FROM read_csv('{csv}')"
        )
    e = _engine(path)
    try:
        assert not any(c.bigint for c in e.catalog.table("t").columns)
        fast, slow = _both(e, "SELECT AVG(x) FROM t", monkeypatch)
        assert fast == slow and CORRECTION not in fast
        assert e.backend.execute(fast).rows == e.backend.execute(slow).rows
    finally:
        e.close()
