"""The tables of a PostgreSQL database as their metadata declares them (``schema init`` and
``schema check --database postgresql://…``): names, types, NOT NULL and single-column primary
keys of the tables and views on the search path, each name's relation as the backend resolves it
(``pg_path``: the first on the path, none that a pg_catalog relation's name hides). Reads the
catalog only, never a row."""

from __future__ import annotations

import psycopg

from dpproxy.backends.pg_path import first_on_path, path_array, pin_catalog
from dpproxy.catalog.draft import ColumnShape, TableShape
from dpproxy.dsn import redact_dsn
from dpproxy.errors import BackendUnavailable

# A type's name only where it is a built-in (pg_catalog's): any other, a domain or an
# extension's type, qualified by its schema, which no schema type matches (42804). A domain
# may take a name that reads as a type of another engine: ``CREATE DOMAIN double AS
# numeric`` was "double", a float, over values (1e400) a double cannot hold, and ``long``
# over text an integer.
# (``backends/postgres.py`` reads the same for the fit of the catalog it attaches.)
TYPE_NAME = (
    "CASE WHEN ty.typnamespace = 'pg_catalog'::pg_catalog.regnamespace "
    "THEN pg_catalog.format_type(a.atttypid, a.atttypmod) ELSE pg_catalog.quote_ident("
    "n.nspname) || '.' || pg_catalog.quote_ident(ty.typname) END"
)
TYPE_JOIN = (
    "JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace "
)
_COLUMNS = (
    f"SELECT c.relname, a.attname, {TYPE_NAME}, "
    "NOT a.attnotnull FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    f"{TYPE_JOIN}"
    "WHERE {first} AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
    "AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY c.relname, a.attnum"
)
_KEYS = (
    "SELECT c.relname, a.attname FROM pg_catalog.pg_index i "
    "JOIN pg_catalog.pg_class c ON c.oid = i.indrelid "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0] "
    "WHERE i.indisprimary AND i.indnkeyatts = 1 AND {first}"
)


def describe_postgres(dsn: str) -> tuple[TableShape, ...]:
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            path = pin_catalog(conn, redact_dsn(dsn))  # the same search path as the backend's
            first = first_on_path(path_array(path))
            rows = conn.execute(_COLUMNS.replace("{first}", first)).fetchall()
            keys = {
                t.lower(): c for t, c in conn.execute(_KEYS.replace("{first}", first)).fetchall()
            }
    except psycopg.OperationalError as e:
        raise BackendUnavailable(
            f"cannot connect to {redact_dsn(dsn)}",
            hint=str(e).strip().splitlines()[-1][:300] if str(e).strip() else None,
            log_detail=str(e),
        ) from e
    tables: dict[str, list[ColumnShape]] = {}
    for table, column, sql_type, nullable in rows:
        tables.setdefault(table, []).append(ColumnShape(column, sql_type, bool(nullable)))
    # PostgreSQL compares names exactly: "Sales" is not sales (sql/pgnames.py)
    return tuple(
        TableShape(n, tuple(cs), keys.get(n.lower()), exact=True) for n, cs in tables.items()
    )
