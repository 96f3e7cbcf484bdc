"""Issue 21's faster planning arithmetic computes the same exact values as the plain Fraction
formulas it replaced (the references below are those formulas, kept verbatim)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

from dpproxy.values import _ln, ln_down, ln_up


def _ln_reference(x: Fraction) -> float:
    if abs(x - 1) < Fraction(1, 2):
        return math.log1p(float(x - 1))
    f = float(x) if abs(x.numerator).bit_length() - x.denominator.bit_length() < 1000 else 0.0
    if f > 0 and math.isfinite(f) and f > 1e-300:
        return math.log(f)
    return math.log(x.numerator) - math.log(x.denominator)


def _ln_up_reference(x: Fraction) -> Fraction:
    v = _ln_reference(x)
    return Fraction(v) + Fraction(abs(v)) / 10**9 + Fraction(1, 10**300)


def _ln_down_reference(x: Fraction) -> Fraction:
    v = _ln_reference(x)
    return Fraction(v) - Fraction(abs(v)) / 10**9 - Fraction(1, 10**300)


def _arguments() -> list[Fraction]:
    rng = random.Random(21)
    xs = [Fraction(rng.randint(1, 10**6), rng.randint(1, 10**6)) for _ in range(1000)]
    xs += [1 + Fraction(rng.random()) for _ in range(200)]
    xs += [Fraction(rng.random()) ** 7 for _ in range(100)]
    xs += [Fraction(rng.randint(1, 2**3000), rng.randint(1, 2**3000)) for _ in range(100)]
    xs += [
        Fraction(1),
        Fraction(2),
        Fraction(1, 2),
        Fraction(3, 2),
        Fraction(1, 10**300),
        Fraction(10**400),
        Fraction(10**400 + 1, 10**400),
        Fraction(1, 10**2000),
        Fraction(10**2000, 3),
        Fraction(2 * 4722366482869645213696, 4722366482869645),  # 2/δ of the demo schema
    ]
    return xs


def test_ln_bounds_equal_the_three_fraction_sum() -> None:
    for x in _arguments():
        assert _ln(x) == _ln_reference(x), x
        assert ln_up(x) == _ln_up_reference(x), x
        assert ln_down(x) == _ln_down_reference(x), x
