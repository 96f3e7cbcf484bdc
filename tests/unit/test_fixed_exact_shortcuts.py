"""``rewrite/fixed``'s decisions computed on integers and doubles are the ones its Fractions
made: ``summand`` leaves out a SUM term's comparisons exactly when the grid's points, as
Fractions, hold ``computed_range``'s Fractions (the form before the shortcut, kept here as the
reference), ``computed_range`` is that reference, and ``grid`` is the grid of the reference
``max(|lo|, |hi|)``; ``wholesum.whole_term`` is unchanged by testing the measure's exact
range first."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.planning.plan import Primitive
from dpproxy.rewrite.fixed import (
    TOP_BITS,
    Grid,
    _ceil_log2,
    _computed_doubles,
    _natural_bits,
    _on_grid,
    computed_range,
    exact_range,
    grid,
)
from dpproxy.rewrite.wholesum import whole_term
from dpproxy.values import Interval

TABLE = Table(
    "t",
    True,
    (
        Column("i", ColumnType.INTEGER, Fraction(-10), Fraction(10)),
        Column("j", ColumnType.INTEGER, Fraction(0), Fraction(2**60)),
        Column("x", ColumnType.FLOAT, Fraction(-5, 2), Fraction(29, 4)),
        Column("y", ColumnType.FLOAT, Fraction(1, 3), Fraction(7, 3)),
    ),
)
MEASURES = ("i", "j", "x", "y", "i - x", "CASE WHEN x > 0 THEN 3 ELSE -2 END", "i * 2")
_EXACT_DOUBLE = Fraction(2**53)


def _reference_range(
    p: Primitive, row: tuple[float, float] | None
) -> tuple[Fraction, Fraction] | None:
    """``computed_range`` as it was written with Fractions."""
    assert p.measure is not None
    span = exact_range(p.measure, TABLE)
    if span is None and row is not None:
        span = (Fraction(row[0]), Fraction(row[1]))
    if span is None or any(abs(v) > _EXACT_DOUBLE for v in span):
        return None
    if p.center.denominator == 1:
        if abs(p.center.numerator) > 2**53:
            return None
        centre = float(p.center.numerator)
    else:
        centre = float(p.center)
        if abs(centre) > 2**53:
            return None
    low, high = float(span[0]) - centre, float(span[1]) - centre
    if p.squared:
        return Fraction(0), Fraction(max(low * low, high * high))
    return Fraction(low), Fraction(high)


def _reference_grid(p: Primitive) -> Grid:
    assert p.values is not None and p.values.lo is not None and p.values.hi is not None
    lo, hi = p.values.lo, p.values.hi
    m = max(abs(lo), abs(hi))
    natural = _natural_bits(p, TABLE)
    if m == 0:
        return Grid(0, 0, 0)
    bits = min(TOP_BITS - _ceil_log2(m), 1000)
    if natural is not None and natural <= bits:
        bits = natural
    scale = Fraction(2) ** bits
    low, high = -((-lo * scale) // 1), (hi * scale) // 1
    if low > high:
        low = high = high if lo > 0 else low
    return Grid(bits, int(low), int(high))


def _fraction(rng: random.Random) -> Fraction:
    kind = rng.randrange(5)
    if kind == 0:
        return Fraction(rng.randint(-(2**60), 2**60))
    if kind == 1:
        return Fraction(rng.randint(-1000, 1000), rng.choice((1, 2, 3, 7, 1024, 10**9)))
    if kind == 2:
        return Fraction(rng.uniform(-1e6, 1e6))
    if kind == 3:
        return Fraction(0)
    return Fraction(rng.randint(-5, 5), 2 ** rng.randint(0, 80))


def _double(rng: random.Random) -> float:
    kind = rng.randrange(4)
    if kind == 0:
        return float(rng.randint(-(2**54), 2**54))
    if kind == 1:
        return rng.uniform(-1e5, 1e5)
    if kind == 2:
        return float(rng.randint(-20, 20))
    return rng.choice((0.0, -0.0, 2.0**53, -(2.0**53), 2.0**53 + 2, 5e-324, 1e-300))


def _primitives(seed: int) -> list[tuple[Primitive, tuple[float, float] | None]]:
    rng = random.Random(seed)
    out = []
    for _ in range(400):
        lo, hi = sorted((_fraction(rng), _fraction(rng)))
        measure: exp.Expression = exp.maybe_parse(rng.choice(MEASURES), dialect="postgres")
        centre = rng.choice((Fraction(0), Fraction(0), _fraction(rng), Fraction(2600)))
        p = Primitive(
            "__p0",
            PrimitiveKind.SUM,
            measure,
            Interval(lo, hi),
            center=centre,
            squared=rng.random() < 0.3,
        )
        a, b = sorted((_double(rng), _double(rng)))
        out.append((p, rng.choice(((a, b), None))))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_integer_decisions_are_the_fraction_ones(seed: int) -> None:
    for p, row in _primitives(seed):
        g = grid(p, TABLE)
        assert g == _reference_grid(p)
        reference = _reference_range(p, row)
        assert computed_range(p, TABLE, row) == reference
        doubles = _computed_doubles(p, TABLE, row)
        assert (doubles is None) == (reference is None)
        if g.bits >= 0 and doubles is not None and reference is not None:
            within = g.point(g.low) <= reference[0] and reference[1] <= g.point(g.high)
            assert _on_grid(g, doubles) == within


@pytest.mark.parametrize("seed", range(3))
def test_on_grid_at_the_ends(seed: int) -> None:
    """Spans that touch, or miss by one double, a grid's ends."""
    rng = random.Random(seed)
    for _ in range(2000):
        bits = rng.randint(0, 60)
        low, high = sorted((rng.randint(-(2**52), 2**52), rng.randint(-(2**52), 2**52)))
        g = Grid(bits, low, high)
        a = float(Fraction(low, 2**bits))
        b = float(Fraction(high, 2**bits))
        for lo_end in (a, a - abs(a) * 2**-52 - 5e-324, a + abs(a) * 2**-52):
            for hi_end in (b, b + abs(b) * 2**-52 + 5e-324, b - abs(b) * 2**-52):
                span = (lo_end, hi_end)
                want = g.point(low) <= Fraction(lo_end) and Fraction(hi_end) <= g.point(high)
                assert _on_grid(g, span) == want


def test_whole_term_tests_the_range_first() -> None:
    for p, _ in _primitives(99):
        assert p.measure is not None
        span = exact_range(p.measure, TABLE)
        natural = _natural_bits(p, TABLE)
        if span is None or natural is None or any(v.denominator != 1 for v in span):
            assert whole_term(p, TABLE) is None
