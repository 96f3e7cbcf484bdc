"""Clamps that map every row to itself, left out of the SQL that runs.

A row-level measure clamps each bounded numeric column to its schema bounds
(``rewrite/clamps.clamp``): ``CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END`` with
``v = CAST(column AS DOUBLE)``. Where the backend has proved that no row of the table makes
either comparison true, that CASE equals its ELSE branch ``v`` on every row, NULL included
(both comparisons are NULL, so the ELSE is taken), and :func:`drop_noop_clamps` puts ``v`` in
its place. Two proofs count:

* ``Column.in_bounds``: a CHECK constraint confines the integer column to ``[lower, upper]``
  (``backends/checks.py``). The clamp's bounds are then those integers themselves
  (``clamps.clamp_bounds``), and rounding to a double is monotone, so for every stored integer
  ``lower ≤ x ≤ upper`` neither ``CAST(x AS DOUBLE) < lower`` nor ``> upper`` holds.
* ``Column.scanned``: a read-only DuckDB file none of whose rows satisfies either comparison
  (``backends/scanned.py``). For an integer column the scan asks for ``x < lower OR x >
  upper`` (the same argument as for a CHECK); for any other column it asks for exactly the
  two comparisons of the clamp, built by :func:`clamp_conditions`, or ``isnan(v)``. NaN,
  which DuckDB orders above every number, already satisfies ``v > hi`` and is named anyway:
  unclamped, a NaN would reach the fixed-point cast of ``rewrite/fixed.py``, which it would
  make fail, so no column holding one is ever marked.

The same holds for the *taming* of a float leaf under arithmetic (``rewrite/floats.py``: ``CASE
WHEN ABS(v) < 1e-L THEN 0.0 WHEN 1eL < v ≤ max THEN 1eL WHEN −max ≤ v < −1eL THEN −1eL ELSE v
END``, which keeps PostgreSQL's float arithmetic from raising): :func:`taming_is_identity`
proves it maps every row of a scanned file to itself from the column's proved bounds and the
least non-zero magnitude its rows hold (``Column.least_nonzero``, read by
``backends/scanned.least_nonzero``), and ``floats.finite_arithmetic`` marks it the same way.

Nothing else changes, and so nothing that depends on it can: the measure is guarded, typed,
range-checked and refused or accepted (``rewrite/floats.py``, ``rewrite/guard.py``) with the
clamps in place, exactly as EXPLAIN plans it (``Catalog.shown``), and only the finished tree
loses them. Every value it computes is the same double on every row of the database it was
planned on; the SQL with the clamp is the one EXPLAIN shows and the one the tests compare
against (``tests/integration/test_scanned_bounds.py``).
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import ColumnType, Table
from dpproxy.rewrite.clamps import column_clamp


def clamp_conditions(name: str, lo: Fraction, hi: Fraction) -> list[exp.Expression]:
    """The two comparisons of column ``name``'s clamp to ``[lo, hi]``, as the rewrite writes
    them (``v < lo`` and ``v > hi``, bounds rounded outward), and ``isnan(v)``: the rows the
    clamp does not map to themselves, with NaN named."""
    case = column_clamp(name, lo, hi)
    ifs = case.args["ifs"]
    value = case.args["default"]
    return [ifs[0].this, ifs[1].this, exp.Anonymous(this="isnan", expressions=[value])]


def _proved(table: Table, case: exp.Case) -> bool:
    value = case.args.get("default")
    if not isinstance(value, exp.Cast) or not isinstance(value.this, exp.Column):
        return False
    col = table.column(value.this.name)
    if col is None or col.lower is None or col.upper is None:
        return False
    if col.in_bounds:  # a CHECK constraint: integer columns only (backends/checks.py)
        return col.type is ColumnType.INTEGER
    return col.scanned


NOOP = "dpproxy_noop_clamp"  # meta of a clamp CASE whose column is proved within its bounds


def tamed_value(name: str) -> exp.Cast:
    """``CAST(name AS DOUBLE)``: the form of a float column's value that ``rewrite/floats.py``
    tames, and that ``backends/scanned.least_nonzero`` reads."""
    return exp.Cast(this=exp.column(name), to=exp.DataType(this=exp.DataType.Type.DOUBLE))


def taming_is_identity(leaf: exp.Expression, table: Table, exponent: int) -> bool:
    """Does the taming of ``leaf`` at L = ``exponent`` (``floats._tame``: ``CASE WHEN ABS(v) <
    1e-L THEN 0.0 WHEN 1e L < v ≤ max THEN 1e L WHEN −max ≤ v < −1e L THEN −1e L ELSE v END``)
    map every row of the database to itself? Yes when ``leaf`` is ``CAST(c AS DOUBLE)`` of a
    float column ``c`` marked ``scanned`` (every v within the clamp's bounds, rounded outward,
    and never NaN: ``clamp_conditions``) with |lower|, |upper| ≤ 10^L / 2 (the outward
    rounding moves a bound by a relative 2^-52 at most, so no v exceeds 10^L), and whose
    least non-zero |v| is at least the double 1e-L (``Column.least_nonzero``, 0.0 when a row
    holds -0.0, which the first branch would turn into +0.0): then on every row, NULL
    included, the CASE takes no branch, or the first for v = +0.0, whose 0.0 is the same
    double, and so equals its ELSE, ``v``."""
    if type(leaf) is not exp.Cast or not isinstance(leaf.this, exp.Column):
        return False
    if leaf.to.this is not exp.DataType.Type.DOUBLE:
        return False
    col = table.column(leaf.this.name)
    if col is None or col.type is not ColumnType.FLOAT or not col.scanned:
        return False
    if col.lower is None or col.upper is None:
        return False
    if 2 * max(abs(col.lower), abs(col.upper)) > Fraction(10) ** exponent:
        return False
    return col.least_nonzero >= float(f"1e-{exponent}")


def mark_noop_clamps(cases: list[exp.Expression], table: Table) -> None:
    """Mark each clamp CASE of ``cases`` (``clamps.clamp_values``' list) whose column is proved
    within its bounds (module docstring). Only a mark in ``meta``, which sqlglot's equality,
    hashing and ``tree_key`` ignore and its copies keep: no decision of the rewrite changes."""
    for case in cases:
        if isinstance(case, exp.Case) and _proved(table, case):
            case.meta[NOOP] = True


def drop_noop_clamps(tree: exp.Select) -> exp.Select:
    """The finished statement ``tree`` with each marked clamp replaced by its ELSE branch, in
    place: the last step before the SQL text, so that nothing else sees the difference."""
    for case in [c for c in tree.find_all(exp.Case) if c.meta.get(NOOP)]:
        case.replace(case.args["default"])
    return tree
