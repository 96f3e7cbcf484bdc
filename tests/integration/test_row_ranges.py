"""``rewrite/ranges.row_range`` is sound: every value a row measure takes, on DuckDB and on
PostgreSQL, lies in the interval it proves — the interval that lets a fixed-point SUM leave
out its two comparisons (``rewrite/fixed.summand``).

Random measures (arithmetic over a FLOAT and two INTEGER columns and literals, CASEs, ABS,
NULLIF, division) are built into row measures exactly as the rewrite builds them
(``rows._row_measure``: clamps, guards, tamings), then evaluated per row over values at,
inside and beyond the bounds, ±0, subnormals, near the double range, NaN, ±inf and NULL
(each combination of the special values, and random rows); each non-NULL value must lie
within [L, H], and most of the corpus must be proved, not skipped. For a few measures the
range is exactly the arithmetic of the bounds (not merely some wider interval), and a
column bounded on one side, a divisor that may be 0 or a function gets none. Through the
engine, fewer SUMs keep their comparisons, and the exact sums equal those with every
comparison kept.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import duckdb
import psycopg
import pytest
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.ranges import row_range
from dpproxy.rewrite.rows import _row_measure
from dpproxy.sql.types import SqlType

TABLE = Table(
    "t",
    True,
    (
        Column("x", ColumnType.FLOAT, Fraction(-5, 2), Fraction(29, 4)),
        Column("i", ColumnType.INTEGER, Fraction(-10), Fraction(10)),
        Column("j", ColumnType.INTEGER, Fraction(0), Fraction(1000)),
        Column("y", ColumnType.FLOAT, Fraction(0), None),  # bounded below only
    ),
)
TYPES = {"x": SqlType.NUMERIC, "i": SqlType.NUMERIC, "j": SqlType.NUMERIC, "y": SqlType.NUMERIC}
LITERALS = ("2", "0.5", "100", "0.1", "3", "1e-3", "7.25", "1e12")
FLOATS = (
    None, 0.0, -0.0, 5e-324, -5e-324, 1e-200, 1.0, -2.5, 7.25, 7.26, -3.0, 1e300, -1e300,
    math.nan, math.inf, -math.inf,
)  # fmt: skip
INTS = (None, -11, -10, 0, 3, 10, 11, 1000, 1001, -(2**31))


def _measure(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(
            ["x", "i", "j", "x", *LITERALS[:3]] + (["y"] if rng.random() < 0.1 else [])
        )
    kind = rng.choice(["+", "-", "*", "/", "case", "abs", "neg", "nullif", "+", "*"])
    a, b = _measure(rng, depth - 1), _measure(rng, depth - 1)
    if kind == "case":
        return (
            f"CASE WHEN {a} > {rng.choice(LITERALS)} THEN {b} ELSE {_measure(rng, depth - 1)} END"
        )
    if kind == "abs":
        return f"ABS({a})"
    if kind == "neg":
        return f"-({a})"
    if kind == "nullif":
        return f"({a}) / NULLIF({b}, 0)"
    if kind == "/":
        return f"({a}) / {rng.choice(LITERALS)}"
    return f"({a}) {kind} ({b})"


def _measures() -> list[str]:
    rng = random.Random(20261128)
    out: list[str] = []
    while len(out) < 120:
        m = _measure(rng, 3)
        if any(c in m for c in "xij"):
            out.append(m)
    return out


MEASURES = _measures()


def _rows() -> list[tuple[object, ...]]:
    rng = random.Random(7)
    rows = [(x, i, j, y) for x in FLOATS for i in INTS[:5] for j in (0, 1000, None) for y in (1.0,)]
    rows += [
        (rng.choice(FLOATS), rng.choice(INTS), rng.choice(INTS), rng.choice(FLOATS))
        for _ in range(400)
    ]
    rows += [
        (rng.uniform(-2.5, 7.25), rng.randint(-10, 10), rng.randint(0, 1000), rng.random())
        for _ in range(400)
    ]
    return rows


ROWS = _rows()


def _built(measure: str) -> exp.Expression | None:
    from dpproxy.errors import DPProxyError

    try:
        return _row_measure(exp.maybe_parse(measure, dialect="postgres"), TABLE, TYPES)
    except DPProxyError:  # refused (an arithmetic that could overflow): nothing to prove
        return None


def _check(values: list[object], proved: tuple[float, float], measure: str) -> None:
    lo, hi = proved
    seen = [v for v in values if v is not None]
    for v in seen:
        assert isinstance(v, float | int), (measure, v)
        assert not math.isnan(v), (measure, "NaN reached a measure with a proved range")
        assert lo <= v <= hi, (measure, v, proved)


@pytest.fixture(scope="module")
def duck() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x DOUBLE, i BIGINT, j BIGINT, y DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", ROWS)
    return con


def _proved() -> list[tuple[str, exp.Expression, tuple[float, float]]]:
    """The corpus's measures built as the rewrite builds them, with the range proved for
    each that has one (most of them: at least 40, not a corpus of skips)."""
    out = []
    for measure in MEASURES:
        tree = _built(measure)
        proved = None if tree is None else row_range(tree, TABLE)
        if tree is not None and proved is not None:
            out.append((measure, tree, proved))
    assert len(out) >= 40, len(out)
    return out


def test_the_proved_range_holds_every_row_on_duckdb(duck: duckdb.DuckDBPyConnection) -> None:
    for measure, tree, proved in _proved():
        values = [r[0] for r in duck.execute(f"SELECT {tree.sql('duckdb')} FROM t").fetchall()]
        _check(values, proved, measure)


def test_the_proved_range_holds_every_row_on_postgresql(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("CREATE TABLE t (x double precision, i bigint, j bigint, y double precision)")
        with con.cursor().copy("COPY t FROM STDIN") as copy:
            for row in ROWS:
                copy.write_row(row)
        for measure, tree, proved in _proved():
            select = to_postgres(exp.select(tree.copy()).from_("t"), TYPES)
            values = [r[0] for r in con.execute(select.sql("postgres")).fetchall()]
            _check([float(v) if v is not None else None for v in values], proved, measure)


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("x * 0.5", (-1.25, 3.625)),
        ("x / 100 + i", (-10.025, 10.0725)),
        ("j - i * 2", (-20.0, 1020.0)),
        ("ABS(x) + 1", (1.0, 8.25)),
        ("CASE WHEN i > 0 THEN x ELSE j END", (-2.5, 1000.0)),
    ],
)
def test_the_range_is_the_arithmetic_of_the_bounds(
    measure: str, expected: tuple[float, float]
) -> None:
    tree = _built(measure)
    assert tree is not None
    assert row_range(tree, TABLE) == expected


@pytest.mark.parametrize(
    "measure",
    ["y * 2", "x / NULLIF(i, 0)", "SQRT(j)", "x % 3", "i / j", "y - x"],
)
def test_no_range_where_none_is_proved(measure: str) -> None:
    """A column bounded on one side, a divisor that may be 0 (or near it), a function."""
    tree = _built(measure)
    assert tree is None or row_range(tree, TABLE) is None


WHOLE_SCHEMA = """
version: 1
dataset: ranges
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  t:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      x: {type: float, nullable: true, lower: -2.5, upper: 7.25}
      i: {type: integer, nullable: true, lower: -10, upper: 10}
      j: {type: integer, nullable: true, lower: 0, upper: 1000}
      y: {type: float, nullable: true}
"""
END_TO_END = (
    "SELECT SUM(x * 0.5), AVG(x / 100 + i), VARIANCE(j - i * 2) FROM t",
    "SELECT SUM(ABS(x) + j), AVG(CASE WHEN i > 0 THEN x ELSE j END) FROM t",
)


@pytest.mark.parametrize("sql", END_TO_END)
def test_leaving_out_the_comparisons_gives_the_same_exact_sums(
    sql: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the engine, noise off, on a DuckDB file holding every awkward row: the SQL
    leaves out fixed-point SUMs' comparisons (fewer ``CASE WHEN __p…``) and its exact
    aggregates equal those of the SQL that keeps them all (``row_range`` disabled)."""
    from pathlib import Path

    from dpproxy.accounting.memory import MemoryAccountant
    from dpproxy.backends.duckdb import DuckDBBackend
    from dpproxy.catalog.load import parse_catalog
    from dpproxy.engine import Engine
    from dpproxy.rewrite import pipeline
    from dpproxy.values import Cost
    from tests.noise import NoNoise

    path = Path(str(tmp_path)) / "ranges.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE t (uid BIGINT PRIMARY KEY, x DOUBLE, i BIGINT, j BIGINT, y DOUBLE)"
        )
        con.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?)", [(u, *r) for u, r in enumerate(ROWS)]
        )
    catalog = parse_catalog(WHOLE_SCHEMA)

    def exact(engine: Engine) -> tuple[str, list[tuple[object, ...]]]:
        prepared = engine.prepare(sql)
        return prepared.sql, list(engine.backend.execute(prepared.sql).rows)

    huge = Cost(Fraction(10**9), Fraction(1, 2))

    def engine() -> Engine:  # a new one each time: an engine keeps a statement's SQL
        return Engine(
            catalog, DuckDBBackend(path), accountant=MemoryAccountant(huge), noise=NoNoise()
        )

    first = engine()
    try:
        short_sql, short_rows = exact(first)
    finally:
        first.close()
    monkeypatch.setattr(pipeline, "row_range", lambda tree, table: None)
    second = engine()
    try:
        long_sql, long_rows = exact(second)
    finally:
        second.close()
    # fewer SUMs clamp their terms (an AVG whose inexact centre may round its terms past the
    # grid's ends keeps its comparisons: the range is not enough there)
    assert short_sql.count("CASE WHEN __p") < long_sql.count("CASE WHEN __p")
    assert short_rows == long_rows
