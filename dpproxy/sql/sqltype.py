"""The static types of row-level expressions (PostgreSQL's, as far as dpproxy needs them).

In a module of its own so that :mod:`dpproxy.sql.types` and :mod:`dpproxy.sql.dates` can both
use it without importing each other.
"""

from __future__ import annotations

from enum import Enum


class SqlType(Enum):
    NUMERIC = "numeric"
    TEXT = "text"
    BOOLEAN = "boolean"
    DATE = "date"
    NULL = "null"  # the untyped NULL literal, compatible with everything
    UNKNOWN = "unknown"  # a string literal: Postgres's "unknown", coerced on use
