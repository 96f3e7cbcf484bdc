"""DuckDB's HUGEINT, UHUGEINT and DECIMAL wider than 20 digits before the point or 18 after,
declared ``float`` in a private table, read as DOUBLE through a total conversion
(``sql/widenum.py``), as PostgreSQL's ``numeric`` is (``test_wide_numeric_double.py``).

Until 2026-11-29 such a column was refused when the engine opened (42804: DuckDB compares or
unifies it with an integer or a literal in a type that cannot hold every value of both,
``test_wide_numeric.py``). Now every statement reads the table through a derived table of the
same name whose such columns are ``CAST(x AS DOUBLE)``: a HUGEINT's magnitude is below
1.7e38, a UHUGEINT's below 3.5e38 and a DECIMAL(38, s)'s below 1e38, far within a double's
1.8e308, so the cast cannot fail. Each test runs on real DuckDB files with the noise off: the
file where one unit holds an extreme value and its neighbour without that unit are both
answered, and every answer is the answer over a DOUBLE column holding the converted value.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
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
    "SELECT COUNT(*) FROM t WHERE x > 1e30",
    "SELECT COUNT(*) FROM t WHERE x = -1",
    "SELECT COUNT(*) FROM t WHERE x = 1.5",
    "SELECT COUNT(*) FROM t WHERE x = 0.5",
    "SELECT COUNT(*) FROM t WHERE x > uid",
    "SELECT COUNT(*) FROM t WHERE x = uid",
    "SELECT COUNT(*) FROM t WHERE COALESCE(x, 0.5) > 0",
    "SELECT COUNT(*) FROM t WHERE ABS(x) > 0",
    "SELECT COUNT(*) FROM t WHERE CAST(x AS INTEGER) > 0",
    "SELECT COUNT(*) FROM t WHERE x IS NULL",
    "SELECT SUM(b) FROM t",
    "SELECT SUM(b) FROM t WHERE x < 2",
    "SELECT AVG(b) FROM t WHERE x > 0",
    "SELECT x AS k, COUNT(*) FROM t GROUP BY 1 ORDER BY 1",
)
H = 2**127 - 1
# (the column type, the value unit 3 holds: each the type's extreme, or NULL)
EXTREMES = (
    ("HUGEINT", str(H)),
    ("HUGEINT", str(-H)),
    ("HUGEINT", None),
    ("UHUGEINT", str(2**128 - 1)),
    ("DECIMAL(38, 0)", "9" * 38),
    ("DECIMAL(38, 0)", "-" + "9" * 38),
    ("DECIMAL(38, 37)", "9." + "9" * 37),
    ("DECIMAL(38, 37)", "-9." + "9" * 37),
    ("DECIMAL(38, 37)", "0." + "0" * 36 + "1"),
    ("DECIMAL(30, 2)", "-" + "9" * 28 + ".99"),
    ("DECIMAL(25, 20)", "1.00000000000000000001"),
)
BASE: list[tuple[int, str | None, str]] = [(1, "1", "1"), (2, "2", "2"), (4, None, "5")]


def make(path: Path, column_type: str, rows: list[tuple[int, str | None, str]]) -> Path:
    """A DuckDB file of ``t`` with ``x`` of ``column_type`` (``b`` too, unless it is DOUBLE:
    then the values are read from their text, exactly rounded, not cast from the type)."""
    b_type = "INTEGER" if column_type == "DOUBLE" else column_type
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE t (uid INTEGER NOT NULL, x {column_type}, b {b_type})")
        for uid, x, b in rows:
            con.execute(
                f"INSERT INTO t VALUES (?, CAST(? AS {column_type}), CAST(? AS {b_type}))",
                [uid, x, b],
            )
    return path


def answers(path: Path, schema: str = SCHEMA) -> object:
    """Every query's released rows over the file, or the first error's SQLSTATE."""
    backend = DuckDBBackend(path)
    try:
        try:
            engine = Engine(parse_catalog(schema), backend, noise=NoNoise())
            return [list(engine.run(q, analyst="a").released.rows) for q in QUERIES]
        except DPProxyError as e:
            return e.sqlstate
    finally:
        backend.close()


def converted(value: str | None) -> str | None:
    """The double DuckDB's cast gives ``value``, as the text of that double."""
    return None if value is None else repr(float(value))


CASES = [pytest.param(t, v, id=f"{t}-{v}") for t, v in EXTREMES]


@pytest.mark.parametrize(("column_type", "value"), CASES)
def test_a_wide_duckdb_column_is_read_as_a_double(
    tmp_path: Path, column_type: str, value: str | None
) -> None:
    """Before: 42804 at open for both the file and its neighbour."""
    got = answers(make(tmp_path / "with.duckdb", column_type, [*BASE, (3, value, "9")]))
    neighbour = answers(make(tmp_path / "without.duckdb", column_type, BASE))
    assert isinstance(got, list) and isinstance(neighbour, list), (got, neighbour)
    rows = [(u, converted(x), b) for u, x, b in [*BASE, (3, value, "9")]]
    assert got == answers(make(tmp_path / "double.duckdb", "DOUBLE", rows))
    base = [(u, converted(x), b) for u, x, b in BASE]
    assert neighbour == answers(make(tmp_path / "double0.duckdb", "DOUBLE", base))


def test_the_cast_to_double_cannot_fail_on_any_extreme() -> None:
    """The docstring's claim (``sql/widenum.duckdb_double``), on DuckDB itself: each type's
    extreme values, and NULL, cast to DOUBLE without error, within a double's range."""
    con = duckdb.connect()
    for column_type, value in [*EXTREMES, ("HUGEINT", str(-(2**127))), ("UHUGEINT", "0")]:
        row = con.execute(f"SELECT CAST(CAST(? AS {column_type}) AS DOUBLE)", [value]).fetchone()
        assert row is not None
        assert row[0] is None if value is None else abs(row[0]) < 3.5e38, (column_type, row)
        if value is not None:
            assert row[0] == float(value), (column_type, value, row)


@pytest.mark.parametrize("column_type", ["HUGEINT", "UHUGEINT", "DECIMAL(38, 0)"])
def test_an_integer_over_a_wide_duckdb_column_is_still_refused(
    tmp_path: Path, column_type: str
) -> None:
    """No total conversion to an integer is offered: declared ``integer``, 42804 as before."""
    schema = SCHEMA.replace("x: {type: float", "x: {type: integer")
    path = make(tmp_path / "w.duckdb", column_type, BASE)
    assert answers(path, schema) == "42804"


def test_a_wide_duckdb_unit_or_public_column_is_still_refused(tmp_path: Path) -> None:
    """A unit column of such a type (two values the cast reads as one would be one unit) and
    a public table's column keep the refusal, 42804."""
    path = tmp_path / "u.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (uid HUGEINT NOT NULL, x DOUBLE, b DOUBLE)")
        con.execute("CREATE TABLE p (v HUGEINT)")
    unit = SCHEMA.replace("uid: {type: integer}", "uid: {type: float}")
    assert answers(path, unit) == "42804"
    public = SCHEMA.replace("uid: {type: float}", "uid: {type: integer}") + (
        "  p:\n    private: false\n    columns:\n      v: {type: float}\n"
    )
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE t")
        con.execute("CREATE TABLE t (uid INTEGER NOT NULL, x DOUBLE, b DOUBLE)")
    assert answers(path, public) == "42804"


def test_a_converted_column_is_not_marked_scanned(tmp_path: Path) -> None:
    """``backends/scanned.py`` proves a float column's clamp a no-op by reading its rows; a
    converted column is read as the cast's value, so it is left unmarked (its clamp stays),
    while the same file's DOUBLE column beside it is marked."""
    path = tmp_path / "s.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (uid INTEGER NOT NULL, x DOUBLE, b DECIMAL(38, 0))")
        con.execute("INSERT INTO t VALUES (1, 1.0, 5), (2, 2.0, 100)")
    schema = SCHEMA.replace(
        "x: {type: float, nullable: true}", "x: {type: float, lower: 0, upper: 9}"
    )
    backend = DuckDBBackend(path)
    try:
        engine = Engine(parse_catalog(schema), backend, noise=NoNoise())
        t = engine.catalog.table("t")
        assert t is not None and t.wide == ("b",)
        x, b = t.column("x"), t.column("b")
        assert x is not None and b is not None
        assert x.scanned and not b.scanned and b.least_nonzero == 0.0
        assert list(engine.run("SELECT SUM(b) FROM t", analyst="a").released.rows) == [(105.0,)]
    finally:
        backend.close()


@pytest.mark.parametrize(("declared", "fits"), [("float", True), ("integer", False)])
def test_schema_check_agrees_with_the_engine(tmp_path: Path, declared: str, fits: bool) -> None:
    """``dpproxy schema check --database`` over a DuckDB file lets a HUGEINT column fit where
    the engine reads it as a double, and reports 42804 where the engine refuses it."""
    from dpproxy.backends.opener import describe
    from dpproxy.catalog.check import check_schema

    path = make(tmp_path / "c.duckdb", "HUGEINT", BASE)
    text = SCHEMA.replace("x: {type: float", f"x: {{type: {declared}")
    report = check_schema(text, "wide.yaml", describe(str(path)))
    assert report.codes == (() if fits else ("42804",)), report.problems
    assert (answers(path, text) != "42804") is fits


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_files_read_in_place_are_read_the_same_way(tmp_path: Path, suffix: str) -> None:
    """A CSV file whose column DuckDB's sniffer types HUGEINT, a Parquet file's DECIMAL(38, 0):
    the file with the extreme value and its neighbour without it are both answered, as a
    DuckDB file with the converted values in a DOUBLE column. (The CSV neighbour's column is
    typed BIGINT, which fits as it is.)"""
    from dpproxy.engine import open_engine

    schema = tmp_path / "wide.yaml"
    schema.write_text(SCHEMA)
    column_type, value = ("HUGEINT", str(H)) if suffix == "csv" else ("DECIMAL(38, 0)", "9" * 38)
    got = []
    for rows in ([*BASE, (3, value, "9")], BASE):
        source = make(tmp_path / f"src{len(rows)}.duckdb", column_type, rows)
        path = tmp_path / f"t{len(rows)}" / f"t.{suffix}"
        path.parent.mkdir()
        with duckdb.connect(str(source)) as con:
            fmt = "(HEADER)" if suffix == "csv" else "(FORMAT parquet)"
            con.execute(f"COPY t TO '{path}' {fmt}")
        engine = open_engine(str(path), str(schema), noise=NoNoise())
        try:
            t = engine.catalog.table("t")
            assert t is not None and ("x" in t.wide or rows == BASE), t
            got.append([list(engine.run(q, analyst="a").released.rows) for q in QUERIES])
        finally:
            engine.close()
        rows = [(u, converted(x), b) for u, x, b in rows]
        assert got[-1] == answers(make(tmp_path / f"d{len(rows)}.duckdb", "DOUBLE", rows))


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("doc", "claims"),
    [
        (
            "schemas/README.md",
            [
                "On DuckDB (a DuckDB file, or Parquet and CSV files read in place), a HUGEINT, "
                "a UHUGEINT or a DECIMAL with more than 20 digits before the point or 18 after "
                "it fits `float` in a private table the same way: dpproxy reads it as "
                "`CAST(x AS DOUBLE)`, which cannot fail (every such value lies within ±3.5e38, "
                "far inside a double's range), so it is answered as a DOUBLE column holding the "
                "converted values.",
                "Declared `integer`, in a public table, or as a privacy unit or a key a unit is "
                "reached by, it is refused (`42804`), as on PostgreSQL.",
            ],
        ),
        (
            "docs/postgres.md",
            [
                "DuckDB's HUGEINT, UHUGEINT and wide DECIMAL columns are read the same way, "
                "through a plain `CAST(x AS DOUBLE)` (their values lie within ±3.5e38), in the "
                "same derived table; on PostgreSQL and DuckDB only (Spark checks names, not "
                "types).",
            ],
        ),
        (
            "SECURITY.md",
            [
                "a DuckDB HUGEINT, UHUGEINT or wide DECIMAL declared the same way, a domain; "
                "declared `float` in a private table, such a `numeric` or DuckDB column is read "
                "as a double through a total conversion",
            ],
        ),
    ],
)
def test_the_docs_say_what_these_tests_check(doc: str, claims: list[str]) -> None:
    text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
    for claim in claims:
        assert claim in text, claim
