"""Stability of the bounded relation and sensitivity of each released primitive.

After the rewrite's contribution bounding (``rewrite/bound.py``), one privacy unit owns at most
``rows`` rows in total, in at most ``groups`` groups, with at most ``rows_per_group`` rows in
any one group (the protected change of ``../shared/reading/002_*``: MaxRowsPerID, or
MaxGroupsPerID × MaxRowsPerGroupPerID). From that and a per-row value interval, the functions
here give the largest change of the vector of per-group releases between neighbours:

* **add/remove one unit**: the unit's rows appear or vanish. A row moves a COUNT by 1 and a SUM
  by at most max|x|; spread over groups, the L1 change is ``rows × max|x|``, the L∞ change
  ``rows_per_group × max|x|`` and the L2 change is largest when rows are packed into as few
  groups as possible: √(⌊K/R⌋R² + (K mod R)²) × max|x|.
* **substitute one unit**: one unit's rows are replaced by another's. Without GROUP BY the single
  release moves within the range of one unit's total, [min(0, K·lo), max(0, K·hi)], so the bound
  is that range's width. With GROUP BY we use removal then addition: twice the add/remove bound.

Distinct-unit counts move by 1 in each of at most ``groups`` groups.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from dpproxy.catalog.model import ContributionBound, Neighbouring
from dpproxy.errors import InternalError
from dpproxy.values import Interval, Sensitivity, sqrt_up


class PrimitiveKind(Enum):
    COUNT = "count"  # number of rows (or of non-NULL measure values)
    SUM = "sum"  # sum of a bounded measure
    UNITS = "units"  # number of distinct privacy units
    # number of distinct non-NULL values of a measure, with COUNT's sensitivity: removing a
    # row lowers its group's distinct count by 1 or 0, adding one raises it by 1 or 0. A unit
    # removed (added) with r_g rows in group g moves that count by at most r_g, COUNT's own
    # bound; substituted (r_g rows out, a_g in) by at most max(r_g, a_g): at most K over one
    # group, and Σ_g (r_g + a_g) ≤ 2K over groups, COUNT's substitution bounds.
    DISTINCT = "distinct"


@dataclass(frozen=True, slots=True)
class Stability:
    """Per-unit contribution after bounding: K rows, G groups, R rows per group."""

    rows: int
    groups: int
    rows_per_group: int

    def __post_init__(self) -> None:
        if min(self.rows, self.groups, self.rows_per_group) < 1:
            raise InternalError("stability bounds must be positive")
        if self.rows > self.groups * self.rows_per_group:
            raise InternalError("rows exceed groups × rows_per_group")


def stability(bound: ContributionBound, *, grouped: bool) -> Stability:
    """The per-unit contribution the rewrite enforces for this table's bound.

    >>> stability(ContributionBound(max_rows=3), grouped=True)
    Stability(rows=3, groups=3, rows_per_group=3)
    >>> stability(ContributionBound(None, 2, 5), grouped=True)
    Stability(rows=10, groups=2, rows_per_group=5)
    """
    k, g, r = bound.max_rows, bound.max_groups, bound.max_rows_per_group
    if not grouped:
        total = bound.rows_total()
        if total is None:
            raise InternalError("a private table without a row bound")
        return Stability(total, 1, total)
    if g is not None and r is not None:
        per_group = r if k is None else min(r, k)
        groups = g if k is None else min(g, k)
        rows = groups * per_group if k is None else min(k, groups * per_group)
        return Stability(rows, groups, per_group)
    if k is None:
        raise InternalError("a private table without a row bound")
    return Stability(k, k, k)


def _packed_l2(rows: int, per_group: int) -> Fraction:
    full, rest = divmod(rows, per_group)
    return sqrt_up(Fraction(full * per_group * per_group + rest * rest))


@functools.lru_cache(maxsize=4096)
def sensitivity(
    kind: PrimitiveKind,
    stab: Stability,
    neighbouring: Neighbouring,
    values: Interval | None = None,
    *,
    grouped: bool,
) -> Sensitivity:
    """Sensitivity of one primitive released for every group (or once, if not grouped).

    >>> s, ages = Stability(1, 1, 1), Interval(Fraction(17), Fraction(90))
    >>> sensitivity(PrimitiveKind.SUM, s, Neighbouring.ADD_REMOVE, ages, grouped=False).l1
    Fraction(90, 1)
    >>> sensitivity(PrimitiveKind.SUM, s, Neighbouring.SUBSTITUTE, ages, grouped=False).l1
    Fraction(90, 1)
    """
    if kind is PrimitiveKind.UNITS:
        base = Sensitivity(Fraction(stab.groups), sqrt_up(Fraction(stab.groups)), Fraction(1))
        if neighbouring is Neighbouring.SUBSTITUTE:
            return base.scaled(Fraction(2)) if grouped else base
        return base
    if kind in (PrimitiveKind.COUNT, PrimitiveKind.DISTINCT):
        per_row = Interval(Fraction(0), Fraction(1))
    else:
        if values is None or not values.bounded:
            raise InternalError("a SUM primitive needs a bounded value interval")
        per_row = values
    m = per_row.max_abs()
    ar = Sensitivity(
        stab.rows * m, _packed_l2(stab.rows, stab.rows_per_group) * m, stab.rows_per_group * m
    )
    if neighbouring is Neighbouring.ADD_REMOVE:
        return ar
    if grouped:
        return ar.scaled(Fraction(2))
    assert per_row.lo is not None and per_row.hi is not None
    k = stab.rows
    width = max(Fraction(0), k * per_row.hi) - min(Fraction(0), k * per_row.lo)
    return Sensitivity(width, width, width)
