"""What the corpus tests compare released rows with: the exact answer of the same SQL run
directly on DuckDB, and equality of one released value with one exact value."""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import duckdb
import sqlglot


def exact_rows(path: Path, sql: str, *, limit: bool = False) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the DuckDB file, without its LIMIT unless ``limit``: private
    groups are selected with noise before dpproxy applies a LIMIT."""
    tree = sqlglot.parse_one(sql, read="postgres")
    if not limit:
        tree.set("limit", None)
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(tree.sql("duckdb")).fetchall()
    finally:
        con.close()


def same(a: Any, b: Any) -> bool:
    """Numbers to 1e-9 relative; a DATE from dpproxy equals the database's TIMESTAMP at
    midnight (DATE_TRUNC of a date); anything else by its text."""
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, datetime.date) and isinstance(b, datetime.date):
        return str(a).removesuffix(" 00:00:00") == str(b).removesuffix(" 00:00:00")
    return str(a) == str(b)


def matches(row: tuple[Any, ...], exact: list[tuple[Any, ...]]) -> bool:
    """Is ``row`` one of the ``exact`` rows?"""
    return any(
        len(e) == len(row) and all(same(x, y) for x, y in zip(row, e, strict=True)) for e in exact
    )
