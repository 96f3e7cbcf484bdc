"""What a backend reads from its database's constraints, and where it must not trust them:
``Table.unit_is_unique`` (a PRIMARY KEY or UNIQUE NOT NULL unit column: contribution bounding
is left out) and ``Column.not_null`` (a NOT NULL column: its COUNT is COUNT(*), shared with the
others: ``tests/unit/test_shared_count.py``).

Only a stored table's constraints speak for the rows a query reads. On DuckDB, a view's
``DESCRIBE`` shows the key and NOT NULL of the table it reads however it joins it: a view
``SELECT t.* FROM t JOIN u ON true`` shows t's PRIMARY KEY with each unit |u| times, and was
once taken as unique (sensitivity 1 where a unit held five rows). On PostgreSQL, a parent
table's PRIMARY KEY holds only its own rows while a SELECT of it reads its inheritance
children's too, a child may drop a NOT NULL its parent has (before PostgreSQL 18), and a
constraint of another relation of the same name on the search path proves nothing about the
one the name resolves to. A foreign table that is a child or a partition holds its parent's
CHECK constraints without enforcing them (``Column.in_bounds``: the clamp is left out), and a
SELECT of the parent reads its rows. Each case runs a query end to end with the noise off: a
unit repeated by a view or a child keeps only its bounded rows, and a foreign row's value
outside the bounds is clamped.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from dpproxy.backends import fit
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Table
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.integration.test_check_bounds_postgres import run_statements
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: constraints
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  w:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: float, lower: 0, upper: 100}
"""
UNITS = 100


def _engine(backend: DuckDBBackend | PostgresBackend) -> Engine:
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())


def _facts(e: Engine) -> tuple[bool, bool]:
    w = e.catalog.table("w")
    assert isinstance(w, Table)
    a = w.column("a")
    assert a is not None
    return w.unit_is_unique, a.not_null


def _count(e: Engine) -> int:
    (row,) = e.run("SELECT COUNT(*) FROM w", analyst="a").released.rows
    return int(row[0])  # type: ignore[call-overload]


# The rows of w and its units, the NULL unit one of them (bounding ranks its rows together)
DISTINCT_UNITS = "SELECT COUNT(*), (SELECT COUNT(*) FROM (SELECT DISTINCT uid FROM w) d) FROM w"


# (DDL after the stored table t(uid PRIMARY KEY, a NOT NULL) and u(k) with 5 rows, unique?,
#  not null?, the released COUNT(*) with the noise off: one row per unit kept)
DUCKDB_CASES = [
    (
        "CREATE TABLE w (uid BIGINT PRIMARY KEY, a DOUBLE NOT NULL); INSERT INTO w SELECT * FROM t",
        True,
        True,
    ),
    (
        "CREATE TABLE w (uid BIGINT UNIQUE NOT NULL, a DOUBLE); INSERT INTO w SELECT * FROM t",
        True,
        False,
    ),
    # UNIQUE admits any number of NULLs, and rows whose unit is NULL are one unit
    ("CREATE TABLE w (uid BIGINT UNIQUE, a DOUBLE); INSERT INTO w SELECT * FROM t", False, False),
    (
        "CREATE TABLE w (uid BIGINT UNIQUE, a DOUBLE); INSERT INTO w SELECT * FROM t; "
        "INSERT INTO w SELECT NULL, 1 FROM range(500)",  # 500 rows of the NULL unit
        False,
        False,
    ),
    ("CREATE TABLE w (uid BIGINT, a DOUBLE NOT NULL); INSERT INTO w SELECT * FROM t", False, True),
    ("CREATE VIEW w AS SELECT * FROM t", False, False),
    ("CREATE VIEW w AS SELECT t.* FROM t JOIN u ON true", False, False),  # each unit 5 times
    ("CREATE VIEW w AS SELECT t.uid, t.a FROM u LEFT JOIN t ON u.k = t.uid", False, False),
]


@pytest.mark.parametrize(("ddl", "unique", "not_null"), DUCKDB_CASES)
def test_duckdb_trusts_the_constraints_of_stored_tables_only(
    tmp_path: Path, ddl: str, unique: bool, not_null: bool
) -> None:
    path = tmp_path / "c.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (uid BIGINT PRIMARY KEY, a DOUBLE NOT NULL)")
        con.execute(f"INSERT INTO t SELECT i, i % 100 FROM range({UNITS}) r(i)")
        con.execute("CREATE TABLE u (k BIGINT)")
        con.execute("INSERT INTO u SELECT i FROM range(5) r(i)")
        for statement in ddl.split("; "):
            con.execute(statement)
        rows, units = con.execute(DISTINCT_UNITS).fetchone()  # type: ignore[misc]
    e = _engine(DuckDBBackend(path))
    try:
        assert _facts(e) == (unique, not_null)
        assert _count(e) == units  # max_rows_per_unit: 1, bounded or proven unique
        assert rows == units or not unique
    finally:
        e.close()


# A text unit whose units each have two spellings, 'P7' and 'p7': one unit under a
# case-insensitive collation, which PARTITION BY and COUNT(DISTINCT) compare with
TEXT_SCHEMA = SCHEMA.replace("uid: {type: integer}", "uid: {type: text}")
TWO_CASES = "CASE WHEN i % 2 = 0 THEN 'p' ELSE 'P' END || (i // 2)"


# (DDL of w, a unit column of collation NOCASE; unique?)
DUCKDB_COLLATED = [
    ("CREATE TABLE w (uid VARCHAR PRIMARY KEY, a DOUBLE)", True),  # 200 units, none repeated
    # the key compares bytes, not the collation: 'P7' and 'p7' are both in it
    ("CREATE TABLE w (uid VARCHAR COLLATE NOCASE PRIMARY KEY, a DOUBLE)", False),
    ("CREATE TABLE w (uid VARCHAR COLLATE NOCASE UNIQUE NOT NULL, a DOUBLE)", False),
    ("CREATE TABLE w (uid VARCHAR PRIMARY KEY, a DOUBLE, b VARCHAR COLLATE NOACCENT)", False),
]


@pytest.mark.parametrize(("ddl", "unique"), DUCKDB_COLLATED)
def test_duckdb_trusts_no_key_of_a_table_with_a_collation(
    tmp_path: Path, ddl: str, unique: bool
) -> None:
    """DuckDB's PRIMARY KEY of a VARCHAR COLLATE NOCASE column holds 'P7' and 'p7', which the
    bounding ranks as one unit: the key was once trusted, and 200 rows of 100 units were
    counted as 200 with max_rows_per_unit 1 (the COUNT(DISTINCT uid) too). The last case
    costs only the optimisation: the collation is read from the table's CREATE statement."""
    path = tmp_path / "c.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl)
        con.execute(f"INSERT INTO w (uid, a) SELECT {TWO_CASES}, 1 FROM range(200) r(i)")
        (units,) = con.execute("SELECT COUNT(DISTINCT uid) FROM w").fetchone()  # type: ignore[misc]
    e = Engine(parse_catalog(TEXT_SCHEMA), DuckDBBackend(path), noise=NoNoise())
    try:
        assert _facts(e)[0] is unique
        assert _count(e) == units == (200 if "NOCASE" not in ddl else 100)
        (row,) = e.run("SELECT COUNT(DISTINCT uid) FROM w", analyst="a").released.rows
        assert row[0] == units
    finally:
        e.close()


ROWS = f"SELECT i, i % 100 FROM generate_series(1, {UNITS}) i"
FAILS = "FAILS: "  # a statement that PostgreSQL refuses, leaving something behind


def _run(dsn: str, statements: list[str]) -> None:
    """``run_statements``, where a statement marked ``FAILS`` must raise."""
    for s in statements:
        if s.startswith(FAILS):
            with pytest.raises(psycopg.Error):
                run_statements(dsn, [s.removeprefix(FAILS)])
        else:
            run_statements(dsn, [s])


# (statements, unique?, not null?, units: the COUNT(*) released with the noise off)
POSTGRES_CASES = [
    (
        ["CREATE TABLE w (uid INT PRIMARY KEY, a FLOAT8 NOT NULL)", f"INSERT INTO w {ROWS}"],
        True,
        True,
    ),
    (["CREATE TABLE w (uid INT UNIQUE NOT NULL, a FLOAT8)", f"INSERT INTO w {ROWS}"], True, False),
    # UNIQUE admits any number of NULLs, and rows whose unit is NULL are one unit
    (["CREATE TABLE w (uid INT UNIQUE, a FLOAT8)", f"INSERT INTO w {ROWS}"], False, False),
    (
        [
            "CREATE TABLE w (uid INT UNIQUE, a FLOAT8)",
            f"INSERT INTO w {ROWS}",
            "INSERT INTO w SELECT NULL, 1 FROM generate_series(1, 500)",
        ],
        False,
        False,
    ),
    (  # a unique index that failed to build (a duplicate) is left marked unique, not valid
        [
            "CREATE TABLE w (uid INT NOT NULL, a FLOAT8)",
            f"INSERT INTO w {ROWS}",
            "INSERT INTO w VALUES (1, 1), (1, 2), (1, 3)",
            f"{FAILS}CREATE UNIQUE INDEX CONCURRENTLY w_uid ON w (uid)",
        ],
        False,
        False,
    ),
    (  # inheritance: the parent's key holds its own rows; a SELECT of it reads the child's
        [
            "CREATE TABLE w (uid INT PRIMARY KEY, a FLOAT8 NOT NULL)",
            "CREATE TABLE w_child () INHERITS (w)",
            f"INSERT INTO w {ROWS}",
            f"INSERT INTO w_child {ROWS}",
            "ALTER TABLE w_child ALTER COLUMN a DROP NOT NULL",
            "INSERT INTO w_child VALUES (1, NULL)",
        ],
        False,
        False,
    ),
    (  # partitioned: the key holds across partitions; NOT NULL is not read (a partition may
        # be a foreign table)
        [
            "CREATE TABLE w (uid INT PRIMARY KEY, a FLOAT8 NOT NULL) PARTITION BY RANGE (uid)",
            "CREATE TABLE w_low PARTITION OF w FOR VALUES FROM (MINVALUE) TO (50)",
            "CREATE TABLE w_high PARTITION OF w FOR VALUES FROM (50) TO (MAXVALUE)",
            f"INSERT INTO w {ROWS}",
        ],
        True,
        False,
    ),
    (
        [
            "CREATE TABLE t (uid INT PRIMARY KEY, a FLOAT8 NOT NULL)",
            f"INSERT INTO t {ROWS}",
            "CREATE TABLE u (k INT)",
            "INSERT INTO u SELECT generate_series(1, 5)",
            "CREATE VIEW w AS SELECT t.* FROM t JOIN u ON true",
        ],
        False,
        False,
    ),
    (  # a materialized view's column is never declared NOT NULL: its unique index admits
        # any number of NULL units
        [
            "CREATE TABLE t (uid INT, a FLOAT8 NOT NULL)",
            f"INSERT INTO t {ROWS}",
            "CREATE MATERIALIZED VIEW w AS SELECT * FROM t",
            "CREATE UNIQUE INDEX ON w (uid)",
        ],
        False,
        False,
    ),
    (  # the key and the NOT NULL of "UID" and "A", beside the uid and a that a query reads
        [
            'CREATE TABLE w ("UID" INT PRIMARY KEY, uid INT, "A" FLOAT8 NOT NULL, a FLOAT8)',
            "INSERT INTO w SELECT i, i % 10, 1, NULLIF(i % 2, 0) FROM generate_series(1, 100) i",
        ],
        False,
        False,
    ),
    (  # another relation named w on the search path: the key may not be the one read
        [
            "CREATE TABLE w (uid INT PRIMARY KEY, a FLOAT8 NOT NULL)",
            f"INSERT INTO w {ROWS}",
            "CREATE SCHEMA other_w",
            "CREATE TABLE other_w.w (uid INT, a FLOAT8)",
            "SET search_path = public, other_w",
        ],
        False,
        False,
    ),
]


@pytest.mark.parametrize(("statements", "unique", "not_null"), POSTGRES_CASES)
def test_postgres_trusts_the_constraints_that_hold_for_the_rows_read(
    pg_dsn: str, statements: list[str], unique: bool, not_null: bool
) -> None:
    _run(pg_dsn, statements)
    with psycopg.connect(pg_dsn) as con:
        units = con.execute(DISTINCT_UNITS).fetchone()[1]  # type: ignore[index]
    e = _engine(PostgresBackend(pg_dsn))
    try:
        assert _facts(e) == (unique, not_null)
        assert _count(e) == units
    finally:
        e.close()


CHECK_SCHEMA = SCHEMA.replace(
    "a: {type: float, lower: 0, upper: 100}", "a: {type: integer, lower: 0, upper: 100}"
)
FOREIGN = [
    "CREATE EXTENSION IF NOT EXISTS file_fdw",
    "CREATE SERVER rows FOREIGN DATA WRAPPER file_fdw",
]
# a foreign table that reads one row, a = 1000, outside the parent's CHECK
FAR = "SERVER rows OPTIONS (program 'echo 500,1000', format 'csv')"


@pytest.mark.parametrize(
    ("statements", "proves"),
    [
        (["CREATE TABLE w (uid INT, a INT CHECK (a BETWEEN 0 AND 100))"], True),
        (
            [
                "CREATE TABLE w (uid INT, a INT CHECK (a BETWEEN 0 AND 100))",
                "CREATE TABLE w_child () INHERITS (w)",  # inherits the CHECK, cannot drop it
            ],
            True,
        ),
        (
            [
                *FOREIGN,
                "CREATE TABLE w (uid INT, a INT CHECK (a BETWEEN 0 AND 100)) "
                "PARTITION BY RANGE (uid)",
                "CREATE TABLE w_low PARTITION OF w FOR VALUES FROM (MINVALUE) TO (100)",
                f"CREATE FOREIGN TABLE w_far PARTITION OF w FOR VALUES FROM (100) TO (MAXVALUE) "
                f"{FAR}",
            ],
            False,
        ),
        (
            [
                *FOREIGN,
                "CREATE TABLE w (uid INT, a INT CHECK (a BETWEEN 0 AND 100))",
                "CREATE TABLE w_mid () INHERITS (w)",
                f"CREATE FOREIGN TABLE w_far (uid INT, a INT) INHERITS (w_mid) {FAR}",
            ],
            False,
        ),
    ],
)
def test_postgres_trusts_no_check_that_a_foreign_descendant_holds_unenforced(
    pg_dsn: str, statements: list[str], proves: bool
) -> None:
    """A foreign table holds its parent's CHECK constraints without enforcing them, and a
    SELECT of the parent reads its rows: the clamp stays, and the sum counts a = 1000 as the
    bound 100 (it was once left out: 1000 where the sensitivity is 100)."""
    run_statements(pg_dsn, [*statements, "INSERT INTO w VALUES (1, 50)"])
    e = Engine(parse_catalog(CHECK_SCHEMA), PostgresBackend(pg_dsn), noise=NoNoise())
    try:
        w = e.catalog.table("w")
        assert w is not None and w.column("a").in_bounds is proves  # type: ignore[union-attr]
        (row,) = e.run("SELECT SUM(a) FROM w", analyst="a").released.rows
        assert row[0] == (50 if proves else 150)
    finally:
        e.close()


CI = "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
# 200 rows, two spellings of each of 100 units: 'P7' and 'p7'
TWO_SPELLINGS = (
    f"INSERT INTO w SELECT {TWO_CASES.replace('//', '/')}, 1 FROM generate_series(0, 199) i"
)
ONE_SPELLING = "INSERT INTO w SELECT 'p' || i, 1 FROM generate_series(0, 99) i"


@pytest.mark.parametrize(
    ("statements", "unique"),
    [
        ([CI, "CREATE TABLE w (uid TEXT COLLATE ci PRIMARY KEY, a FLOAT8)", ONE_SPELLING], True),
        (
            [  # the index's collation tells 'P7' from 'p7'; the column's equality does not
                CI,
                "CREATE TABLE w (uid TEXT COLLATE ci NOT NULL, a FLOAT8)",
                'CREATE UNIQUE INDEX ON w (uid COLLATE "C")',
                TWO_SPELLINGS,
            ],
            False,
        ),
        (
            [  # text's operator class on a citext column: case-sensitive, citext's = is not
                "CREATE EXTENSION IF NOT EXISTS citext",
                "CREATE TABLE w (uid CITEXT NOT NULL, a FLOAT8)",
                "CREATE UNIQUE INDEX ON w (uid text_ops)",
                TWO_SPELLINGS,
            ],
            False,
        ),
        (["CREATE TABLE w (uid VARCHAR(10) PRIMARY KEY, a FLOAT8)", TWO_SPELLINGS], True),
        (
            [
                "CREATE DOMAIN unit_d AS TEXT",
                "CREATE TABLE w (uid unit_d PRIMARY KEY, a FLOAT8)",
                TWO_SPELLINGS,
            ],
            True,
        ),
    ],
)
def test_postgres_trusts_a_unique_index_with_the_columns_own_equality(
    pg_dsn: str, statements: list[str], unique: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unique index in another collation or operator class than the column's own was once
    trusted: on a case-insensitive column, 200 rows of 100 units ('P7' and 'p7' are one unit
    under PARTITION BY) were counted as 200 with max_rows_per_unit 1. A column of a type
    outside pg_catalog (citext, a domain) does not fit the schema's ``text`` and the engine is
    refused (42804, ``backends/fit.py``); behind that, the uniqueness test still holds."""
    run_statements(pg_dsn, statements)
    if any(s.startswith(("CREATE EXTENSION", "CREATE DOMAIN")) for s in statements):
        backend = PostgresBackend(pg_dsn)
        try:
            with pytest.raises(DPProxyError) as refused:
                Engine(parse_catalog(TEXT_SCHEMA), backend, noise=NoNoise())
            assert refused.value.sqlstate == "42804"
        finally:
            backend.close()
        monkeypatch.setattr(fit, "refuse_misfit", lambda *args, **kwargs: None)
    with psycopg.connect(pg_dsn) as con:
        units = con.execute("SELECT COUNT(DISTINCT uid) FROM w").fetchone()[0]  # type: ignore[index]
    e = Engine(parse_catalog(TEXT_SCHEMA), PostgresBackend(pg_dsn), noise=NoNoise())
    try:
        assert _facts(e)[0] is unique
        assert _count(e) == units
        (row,) = e.run("SELECT COUNT(DISTINCT uid) FROM w", analyst="a").released.rows
        assert row[0] == units
    finally:
        e.close()


def test_postgres_trusts_no_check_of_an_operator_outside_pg_catalog(pg_dsn: str) -> None:
    """A CHECK written with an operator of another schema (here one that is always true) reads
    as plain ``(a >= 0) AND (a <= 100)`` where that schema precedes pg_catalog on the search
    path; a = 1000 passed it, and the clamp was left out (1000 released where the bound is
    100). A constraint that depends on any operator or function that is not built in proves
    nothing."""
    run_statements(
        pg_dsn,
        [
            "CREATE SCHEMA ops",
            "CREATE FUNCTION ops.yes(int, int) RETURNS bool LANGUAGE sql AS 'SELECT true'",
            "CREATE OPERATOR ops.<= (LEFTARG = int, RIGHTARG = int, FUNCTION = ops.yes)",
            "CREATE OPERATOR ops.>= (LEFTARG = int, RIGHTARG = int, FUNCTION = ops.yes)",
            "SET search_path = public, ops, pg_catalog",
        ],
    )
    with psycopg.connect(pg_dsn, autocommit=True) as con:  # the database's search path
        con.execute("CREATE TABLE w (uid INT, a INT CHECK (a >= 0 AND a <= 100))")
        con.execute("INSERT INTO w VALUES (1, 1000)")
    e = Engine(parse_catalog(CHECK_SCHEMA), PostgresBackend(pg_dsn), noise=NoNoise())
    try:
        w = e.catalog.table("w")
        (row,) = e.run("SELECT SUM(a) FROM w", analyst="a").released.rows
        assert row[0] == 100
        assert w is not None and not w.column("a").in_bounds  # type: ignore[union-attr]
    finally:
        e.close()
