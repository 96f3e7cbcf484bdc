"""Unit keys: which columns of the schema determine the privacy unit of their row.

``sql/semijoins.py`` accepts a subquery over private rows only when it equates a column of its
table with a column of the outer row that both determine the same unit in the same way
(:func:`unit_key`): then every row the subquery can match belongs to the outer row's unit.
"""

from __future__ import annotations

from dpproxy.catalog.model import Catalog, Table


def unit_key(catalog: Catalog, table: Table, column: str) -> tuple[str, ...] | None:
    """What a value of ``table.column`` determines about its row's unit, or ``None``.

    ``("unit",)``: the value *is* the unit (the table's own unit column); ``("key", T, K)``:
    the value is a key ``K`` of the private table ``T`` that some table's unit is referenced
    through, and the row belongs to the unit of the one ``T`` row with that key. Two columns
    with the same (non-None) answer and equal values belong to the same unit."""
    if not table.private:
        return None
    col = column.lower()
    if table.unit_via is None:
        if table.privacy_unit and table.privacy_unit.lower() == col:
            return ("unit",)
    elif table.unit_via.column.lower() == col:
        return _key(catalog, table.unit_via.table, table.unit_via.key)
    if any(
        o.unit_via is not None
        and o.unit_via.table.lower() == table.name.lower()
        and o.unit_via.key.lower() == col
        for o in catalog.tables
    ):
        return _key(catalog, table.name, col)
    return None


def _key(catalog: Catalog, table: str, key: str) -> tuple[str, ...]:
    """``("key", table, key)``, or ``("unit",)`` when the key is that table's unit column."""
    t = catalog.table(table)
    if t is not None and t.unit_via is None and (t.privacy_unit or "").lower() == key.lower():
        return ("unit",)
    return ("key", table.lower(), key.lower())
