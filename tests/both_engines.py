"""One scratch table on an in-memory DuckDB and on a PostgreSQL database, for tests that run
the same printed expressions on both engines (``tests/integration/test_*_forms.py``)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
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


def double_literal(v: float) -> str:
    """``v`` as a DOUBLE PRECISION literal both engines read alike (NaN and ±Infinity too)."""
    if math.isnan(v):
        return "CAST('NaN' AS DOUBLE PRECISION)"
    if math.isinf(v):
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE PRECISION)"
    return f"CAST({v!r} AS DOUBLE PRECISION)"


def doubles_table(name: str, values: Sequence[float]) -> Callable[[str], list[str]]:
    """The ``table_sql`` of :func:`duckdb_and_postgres` for a table ``name (i INTEGER, x DOUBLE
    PRECISION)`` holding ``values`` in order, then one NULL."""

    def table_sql(dialect: str) -> list[str]:
        rows = [f"({i}, {double_literal(v)})" for i, v in enumerate(values)]
        rows.append(f"({len(values)}, NULL)")
        return [
            f"DROP TABLE IF EXISTS {name}",
            f"CREATE TABLE {name} (i INTEGER, x DOUBLE PRECISION)",
            f"INSERT INTO {name} VALUES " + ", ".join(rows),
        ]

    return table_sql
