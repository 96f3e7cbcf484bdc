"""``CAST(... AS REAL)`` gives the same rows on DuckDB and PostgreSQL, noise off, and never an
error (``dpproxy/rewrite/real.py``; docs/postgres.md, "One semantics on both engines").

dpproxy used to send ``TRY_CAST(x AS REAL)`` to DuckDB (NULL beyond 3.4e38, 0 for a value
that rounds to zero, float32 rounding within) and ``CAST(x AS DOUBLE PRECISION)`` to
PostgreSQL (no rounding at all): ``CAST(fu AS REAL) > 0`` over 1e308 and 5e-324 counted 0 on
DuckDB and 2 on PostgreSQL. Now both engines round to float32 by one tree: a finite value
beyond the largest REAL is NULL, a magnitude of at most 2⁻¹⁵⁰ is 0, NaN and ±inf stay.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.engine import Engine, open_engine
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.floats import finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.sql.types import SqlType
from tests.noise import NoNoise

REAL_MAX = float.fromhex("0x1.fffffep+127")  # 3.4028234663852886e38
TINY = 2.0**-150  # the largest magnitude a REAL rounds to zero

FLOATS: list[float | None] = [
    1e308,
    -1e308,
    5e-324,
    -5e-324,
    3.5e38,
    -3.5e38,
    1e-46,
    -1e-46,
    TINY,
    math.nextafter(TINY, 1.0),  # the least positive REAL, 2^-149
    1e-45,
    1e-40,  # a subnormal REAL
    REAL_MAX,
    math.nextafter(REAL_MAX, math.inf),  # beyond the largest REAL: NULL
    -REAL_MAX,
    float.fromhex("0x1.ffffffp+127"),  # what rounds to inf as a float32
    16777217.0,  # 2^24 + 1: a float32 rounds it to 16777216
    16777219.0,  # rounds up, to 16777220 (ties to even)
    0.1,
    -2.5,
    0.0,
    -0.0,
    1.0,
    math.nan,
    math.inf,
    -math.inf,
    None,
]
# 2^60 + 2^36 + 1 rounds to a double halfway between two REALs, then to the even one, 2^60;
# PostgreSQL's own cast rounds it once, up to 2^60 + 2^37 (docs/postgres.md's known difference)
TWICE_ROUNDED = 2**60 + 2**36 + 1
INTEGERS: list[int | None] = [16777217, 2**63 - 1, -(2**63), 2**53 + 1, TWICE_ROUNDED, 0, -7, None]
TEXTS: list[str | None] = [
    "1e39",
    "-3.5e38",
    "16777217",
    "1e-46",
    "5e-324",
    "0.1",
    " 2.5 ",
    "nan",
    "-inf",
    "Infinity",
    "1e308",
    "abc",
    "",
    None,
]

SCHEMA = """\
version: 1
dataset: realcast
privacy:
  epsilon: 1.0
  delta: 1.0e-6
  budget: {epsilon: 1000000000, delta: 0.5}
tables:
  realcast:
    private: true
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      fu: {type: float, nullable: true}
      iu: {type: integer, nullable: true}
      s: {type: text, nullable: true}
      fb: {type: float, lower: 0, upper: 0.1, nullable: true}
"""

REALCAST = Table(
    "realcast",
    True,
    (
        Column("uid", ColumnType.INTEGER),
        Column("fu", ColumnType.FLOAT),
        Column("iu", ColumnType.INTEGER),
        Column("s", ColumnType.TEXT),
    ),
    privacy_unit="uid",
)
TYPES = {"uid": SqlType.NUMERIC, "fu": SqlType.NUMERIC, "iu": SqlType.NUMERIC, "s": SqlType.TEXT}


def _rows() -> list[tuple[Any, ...]]:
    n = max(len(FLOATS), len(INTEGERS), len(TEXTS))

    def at(values: list[Any], i: int) -> Any:
        return values[i] if i < len(values) else None

    fb = [0.1, 0.05, 0.0, 0.03]
    return [(i, at(FLOATS, i), at(INTEGERS, i), at(TEXTS, i), at(fb, i)) for i in range(n)]


@pytest.fixture(scope="module")
def world(pg_session_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """(DuckDB connection, PostgreSQL connection, DuckDB engine, PostgreSQL engine) over the
    same table ``realcast`` on both engines, the engines noiseless."""
    tmp = tmp_path_factory.mktemp("realcast")
    path, schema = tmp / "realcast.duckdb", tmp / "realcast.yaml"
    schema.write_text(SCHEMA)
    rows = _rows()
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE realcast (uid INTEGER, fu DOUBLE, iu BIGINT, s VARCHAR, fb DOUBLE)")
    con.executemany("INSERT INTO realcast VALUES (?, ?, ?, ?, ?)", rows)
    con.close()
    with psycopg.connect(pg_session_dsn, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS realcast")
        pg.execute(
            "CREATE TABLE realcast (uid integer, fu double precision, iu bigint, s text, "
            "fb double precision)"
        )
        with pg.cursor().copy("COPY realcast FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    info = psycopg.conninfo.conninfo_to_dict(pg_session_dsn)  # dpproxy takes URLs
    user, host = info.get("user", "postgres"), info.get("host", "127.0.0.1")
    url = f"postgresql://{user}@{host}:{info.get('port') or 5432}/{info['dbname']}"
    duck_engine = open_engine(str(path), str(schema), noise=NoNoise())
    pg_engine = open_engine(url, str(schema), noise=NoNoise())
    duck = duckdb.connect(str(path), read_only=True)
    pg = psycopg.connect(pg_session_dsn, autocommit=True)
    yield duck, pg, duck_engine, pg_engine
    duck.close()
    pg.close()
    duck_engine.close()
    pg_engine.close()


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b) and type(a) is type(b)


def real(x: float | None) -> float | None:
    """The semantics docs/postgres.md states, in Python: float32 rounding (ties to even); a
    finite value beyond the largest REAL is NULL; a magnitude of at most 2⁻¹⁵⁰ is 0.0."""
    if x is None or math.isnan(x) or math.isinf(x):
        return x
    if abs(x) > REAL_MAX:
        return None
    if abs(x) <= TINY:
        return 0.0
    rounded: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return rounded


def _both(world: Any, expr: exp.Expression) -> tuple[list[Any], list[Any]]:
    duck, pg, *_ = world
    select = exp.select(exp.column("uid"), exp.alias_(expr, "v")).from_("realcast")
    select = select.order_by("uid")
    d = duck.execute(select.sql(dialect="duckdb")).fetchall()
    p = pg.execute(to_postgres(select.copy(), TYPES).sql(dialect="postgres")).fetchall()
    return d, p


# Row by row, through the guards and the taming as the rewrite applies them.
ROW_CASES = [
    ("CAST(fu AS REAL)", "fu"),
    ("CAST(fu AS FLOAT4)", "fu"),
    ("fu::real", "fu"),
    ("CAST(iu AS REAL)", "iu"),
    ("CAST(s AS REAL)", "s"),
    ("CAST(fu AS REAL) * CAST(fu AS REAL)", None),
    ("CAST(fu AS REAL) * 1e30", None),
    ("CAST(fu AS REAL) / 3", None),
    ("CAST(CAST(fu AS REAL) AS REAL)", "fu"),
    ("CAST(fu * 2 AS REAL)", None),
    ("COALESCE(CAST(fu AS REAL), 1e300)", None),
    ("CAST(1e39 AS REAL)", None),
    ("CAST('16777217' AS REAL)", None),
    ("CAST(fu AS FLOAT)", None),  # FLOAT is DOUBLE PRECISION in PostgreSQL: no rounding
]


@pytest.mark.parametrize(("sql", "column"), ROW_CASES)
def test_real_casts_give_the_same_values_on_both_engines(
    world: Any, sql: str, column: str | None
) -> None:
    raw: exp.Expression = exp.maybe_parse(sql, dialect="postgres")
    tamed = finite_arithmetic(guard_row_expression(raw, REALCAST), REALCAST)
    d, p = _both(world, tamed)  # PostgreSQL raising would fail the test here
    mismatches = [(a, b) for a, b in zip(d, p, strict=True) if not _same(a[1], b[1])]
    assert not mismatches, mismatches
    if column is not None:  # the values are the stated semantics
        rows = _rows()
        index = ["uid", "fu", "iu", "s", "fb"].index(column)
        for (uid, value), row in zip(d, rows, strict=True):
            x = row[index]
            if column == "s":
                x = _text_double(x)
            expected = real(None if x is None else float(x))
            assert _same(value, expected), (uid, x, value, expected)


def _text_double(s: str | None) -> float | None:
    """dpproxy's text-to-double (docs/postgres.md's number grammar), for the rows above."""
    if s is None:
        return None
    try:
        return float(s.strip())
    except ValueError:
        return None


def test_sixteen_million_and_one_rounds_to_even(world: Any) -> None:
    raw: exp.Expression = exp.maybe_parse("CAST(fu AS REAL) = 16777216", dialect="postgres")
    d, p = _both(world, guard_row_expression(raw, REALCAST))
    assert d == p
    assert [uid for uid, v in d if v] == [FLOATS.index(16777217.0)]


# Through the engines, noise off: the released answers are equal.
QUERIES = [
    "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS REAL) > 0",
    "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS REAL) IS NULL",
    "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS REAL) = 0",
    "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS REAL) = 16777216",
    "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS FLOAT4) < 0",
    "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS FLOAT(10)) * CAST(fu AS REAL) > 1e70",
    "SELECT COUNT(*) FROM realcast WHERE CAST(iu AS REAL) = 9223372036854775807",
    "SELECT COUNT(*) FROM realcast WHERE CAST(s AS REAL) IS NULL",
    "SELECT COUNT(*) FROM realcast WHERE CAST(s AS REAL) = 16777216",
    "SELECT COUNT(*) FROM realcast WHERE CAST('1e39' AS REAL) IS NULL",
    "SELECT SUM(CAST(fb AS REAL)) FROM realcast",
    "SELECT COUNT(*), SUM(CAST(fb AS REAL) * 10) FROM realcast WHERE CAST(fu AS REAL) <> 0",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_real_casts_give_the_same_release_on_both_engines(world: Any, sql: str) -> None:
    duck: Engine
    pg: Engine
    _, _, duck, pg = world
    d_sql, p_sql = duck.prepare(sql, secret=1).sql, pg.prepare(sql, secret=1).sql
    assert d_sql is not None and p_sql is not None
    d_exact = duck.backend.execute(d_sql).rows
    p_exact = pg.backend.execute(p_sql).rows  # never an error
    assert d_exact == p_exact
    d = duck.run(sql, analyst="realcast").released.rows
    p = pg.run(sql, analyst="realcast").released.rows
    assert d == p


def test_the_reported_case_counts_what_the_semantics_says(world: Any) -> None:
    """1e308 and 5e-324 (the case found): NULL and 0, so neither counts as > 0."""
    _, _, duck_engine, pg_engine = world
    sql = "SELECT COUNT(*) FROM realcast WHERE CAST(fu AS REAL) > 0"
    expected = sum(1 for x in FLOATS if x is not None and (r := real(x)) is not None and r > 0)
    expected += sum(1 for x in FLOATS if x is not None and math.isnan(x))  # NaN > 0 in SQL
    for engine in (duck_engine, pg_engine):
        assert engine.run(sql, analyst="realcast").released.rows == ((expected,),)


def test_a_released_value_cast_to_real_follows_the_same_rule(world: Any) -> None:
    """A cast that dpproxy computes itself, on a released value (``release/evaluation.py``):
    the count times 1e38 is beyond the largest REAL, so NULL, and no row exceeds NULL; times
    1e37 it is a REAL, rounded as in SQL."""
    _, _, duck, pg = world
    n = len(_rows())
    query = "SELECT COUNT(*) FROM realcast WHERE fu {} (SELECT CAST(COUNT(*) * {} AS REAL) FROM t)"
    beyond = query.format(">", "1e38").replace("FROM t)", "FROM realcast)")
    within = query.format(">=", "1e37").replace("FROM t)", "FROM realcast)")
    bound = real(n * 1e37)
    assert bound is not None and bound != n * 1e37  # rounded
    above = sum(1 for x in FLOATS if x is not None and not math.isnan(x) and x >= bound)
    above += sum(1 for x in FLOATS if x is not None and math.isnan(x))  # NaN is above all
    for engine in (duck, pg):
        assert engine.run(beyond, analyst="realcast").released.rows == ((0,),)
        assert engine.run(within, analyst="realcast").released.rows == ((above,),)


def _column(world: Any, sql: str) -> tuple[list[Any], list[Any]]:
    raw: exp.Expression = exp.maybe_parse(sql, dialect="postgres")
    d, p = _both(world, finite_arithmetic(guard_row_expression(raw, REALCAST), REALCAST))
    return [v for _, v in d], [v for _, v in p]


def test_a_real_is_computed_on_as_a_double(world: Any) -> None:
    """The largest REAL times 1e30 is 3.4e68 on both engines (float32 arithmetic would give
    inf on DuckDB and raise on PostgreSQL)."""
    d, p = _column(world, "CAST(fu AS REAL) * 1e30")
    row = FLOATS.index(REAL_MAX)
    assert d[row] == p[row] == REAL_MAX * 1e30


def test_float_without_a_precision_is_double_precision(world: Any) -> None:
    d, p = _column(world, "CAST(fu AS FLOAT)")
    for x in (16777217.0, 1e308, 5e-324, 0.1):
        assert d[FLOATS.index(x)] == p[FLOATS.index(x)] == x


def test_postgresql_own_real_cast_raises_where_dpproxy_gives_null_or_zero(world: Any) -> None:
    _, pg, *_ = world
    for value in ("1e308", "5e-324", "3.5e38", "1e-46"):
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            pg.execute(f"SELECT CAST(CAST({value} AS DOUBLE PRECISION) AS REAL)")
    d, p = _column(world, "CAST(fu AS REAL)")
    for x, expected in ((1e308, None), (3.5e38, None), (5e-324, 0.0), (1e-46, 0.0)):
        assert d[FLOATS.index(x)] == p[FLOATS.index(x)] == expected


def test_a_bigint_is_rounded_to_a_double_first(world: Any) -> None:
    """The known difference from PostgreSQL's own cast: two roundings where it does one."""
    _, pg, *_ = world
    native_sql = f"SELECT CAST(CAST(CAST({TWICE_ROUNDED} AS BIGINT) AS REAL) AS FLOAT8)"
    (native,) = pg.execute(native_sql).fetchone()
    assert native == float(2**60 + 2**37)
    d, p = _column(world, "CAST(iu AS REAL)")
    row = INTEGERS.index(TWICE_ROUNDED)
    assert d[row] == p[row] == float(2**60)


SPARK_CASES = ["CAST(fu AS REAL)", "CAST(iu AS REAL)", "CAST(s AS REAL)", "CAST(fu AS REAL) * 1e30"]


def test_spark_gives_the_same_values(
    world: Any, spark_master: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Spark (ANSI) rounds to REAL as DuckDB and PostgreSQL do, and never raises: its own
    ANSI cast is applied only within REAL's range too (``rewrite/spark.py``)."""
    from dpproxy.backends.spark import SparkBackend
    from dpproxy.rewrite.spark import to_spark
    from tests.spark import export_parquet

    duck, *_ = world
    (path,) = duck.execute("SELECT path FROM duckdb_databases() WHERE NOT internal").fetchone()
    parquet = export_parquet(Path(path), tmp_path_factory.mktemp("realcast-spark") / "data")
    spark = SparkBackend(f"{spark_master}?parquet_dir={parquet}")
    try:
        for sql in SPARK_CASES:
            raw: exp.Expression = exp.maybe_parse(sql, dialect="postgres")
            tamed = finite_arithmetic(guard_row_expression(raw, REALCAST), REALCAST)
            select = exp.select(exp.column("uid"), exp.alias_(tamed, "v")).from_("realcast")
            select = select.order_by("uid")
            d = duck.execute(select.sql(dialect="duckdb")).fetchall()
            s = spark.execute(to_spark(select.copy(), TYPES).sql(dialect="spark")).rows
            mismatches = [(a, b) for a, b in zip(d, s, strict=True) if not _same(a[1], b[1])]
            assert not mismatches, (sql, mismatches)
    finally:
        spark.close()
