"""CHECK constraints that prove a column within its schema bounds, on PostgreSQL
(``backends/checks.postgres_proven``): only validated, inherited constraints of a plain table
the unqualified name resolves to; the same shapes as on DuckDB (``test_check_bounds.py``).
"""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest
from psycopg import sql as pgsql

from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from tests.integration.test_check_bounds import QUERIES, SCHEMA, SECRET

CLAMP = "CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100"
# the clamp as a bounded plan writes it (a unit not proved unique: another relation of the
# same name on the search path leaves its key uncertain too, backends/checks.PG_UNIQUE)
CLAMP_BOUNDED = "CASE WHEN CAST(age AS DOUBLE PRECISION) < 0 THEN 0"

# (statements after "CREATE TABLE t(pid INTEGER PRIMARY KEY, other INTEGER, " + the first,
#  does it prove age within [0, 100]?)
CASES = [
    (("age INTEGER CHECK (age BETWEEN 0 AND 100))",), True),
    (("age BIGINT CHECK (age >= 0 AND age <= 100))",), True),
    (("age SMALLINT CHECK (age > -1 AND age < 101))",), True),
    (("age NUMERIC(5, 0) CHECK (age >= 0 AND age <= 100))",), True),
    (("age INTEGER, CHECK (age >= 0), CHECK (age <= 100))",), True),
    (("age INTEGER CHECK (age BETWEEN 0 AND 101))",), False),
    (("age INTEGER CHECK (age BETWEEN SYMMETRIC 0 AND 100))",), False),
    (("age INTEGER CHECK (age BETWEEN 0 AND 100 OR age IS NULL))",), False),
    (("age INTEGER CHECK (age >= 0 AND age <= 100 AND other >= 0))",), False),
    # a NUMERIC of scale 0 holds integers only, and its CHECK proves the bounds as an integer
    # type's (a plain NUMERIC, once here as "not an integer type", does not fit the schema's
    # integer: the engine is refused, 42804, tests/attacks/test_direct_engine_fit.py)
    (("age NUMERIC(10, 0) CHECK (age BETWEEN 0 AND 100))",), True),
    (("age INTEGER)",), False),
    (  # NOT VALID: the rows already there were never checked
        (
            "age INTEGER)",
            "ALTER TABLE t ADD CONSTRAINT a CHECK (age BETWEEN 0 AND 100) NOT VALID",
        ),
        False,
    ),
    (
        (
            "age INTEGER)",
            "ALTER TABLE t ADD CONSTRAINT a CHECK (age BETWEEN 0 AND 100) NOT VALID",
            "ALTER TABLE t VALIDATE CONSTRAINT a",
        ),
        True,
    ),
    (  # NO INHERIT: a child table's rows, read by a SELECT of t, need not satisfy it
        ("age INTEGER, CHECK (age BETWEEN 0 AND 100) NO INHERIT)",),
        False,
    ),
    (  # another relation named t on the search path: not certainly the one the query reads
        (
            "age INTEGER CHECK (age BETWEEN 0 AND 100))",
            "CREATE SCHEMA other_t",
            "CREATE TABLE other_t.t(age INTEGER)",
            "SET search_path = public, other_t",
        ),
        False,
    ),
]


def _load(dsn: str, statements: tuple[str, ...]) -> None:
    first, *rest = statements
    run_statements(
        dsn,
        [
            f"CREATE TABLE t(pid INTEGER PRIMARY KEY, other INTEGER, {first}",
            "CREATE TABLE pub(age INTEGER CHECK (age BETWEEN 0 AND 100))",
            "INSERT INTO pub VALUES (3)",
            *rest,
        ],
    )


def run_statements(dsn: str, statements: list[str]) -> None:
    """Each statement on ``dsn``; a ``SET search_path`` is set for the database, so that every
    later connection (the backend's) has it."""
    with psycopg.connect(dsn, autocommit=True) as con:
        for s in statements:
            if s.startswith("SET search_path"):
                db = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
                con.execute(
                    pgsql.SQL("ALTER DATABASE {} ").format(pgsql.Identifier(db)) + pgsql.SQL(s)
                )
            else:
                con.execute(s)


def _engine(dsn: str, age_type: str = "integer") -> Engine:
    return Engine(parse_catalog(SCHEMA.replace("AGE_TYPE", age_type)), PostgresBackend(dsn))


@pytest.mark.parametrize(("statements", "proves"), CASES)
def test_which_postgres_constraints_leave_out_the_clamp(
    statements: tuple[str, ...], proves: bool, pg_dsn: str
) -> None:
    _load(pg_dsn, statements)
    e = _engine(pg_dsn)
    try:
        t, pub = e.catalog.table("t"), e.catalog.table("pub")
        assert t is not None and pub is not None
        age = t.column("age")
        assert age is not None and age.in_bounds is proves
        # never proved by the rows on PostgreSQL (backends/scanned.py): the table is empty
        # here, yet the SQL that runs keeps the clamp unless a constraint proves it
        assert not any(c.scanned for c in t.columns)
        assert not any(c.in_bounds for c in pub.columns)
        prepared = e.prepare("SELECT SUM(age), AVG(age) FROM t", secret=SECRET)
        assert prepared.sql is not None
        bare = prepared.sql.replace('"', "")  # PostgreSQL's SQL quotes every catalog name
        clamped = CLAMP in bare or CLAMP_BOUNDED in bare
        assert clamped is not proves, prepared.sql
    finally:
        e.close()


def test_postgres_sql_without_the_clamp_gives_the_same_aggregates(pg_dsn: str) -> None:
    _load(pg_dsn, ("age BIGINT CHECK (age BETWEEN 0 AND 100))",))
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(
            "INSERT INTO t SELECT i, i % 7, CASE WHEN i % 11 = 0 THEN NULL ELSE i % 101 END "
            "FROM generate_series(1, 2999) i"
        )
        con.execute("INSERT INTO t VALUES (5000, 1, 0), (5001, 1, 100), (5002, NULL, 100)")
        for bad in (101, -1):
            with pytest.raises(psycopg.errors.CheckViolation):
                con.execute("INSERT INTO t VALUES (9999, 0, %s)", (bad,))
    e = _engine(pg_dsn)
    try:
        clamped = replace(
            e.catalog,
            tables=tuple(
                replace(t, columns=tuple(replace(c, in_bounds=False) for c in t.columns))
                for t in e.catalog.tables
            ),
        )
        for sql in QUERIES:
            fast = e.prepare(sql, secret=SECRET)
            assert fast.sql is not None
            plan = plan_query(validate(parse(sql), clamped, sql), clamped.policy)
            slow = rewrite(plan, SECRET, "postgres", schemas=e.schemas)
            assert "CASE WHEN \"age\" < 0" in slow and "CASE WHEN \"age\" < 0" not in fast.sql, sql
            a, b = e.backend.execute(fast.sql), e.backend.execute(slow)
            assert a.columns == b.columns
            assert sorted(a.rows, key=repr) == sorted(b.rows, key=repr), sql
    finally:
        e.close()
