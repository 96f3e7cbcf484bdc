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


def test_smooth_candidate_prediction_is_below_the_exact_one_and_close() -> None:
    """The SMOOTH candidate of an AVG is scored in floats (``methods._predicted_mean_smooth``);
    the exact ``mean_smooth`` at the plan's β is never below it, and above it by a relative
    10⁻⁹·ln n + n·2^-47 at most (the bound its docstring derives)."""
    from dpproxy.analysis import local
    from dpproxy.catalog.model import Neighbouring
    from dpproxy.planning.methods import _predicted_mean_smooth

    rng = random.Random(5)
    for _ in range(3000):
        n = rng.choice([0, 1, 2, 5, 10, 100, 1000, 32561, rng.randint(0, 10**6)])
        w = Fraction(rng.randint(1, 10**6), rng.choice([1, 3, 1000]))
        rows = rng.choice([1, 2, 3, 10, 100])
        rel = rng.choice(list(Neighbouring))
        eps = Fraction(rng.randint(1, 10**4), rng.choice([1, 10, 100, 1000, 10**4]))
        dlt = Fraction(rng.randint(1, 1000), 10 ** rng.randint(4, 300))
        beta = eps / (2 * ln_up(2 / dlt))  # methods._beta
        exact = float(local.mean_smooth(n, w, rows, rel, beta))
        fast = _predicted_mean_smooth(n, float(w), rows, rel, float(eps), dlt)
        slack = 1e-9 * math.log(n + 2) + n * 2.0**-47 + 1e-12
        assert fast * (1 - 1e-12) <= exact <= fast * (1 + slack), (n, w, rows, eps, dlt)


def test_fixed_point_grid_integers_equal_the_fraction_formulas() -> None:
    """``rewrite/fixed.py``'s ⌈log2 m⌉ and the grid's ⌈lo·2^k⌉, ⌊hi·2^k⌋ on integers."""
    from dpproxy.rewrite.fixed import _ceil_log2, _ceil_scaled, _floor_scaled

    def pow2(e: int) -> Fraction:
        return Fraction(2) ** e

    rng = random.Random(7)
    for _ in range(3000):
        x = Fraction(rng.randint(-(10**12), 10**12), rng.choice([1, 3, 7, 10**6, 2**40]))
        bits = rng.randint(-60, 60)
        assert _floor_scaled(x, bits) == math.floor(x * pow2(bits))
        assert _ceil_scaled(x, bits) == math.ceil(x * pow2(bits))
        m = abs(x) or Fraction(1, 3)
        e = _ceil_log2(m)
        assert m <= pow2(e) and not m <= pow2(e - 1)
