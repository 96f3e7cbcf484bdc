"""Open ``--database`` whatever it names: data files (``backends/files.py``, as DuckDB views),
a DuckDB database or a PostgreSQL URL (``backends.open_backend``); and read its tables' shapes
for ``dpproxy schema init`` and ``schema check --database`` (metadata only)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from dpproxy.backends import Backend, open_backend
from dpproxy.backends.files import file_sources
from dpproxy.dsn import is_postgres_url
from dpproxy.errors import BadFileFormat, InvalidParameter, UndefinedFile, UnsupportedQuery

if TYPE_CHECKING:  # schema init's module, not imported to open a database for a query
    from dpproxy.catalog.draft import TableShape


def half_given(database: str | None) -> InvalidParameter:
    """The error for a database without a schema, or a schema without a database."""
    if database is not None:
        return InvalidParameter(
            f"--database {database} needs a privacy schema (--schema FILE.yaml)",
            hint=f"draft one with `dpproxy schema init --database {database} -o schema.yaml`, "
            "fill in its TODOs, then pass --schema schema.yaml",
        )
    return InvalidParameter(
        "give both a database and a schema, or neither (for the bundled demo)",
        hint="--database FILE.duckdb|FILE.csv|FILE.parquet --schema FILE.yaml",
    )


def open_database(
    database: str,
    *,
    tables: tuple[str, ...] = (),
    portable_hash: bool = False,
    statement_timeout: float | None = None,
) -> Backend:
    """The backend for ``--database``: data files (this module), else ``open_backend``."""
    sources = file_sources(database)
    if sources is None:
        return open_backend(
            database, portable_hash=portable_hash, statement_timeout=statement_timeout
        )
    from dpproxy.backends.file_views import FileBackend

    return FileBackend(sources, tables, portable_hash=portable_hash)


def describe(database: str) -> tuple[TableShape, ...]:
    """The tables of ``database`` as their metadata declares them (names, types, NOT NULL,
    single-column primary keys): no row is read, beyond what DuckDB's CSV sniffer reads to
    find the columns and their types."""
    if is_postgres_url(database):
        from dpproxy.backends.postgres_shapes import describe_postgres

        return describe_postgres(database)
    from dpproxy.backends.file_views import duckdb_shapes

    con = _duckdb_connection(database)
    try:
        return duckdb_shapes(con)
    finally:
        con.close()


def _duckdb_connection(database: str) -> Any:
    """A read-only DuckDB connection: the views of data files, or a DuckDB database file."""
    import duckdb

    from dpproxy.backends.file_views import connect_sources

    sources = file_sources(database)
    if sources is not None:
        return connect_sources(sources)
    path = Path(database)
    if not path.exists():
        raise UndefinedFile(
            f"database file {path} does not exist",
            hint=f"check the path (relative to {Path.cwd()})",
        )
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        raise BadFileFormat(
            f"cannot open DuckDB database {path}",
            hint=f"DuckDB says: {str(e).splitlines()[0][:300]}",
            log_detail=str(e),
        ) from e


def _literal(c: Fraction) -> str:
    """The exact decimal of a grid value (its denominator divides a power of 10)."""
    if c.denominator == 1:
        return str(c.numerator)
    digits = 0
    while (c * 10**digits).denominator != 1:
        digits += 1
        if digits > 30:
            raise ValueError(f"{c} has no short decimal")
    whole = c * 10**digits
    sign, mag = ("-" if whole < 0 else ""), str(abs(whole.numerator)).rjust(digits + 1, "0")
    return f"{sign}{mag[:-digits]}.{mag[-digits:]}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class BoundCounts(NamedTuple):
    units: int  # units with a non-NULL value
    below: tuple[int, ...]  # per candidate: units whose minimum is below it
    above: tuple[int, ...]  # per candidate: units whose maximum is above it


def open_for_bounds(database: str) -> Any:
    """The connection ``count_for_bounds`` reads (opened before any budget is reserved)."""
    if is_postgres_url(database):
        raise UnsupportedQuery(
            "--dp-bounds reads DuckDB databases and CSV or Parquet files only",
            hint="draft the schema without --dp-bounds and write the bounds from documentation",
        )
    return _duckdb_connection(database)


def bounds_sql(table: str, unit: str, column: str, grid: tuple[Fraction, ...]) -> str:
    """The counts of ``mechanisms/dp_bounds.py`` in one query: each unit reduced to the MIN and
    MAX of ``column`` over its rows, then how many units fall below/above each candidate."""
    x, u = _ident(column), _ident(unit)
    below = ", ".join(f"COUNT(*) FILTER (WHERE lo < {_literal(c)})" for c in grid)
    above = ", ".join(f"COUNT(*) FILTER (WHERE hi > {_literal(c)})" for c in grid)
    return (
        f"WITH per_unit AS (SELECT MIN({x}) AS lo, MAX({x}) AS hi FROM {_ident(table)} "
        f"WHERE {x} IS NOT NULL AND {u} IS NOT NULL GROUP BY {u}) "
        f"SELECT COUNT(*), {below}, {above} FROM per_unit"
    )


def count_for_bounds(con: Any, sql: str, candidates: int) -> BoundCounts:
    """Run :func:`bounds_sql`: exact counts that only the DP choice may see."""
    row = con.execute(sql).fetchone()
    k = candidates
    return BoundCounts(int(row[0]), tuple(row[1 : k + 1]), tuple(row[k + 1 :]))


def domain_sql(table: str, unit: str, column: str) -> str:
    """The counts of ``mechanisms/dp_domains.py``: each unit reduced to one value of ``column``
    (the one with the smallest ``md5(v) || v``: a fixed order, a total one since the MD5 has a
    fixed length), then the number of units per value."""
    x, u = _ident(column), _ident(unit)
    return (
        f"WITH per_unit AS (SELECT arg_min({x}, md5({x}) || {x}) AS v FROM {_ident(table)} "
        f"WHERE {x} IS NOT NULL AND {u} IS NOT NULL GROUP BY {u}) "
        "SELECT v, COUNT(*) FROM per_unit GROUP BY v"
    )


def count_for_domain(con: Any, sql: str) -> list[tuple[str, int]]:
    """Run :func:`domain_sql`: exact counts that only the DP selection may see."""
    return [(str(v), int(n)) for v, n in con.execute(sql).fetchall()]
