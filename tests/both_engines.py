"""One scratch table on an in-memory DuckDB and on a PostgreSQL database, for tests that run
the same printed expressions on both engines (``tests/integration/test_*_forms.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import psycopg


@contextlib.contextmanager
def duckdb_and_postgres(
    pg_dsn: str, table_sql: Callable[[str], list[str]]
) -> Iterator[tuple[Any, Any]]:
    """(DuckDB connection, PostgreSQL connection), each after running ``table_sql(dialect)``
    (``"duckdb"`` or ``"postgres"``); both closed afterwards."""
    duck = duckdb.connect()
    pg = psycopg.connect(pg_dsn, autocommit=True)
    try:
        for statement in table_sql("duckdb"):
            duck.execute(statement)
        for statement in table_sql("postgres"):
            pg.execute(statement)  # type: ignore[arg-type]
        yield duck, pg
    finally:
        duck.close()
        pg.close()
