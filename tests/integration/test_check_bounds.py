"""CHECK constraints that prove a column within its schema bounds (``backends/checks.py``):
the DuckDB backend marks such a column ``in_bounds`` and the whole-number rewrite
(``rewrite/wholesum.py``) leaves out its clamp; every other constraint keeps the clamp.

On real DuckDB files: which constraints prove the bounds, that DuckDB refuses a row outside
them (the trust the skip rests on), and that the SQL without the clamp gives exactly the
aggregates of the SQL with it, NULLs and values on the bounds included.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.checks import interval
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine

SECRET = 0x21C

SCHEMA = """\
version: 1
dataset: checks
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  t:
    private: true
    privacy_unit: pid
    columns:
      pid: {type: integer}
      age: {type: AGE_TYPE, nullable: true, lower: 0, upper: 100}
      other: {type: integer, nullable: true, lower: 0, upper: 100}
  pub:
    private: false
    columns:
      age: {type: integer, lower: 0, upper: 100}
"""

# (the age column's DDL and constraints after "pid INTEGER PRIMARY KEY, other INTEGER, ",
#  does it prove age within [0, 100]?)
CASES = [
    ("age INTEGER CHECK (age BETWEEN 0 AND 100)", True),
    ("age BIGINT CHECK (age >= 0 AND age <= 100)", True),
    ("age INTEGER CHECK (age > -1 AND age < 101)", True),  # strict, on integers
    ("age SMALLINT CHECK (0 <= age AND 100 >= age)", True),  # the column on the right
    ("age INTEGER CHECK (age BETWEEN 10 AND 50)", True),  # narrower than the bounds
    ("age INTEGER, CHECK (age >= 0), CHECK (age <= 100)", True),  # two constraints together
    ("age DECIMAL(5, 0) CHECK (age BETWEEN 0 AND 100)", True),
    ("age INTEGER CHECK (age BETWEEN 0 AND 101)", False),  # wider
    ("age INTEGER CHECK (age BETWEEN -1 AND 100)", False),
    ("age INTEGER CHECK (age > -2 AND age <= 100)", False),
    ("age INTEGER CHECK (age >= 0)", False),  # one side only
    ("age INTEGER CHECK (age BETWEEN 0 AND 100 OR age IS NULL)", False),  # a disjunction
    ("age INTEGER CHECK (NOT (age < 0) AND age <= 100)", False),
    ("age INTEGER CHECK (age >= 0 AND age <= 100 AND other >= 0)", False),  # another column
    ("age INTEGER, CHECK (other BETWEEN 0 AND 100)", False),  # only the other column's
    ("age INTEGER CHECK (abs(age) <= 100 AND age >= 0)", False),  # a function
    ("age INTEGER CHECK (age BETWEEN 0 AND 100.0)", False),  # not an integer literal
    ("age INTEGER CHECK (age BETWEEN 0 AND 1e2)", False),
    ("age INTEGER CHECK (age BETWEEN 0 AND 100 AND age <> 50)", False),  # another comparison
    ("age INTEGER", False),  # no constraint
]


def _database(path: Path, ddl: str) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE t(pid INTEGER PRIMARY KEY, other INTEGER, {ddl})")
        con.execute("CREATE TABLE pub(age INTEGER CHECK (age BETWEEN 0 AND 100))")
        con.execute("INSERT INTO pub VALUES (3)")


def _engine(path: Path, age_type: str = "integer") -> Engine:
    return Engine(parse_catalog(SCHEMA.replace("AGE_TYPE", age_type)), DuckDBBackend(path))


def _age_sql(e: Engine, sql: str = "SELECT SUM(age), AVG(age) FROM t") -> str:
    # the canonical SQL: what the constraints alone leave out (backends/scanned.py may leave
    # out more in the SQL that runs, from the rows of these small tables)
    prepared = e.canonical().prepare(sql, secret=SECRET)
    assert prepared.sql is not None and not prepared.plan.needs_bounding
    return prepared.sql


@pytest.mark.parametrize(("ddl", "proves"), CASES)
def test_which_constraints_leave_out_the_clamp(ddl: str, proves: bool, tmp_path: Path) -> None:
    _database(tmp_path / "c.duckdb", ddl)
    e = _engine(tmp_path / "c.duckdb")
    try:
        t, pub = e.catalog.table("t"), e.catalog.table("pub")
        assert t is not None and pub is not None
        age, other = t.column("age"), t.column("other")
        assert age is not None and other is not None
        assert age.in_bounds is proves
        other_proven = "CHECK (other BETWEEN 0 AND 100)" in ddl  # the other column's own
        assert other.in_bounds is other_proven
        assert not any(c.in_bounds for c in pub.columns)  # public tables are never read
        sql = _age_sql(e)
        assert ("CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100" in sql) is not proves, sql
        assert ("CASE WHEN other" in _age_sql(e, "SELECT SUM(other) FROM t")) is not other_proven
        # An expression of the column: its sum needs no clamp of its own, its values proved
        # within [1, 101] from the column's (rewrite/ranges.py); the column's DOUBLE clamp
        # inside it is left out where the constraint proves it (rewrite/noop_clamps.py).
        expression = _age_sql(e, "SELECT SUM(age + 1) FROM t")
        assert "THEN 1 WHEN" not in expression and "> 101" not in expression, expression
        assert ("CASE WHEN CAST(age AS DOUBLE) < 0" in expression) is not proves
    finally:
        e.close()


def test_a_float_column_keeps_its_clamp(tmp_path: Path) -> None:
    _database(tmp_path / "f.duckdb", "age DOUBLE CHECK (age BETWEEN 0 AND 100)")
    e = _engine(tmp_path / "f.duckdb", "float")
    try:
        age = e.catalog.table("t").column("age")  # type: ignore[union-attr]
        assert age is not None and not age.in_bounds
        assert "CASE WHEN" in _age_sql(e)
    finally:
        e.close()


def test_duckdb_refuses_a_value_outside_the_constraint(tmp_path: Path) -> None:
    """The trust model: a row the clamp would change cannot be in the table."""
    path = tmp_path / "r.duckdb"
    _database(path, "age INTEGER CHECK (age BETWEEN 0 AND 100)")
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO t VALUES (1, 0, 100), (2, NULL, NULL), (3, 5, 0)")
        for bad in (101, -1, 2**31 - 1):
            with pytest.raises(duckdb.ConstraintException):
                con.execute("INSERT INTO t VALUES (9, 0, ?)", [bad])
            with pytest.raises(duckdb.ConstraintException):
                con.execute("UPDATE t SET age = ? WHERE pid = 1", [bad])
        assert con.execute("SELECT MIN(age), MAX(age) FROM t").fetchone() == (0, 100)


def _clamped(catalog: Catalog) -> Catalog:
    return replace(
        catalog,
        tables=tuple(
            replace(
                t, columns=tuple(replace(c, in_bounds=False, scanned=False) for c in t.columns)
            )
            for t in catalog.tables
        ),
    )


QUERIES = (
    "SELECT SUM(age) FROM t",
    "SELECT AVG(age), COUNT(age) FROM t",
    "SELECT VAR_SAMP(age), STDDEV_POP(age) FROM t",
    "SELECT other, SUM(age), AVG(age) FROM t GROUP BY other",
    "SELECT AVG(age) FROM t WHERE other > 3",
    "SELECT COUNT(DISTINCT age), SUM(age) FROM t",
)
# Row-level expressions: the column's DOUBLE clamp inside them (rewrite/noop_clamps.py).
EXPRESSIONS = (
    "SELECT SUM(age + 1), AVG(age / 3) FROM t",
    "SELECT other, SUM(age * 0.5 - other) FROM t GROUP BY other",
    "SELECT VAR_POP(age * 2), AVG(CASE WHEN age > 50 THEN age END) FROM t",
)


def test_the_sql_without_the_clamp_gives_the_same_aggregates(tmp_path: Path) -> None:
    path = tmp_path / "same.duckdb"
    _database(path, "age BIGINT CHECK (age BETWEEN 0 AND 100)")
    with duckdb.connect(str(path)) as con:
        con.execute(
            "INSERT INTO t SELECT i, i % 7, CASE WHEN i % 11 = 0 THEN NULL ELSE i % 101 END "
            "FROM range(1, 3000) r(i)"
        )
        con.execute("INSERT INTO t VALUES (5000, 1, 0), (5001, 1, 100), (5002, NULL, 100)")
    e = _engine(path)
    try:
        from dpproxy.planning.planner import plan_query
        from dpproxy.rewrite.pipeline import rewrite
        from dpproxy.sql.parse import parse
        from dpproxy.sql.validate import validate

        clamped = _clamped(e.catalog)
        for sql in (*QUERIES, *EXPRESSIONS):
            fast = e.prepare(sql, secret=SECRET)
            assert fast.sql is not None
            plan = plan_query(validate(parse(sql), clamped, sql), clamped.policy)
            slow = rewrite(plan, SECRET, "duckdb")
            clamp = "CASE WHEN age < 0" if sql in QUERIES else "CASE WHEN CAST(age AS DOUBLE) < 0"
            assert clamp in slow and clamp not in fast.sql, sql
            a, b = e.backend.execute(fast.sql), e.backend.execute(slow)
            assert a.columns == b.columns
            assert sorted(a.rows, key=repr) == sorted(b.rows, key=repr), sql
    finally:
        e.close()


@pytest.mark.parametrize(
    ("text", "dialect", "expected"),
    [
        ("(age BETWEEN 0 AND 100)", "duckdb", (0, 100)),
        ("((age > -1) AND (age < 101))", "duckdb", (0, 100)),
        ('("AGE" >= 3)', "duckdb", (3, None)),  # DuckDB: names case-insensitive
        ("((age >= 0) AND (age <= 100))", "postgres", (0, 100)),
        ("((age >= '-5'::integer) AND (age <= 7))", "postgres", (-5, 7)),
        ('("AGE" >= 3)', "postgres", None),  # PostgreSQL: a quoted name is another column
        ("((age >= (0)::numeric) AND (age <= 100))", "postgres", (0, 100)),
        ("((age >= (0)::numeric(5,1)) AND (age <= 100))", "postgres", None),
        ("((age >= (0)::double precision) AND (age <= 100))", "postgres", None),
        ("((age >= (0.5)::numeric) AND (age <= 100))", "postgres", None),
        ("((age >= 0) AND (age <= 100)) NOT VALID", "postgres", None),
        ("((t.age >= 0) AND (age <= 100))", "duckdb", None),
        ("(age IN (1, 2))", "duckdb", None),
        ("(age BETWEEN SYMMETRIC 0 AND 100)", "postgres", None),
        ("(age = 5)", "duckdb", None),
        ("((age >= 0) AND (age <= 100)) OR FALSE", "duckdb", None),
        ("(age >= 0 AND age <= 1/2)", "duckdb", None),
        ("not sql at all (", "duckdb", None),
    ],
)
def test_interval(text: str, dialect: str, expected: tuple[int, int] | None) -> None:
    assert interval(text, "age", dialect) == expected


def test_the_schema_readme_example(tmp_path: Path) -> None:
    """schemas/README.md's example constraint, with the bounds of its example schema."""
    readme = (Path(__file__).parents[2] / "schemas" / "README.md").read_text(encoding="utf-8")
    example = "age INTEGER CHECK (age BETWEEN 17 AND 90)"
    assert f"`{example}`" in readme and "age: {type: integer, lower: 17, upper: 90}" in readme
    _database(tmp_path / "readme.duckdb", example)
    schema = SCHEMA.replace("AGE_TYPE", "integer").replace(
        "nullable: true, lower: 0, upper: 100}\n      other", "lower: 17, upper: 90}\n      other"
    )
    e = Engine(parse_catalog(schema), DuckDBBackend(tmp_path / "readme.duckdb"))
    try:
        assert e.catalog.table("t").column("age").in_bounds  # type: ignore[union-attr]
        assert "CASE WHEN age" not in _age_sql(e)
    finally:
        e.close()
