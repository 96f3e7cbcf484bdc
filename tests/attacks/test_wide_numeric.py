"""Named attack: one value of a number type wider than dpproxy computes with decides an error.

PostgreSQL's ``numeric`` without a precision holds up to 131,072 digits before the point and
16,383 after. The rewrite computes a number column as DOUBLE (``rewrite/guard.py``: its
arithmetic, its clamp to the schema bounds, a cast's range test) and reads group keys into
Python floats, and PostgreSQL's ``numeric`` → ``double precision`` raises 22003 for 1e400
and for 1e-400 ("is out of range for type double precision"). So over a column ``x numeric``
declared ``float``, ``SELECT COUNT(*) FROM t WHERE x + 1 > 0`` (also ``ABS(x)``, ``FLOOR``,
``SQRT``, ``ROUND``, a cast, ``SUM`` of a bounded column, ``GROUP BY x``) failed, XX000 and
charged, on the database where one unit held 1e400 and was answered on its neighbour
without that unit: one exact bit about that unit, whatever ε says.

A number column fits a ``float`` or ``integer`` schema type when its type bounds its values
within a REAL's range (PostgreSQL unifies a numeric and a ``real`` column as REAL, which
raises the same way beyond 3.4e38): ``numeric(p, s)`` with p − s ≤ 38 and s ≤ 37
(``catalog/draft.py``). ``numeric`` without a precision, and ``numeric(1000, 500)``, were
then refused (42804) when the engine opened, on every database alike; since 2026-11-29 such
a column declared ``float`` in a private table is read as DOUBLE through a total conversion
(``sql/widenum.py``, ``test_wide_numeric_double.py``), and every query here is answered on
the database and on its neighbour alike. Declared ``integer``, it is still refused (42804).

DuckDB's widest types fail otherwise: it compares or unifies a HUGEINT, a UHUGEINT or a
DECIMAL(38, s) with a literal or another number column by casting both to one type, which
cannot hold every value of both (``h = -1`` over a UHUGEINT: "Type UINT128 with value
340282366920938463463374607431768211455 can't be cast ... INT64"; ``hi = 1.5`` over a
HUGEINT: "Could not cast value ... to DECIMAL(38,1)"; ``d = i`` of a DECIMAL(38, 37) and an
INTEGER). Such columns are now refused (42804) when the engine opens; DuckDB's DECIMAL fits
with at most 20 digits before the point and 18 after (``catalog/draft.py``). Since
2026-11-29 such a column declared ``float`` in a private table is read as DOUBLE
(``sql/widenum.duckdb_double``, ``test_wide_numeric_duckdb.py``); declared ``integer`` (as
here), it is still refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import psycopg
import pytest

from dpproxy.engine import open_engine
from dpproxy.errors import DPProxyError
from tests.noise import NoNoise

SCHEMA = """\
version: 1
dataset: wide
privacy:
  epsilon: 1.0
  delta: 1.0e-6
  budget: {epsilon: 1000000000, delta: 0.5}
tables:
  t:
    private: true
    privacy_unit: uid
    max_rows_per_unit: 3
    columns:
      uid: {type: integer}
      x: {type: float, nullable: true}
      b: {type: float, lower: 0, upper: 100}
"""

QUERIES = (
    "SELECT COUNT(*) FROM t WHERE x + 1 > 0",
    "SELECT COUNT(*) FROM t WHERE ABS(x) > 0",
    "SELECT COUNT(*) FROM t WHERE CAST(x AS INTEGER) > 0",
    "SELECT SUM(b) FROM t",
    "SELECT x AS k, COUNT(*) FROM t GROUP BY 1",
)

# (the column type, the value the unit 3 holds): each out of a double's range
WIDE = (
    ("numeric", "1e400"),
    ("numeric", "1e-400"),
    ("numeric(1000, 500)", "1e400"),
    ("numeric(400, 0)", "1e390"),
    ("numeric(3, -400)", "1e400"),
    ("numeric(400, 380)", "1e-370"),
)


def outcome(database: str, schema: Path, sql: str) -> tuple[str, str | None]:
    """("refused", SQLSTATE) when the engine refuses to open or the query before the data,
    ("failed", SQLSTATE) when it ran and failed, ("answered", None)."""
    try:
        engine = open_engine(database, str(schema), noise=NoNoise())
    except DPProxyError as e:
        return ("refused", e.sqlstate)
    try:
        try:
            engine.prepare(sql)
        except DPProxyError as e:
            return ("refused", e.sqlstate)
        try:
            engine.run(sql, analyst="mallory")
        except DPProxyError as e:
            return ("failed", e.sqlstate)
        return ("answered", None)
    finally:
        engine.close()


@pytest.fixture
def world(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    schema = tmp_path / "wide.yaml"
    schema.write_text(SCHEMA)
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)  # dpproxy takes postgresql:// URLs
    user, host = info.get("user", "postgres"), info.get("host", "127.0.0.1")
    yield f"postgresql://{user}@{host}:{info.get('port') or 5432}/{info['dbname']}", schema


def load(dsn: str, column_type: str, rows: Sequence[tuple[int, str | None, int]]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS t")
        conn.execute(f"CREATE TABLE t (uid integer NOT NULL, x {column_type}, b {column_type})")
        for r in rows:
            conn.execute("INSERT INTO t VALUES (%s, %s::numeric, %s)", r)


@pytest.mark.parametrize(("column_type", "value"), WIDE)
def test_a_wide_numeric_value_decides_no_outcome(
    world: tuple[str, Path], column_type: str, value: str
) -> None:
    dsn, schema = world
    rows = [(1, "1.5", 1), (2, "2.5", 2)]
    for sql in QUERIES:
        load(dsn, column_type, [*rows, (3, value, 3)])
        with_unit = outcome(dsn, schema, sql)
        load(dsn, column_type, rows)
        without = outcome(dsn, schema, sql)
        assert with_unit == without == ("answered", None), (sql, with_unit, without)


@pytest.mark.parametrize(
    "column_type", ["numeric(20, 2)", "numeric(38, 0)", "numeric(50, 37)", "real"]
)
def test_a_number_type_within_a_doubles_range_is_answered(
    world: tuple[str, Path], column_type: str
) -> None:
    """The types that fit: their extreme values (and NaN) are answered, as their neighbour."""
    dsn, schema = world
    big = {"numeric(20, 2)": "1e17", "numeric(38, 0)": "9e37", "real": "3e38"}
    value = big.get(column_type, "1e-37")
    rows = [(1, "1.5", 1), (2, "NaN", 2)]
    for sql in QUERIES:
        load(dsn, column_type, [*rows, (3, value, 3)])
        assert outcome(dsn, schema, sql) == ("answered", None), (column_type, sql)
        load(dsn, column_type, rows)
        assert outcome(dsn, schema, sql) == ("answered", None), (column_type, sql)


# DuckDB: (the column type, the query, the value the unit 30 holds)
DUCK_WIDE = (
    ("UHUGEINT", "SELECT COUNT(*) FROM t WHERE x = -1", str(2**128 - 1)),
    ("UHUGEINT", "SELECT COUNT(*) FROM t WHERE x > uid", str(2**128 - 1)),
    ("HUGEINT", "SELECT COUNT(*) FROM t WHERE x = 1.5", str(-(2**127))),
    ("HUGEINT", "SELECT COUNT(*) FROM t WHERE COALESCE(x, 0.5) > 0", str(2**127 - 1)),
    ("DECIMAL(38, 37)", "SELECT COUNT(*) FROM t WHERE x = uid", "9.5"),
    ("DECIMAL(38, 0)", "SELECT COUNT(*) FROM t WHERE x = 0.5", "1" + "0" * 37),
)
DUCK_SCHEMA = SCHEMA.replace("x: {type: float", "x: {type: integer").replace(
    "b: {type: float, lower: 0, upper: 100}", "b: {type: integer, lower: 0, upper: 100}"
)


def duck_outcome(
    tmp: Path, column_type: str, sql: str, rows: list[tuple[int, str]], wide: bool = False
) -> object:
    path = tmp / f"wide{len(list(tmp.iterdir()))}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t (uid INTEGER NOT NULL, x {column_type}, b INTEGER NOT NULL)")
    for uid, value in rows:
        con.execute(f"INSERT INTO t VALUES (?, CAST(? AS {column_type}), 1)", [uid, value])
    con.close()
    schema = tmp / "duck.yaml"
    # declared float, a wide x is now read as DOUBLE: the refusals are for integer
    fitting = "x: {type: float" if "," in column_type and not wide else "x: {type: integer"
    schema.write_text(DUCK_SCHEMA.replace("x: {type: integer", fitting))
    return outcome(str(path), schema, sql)


@pytest.mark.parametrize(("column_type", "sql", "value"), DUCK_WIDE)
def test_a_wide_duckdb_value_decides_no_outcome(
    tmp_path: Path, column_type: str, sql: str, value: str
) -> None:
    rows = [(1, "1"), (2, "2")]
    with_unit = duck_outcome(tmp_path, column_type, sql, [*rows, (30, value)], True)  # uid >= 10
    without = duck_outcome(tmp_path, column_type, sql, rows, True)
    assert with_unit == without == ("refused", "42804"), (with_unit, without)


@pytest.mark.parametrize("column_type", ["DECIMAL(38, 18)", "DECIMAL(20, 0)", "UBIGINT", "BIGINT"])
def test_a_duckdb_number_type_that_fits_is_answered(tmp_path: Path, column_type: str) -> None:
    big = {"DECIMAL(38, 18)": "-99999999999999999999.999999999999999999"}
    value = big.get(column_type, "18446744073709551615" if column_type[0] == "U" else "-1")
    if column_type == "DECIMAL(20, 0)":
        value = "-" + "9" * 20
    for sql in [q for _, q, _ in DUCK_WIDE] + ["SELECT COUNT(*) FROM t WHERE x = 0.5"]:
        got = duck_outcome(tmp_path, column_type, sql, [(1, "1"), (3, value)])
        assert got == ("answered", None), (column_type, sql, got)


# PostgreSQL: a ``real`` column and a number constant beyond REAL's range in one of the
# constructs that unify their types: PostgreSQL casts the constant to REAL ("value out of
# range: overflow"/"underflow", 22003), so the accepted query failed, charged, on every
# database. The constant is now a DOUBLE there (``rewrite/guard.real_safe``).
REAL_UNIFYING = (
    "SELECT COUNT(*) FROM t WHERE COALESCE(x, 1e300) > 0",
    "SELECT COUNT(*) FROM t WHERE CASE WHEN uid = 3 THEN x ELSE -1e300 END > 0",
    "SELECT COUNT(*) FROM t WHERE GREATEST(x, 1e300) > 0",
    "SELECT COUNT(*) FROM t WHERE LEAST(x, 1e-300) > 0",
    "SELECT COUNT(*) FROM t WHERE x IN (1e300, 1e-300)",
    "SELECT COUNT(*) FROM t WHERE x NOT IN (2, -(1e300))",
)


@pytest.mark.parametrize("sql", REAL_UNIFYING)
def test_a_constant_beyond_real_beside_a_real_column_is_answered(
    world: tuple[str, Path], sql: str
) -> None:
    dsn, schema = world
    load(dsn, "real", [(1, "1.5", 1), (3, "3e38", 3)])
    assert outcome(dsn, schema, sql) == ("answered", None)


def test_a_numeric_beyond_real_beside_a_real_column_decides_no_outcome(
    world: tuple[str, Path],
) -> None:
    """PostgreSQL unifies ``real`` and ``numeric`` as REAL: over a numeric(300, 0) ``n``,
    ``CASE WHEN uid = 1 THEN r ELSE n END`` failed (22003, charged) exactly when a unit
    other than 1 held 1e299; such a column was then refused (42804) when the engine opened,
    and is now read as a DOUBLE (sql/widenum.py), which unifies with REAL as DOUBLE."""
    dsn, schema_path = world
    schema_path.write_text(
        SCHEMA.replace("b: {type: float", "r: {type: float, nullable: true}\n      b: {type: float")
    )
    sql = "SELECT COUNT(*) FROM t WHERE CASE WHEN uid = 1 THEN r ELSE x END > 0"
    got = []
    for value in ("1e299", "5"):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS t")
            conn.execute("CREATE TABLE t (uid integer NOT NULL, x numeric(300, 0), r real, b real)")
            conn.execute("INSERT INTO t VALUES (1, 1, 1, 1), (3, %s::numeric, NULL, 3)", (value,))
        got.append(outcome(dsn, schema_path, sql))
    assert got[0] == got[1] == ("answered", None), got


@pytest.mark.parametrize(
    ("domain", "base", "declared", "value", "sql"),
    [
        ("double", "numeric", "float", "1e400", "SELECT COUNT(*) FROM t WHERE x + 1 > 0"),
        ("long", "text", "integer", "abc", "SELECT COUNT(*) FROM t WHERE x + 1 > 0"),
    ],
)
def test_a_domain_named_like_a_type_is_not_that_type(
    world: tuple[str, Path], domain: str, base: str, declared: str, value: str, sql: str
) -> None:
    """PostgreSQL's ``format_type`` names a domain by its own name, which may read as a type
    of another engine's (``double``, ``long``, ``string``, ``hugeint``): a domain ``double``
    over ``numeric`` fitted ``float`` and one unit's 1e400 failed ``x + 1 > 0`` (XX000,
    charged) where its neighbour was answered. Types outside pg_catalog are now named with
    their schema (``backends/postgres_shapes.py``), so no schema type fits them: 42804."""
    dsn, schema_path = world
    schema_path.write_text(SCHEMA.replace("x: {type: float", f"x: {{type: {declared}"))
    got = []
    for rows in ([(1, None), (3, value)], [(1, None)]):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS t")
            conn.execute(f"DROP DOMAIN IF EXISTS public.{domain}")
            conn.execute(f"CREATE DOMAIN public.{domain} AS {base}")
            conn.execute(f"CREATE TABLE t (uid integer NOT NULL, x public.{domain}, b real)")
            for uid, v in rows:
                conn.execute("INSERT INTO t VALUES (%s, %s, 1)", (uid, v))
        got.append(outcome(dsn, schema_path, sql))
    assert got[0] == got[1] == ("refused", "42804"), got
