"""The schema's fit to the database, checked wherever a backend attaches a catalog.

Every DuckDB and PostgreSQL backend runs :func:`refuse_misfit` in its ``attach_catalog``, so
an ``Engine(catalog, backend)`` built directly is refused exactly as ``dpproxy.connect`` and
``dpproxy serve`` are (``engine.open_engine`` builds one too): a table (42P01) or column
(42703) the database lacks, and a column whose type is not the schema's (42804: the rewritten
SQL is total only on data of the declared types; a PostgreSQL ``numeric`` without a precision
or a DuckDB HUGEINT let one unit's value fail a query that its neighbour answered,
``tests/attacks/test_wide_numeric.py``, unless :func:`read_wide` reads it as DOUBLE), all at
once in the error's ``problems``. Metadata only, read once per engine from what
``attach_catalog`` already reads (DuckDB's ``DESCRIBE``, PostgreSQL's ``pg_attribute``); the
whole database's tables are listed only for the message of a missing table. Spark checks names
only (``backends/spark.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dpproxy.catalog.check import fit_error
from dpproxy.catalog.draft import ColumnShape, TableShape, double_readable, wide_numeric
from dpproxy.catalog.model import Catalog, ColumnType


def refuse_misfit(
    catalog: Catalog,
    described: Mapping[str, tuple[ColumnShape, ...]],
    where: str,
    everything: Callable[[], tuple[TableShape, ...]],
    exact: bool = False,
) -> None:
    """Raise ``catalog.check.fit_error`` for a schema that does not fit the database.

    ``described``: each schema table's columns as the database declares them (an empty tuple
    for a table it lacks), keyed by the schema's name; ``where`` names the database in the
    hint; ``everything`` reads every table of the database, called only when one is missing
    (the message lists them); ``exact``: the database compares names exactly (PostgreSQL)."""
    shapes = tuple(TableShape(n, cols, exact=exact) for n, cols in described.items() if cols)
    if len(shapes) < len(catalog.tables):
        shapes = everything()
    err = fit_error(catalog, shapes, where)
    if err is not None:
        raise err


def read_wide(
    catalog: Catalog, described: Mapping[str, tuple[ColumnShape, ...]]
) -> dict[str, tuple[str, ...]]:
    """PostgreSQL and DuckDB: {table: the lower-case names of its columns read as DOUBLE
    through a total conversion (``sql/widenum.py``)}: the ``float`` columns of private
    tables, other than unit columns and keys (``catalog.draft.double_readable``), whose type
    is too wide (``catalog.draft.wide_numeric``: a ``numeric`` wider than a double; DuckDB's
    HUGEINT, UHUGEINT, a DECIMAL beyond 20 digits before the point or 18 after).
    ``catalog.draft.check_against`` lets these fit; any other wide column (``integer``, a
    unit or key, or of a public table) is refused (42804)."""
    readable = double_readable(catalog)
    wide: dict[str, tuple[str, ...]] = {}
    for t in catalog.tables:
        names = tuple(
            c.name.lower()
            for c in described.get(t.name, ())
            if (t.name.lower(), c.name.lower()) in readable and wide_numeric(c.sql_type)
        )
        if names:
            wide[t.name] = names
    return wide


def read_real(
    catalog: Catalog, described: Mapping[str, tuple[ColumnShape, ...]]
) -> dict[str, tuple[str, ...]]:
    """PostgreSQL: {table: the lower-case names of its ``float`` columns stored as ``real``},
    private tables only, which every statement reads as DOUBLE PRECISION
    (``sql/widenum.read_as_double``). A float4 left as it is unified float4 with the
    rewrite's constants: the taming ``CASE WHEN ... THEN 1e150 ... ELSE x END`` of
    ``rewrite/floats.py`` is a float4 CASE there, and 1e150 does not fit one (22003, XX000
    after the charge on every database, ``tests/attacks/test_real_column.py``)."""
    out: dict[str, tuple[str, ...]] = {}
    for t in catalog.tables:
        floats = {c.name.lower() for c in t.columns if c.type is ColumnType.FLOAT}
        names = tuple(
            c.name.lower()
            for c in described.get(t.name, ())
            if t.private and c.name.lower() in floats and c.sql_type.strip().lower() == "real"
        )
        if names:
            out[t.name] = names
    return out


def duckdb_shapes(c: Any) -> tuple[TableShape, ...]:
    """The tables and views of a DuckDB connection's ``main`` schema: names, types, NOT NULL
    and single-column primary keys (metadata only)."""
    rows = c.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
        "WHERE NOT internal AND schema_name = 'main' ORDER BY table_name, column_index"
    ).fetchall()
    keys = {
        r[0].lower(): r[1][0]
        for r in c.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY' AND schema_name = 'main'"
        ).fetchall()
        if len(r[1]) == 1
    }
    tables: dict[str, list[ColumnShape]] = {}
    for table, column, sql_type, nullable in rows:
        tables.setdefault(table, []).append(ColumnShape(column, sql_type, bool(nullable)))
    return tuple(
        TableShape(name, tuple(cols), keys.get(name.lower())) for name, cols in tables.items()
    )
