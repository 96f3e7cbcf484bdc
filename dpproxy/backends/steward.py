"""``dpproxy schema init --dp-bounds``: the data steward's DP release of clamping bounds.

The mechanism and its privacy argument are in ``mechanisms/dp_bounds.py``. This is the shell
around it: it opens the data before any budget is held, reserves the whole cost on the steward's
account in the ledger, reads the counts, commits the cost (a failure once the data was read is
charged too, as for any query), then draws the choices with OpenDP's sampler.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Protocol

from dpproxy.backends.opener import bounds_sql, count_for_bounds, open_for_bounds
from dpproxy.catalog.draft import TableShape, schema_type
from dpproxy.catalog.model import ColumnType
from dpproxy.errors import InternalError, InvalidParameter, UndefinedColumn
from dpproxy.mechanisms.dp_bounds import candidates, choose_bounds, epsilon_each
from dpproxy.mechanisms.noise import NoiseSource, OpenDPNoise
from dpproxy.values import Cost


class Charges(Protocol):
    """What is needed of the ledger (``accounting.ledger.Ledger``)."""

    def reserve(self, analyst: str, cost: Cost, record: Any = None) -> Any: ...

    def commit(self, r: Any, *, failed: str | None = None) -> None: ...


def bounded_columns(shape: TableShape, unit: str) -> list[str]:
    """The columns that get DP bounds: numeric, plain identifiers, not the unit."""
    out = []
    for c in shape.columns:
        t = schema_type(c.sql_type)
        if t is not None and t.numeric and c.name.isidentifier() and c.name != unit:
            out.append(c.name)
    return out


def estimate_bounds(
    database: str,
    shape: TableShape,
    unit: str,
    epsilon: Fraction,
    ledger: Charges,
    steward: str,
    record: Any = None,
    noise: NoiseSource | None = None,
) -> dict[tuple[str, str], tuple[Fraction, Fraction, str]]:
    """DP bounds for every numeric column of ``shape``, at a total cost of (ε, 0) charged to
    ``steward``; the mapping ``catalog.draft.draft_schema`` takes."""
    if shape.column(unit) is None:
        raise UndefinedColumn(
            f'column "{unit}" is not in table "{shape.name}"',
            hint="--unit names the column identifying one person",
        )
    columns = bounded_columns(shape, unit)
    if not columns:
        raise InvalidParameter(
            f'table "{shape.name}" has no numeric column besides the unit: nothing to bound',
            hint="draft the schema without --dp-bounds",
        )
    each = epsilon_each(epsilon, len(columns))
    con = open_for_bounds(database)  # before any budget is held: failing here costs nothing
    try:
        grids = {c: candidates(integer=not _is_float(shape, c)) for c in columns}
        sqls = {c: bounds_sql(shape.name, unit, c, grids[c]) for c in columns}
        held = ledger.reserve(steward, Cost(epsilon), record)
        try:
            counts = {c: count_for_bounds(con, sqls[c], len(grids[c])) for c in columns}
        except Exception as e:
            ledger.commit(held, failed=InternalError.sqlstate)  # the data was read: charged
            raise InternalError(
                "the database failed while the bounds were computed; the attempt was charged",
                log_detail=f"{type(e).__name__}: {e}",
            ) from e
        ledger.commit(held)
    finally:
        con.close()
    source = noise or OpenDPNoise()
    out = {}
    for c in columns:
        n = counts[c]
        chosen = choose_bounds(grids[c], n.below, n.above, n.units, each, source)
        note = f"DP bounds (ε = {_show(each)} each, charged to {steward}): check them"
        out[(shape.name, c)] = (chosen.lower, chosen.upper, note)
    return out


def _is_float(shape: TableShape, column: str) -> bool:
    col = shape.column(column)
    return col is not None and schema_type(col.sql_type) is ColumnType.FLOAT


def _show(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
