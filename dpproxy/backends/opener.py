"""Open ``--database`` whatever it names: data files (``backends/files.py``, as DuckDB views),
a DuckDB database or a PostgreSQL URL (``backends.open_backend``); and read its tables' shapes
for ``dpproxy schema init`` and ``schema check --database`` (metadata only)."""

from __future__ import annotations

from pathlib import Path

from dpproxy.backends import Backend, open_backend
from dpproxy.backends.files import BadFileFormat, UndefinedFile, file_sources
from dpproxy.catalog.draft import TableShape
from dpproxy.dsn import is_postgres_url
from dpproxy.errors import InvalidParameter


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
    import duckdb

    from dpproxy.backends.file_views import connect_sources, duckdb_shapes

    sources = file_sources(database)
    if sources is not None:
        con = connect_sources(sources)
    else:
        path = Path(database)
        if not path.exists():
            raise UndefinedFile(
                f"database file {path} does not exist",
                hint=f"check the path (relative to {Path.cwd()})",
            )
        try:
            con = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as e:
            raise BadFileFormat(
                f"cannot open DuckDB database {path}",
                hint=f"DuckDB says: {str(e).splitlines()[0][:300]}",
                log_detail=str(e),
            ) from e
    try:
        return duckdb_shapes(con)
    finally:
        con.close()
