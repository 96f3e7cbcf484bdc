"""Bounds of SQRT, CBRT, LN, LOG (base 10 or a constant base), EXP, SIGN, POWER (integer or
fractional exponent) and PI() (analysis/bounds.py) and their magnitudes
(rewrite/floats.py): every value the guarded form computes for a value of the argument's
interval lies in the interval ``bounds_of`` gives, and every finite non-zero result of a
double in the domain lies within the magnitude span the float analysis assumes."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from sqlglot import exp

from dpproxy.analysis.bounds import bounds_of
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.floats import _OF_ANY_DOUBLE
from dpproxy.sql.types import EXP_LIMIT

FUNCS = {
    "SQRT": (math.sqrt, lambda v: v >= 0),
    "LN": (math.log, lambda v: v > 0),
    "LOG": (math.log10, lambda v: v > 0),
    "EXP": (math.exp, lambda v: -EXP_LIMIT <= v <= EXP_LIMIT),
    "SIGN": (lambda v: float((v > 0) - (v < 0)), lambda v: True),
    "POWER": (lambda v: v**2, lambda v: v == 0 or 1e-75 < abs(v) < 9.9e74),
    "POWER3": (lambda v: v**3, lambda v: v == 0 or 1e-50 < abs(v) < 9.9e49),
    "CBRT": (math.cbrt, lambda v: True),
    "LOG2": (math.log2, lambda v: v > 0),
    "LOGHALF": (lambda v: math.log(v) / math.log(0.5), lambda v: v > 0),
    "ROOT": (lambda v: v**0.5, lambda v: v == 0 or 1.000001e-300 <= v <= 9.99999e299),
    "RECIP": (lambda v: v**-1.5, lambda v: 1.000001e-100 <= v <= 9.99999e99),
}
SQL = {
    "POWER": "POWER(x, 2)",
    "POWER3": "x ^ 3",
    "LOG2": "LOG(2, x)",
    "LOGHALF": "LOG(0.5, x)",
    "ROOT": "POWER(x, 0.5)",
    "RECIP": "x ^ -1.5",
}
_rng = random.Random(6)
ENDS = [
    -1e80,
    -1000.0,
    -400.0,
    -345.0,
    -2.5,
    -1.0,
    0.0,
    1e-9,
    0.5,
    1.0,
    3.0,
    100.0,
    344.9,
    400.0,
    1e12,
]


def _table(lo: float, hi: float) -> Table:
    return Table("t", True, (Column("x", ColumnType.FLOAT, Fraction(lo), Fraction(hi)),))


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_every_value_of_the_interval_maps_inside_the_bounds(name: str) -> None:
    f, domain = FUNCS[name]
    node = exp.maybe_parse(SQL.get(name, f"{name}(x)"), dialect="postgres")
    pairs = [(a, b) for a in ENDS for b in ENDS if a <= b]
    for lo, hi in pairs:
        iv = bounds_of(node, _table(lo, hi))
        samples = [lo, hi] + [_rng.uniform(lo, hi) for _ in range(40)]
        values = [f(v) for v in samples if domain(v)]
        if iv is None:  # always NULL
            assert not values, (name, lo, hi)
            continue
        for y in values:
            assert iv.lo is None or iv.lo <= Fraction(y), (name, lo, hi, y, str(iv))
            assert iv.hi is None or Fraction(y) <= iv.hi, (name, lo, hi, y, str(iv))


def test_exp_is_bounded_even_over_an_unbounded_column() -> None:
    t = Table("t", True, (Column("x", ColumnType.FLOAT),))
    iv = bounds_of(exp.maybe_parse("EXP(x)"), t)
    assert iv is not None and iv.bounded and iv.hi is not None and iv.hi < Fraction(10) ** 150


def test_pi_is_the_double() -> None:
    iv = bounds_of(exp.maybe_parse("PI() * 2"), _table(0, 1))
    assert iv is not None and iv.lo == iv.hi == 2 * Fraction(math.pi)


DOUBLES = [5e-324, 1e-310, 2.2250738585072014e-308, 1e-300, 1 - 2**-53, 1 + 2**-52, 0.5, 2.0]
DOUBLES += [1e300, 1.7976931348623157e308, 345.0, -345.0, -1.0 + 2**-53, 10.0]


@pytest.mark.parametrize("node", sorted(_OF_ANY_DOUBLE, key=lambda c: c.__name__))
def test_magnitudes_cover_every_double_in_the_domain(node: type[exp.Expression]) -> None:
    name = node.__name__.upper()
    f, domain = FUNCS["POWER" if name == "POW" else name]
    span = _OF_ANY_DOUBLE[node]
    samples = DOUBLES + [_rng.uniform(-1, 1) * 10.0 ** _rng.uniform(-320, 308) for _ in range(500)]
    for v in samples:
        if not domain(v):
            continue
        y = abs(f(v))
        if y == 0 or math.isinf(y):
            continue
        assert span.lo <= math.log10(y) <= span.hi, (name, v, y)


@pytest.mark.parametrize("base", ["2", "0.5", "1.000001", "1e300"])
def test_log_with_a_base_has_its_own_magnitude(base: str) -> None:
    """LOG(b, x) = LN(x) / LN(b): its span is LN's shifted by |ln b|, for every double x > 0."""
    from dpproxy.rewrite.floats import Magnitudes

    t = Table("t", True, (Column("x", ColumnType.FLOAT),))
    span = Magnitudes(t, 150.0).span(exp.maybe_parse(f"LOG({base}, x)", dialect="postgres"))
    assert span is not None
    b = float(base)
    samples = DOUBLES + [10.0 ** _rng.uniform(-323, 308) for _ in range(500)]
    for v in samples:
        if v <= 0:
            continue
        y = abs(math.log(v) / math.log(b))
        if y != 0 and not math.isinf(y):
            assert span.lo <= math.log10(y) <= span.hi, (base, v, y)
