"""The context of one rewrite (:class:`RewriteContext`: the plan, the row-hash secret, the
dialect, every column's SQL type) and the names of the group-key columns of ``__rows``, which
every layer of the rewritten query reads (``rewrite/pipeline.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dpproxy.catalog.model import ColumnType, Table
from dpproxy.planning.plan import QueryPlan
from dpproxy.sql.types import COLUMN_TYPES, SqlType


@dataclass(frozen=True, slots=True)
class RewriteContext:
    plan: QueryPlan
    secret: int  # per-query key of the hash that picks which rows a unit keeps
    dialect: str = "duckdb"
    portable_hash: bool = False  # rewrite/dialect.py: the same rows on every engine
    # PostgreSQL: {lower-case table name: its schema} (sql/qualify.py); empty elsewhere
    schemas: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    # Every column's SQL type, computed once (read-only: callers never change it).
    column_types: dict[str, SqlType] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        q = self.plan.query
        inner = q.per_unit.inner if q.per_unit is not None else None
        object.__setattr__(self, "column_types", _column_types(q.table, inner))

    @property
    def unit_kind(self) -> SqlType | None:
        """How the unit column enters the portable hash (``None``: its text as is)."""
        column = self.plan.query.table.column(self.plan.query.table.privacy_unit or "")
        if column is None or column.type in (ColumnType.INTEGER, ColumnType.DATE):
            return None
        return COLUMN_TYPES[column.type]


# (table, per-unit inner table) → their columns' SQL types: a pure function of the two schema
# objects (kept with the value, so that their ids stay theirs), shared read-only by every
# RewriteContext of those tables instead of a dict built per query.
_COLUMN_TYPES: dict[tuple[int, int], tuple[Table, Table | None, dict[str, SqlType]]] = {}


def _column_types(table: Table, inner: Table | None) -> dict[str, SqlType]:
    key = (id(table), id(inner))
    hit = _COLUMN_TYPES.get(key)
    if hit is None or hit[0] is not table or hit[1] is not inner:
        # A per-unit relation's inner columns too (sql/perunit.py: no name with two types).
        columns = (inner.columns if inner is not None else ()) + table.columns
        if len(_COLUMN_TYPES) >= 256:  # schemas come and go in tests and reloads
            _COLUMN_TYPES.clear()
        hit = _COLUMN_TYPES[key] = (table, inner, {c.name: COLUMN_TYPES[c.type] for c in columns})
    return hit[2]


def key_alias(i: int) -> str:
    return f"__key_{i}"
