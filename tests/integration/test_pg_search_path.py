"""The search path of dpproxy's PostgreSQL connections (``backends/pg_path.py``): pg_catalog
and pg_temp only, every table named with the schema where the steward's search path found it
when the catalog was attached (``sql/qualify.py``).

A database whose search path put a schema ``ops`` before pg_catalog let ``ops.<`` and
``ops.>`` on (float8, float8) stand in for the built-ins in the clamp dpproxy writes: always
false, they removed it (1,050 released with the noise off where each of the two units adds at
most 100); raising above 500, they failed the query for one row's value. An overload with other
argument types (``ops.<(float8, integer)``) competed with the built-in whatever the order, and
refused every connection until 2026-11-29. Each test runs the query end to end on the real
server with the noise off: the released value is the clamped sum, 150, and nothing raises.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import conninfo
from psycopg import sql as pgsql

from dpproxy.backends.pg_path import PINNED, pin_catalog
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.backends.postgres_shapes import describe_postgres as describe
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import UndefinedTable
from tests.integration.test_check_bounds_postgres import run_statements
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: search_path
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  w:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: float, lower: 0, upper: 100}
"""
# two units, one far above the bound of 100: clamped, their sum is 150
ROWS = ["CREATE TABLE w (uid INT, a FLOAT8)", "INSERT INTO w VALUES (1, 1000), (2, 50)"]
CLAMPED = 150.0

NEVER = "SELECT false"
# pg_catalog's own comparison, but an error for a value above 500 (one row's value)
RAISES = "SELECT CASE WHEN $1 > 500 OR $2 > 500 THEN 1 / 0 = 1 ELSE pg_catalog.float8lt($1, $2) END"


def _shadow(body: str) -> list[str]:
    """``ops.<`` and ``ops.>`` on (float8, float8), both ``body``, with the database's search
    path putting ops before pg_catalog."""
    return [
        "CREATE SCHEMA ops",
        f"CREATE FUNCTION ops.f(float8, float8) RETURNS bool LANGUAGE sql AS $${body}$$",
        "CREATE OPERATOR ops.< (LEFTARG = float8, RIGHTARG = float8, FUNCTION = ops.f)",
        "CREATE OPERATOR ops.> (LEFTARG = float8, RIGHTARG = float8, FUNCTION = ops.f)",
        "SET search_path = ops, pg_catalog, public",
    ]


def _sum(dsn: str, query: str = "SELECT SUM(a) FROM w") -> object:
    backend = PostgresBackend(dsn)
    try:
        e = Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
        (row,) = e.run(query, analyst="a").released.rows
        return row[0]
    finally:
        backend.close()


@pytest.mark.parametrize("body", [NEVER, RAISES], ids=["always-false", "raising"])
def test_an_operator_of_another_schema_does_not_replace_the_clamp(pg_dsn: str, body: str) -> None:
    """Before pg_path.pin_catalog: 1,050 released (always false), or the query failed
    (raising, for the row of 1000)."""
    run_statements(pg_dsn, [*ROWS, *_shadow(body)])
    with psycopg.connect(pg_dsn) as con:  # the shadow is live on a plain connection
        if body == NEVER:
            assert con.execute("SELECT 1000::float8 > 100::float8").fetchone() == (False,)
        else:
            with pytest.raises(psycopg.errors.DivisionByZero):
                con.execute("SELECT 1000::float8 > 100::float8")
    assert _sum(pg_dsn) == CLAMPED
    assert _sum(pg_dsn, "SELECT SUM(a) FROM w WHERE a < 2000") == CLAMPED


_FALSE_INT = [  # ops.<(float8, integer), always false: an exact match for the clamp's `x < 0`
    "CREATE SCHEMA ops",
    "CREATE FUNCTION ops.f(float8, int) RETURNS bool LANGUAGE sql AS 'SELECT false'",
    "CREATE OPERATOR ops.< (LEFTARG = float8, RIGHTARG = int, FUNCTION = ops.f)",
    "CREATE OPERATOR ops.> (LEFTARG = float8, RIGHTARG = int, FUNCTION = ops.f)",
]
OVERLOADS = {
    "operator-after-pg_catalog": [*_FALSE_INT, "SET search_path = pg_catalog, ops, public"],
    "operator-before-pg_catalog": [*_FALSE_INT, "SET search_path = ops, pg_catalog, public"],
    "operator-in-public": [
        "CREATE FUNCTION public.f(float8, int) RETURNS bool LANGUAGE sql AS 'SELECT false'",
        "CREATE OPERATOR public.< (LEFTARG = float8, RIGHTARG = int, FUNCTION = public.f)",
        "CREATE OPERATOR public.> (LEFTARG = float8, RIGHTARG = int, FUNCTION = public.f)",
    ],
    "function": [  # raising helpers: round(float8, int) is a common one in public
        "CREATE FUNCTION public.round(float8, int) RETURNS float8 LANGUAGE sql AS 'SELECT 1 / 0'",
        "CREATE FUNCTION public.floor(int) RETURNS int LANGUAGE sql AS 'SELECT 1 / 0'",
        "CREATE FUNCTION public.abs(int) RETURNS int LANGUAGE sql AS 'SELECT 1 / 0'",
    ],
}


@pytest.mark.parametrize("statements", list(OVERLOADS.values()), ids=list(OVERLOADS))
def test_an_overload_of_a_built_in_on_the_path_is_harmless(
    pg_dsn: str, statements: list[str]
) -> None:
    """Whatever the order, an overload with other argument types competes with the built-in
    for an unqualified name and can win (the first three: `1000::float8 > 100` is false on a
    plain connection). dpproxy's sessions search pg_catalog alone: the backend opens, the
    clamp stays, and schema init reads the table."""
    run_statements(pg_dsn, [*ROWS, *statements])
    with psycopg.connect(pg_dsn) as con:  # the overload is live on a plain connection
        if "round" not in statements[0]:
            assert con.execute("SELECT 1000::float8 > 100").fetchone() == (False,)
        else:
            with pytest.raises(psycopg.errors.DivisionByZero):
                con.execute("SELECT round(1000::float8, 2)")
    assert _sum(pg_dsn) == CLAMPED
    assert _sum(pg_dsn, "SELECT SUM(a) FROM w WHERE a > 0 AND uid < 10") == CLAMPED
    assert _sum(pg_dsn, "SELECT SUM(ROUND(a, 1)) FROM w") == CLAMPED
    assert _sum(pg_dsn, "SELECT COUNT(*) FROM w WHERE ABS(uid) < 10") == 2
    assert [t.name for t in describe(pg_dsn)] == ["w"]


def test_a_table_created_after_attach_in_an_earlier_schema_is_not_read(pg_dsn: str) -> None:
    """The path names ``early`` before public, which holds w when the catalog is attached; a
    w created in ``early`` afterwards would take over an unqualified name (a = 7). dpproxy
    keeps reading the attached table, on the open connections and on new ones."""
    run_statements(pg_dsn, [*ROWS, "CREATE SCHEMA early", "SET search_path = early, public"])
    backend = PostgresBackend(pg_dsn, max_connections=2)
    try:
        e = Engine(parse_catalog(SCHEMA), backend, noise=NoNoise())
        assert e.schemas == {"w": "public"}
        run_statements(
            pg_dsn,
            ["CREATE TABLE early.w (uid INT, a FLOAT8)", "INSERT INTO early.w VALUES (1, 7)"],
        )
        with psycopg.connect(pg_dsn) as con:  # an unqualified w is early's now
            assert con.execute("SELECT SUM(a) FROM w").fetchone() == (7.0,)
        for _ in range(3):
            (row,) = e.run("SELECT SUM(a) FROM w", analyst="a").released.rows
            assert row[0] == CLAMPED
    finally:
        backend.close()


def test_a_check_of_the_attached_table_does_not_speak_for_a_later_one(pg_dsn: str) -> None:
    """public.w's CHECK proves a within [0, 100], so the rewrite leaves its clamp out; a w
    created afterwards in ``early``, first on the path, has no CHECK and a = 100000. An
    unqualified name would have summed it unclamped; dpproxy reads public.w."""
    run_statements(
        pg_dsn,
        [
            "CREATE TABLE w (uid INT, a INT CHECK (a BETWEEN 0 AND 100))",
            "INSERT INTO w VALUES (1, 100), (2, 50)",
            "CREATE SCHEMA early",
            "SET search_path = early, public",
        ],
    )
    backend = PostgresBackend(pg_dsn)
    try:
        schema = SCHEMA.replace("a: {type: float", "a: {type: integer")
        e = Engine(parse_catalog(schema), backend, noise=NoNoise())
        (table,) = e.catalog.tables
        assert table.column("a").in_bounds  # type: ignore[union-attr]
        run_statements(
            pg_dsn,
            ["CREATE TABLE early.w (uid INT, a INT)", "INSERT INTO early.w VALUES (1, 100000)"],
        )
        (row,) = e.run("SELECT SUM(a) FROM w", analyst="a").released.rows
        assert row[0] == 150
    finally:
        backend.close()


@pytest.mark.parametrize("schema", ["My Schema", "select", 'we"ird'])
def test_a_schema_that_needs_quotes(pg_dsn: str, schema: str) -> None:
    """The schema's name is quoted in every statement: a blank, a keyword, a double quote."""
    ident = pgsql.Identifier(schema).as_string(None)
    run_statements(
        pg_dsn,
        [
            f"CREATE SCHEMA {ident}",
            *(s.replace("w ", f"{ident}.w ") for s in ROWS),
            f"SET search_path = {ident}",
        ],
    )
    assert _sum(pg_dsn) == CLAMPED
    assert _sum(pg_dsn, "SELECT SUM(a) FROM public.w") == CLAMPED  # the analyst's public.w


def test_a_table_that_needs_quotes(pg_dsn: str) -> None:
    """A private table named ``select`` in a schema ``select``, beside a public table
    ``order`` (read at attach time and by public queries)."""
    run_statements(
        pg_dsn,
        [
            'CREATE SCHEMA "select"',
            'CREATE TABLE "select"."select" (uid INT, a FLOAT8)',
            'INSERT INTO "select"."select" VALUES (1, 1000), (2, 50)',
            'CREATE TABLE "select"."order" (k INT)',
            'INSERT INTO "select"."order" VALUES (1), (2), (2)',
            'SET search_path = "select"',
        ],
    )
    schema = SCHEMA.replace("  w:", '  "select":') + "  order:\n    private: false\n"
    schema += "    columns:\n      k: {type: integer}\n"
    backend = PostgresBackend(pg_dsn)
    try:
        e = Engine(parse_catalog(schema), backend, noise=NoNoise())
        assert e.schemas == {"select": "select", "order": "select"}
        (row,) = e.run('SELECT SUM(a) FROM "select"', analyst="a").released.rows
        assert row[0] == CLAMPED
        rows = e.run('SELECT k, COUNT(*) FROM "order" GROUP BY k ORDER BY k', analyst="a")
        assert rows.released.rows == ((1, 1), (2, 2))
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("path", "options"),
    [
        ("SET search_path = data, public", ""),
        ("SET search_path = nosuch, data, public, pg_catalog", ""),  # pg_catalog last
        ('SET search_path = pg_temp, "$user", data', ""),
        ("", "-c search_path=data,public"),  # the DSN's own
    ],
)
def test_tables_resolve_as_the_configured_path_says(pg_dsn: str, path: str, options: str) -> None:
    """w in a schema ``data`` before public's w: the query reads data's (a = 1000 and 50,
    clamped: 150), not public's (a = 7)."""
    run_statements(
        pg_dsn,
        [
            "CREATE TABLE public.w (uid INT, a FLOAT8)",
            "INSERT INTO public.w VALUES (1, 7)",
            "CREATE SCHEMA data",
            "CREATE TABLE data.w (uid INT, a FLOAT8)",
            "INSERT INTO data.w VALUES (1, 1000), (2, 50)",
            *([path] if path else []),
        ],
    )
    dsn = conninfo.make_conninfo(pg_dsn, options=options) if options else pg_dsn
    assert _sum(dsn) == CLAMPED
    assert {t.name for t in describe(dsn)} == {"w"}  # no pg_catalog relation among them


def test_the_default_path_finds_the_users_schema_first(pg_dsn: str) -> None:
    """The default path, ``"$user", public``: a schema named as the DSN's user comes first."""
    with psycopg.connect(pg_dsn) as con:
        user = con.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]
        assert con.execute("SHOW search_path").fetchone() == ('"$user", public',)
    ident = pgsql.Identifier(user).as_string(None)
    run_statements(
        pg_dsn,
        [
            "CREATE TABLE public.w (uid INT, a FLOAT8)",
            "INSERT INTO public.w VALUES (1, 7)",
            f"CREATE SCHEMA {ident}",
            f"CREATE TABLE {ident}.w (uid INT, a FLOAT8)",
            f"INSERT INTO {ident}.w VALUES (1, 1000), (2, 50)",
        ],
    )
    assert _sum(pg_dsn) == CLAMPED


@pytest.fixture
def role(pg_dsn: str) -> Iterator[str]:
    """A login role of its own (unique name), dropped with its grants afterwards."""
    name = f"dpproxy_sp_{secrets.token_hex(4)}"
    ident = pgsql.Identifier(name)
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(ident))
    try:
        yield name
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(pgsql.SQL("DROP OWNED BY {}").format(ident))
            con.execute(pgsql.SQL("DROP ROLE {}").format(ident))


def test_a_roles_search_path_is_pinned_too(pg_dsn: str, role: str) -> None:
    """``ALTER ROLE ... IN DATABASE ... SET search_path`` putting ops first: the role's
    connections read data.w through its path, and the clamp stays."""
    r = pgsql.Identifier(role)
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        db = pgsql.Identifier(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        for s in [*ROWS, *_shadow(NEVER)[:-1], "CREATE SCHEMA data"]:
            con.execute(s)
        con.execute("ALTER TABLE w SET SCHEMA data")
        for s in (
            "GRANT USAGE ON SCHEMA data, ops TO {r}",
            "GRANT SELECT ON data.w TO {r}",
            "ALTER ROLE {r} IN DATABASE {db} SET search_path = ops, pg_catalog, data",
        ):
            con.execute(pgsql.SQL(s).format(r=r, db=db))
    dsn = conninfo.make_conninfo(pg_dsn, user=role)
    with psycopg.connect(dsn) as con:
        assert con.execute("SHOW search_path").fetchone() == ("ops, pg_catalog, data",)
    assert _sum(dsn) == CLAMPED


def test_an_empty_path_finds_no_table(pg_dsn: str) -> None:
    """An empty configured path holds no table; the session's is pg_catalog and pg_temp."""
    run_statements(pg_dsn, ROWS)
    with psycopg.connect(pg_dsn) as con:
        assert [n for _, n in pin_catalog(con, "x")] == ["public"]
        assert con.execute("SHOW search_path").fetchone() == (PINNED,)
    backend = PostgresBackend(conninfo.make_conninfo(pg_dsn, options="-c search_path="))
    try:
        with pytest.raises(UndefinedTable):
            backend.attach_catalog(parse_catalog(SCHEMA))
    finally:
        backend.close()


def test_a_schema_table_named_as_a_catalog_relation_is_missing(pg_dsn: str) -> None:
    """``pg_settings`` resolves to pg_catalog's, whatever public holds: refused as missing."""
    run_statements(
        pg_dsn, ["CREATE TABLE public.pg_settings (uid INT, a FLOAT8)", "SET search_path = public"]
    )
    backend = PostgresBackend(pg_dsn)
    try:
        with pytest.raises(UndefinedTable):
            backend.attach_catalog(parse_catalog(SCHEMA.replace("  w:", "  pg_settings:")))
    finally:
        backend.close()
