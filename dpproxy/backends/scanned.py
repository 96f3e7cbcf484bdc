"""Bounds proved by reading the data: the clamps a read-only DuckDB file cannot need.

A whole-number measure is clamped to its schema bounds in the rewritten SQL
(``rewrite/wholesum.py``); over 1 M rows the clamp costs DuckDB about as much again as the raw
``SUM`` (its ``CASE`` is evaluated per row even when DuckDB's statistics fold both comparisons
to false), and the correction of ``rewrite/unclamp.py`` still costs a second scan's binding
and planning. When every value of the column already lies within the bounds, the clamp is the
identity on every row, and the SQL without it gives exactly the same aggregates — as when a
CHECK constraint proves it (``backends/checks.py``). The same holds for the DOUBLE clamps of
row-level measures (``rewrite/noop_clamps.py``), over integer and float columns alike.

Here the proof is the data itself: for each bounded ``integer`` column of a private table
stored in the database file (not a view), one query asks DuckDB for a row outside the bounds,
``SELECT 1 FROM t WHERE x < lo OR x > hi LIMIT 1``; no row, and the column is marked
``Column.scanned``. For each bounded ``float`` column the query asks for a row that makes
either comparison of the column's clamp true or holds a NaN, with the clamp's own comparison
trees (``rewrite/noop_clamps.clamp_conditions``), so that it asks exactly what the clamp
would. DuckDB's column statistics usually settle it without reading a row (its
optimiser turns both comparisons into ``false`` when the zone maps prove them), otherwise it
reads until the first such row or to the end, once, when the database is opened.

For each float column so proved, one more query reads the least magnitude of its non-zero
values (:func:`least_nonzero`, ``Column.least_nonzero``), and whether some row holds -0.0: with
the bounds, it proves the taming of ``rewrite/floats.py`` an identity on every row
(``rewrite/noop_clamps.taming_is_identity``), and the SQL that runs leaves it out as well.

Why the proof stays true. Only a database the backend opened ``read_only`` (DuckDB's
``access_mode``): DuckDB then holds a lock on the file that no writer can take, in this
process or another, for as long as the backend is open (``tests/integration/
test_scanned_bounds.py`` checks both), and dpproxy itself never writes. A view, a table
of an in-memory database (files read through views) or another schema's table is never
marked, nor is a generated column: DuckDB computes it at each read, and it may read the
clock (``now()``), so its values can move with no write (``tests/integration/
test_generated_columns.py``). PostgreSQL and Spark are never marked: their data can change
under an open connection.

What the analyst learns. The mark is a fact about the rows (whether some value lies outside
its bounds), so it must not show: EXPLAIN plans against ``Catalog.shown()``, the catalog
without these marks, and shows the SQL with the clamp whatever the data. The answer is the same
number either way (the clamp changes no value), the refusals and the rows' shape depend on the
query and the schema only, and the sensitivity still comes from the schema's bounds. What
remains is timing: a query over in-bounds data runs faster, as ``rewrite/unclamp.py``'s
correction already does, a side channel SECURITY.md leaves out of scope.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

try:  # DuckDB's engine module, not the package's builders (see backends/duckdb.py)
    import _duckdb as duckdb
except ImportError:  # pragma: no cover - a DuckDB whose engine module is duckdb.duckdb
    import duckdb  # type: ignore[no-redef]

from dpproxy.catalog.model import Catalog, ColumnType, Table
from dpproxy.rewrite.noop_clamps import clamp_conditions, tamed_value


def read_only(con: Any) -> bool:
    """Did DuckDB open ``con``'s database read-only (so that nobody can write it)?"""
    row = con.execute("SELECT current_setting('access_mode')").fetchone()
    return row is not None and str(row[0]).lower() == "read_only"


def _integer(value: Any) -> int | None:
    """A bound as an int, or None when it is not a whole number."""
    if value is None or value.denominator != 1:
        return None
    return int(value)


def proven(
    con: Any,
    catalog: Catalog,
    bounded: dict[str, tuple[str, ...]],
    stored: dict[str, int],
    skip: dict[str, set[str]],
    quote: Any,
) -> dict[str, set[str]]:
    """{table: its ``bounded`` columns (lower-case names, ``checks.candidates``) that no row
    of the stored table puts outside their schema bounds}, and its ``fractional`` columns
    whose clamp no row needs; columns in ``skip`` are not read: already proved by a CHECK
    constraint, or generated (computed as they are read, maybe from the clock or random():
    no scan at opening speaks for a later read). ``con``: a read-only DuckDB connection (the
    caller checks :func:`read_only` and holds its lock); ``stored``: the tables stored in
    the current database and schema (``DuckDBBackend._stored_tables``); ``quote``: the
    backend's identifier quoting."""
    out: dict[str, set[str]] = {}
    for t in catalog.tables:
        name = t.name.lower()
        if name not in stored:
            continue
        for column in bounded.get(name, ()):
            if column in skip.get(name, set()):
                continue
            if _in_bounds(con, t, column, quote):
                out.setdefault(name, set()).add(column)
        for column in fractional(t):
            if column in skip.get(name, set()):
                continue
            if _clamp_is_identity(con, t, column, quote):
                out.setdefault(name, set()).add(column)
    return out


def fractional(table: Table) -> tuple[str, ...]:
    """The columns of private ``table`` whose clamp :func:`_clamp_is_identity` may prove a
    no-op (lower-case names): schema type ``float`` with both bounds."""
    if not table.private:
        return ()
    return tuple(
        c.name.lower()
        for c in table.columns
        if c.type is ColumnType.FLOAT and c.lower is not None and c.upper is not None
    )


def _clamp_is_identity(con: Any, table: Table, column: str, quote: Any) -> bool:
    """Does no row of ``table`` make either comparison of ``column``'s clamp true, nor hold
    a NaN there (``rewrite/noop_clamps.py``)? The comparisons are the clamp's own trees, so the
    scan asks DuckDB exactly what the clamp would."""
    col = table.column(column)
    if col is None or col.lower is None or col.upper is None:
        return False
    conditions = clamp_conditions(col.name, col.lower, col.upper)
    return _no_row(con, quote(table.name), " OR ".join(f"({c.sql('duckdb')})" for c in conditions))


def magnitudes(
    con: Any, catalog: Catalog, scanned: dict[str, set[str]], quote: Any
) -> dict[str, dict[str, float]]:
    """{table: {float column marked ``scanned``: the least magnitude of its non-zero values}}
    (``Column.least_nonzero``), one query per column (:func:`least_nonzero`)."""
    out: dict[str, dict[str, float]] = {}
    for t in catalog.tables:
        proved = scanned.get(t.name.lower(), set())
        for column in fractional(t):
            if column in proved:
                out.setdefault(t.name.lower(), {})[column] = least_nonzero(con, t, column, quote)
    return out


def least_nonzero(con: Any, table: Table, column: str, quote: Any) -> float:
    """The least ``ABS(v)`` over the rows with ``v <> 0``, v the double the rewrite tames
    (``noop_clamps.tamed_value``: ``CAST(column AS DOUBLE)``), as DuckDB computes it (exact: ABS and
    MIN are); inf when no row has one. 0.0, which proves nothing, when a row holds -0.0 (the
    taming maps it to +0.0: ``atan2(v, -1)`` is -π for -0.0 and π for +0.0) or when DuckDB
    cannot answer."""
    col = table.column(column)
    if col is None:
        return 0.0
    v = tamed_value(col.name).sql("duckdb")
    sql = (
        f"SELECT MIN(ABS({v})) FILTER (WHERE {v} <> 0), "
        f"COUNT(*) FILTER (WHERE {v} = 0 AND atan2({v}, -1.0) < 0) FROM {quote(table.name)}"
    )
    try:
        row = con.execute(sql).fetchone()
    except duckdb.Error:
        return 0.0
    if row is None or row[1]:
        return 0.0
    least = math.inf if row[0] is None else float(row[0])
    return least if least > 0 else 0.0


def with_magnitudes(table: Table, least: dict[str, float]) -> Table:
    """``table`` with ``Column.least_nonzero`` set for the columns of ``least`` (lower case)."""
    if not least:
        return table
    columns = tuple(
        replace(c, least_nonzero=least[c.name.lower()]) if c.name.lower() in least else c
        for c in table.columns
    )
    return replace(table, columns=columns)


def _in_bounds(con: Any, table: Table, column: str, quote: Any) -> bool:
    col = next((c for c in table.columns if c.name.lower() == column), None)
    if col is None:
        return False
    low, high = _integer(col.lower), _integer(col.upper)
    if low is None or high is None:
        return False
    x = quote(col.name)
    return _no_row(con, quote(table.name), f"{x} < {low} OR {x} > {high}")


def _no_row(con: Any, table: str, where: str) -> bool:
    """Does DuckDB find no row of ``table`` (quoted) where ``where`` holds?"""
    try:
        found = con.execute(f"SELECT 1 FROM {table} WHERE {where} LIMIT 1").fetchall()
    except duckdb.Error:  # anything DuckDB cannot answer proves nothing: the clamp stays
        return False
    return not found
