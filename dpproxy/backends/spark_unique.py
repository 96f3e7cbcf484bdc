"""A unit column the schema states unique (``unit_unique: true``), checked on Spark's Parquet.

Spark enforces no PRIMARY KEY, so without more the rewrite bounds every unit's rows on Spark: a
shuffle of every row by unit, a semi-join and a window, which cost 38-68x the raw aggregate at
10⁷ rows (``benchmarks/SPARK.md``). When the schema states that a private table's unit column is
unique and never NULL, the Spark backend checks that statement against the data once, when it
opens (:func:`check_unique`), and then marks the table ``unit_is_unique`` as the DuckDB and
PostgreSQL backends do for a PRIMARY KEY: the planner and the rewrite skip the bounding.

Why this is sound. Bounding keeps at most k ≥ 1 rows of each unit; on data where every unit has
one row it keeps every row, so the query without it returns exactly what the bounded query
returns, on every such dataset. The check is exact (``COUNT(*) = COUNT(unit) = COUNT(DISTINCT
unit)``), and a table that fails it is refused when the backend opens (``SchemaError``, like a
schema that does not fit its data): the operator learns the answer, no analyst ever reaches a
proxy over data that breaks the statement, so no plan, ``explain`` or answer depends on it.
The check holds for the files it read: only a ``?parquet_dir=`` table whose files are local is
checked (a catalog table can change under the proxy at any time; it stays bounded), and each
query on a checked table compares the files' size and modification time with the checked ones
before and after it runs (:class:`FileGuard`): a file rewritten in between refuses the query
(08001, refunded), or discards its answer (charged), instead of answering without bounding
over data never checked. (The view's file list is fixed when it is registered: a file added
later is never read.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from dpproxy.catalog.model import Table
from dpproxy.errors import BackendUnavailable, InternalError, SchemaError

Signature = tuple[tuple[str, int, int], ...]


def local_files(frame: Any) -> tuple[str, ...] | None:
    """The local paths a DataFrame reads, or None if any is not a ``file:`` path."""
    paths = []
    for uri in frame.inputFiles():
        parsed = urlparse(uri)
        if parsed.scheme not in ("file", ""):
            return None
        paths.append(unquote(parsed.path))
    return tuple(sorted(paths))


def signature(paths: tuple[str, ...]) -> Signature | None:
    """(path, size, mtime in ns) of each file; None if one is gone."""
    try:
        return tuple((p, (st := os.stat(p)).st_size, st.st_mtime_ns) for p in paths)
    except OSError:
        return None


def check_unique(spark: Any, table: Table) -> Signature | None:
    """Check that ``table``'s unit column is unique and never NULL in its Parquet view.

    Returns the files' signature when it holds (None: the table's files are not local, so it
    is not checked and stays bounded); raises ``SchemaError`` when the data breaks it."""
    assert table.privacy_unit is not None
    frame = spark.table(table.name)
    paths = local_files(frame)
    if not paths:
        return None
    before = signature(paths)
    unit = "`" + table.privacy_unit.replace("`", "``") + "`"
    name = "`" + table.name.replace("`", "``") + "`"
    n, non_null, distinct = spark.sql(
        f"SELECT COUNT(*), COUNT({unit}), COUNT(DISTINCT {unit}) FROM {name}"
    ).collect()[0]
    after = signature(paths)
    if before is None or before != after:
        raise SchemaError(
            f'the Parquet files of table "{table.name}" changed while unit_unique was checked',
            hint="open the backend again once the files are written",
        )
    if not n == non_null == distinct:
        raise SchemaError(
            f'table "{table.name}" declares unit_unique, but its unit column '
            f'"{table.privacy_unit}" has repeated or NULL values',
            hint="remove unit_unique from the schema (dpproxy then bounds each unit's rows) "
            "or fix the data",
        )
    return before


@dataclass
class FileGuard:
    """The checked tables' files as they were checked; :meth:`check` refuses any change."""

    files: dict[str, Signature]

    def check(self, *, ran: bool) -> None:
        for table, sig in self.files.items():
            if signature(tuple(p for p, _, _ in sig)) == sig:
                continue
            message = f'the Parquet files of table "{table}" changed since unit_unique was checked'
            hint = "open the backend again: its unit column is checked anew"
            if ran:  # the data was read: the answer is discarded, the budget stays charged
                raise InternalError(message, hint=hint)
            raise BackendUnavailable(message, hint=hint)  # never ran: refunded
