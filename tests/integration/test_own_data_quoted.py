"""Tables and columns whose names need quoting in PostgreSQL (schemas/README.md, "Names";
docs/postgres.md, "Names"): a table ``"Sales"`` with columns ``"userId"`` and ``"createdAt"``,
as Prisma, Django's ``db_table`` and many ORMs create them.

Until 2026-11-29 dpproxy looked every PostgreSQL name up in lower case and wrote its SQL
unquoted, so such a table was refused when the engine opened (42P01: ``table "Sales" of the
schema is not in the database``) whatever the schema said. Now the schema names a table and a
column exactly as the database does, the analyst's SQL names them as PostgreSQL would
(``"Sales"``; an unquoted ``sales`` folds to lower case and does not read ``"Sales"``), and the
SQL dpproxy writes quotes them. DuckDB resolves names regardless of case, as before. Real
PostgreSQL and DuckDB, the noise off.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError, UndefinedColumn, UndefinedTable
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: quoted
privacy: {epsilon: 1, delta: "1e-6", budget: {epsilon: 1000, delta: 0.5}}
tables:
  TABLE:
    privacy_unit: UNIT
    columns:
      UNIT: {type: integer}
      CREATED: {type: date}
      amount: {type: float, lower: 0, upper: 100}
      Region: {type: text, domain: [north, south]}
"""
ROWS = [
    (1, "2024-01-01", 10.0, "north"),
    (2, "2024-02-01", 20.0, "south"),
    (3, "2024-03-01", 1000.0, "south"),
]


def schema(table: str = "Sales", unit: str = "userId", created: str = "createdAt") -> str:
    return SCHEMA.replace("TABLE", table).replace("UNIT", unit).replace("CREATED", created)


@pytest.fixture
def pg(pg_dsn: str) -> str:
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(
            'CREATE TABLE "Sales" ("userId" int PRIMARY KEY, "createdAt" date NOT NULL, '
            'amount float8, "Region" text)'
        )
        for r in ROWS:
            con.execute('INSERT INTO "Sales" VALUES (%s, %s, %s, %s)', r)
    return pg_dsn


@pytest.fixture
def pg_engine(pg: str) -> Iterator[Engine]:
    backend = PostgresBackend(pg)
    try:
        yield Engine(parse_catalog(schema()), backend, noise=NoNoise())
    finally:
        backend.close()


def _one(e: Engine, sql: str) -> object:
    (row,) = e.run(sql, analyst="a").released.rows
    return row[0]


# SUM(amount) with the third row clamped to 100: 130; the WHERE keeps the last two: 120
ANSWERS = [
    ('SELECT COUNT(*) FROM "Sales"', 3),
    ('SELECT SUM(amount) FROM "Sales"', 130.0),
    ('SELECT SUM(amount) FROM "Sales" WHERE "createdAt" >= \'2024-02-01\'', 120.0),
    ('SELECT SUM(s.amount) FROM "Sales" s WHERE s."createdAt" >= \'2024-02-01\'', 120.0),
    ('SELECT SUM("Sales".amount) FROM "Sales" WHERE "Sales"."Region" = \'south\'', 120.0),
    ('SELECT COUNT(DISTINCT "userId") FROM "Sales"', 3),
    (
        'WITH x AS (SELECT "createdAt" AS d FROM "Sales") SELECT COUNT(*) FROM x '
        "WHERE d < '2024-02-15'",
        2,
    ),
]


@pytest.mark.parametrize(("sql", "expected"), ANSWERS)
def test_a_quoted_postgres_table_is_answered(pg_engine: Engine, sql: str, expected: object) -> None:
    """Before: the engine did not open (42P01, "Sales" not in the database)."""
    assert _one(pg_engine, sql) == expected


def test_a_quoted_group_key_is_released_under_its_name(pg_engine: Engine) -> None:
    answer = pg_engine.run(
        'SELECT "Region", SUM(amount) FROM "Sales" GROUP BY "Region" ORDER BY "Region"',
        analyst="a",
    ).released
    assert list(answer.rows) == [("north", 10.0), ("south", 120.0)]


def test_the_sql_dpproxy_writes_quotes_the_names(pg_engine: Engine) -> None:
    query = 'SELECT SUM(amount) FROM "Sales" WHERE "createdAt" > \'2024-01-01\''
    sql = pg_engine.prepare(query).sql
    assert sql is not None
    assert 'FROM "public"."Sales"' in sql and '"createdAt" >' in sql


def test_a_primary_key_of_a_quoted_column_is_read(pg_engine: Engine) -> None:
    """The unit "userId" is the PRIMARY KEY: one row per unit, no contribution bounding;
    "createdAt" is NOT NULL. Before, facts of a column that is not its own lower case were
    never read (the SQL read its lower-case name)."""
    t = pg_engine.catalog.table("Sales")
    assert t is not None and t.unit_is_unique
    created = t.column("createdAt")
    assert created is not None and created.not_null


@pytest.mark.parametrize(
    ("sql", "error", "near"),
    [
        ("SELECT COUNT(*) FROM sales", UndefinedTable, '"Sales"'),
        ("SELECT COUNT(*) FROM SALES", UndefinedTable, '"Sales"'),
        ('SELECT COUNT(*) FROM "sales"', UndefinedTable, '"Sales"'),
        (
            "SELECT COUNT(*) FROM \"Sales\" WHERE createdAt > '2024-01-01'",
            UndefinedColumn,
            '"createdAt"',
        ),
        ('SELECT SUM(amount) FROM "Sales" GROUP BY region', UndefinedColumn, '"Region"'),
        ('SELECT SUM(sales.amount) FROM "Sales"', UndefinedTable, '"Sales"'),
    ],
)
def test_an_unquoted_name_does_not_read_a_quoted_one(
    pg_engine: Engine, sql: str, error: type[DPProxyError], near: str
) -> None:
    """PostgreSQL folds an unquoted name to lower case: ``sales`` is not ``"Sales"``, and
    dpproxy refuses it as PostgreSQL would, naming the close match (before: the engine did
    not open at all)."""
    with pytest.raises(error) as got:
        pg_engine.run(sql, analyst="a")
    assert f"did you mean {near}?" in (got.value.hint or "")


@pytest.mark.parametrize(
    ("table", "unit", "created", "error", "near"),
    [
        ("sales", "userId", "createdAt", UndefinedTable, '"Sales"'),
        ("Sales", "userId", "createdat", UndefinedColumn, '"createdAt"'),
        ("Sales", "UserId", "createdAt", UndefinedColumn, '"userId"'),
    ],
)
def test_a_schema_name_is_the_database_s_exact_name(
    pg: str, table: str, unit: str, created: str, error: type[DPProxyError], near: str
) -> None:
    backend = PostgresBackend(pg)
    try:
        with pytest.raises(error) as got:
            Engine(parse_catalog(schema(table, unit, created)), backend)
        assert f"did you mean {near}?" in (got.value.hint or "")
    finally:
        backend.close()


def test_two_spellings_of_one_name_are_refused(pg_dsn: str) -> None:
    """A column "createdAt" in one table and createdat in another: dpproxy's planning is
    blind to case, so it refuses the schema at open (0A000) rather than guess."""
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute('CREATE TABLE "Sales" ("userId" int, "createdAt" date)')
        con.execute("CREATE TABLE refunds (uid int, createdat date)")
    text = """
version: 1
dataset: two
tables:
  Sales: {privacy_unit: userId, columns: {userId: integer, createdAt: date}}
  refunds: {privacy_unit: uid, columns: {uid: integer, createdat: date}}
"""
    backend = PostgresBackend(pg_dsn)
    try:
        with pytest.raises(DPProxyError) as got:
            Engine(parse_catalog(text), backend)
        assert got.value.sqlstate == "0A000"
        assert '"createdAt"' in got.value.message and '"createdat"' in got.value.message
    finally:
        backend.close()


def test_duckdb_resolves_names_regardless_of_case(tmp_path: Path) -> None:
    path = tmp_path / "sales.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        'CREATE TABLE "Sales" ("userId" INTEGER, "createdAt" DATE, amount DOUBLE, "Region" TEXT)'
    )
    con.executemany('INSERT INTO "Sales" VALUES (?, ?, ?, ?)', ROWS)
    con.close()
    backend = DuckDBBackend(str(path))
    try:
        e = Engine(parse_catalog(schema("sales", "userid", "createdat")), backend, noise=NoNoise())
        assert _one(e, 'SELECT COUNT(*) FROM "Sales" WHERE "createdAt" >= \'2024-02-01\'') == 2
        assert _one(e, "SELECT COUNT(*) FROM sales WHERE createdat >= '2024-02-01'") == 2
    finally:
        backend.close()


def test_columns_that_differ_in_case_only_prove_nothing(pg_dsn: str) -> None:
    """docs/postgres.md: a table with "UID" beside uid proves nothing about either, though
    each is a unique NOT NULL column of its own."""
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute('CREATE TABLE w ("UID" int PRIMARY KEY, uid int NOT NULL UNIQUE, a int)')
    for unit in ("uid", "UID"):
        text = f"""
version: 1
dataset: twin
tables:
  w: {{privacy_unit: {unit}, columns: {{{unit}: integer, a: integer}}}}
"""
        backend = PostgresBackend(pg_dsn)
        try:
            t = Engine(parse_catalog(text), backend).catalog.table("w")
            assert t is not None and not t.unit_is_unique
            assert not any(c.not_null for c in t.columns)
        finally:
            backend.close()


def test_a_view_gives_a_name_with_a_space_a_plain_one(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute('CREATE TABLE "Order Items" (uid int, n int)')
        con.execute('INSERT INTO "Order Items" VALUES (1, 5), (2, 7)')
        con.execute('CREATE VIEW order_items AS SELECT * FROM "Order Items"')
    plain = (
        "version: 1\ndataset: v\ntables:\n  NAME: {privacy_unit: uid, columns: {uid: integer}}\n"
    )
    with pytest.raises(DPProxyError, match="plain identifiers"):
        parse_catalog(plain.replace("NAME", '"Order Items"'))
    backend = PostgresBackend(pg_dsn)
    try:
        e = Engine(parse_catalog(plain.replace("NAME", "order_items")), backend, noise=NoNoise())
        assert _one(e, "SELECT COUNT(*) FROM order_items") == 2
    finally:
        backend.close()


JOINED = """
version: 1
dataset: joined
privacy: {epsilon: 1, delta: "1e-6", budget: {epsilon: 1000, delta: 0.5}}
tables:
  Sales:
    privacy_unit: userId
    max_rows_per_unit: 2
    columns:
      userId: {type: integer}
      regionId: {type: integer}
      amount: {type: float, lower: 0, upper: 100}
  Regions:
    private: false
    columns:
      regionId: {type: integer}
      Name: {type: text}
"""
JOINED_ROWS = [
    'CREATE TABLE "Sales" ("userId" int, "regionId" int, amount float8)',
    'INSERT INTO "Sales" VALUES (1, 1, 10), (2, 2, 20), (2, 2, 30)',
    'CREATE TABLE "Regions" ("regionId" int PRIMARY KEY, "Name" text)',
    "INSERT INTO \"Regions\" VALUES (1, 'north'), (2, 'south')",
]
JOINED_ANSWERS = [
    ('SELECT "Name" FROM "Regions" ORDER BY "Name"', [("north",), ("south",)]),
    (
        'SELECT r."Name", SUM(s.amount) FROM "Sales" s JOIN "Regions" r '
        'ON s."regionId" = r."regionId" GROUP BY r."Name" ORDER BY 1',
        [("north", 10.0), ("south", 50.0)],
    ),
    (
        'SELECT COUNT(*) FROM "Sales" WHERE "regionId" IN '
        '(SELECT "regionId" FROM "Regions" WHERE "Name" = \'south\')',
        [(2,)],
    ),
]


@pytest.mark.parametrize(("sql", "expected"), JOINED_ANSWERS)
def test_a_quoted_public_table_is_read_and_joined(pg_dsn: str, sql: str, expected: object) -> None:
    """A public table "Regions", read exactly, joined and used in IN. Before: the engine did
    not open; with the names fixed at open, the public query missed the quoted "Name"
    (42703) and the join on "regionId" was refused as a cross join (0A000)."""
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        for statement in JOINED_ROWS:
            con.execute(statement)
    backend = PostgresBackend(pg_dsn)
    try:
        e = Engine(parse_catalog(JOINED), backend, noise=NoNoise())
        assert list(e.run(sql, analyst="a").released.rows) == expected
    finally:
        backend.close()


def test_duckdb_joins_on_a_mixed_case_column(tmp_path: Path) -> None:
    """The join on regionId was refused as a cross join on DuckDB too (Table.column looked
    the lower-case name up exactly)."""
    con = duckdb.connect(str(tmp_path / "j.duckdb"))
    for statement in JOINED_ROWS:
        con.execute(statement)
    con.close()
    backend = DuckDBBackend(str(tmp_path / "j.duckdb"))
    try:
        e = Engine(parse_catalog(JOINED), backend, noise=NoNoise())
        assert list(e.run(JOINED_ANSWERS[1][0], analyst="a").released.rows) == [
            ("north", 10.0),
            ("south", 50.0),
        ]
    finally:
        backend.close()


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("doc", "claims"),
    [
        (
            "schemas/README.md",
            [
                'a table created as `"Sales"` (as Prisma, Django\'s `db_table` and many ORMs '
                'create them) is `Sales` in the schema, and a column `"createdAt"` is '
                "`createdAt`",  # test_a_quoted_postgres_table_is_answered
                "refused when dpproxy opens the database (42P01 for a table, 42703 for a "
                'column), with a hint naming the database\'s spelling (`did you mean "Sales"?`)',
                "an unquoted `sales` folds to lower case and is refused (42P01, `relation "
                '"sales" does not exist`, with the same hint), never read as `"Sales"`',
                "The SQL dpproxy sends writes such names in double quotes.",
                "are refused on PostgreSQL (0A000)",  # test_two_spellings_of_one_name_...
                'there `sales`, `SALES` and `"Sales"` all name the table `Sales`',
                "Over PostgreSQL it compares names exactly, as dpproxy does when it opens the "
                "database: a schema table `sales` is reported missing where the database has "
                '`"Sales"`, with `did you mean "Sales"?`.',  # test_schema_check_resolves_...
                "give dpproxy a view of the table under a plain name (`CREATE VIEW order_items "
                'AS SELECT * FROM "Order Items"`)',
            ],
        ),
        (
            "docs/postgres.md",
            [
                'A table two of whose columns differ in case only (`"UID"` beside `uid`) '
                "proves nothing about either",
                "on start a schema name the database spells otherwise is refused, 42P01 for a "
                "table and 42703 for a column",
                "and so is an unquoted `createdAt` (42703)",
                '(`FROM "public"."Sales"`, `"createdAt" > ...`)',
            ],
        ),
    ],
)
def test_the_docs_say_what_these_tests_check(doc: str, claims: list[str]) -> None:
    text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
    for claim in claims:
        assert claim in text, claim


@pytest.mark.parametrize(
    ("table", "unit", "created", "problem"),
    [
        ("Sales", "userId", "createdAt", None),
        ("sales", "userId", "createdAt", 'is not in the database (did you mean "Sales"?)'),
        ("Sales", "userId", "createdat", '(did you mean "createdAt"?) (SQLSTATE 42703)'),
    ],
)
def test_schema_check_resolves_names_as_the_engine_does(
    pg: str, table: str, unit: str, created: str, problem: str | None
) -> None:
    """``dpproxy schema check --database`` over PostgreSQL compares names exactly too (it
    found sales for "Sales" regardless of case, and then the engine refused to open)."""
    from dpproxy.backends.postgres_shapes import describe_postgres
    from dpproxy.catalog.check import check_schema

    report = check_schema(schema(table, unit, created), "s.yaml", describe_postgres(pg))
    if problem is None:
        assert report.problems == ()
    else:
        assert any(problem in p for p in report.problems), report.problems
