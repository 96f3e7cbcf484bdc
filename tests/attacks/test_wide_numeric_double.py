"""PostgreSQL ``numeric`` without a precision (or one beyond a double's range), declared
``float`` in a private table, read as DOUBLE through a total conversion (``sql/widenum.py``).

Until 2026-11-29 such a column was refused when the engine opened (42804), so a database with
money columns declared ``numeric`` could not be used at all (``test_wide_numeric.py`` tells
why: ``numeric`` → ``double precision`` raises 22003 for 1e400 and 1e-400, and one unit's value
then decided an error). Now the SQL dpproxy sends reads the column through a ``CASE`` on the
numeric value that never fails: NaN and ±Infinity become the double's own, a value beyond
±1e308 saturates at ±1e308, one nearer to zero than 1e-307 is 0, any other is cast. Each test
runs on a real PostgreSQL with the noise off: the database where one unit holds an extreme
value and its neighbour without that unit are both answered, and every answer over the
``numeric`` column is the answer over a ``double precision`` column holding the converted
value.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.noise import NoNoise

SCHEMA = """\
version: 1
dataset: wide
privacy: {epsilon: 1, delta: 1.0e-6, budget: {epsilon: 1000000000, delta: 0.5}}
tables:
  t:
    privacy_unit: uid
    max_rows_per_unit: 3
    columns:
      uid: {type: integer}
      x: {type: float, nullable: true}
      b: {type: float, lower: 0, upper: 100}
"""
QUERIES = (
    "SELECT COUNT(*) FROM t WHERE x + 1 > 0",
    "SELECT COUNT(*) FROM t WHERE x > 1e300",
    "SELECT COUNT(*) FROM t WHERE x = 0",
    "SELECT COUNT(*) FROM t WHERE ABS(x) > 0",
    "SELECT COUNT(*) FROM t WHERE CAST(x AS INTEGER) > 0",
    "SELECT COUNT(*) FROM t WHERE x IS NULL",
    "SELECT SUM(b) FROM t",
    "SELECT SUM(b) FROM t WHERE x < 2",
    "SELECT x AS k, COUNT(*) FROM t GROUP BY 1 ORDER BY 1",
)
# the value unit 3 holds in the numeric column, and in the double column beside it
EXTREMES = (
    ("1e400", "1e308"),
    ("-1e400", "-1e308"),
    ("NaN", "NaN"),
    ("Infinity", "Infinity"),
    ("-Infinity", "-Infinity"),
    ("1e-400", "0"),
    ("-1e-400", "0"),
    ("1.5e308", "1e308"),
    ("123.456", "123.456"),
)
BASE = [(1, "1.5", "1000"), (2, "2.5", "20"), (4, None, "5")]


def answers(dsn: str, column_type: str, rows: list[tuple[int, str | None, str]]) -> object:
    """Every query's released rows over ``t`` with ``x`` of ``column_type`` (b numeric too
    when x is), or the first error's SQLSTATE."""
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS t")
        con.execute(f"CREATE TABLE t (uid int NOT NULL, x {column_type}, b {column_type})")
        for uid, x, b in rows:
            con.execute(
                f"INSERT INTO t VALUES (%s, %s::{column_type}, %s::{column_type})", (uid, x, b)
            )
    backend = PostgresBackend(dsn)
    try:
        try:
            engine = Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
            return [list(engine.run(q, analyst="a").released.rows) for q in QUERIES]
        except DPProxyError as e:
            return e.sqlstate
    finally:
        backend.close()


# a numeric with a precision holds no infinity: those values only in plain numeric
CASES = [
    pytest.param(column_type, value, as_double, id=f"{column_type}-{value}")
    for column_type in ("numeric", "numeric(1000, 500)")
    for value, as_double in EXTREMES
    if column_type == "numeric" or "Infinity" not in value
]


@pytest.mark.parametrize(("column_type", "value", "as_double"), CASES)
def test_a_numeric_column_is_read_as_a_double(
    pg_dsn: str, column_type: str, value: str, as_double: str
) -> None:
    """Before: 42804 at open for both the database and its neighbour."""
    got = answers(pg_dsn, column_type, [*BASE, (3, value, "50")])
    neighbour = answers(pg_dsn, column_type, BASE)
    assert isinstance(got, list) and isinstance(neighbour, list), (got, neighbour)
    assert got == answers(pg_dsn, "double precision", [*BASE, (3, as_double, "50")])
    assert neighbour == answers(pg_dsn, "double precision", BASE)


@pytest.mark.parametrize("column_type", ["numeric", "numeric(50, 2)"])
def test_an_integer_over_a_wide_numeric_is_still_refused(pg_dsn: str, column_type: str) -> None:
    """No total conversion to an integer is offered: a column declared ``integer`` over such a
    type is refused at open, 42804, as before."""
    schema = SCHEMA.replace("x: {type: float", "x: {type: integer")
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f"CREATE TABLE t (uid int NOT NULL, x {column_type}, b float8)")
    backend = PostgresBackend(pg_dsn)
    try:
        with pytest.raises(DPProxyError) as got:
            Engine(parse_catalog(schema), backend)
        assert got.value.sqlstate == "42804"
    finally:
        backend.close()


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("doc", "claims"),
    [
        (
            "schemas/README.md",
            [
                "A PostgreSQL `numeric` without a precision (or with one whose values can lie "
                "beyond a double's range, such as `numeric(1000, 500)`), a money column as many "
                "databases declare it, fits `float` in a private table",
                "(NaN and ±Infinity stay what they are, a value beyond ±1e308 is read as ±1e308 "
                "and one nearer to zero than 1e-307 as 0)",
                "Declared `integer`, or in a public table, such a column is refused (`42804`).",
            ],
        ),
        (
            "docs/postgres.md",
            [
                "With the noise off, a table holding 1e400, -1e400, `NaN`, `Infinity` or "
                "1e-400 answers every query as a `double precision` table holding 1e308, "
                "-1e308, `NaN`, `Infinity` or 0, and so does its neighbour without that row.",
                "Declared `integer`, or in a public table, such a column is refused when "
                "dpproxy opens the database (`42804`).",
            ],
        ),
        (
            "SECURITY.md",
            [
                "42804 for a PostgreSQL `numeric` without a precision declared `integer` or in "
                "a public table",
            ],
        ),
    ],
)
def test_the_docs_say_what_these_tests_check(doc: str, claims: list[str]) -> None:
    text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
    for claim in claims:
        assert claim in text, claim


def test_a_public_numeric_column_is_still_refused(pg_dsn: str) -> None:
    schema = SCHEMA + "  p:\n    private: false\n    columns:\n      v: {type: float}\n"
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("CREATE TABLE t (uid int NOT NULL, x float8, b float8)")
        con.execute("CREATE TABLE p (v numeric)")
    backend = PostgresBackend(pg_dsn)
    try:
        with pytest.raises(DPProxyError) as got:
            Engine(parse_catalog(schema), backend)
        assert got.value.sqlstate == "42804"
    finally:
        backend.close()


def test_a_numeric_unit_column_is_still_refused(pg_dsn: str) -> None:
    """Read as a double, 1e400 and 2e400 would be one unit (1e308): a unit column (or a key a
    unit is reached by) of such a type keeps the refusal, 42804."""
    schema = SCHEMA.replace("uid: {type: integer}", "uid: {type: float}")
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("CREATE TABLE t (uid numeric PRIMARY KEY, x float8, b float8)")
    backend = PostgresBackend(pg_dsn)
    try:
        with pytest.raises(DPProxyError) as got:
            Engine(parse_catalog(schema), backend)
        assert got.value.sqlstate == "42804"
    finally:
        backend.close()


@pytest.mark.parametrize(("declared", "fits"), [("float", True), ("integer", False)])
def test_schema_check_agrees_with_the_engine(pg_dsn: str, declared: str, fits: bool) -> None:
    """``dpproxy schema check --database`` lets the numeric column fit where the engine reads
    it as a double, and reports 42804 where the engine refuses it."""
    from dpproxy.backends.postgres_shapes import describe_postgres
    from dpproxy.catalog.check import check_schema

    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("CREATE TABLE t (uid int NOT NULL, x numeric, b numeric)")
    text = SCHEMA.replace("x: {type: float", f"x: {{type: {declared}")
    report = check_schema(text, "wide.yaml", describe_postgres(pg_dsn))
    assert report.codes == (() if fits else ("42804",)), report.problems
