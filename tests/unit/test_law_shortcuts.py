"""The drawn laws' arithmetic on integers gives the laws of the Fraction forms it replaced:
``staircase_for`` (its range checks, ``⌊move/2^k⌋`` and ``⌈γ·M⌉``), ``release/guard.guard_for``
(``⌊log₂(sens/changed)⌋``) and ``pow2``, compared here with the former code, kept below, on
random arguments around every boundary (issue 21: a first query works these out while
planning)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from dpproxy.errors import InternalError
from dpproxy.mechanisms.staircase import GAIN, HIGHEST, LOWEST, WIDER, Staircase, staircase_for
from dpproxy.release.guard import SPAN_BITS, STEP_BITS, SumGuard, guard_for, pow2
from dpproxy.values import float_up


def _staircase_before(
    epsilon: Fraction, move: Fraction, k: int, laplace_scale: Fraction, span: Fraction
) -> Staircase | None:
    if not LOWEST <= epsilon <= HIGHEST or move <= 0:
        return None
    if span / Fraction(2) ** k >= Fraction(2) ** 1000 or move >= Fraction(2) ** 1000:
        return None
    s = Fraction(float_up(1 / epsilon))
    shift = math.floor(move / Fraction(2) ** k)
    if not 1 <= shift < 2**1000:
        return None
    gamma = 1 / math.expm1(1 / float(s))
    inner = max(1, min(shift, math.ceil(Fraction(gamma) * shift)))
    if inner >= shift:
        return None
    law = Staircase(shift, inner, s, k, laplace_scale)
    b = float(laplace_scale)
    if law.median >= GAIN * math.log(2) * b:
        return None
    if law.half_width(0.05) > WIDER * (b * math.log(20) + math.ldexp(1.0, k)):
        return None
    return law


def _guard_before(sens: Fraction, changed: Fraction) -> SumGuard:
    if sens <= 0 or changed <= 0:
        raise InternalError("a SUM guard needs a positive sensitivity")
    x = sens / changed
    e = x.numerator.bit_length() - x.denominator.bit_length()
    e = e if Fraction(2) ** e <= x else e - 1
    j = max(e - STEP_BITS, -1074)
    if j + SPAN_BITS >= 1024:
        raise InternalError("a SUM guard outside the range of a double")
    return SumGuard(j, SPAN_BITS)


def _fraction(rng: random.Random) -> Fraction:
    """A positive rational near a power of two, or near a boundary of the checks."""
    e = rng.randint(-1100, 1100)
    base = Fraction(2) ** e
    return max(Fraction(1, 10**400), base * Fraction(rng.randint(1, 10**6), 10**6) + rng.choice(
        (0, Fraction(1, 10**30), -Fraction(1, 10**30) * base)))  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_staircase_for_is_the_fraction_forms_law(seed: int) -> None:
    rng = random.Random(seed)
    chosen = 0
    for i in range(500):
        k = rng.randint(-1074, 60)
        if i % 2:  # where a staircase is drawn: ε about 0.73–3, a move of many lattice units
            eps = Fraction(rng.randint(730, 3030), 1000)
            move = Fraction(2) ** (k + rng.randint(3, 60)) * Fraction(
                rng.randint(10**5, 10**6), 10**6
            )
            span = move * 2**53
            scale = move / eps
        else:  # every boundary of the checks
            tiny, top = Fraction(1, 10**9), Fraction(2) ** 1000
            eps = rng.choice(
                (
                    LOWEST,
                    HIGHEST,
                    Fraction(rng.randint(1, 5000), 1000),
                    LOWEST - tiny,
                    HIGHEST + tiny,
                )
            )
            move = rng.choice(
                (
                    _fraction(rng),
                    Fraction(0),
                    -Fraction(1),
                    top,
                    top - Fraction(1, 3),
                    Fraction(2) ** k * 3,
                )
            )
            span = rng.choice((move * 2**53, _fraction(rng), Fraction(2) ** (1000 + k),
                               Fraction(2) ** (1000 + k) - Fraction(1, 7)))  # fmt: skip
            scale = abs(move) / eps * Fraction(rng.randint(900, 1100), 1000) or Fraction(1)
        got, want = staircase_for(eps, move, k, scale, span), _staircase_before(
            eps, move, k, scale, span)  # fmt: skip
        assert got == want, (eps, move, k, scale, span)
        chosen += got is not None
    assert chosen > 100  # the laws themselves were compared, not only Nones


@pytest.mark.parametrize("seed", range(4))
def test_guard_for_and_pow2_are_the_fraction_forms(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        changed = rng.choice((Fraction(rng.randint(1, 64)), Fraction(rng.randint(1, 10**9), 7**9)))
        exact = Fraction(2) ** rng.randint(-1000, 1000) * changed  # log2(sens/changed) whole
        sens = rng.choice((_fraction(rng), exact, exact * (1 - Fraction(1, 10**20)), Fraction(0)))
        try:
            want: SumGuard | str = _guard_before(sens, changed)
        except InternalError as e:
            want = str(e)
        try:
            got: SumGuard | str = guard_for(sens, changed)
        except InternalError as e:
            got = str(e)
        assert got == want, (sens, changed)
        e = rng.randint(-1100, 1100)
        assert pow2(e) == Fraction(2) ** e and type(pow2(e)) is Fraction
