"""``release/guard.py``: the double a SUM's noise is added to is exactly the guarded total."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from dpproxy.release.guard import (
    SPAN_BITS,
    STEP_BITS,
    SumGuard,
    guard_for,
    guarded,
    guarded_many,
)


def reference(total: int, bits: int, g: SumGuard) -> Fraction:
    """f(x) of the module's docstring, in exact fractions: clamp, then the nearest number of
    ``span`` significant bits (ties to even)."""
    x = Fraction(total) / Fraction(2) ** bits
    t = Fraction(2) ** (g.step + g.span)
    y = max(-t, min(t, x))
    if y == 0:
        return y
    e = math.floor(math.log2(abs(y)))  # float log2 of a huge Fraction: fix it up exactly
    while Fraction(2) ** e > abs(y):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(y):
        e += 1
    ulp = Fraction(2) ** (e + 1 - g.span)
    return round(y / ulp) * ulp  # Fraction.__round__: ties to even


TOTALS = [
    0, 1, -1, 2**52 + 1, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63 + 12345,
    -(2**64) + 3, 2**100 + 7, -(2**100) - 7, 3**80, -(3**80), 2**200 + 1,
]  # fmt: skip


@pytest.mark.parametrize("bits", [-20, 0, 7, 30, 52, 200])
@pytest.mark.parametrize("sens", [Fraction(1), Fraction(90), Fraction(3, 7), Fraction(10**9)])
def test_the_double_handed_to_the_sampler_is_the_guarded_total(bits: int, sens: Fraction) -> None:
    rng = random.Random(bits * 1000 + int(sens))
    g = guard_for(sens, Fraction(1))
    assert Fraction(2) ** g.step <= sens * Fraction(2) ** -STEP_BITS < Fraction(2) ** (g.step + 1)
    totals = TOTALS + [rng.randint(-(2**130), 2**130) for _ in range(300)]
    for t in totals:
        got = guarded(t, bits, g)
        assert math.isfinite(got)
        assert Fraction(got) == reference(t, bits, g), t
        # never further than h/2 from the clamped exact total
        x = Fraction(t) / Fraction(2) ** bits
        cap = Fraction(2) ** (g.step + SPAN_BITS)
        assert abs(Fraction(got) - max(-cap, min(cap, x))) <= Fraction(2) ** g.step / 2


def test_below_the_clamp_the_value_is_the_one_float_gives() -> None:
    g = guard_for(Fraction(90), Fraction(3))
    for t in (0, 5, -(2**53), 2**53 + 1, 123456789, 2**80 + 2**27 + 1, -(3**50)):
        assert guarded(t, 40, g) == math.ldexp(float(t), -40)


def test_the_clamp_is_beyond_2_to_the_40_maximal_contributions() -> None:
    for sens in (Fraction(1), Fraction(90), Fraction(1, 3), Fraction(7 * 10**6)):
        g = guard_for(sens, Fraction(1))
        assert Fraction(2) ** (g.step + g.span) > sens * 2**40
        big = math.ceil(sens * 2**41) * 2**10  # beyond T on the grid 2^-10
        assert Fraction(guarded(big, 10, g)) == Fraction(2) ** (g.step + g.span)
        assert Fraction(guarded(-big, 10, g)) == -(Fraction(2) ** (g.step + g.span))


@pytest.mark.parametrize("constant", ["1e-320", "4.9e-324", "2.22507e-313"])
def test_a_sum_of_a_subnormal_constant_is_answered(constant: str) -> None:
    """The step never goes below 2^-1074 (it used to raise an internal error, charged, for
    ``SUM(1e-320)``): more noise for such a plan, and an answer."""
    import dpproxy

    sens = Fraction(constant)
    g = guard_for(sens, Fraction(1))
    assert g.step >= -1074
    assert Fraction(2) ** g.step <= sens / 2**STEP_BITS or g.step == -1074
    with dpproxy.connect(budget_epsilon=10**6, budget_delta="0.5", ledger="memory") as conn:
        cur = conn.cursor()
        cur.execute(f"SELECT sex, COUNT(*), SUM({constant}) FROM adult GROUP BY sex")
        rows = cur.fetchall()
    assert len(rows) == 2 and all(math.isfinite(r[2]) for r in rows)


@pytest.mark.parametrize("span", [SPAN_BITS, 30, 8])
def test_every_total_near_the_clamp_and_2_to_the_53_is_the_exact_map(span: int) -> None:
    """guarded's shortcut (float() of the clamped total, which rounds to 53 significant bits,
    ties to even) gives the map of the module's docstring exactly, at the clamp, at 2^53 and
    at ties, for the production precision and for reduced ones (where it must not apply)."""
    for step, bits in ((-12, 0), (-40, 3), (-30, 30), (0, -20), (-3, 0), (300, 600), (960, 0)):
        if step + span + bits < 0:
            continue  # a clamp below one grid step: production precision only (guarded)
        g = SumGuard(step, span)
        cap = 2 ** (step + span + bits)
        edges = [cap, 2**53, 2**span, 2**54 + 2, 2**54 + 6, 2**60 + 2**7 * 3]
        totals = [s * (e + d) for e in edges for d in (-2, -1, 0, 1, 2) for s in (1, -1)]
        for t in totals:
            assert Fraction(guarded(t, bits, g)) == reference(t, bits, g), (step, bits, t)


@pytest.mark.parametrize("step, bits", [(900, 100), (960, 60), (500, 1000)])
def test_grid_units_beyond_a_double_still_give_the_exact_map(step: int, bits: int) -> None:
    """A total of 2^1024 grid units or more (no plan's rows reach it: each holds ≤ 2^52 units)
    is still converted exactly, without an intermediate float of the units overflowing."""
    g = SumGuard(step)
    cap = 2 ** (step + SPAN_BITS + bits)
    for t in (2**1030 + 12345, -(2**1030) - 1, cap - 1, -cap + 3, cap + 2**900):
        got = guarded(t, bits, g)
        assert math.isfinite(got) and Fraction(got) == reference(t, bits, g), (step, bits, t)


@pytest.mark.parametrize(
    "step, bits, span",
    [(-12, 43, SPAN_BITS), (-40, 3, SPAN_BITS), (0, -20, SPAN_BITS), (960, 0, SPAN_BITS),
     (-60, 0, SPAN_BITS), (900, 100, SPAN_BITS), (500, 1000, SPAN_BITS), (-3, 0, 30)],
)  # fmt: skip
def test_the_vector_form_gives_every_value_guarded_gives(step: int, bits: int, span: int) -> None:
    """guarded_many (one check of the plan's numbers per vector) is guarded, value by value:
    below the clamp, at and beyond it, at ties, with a reduced precision and with T below one
    grid step (its fallbacks), for vectors all within ±T and vectors with one value beyond."""
    g = SumGuard(step, span)
    rng = random.Random(step * 7 + bits)
    cap = 2 ** max(step + span + bits, 0)
    near = [s * (e + d) for e in (cap, 2**53, 2**54 + 2) for d in (-1, 0, 1) for s in (1, -1)]
    inside = [t for t in near if abs(t) <= cap] + [rng.randint(-cap, cap) for _ in range(200)]
    for totals in (inside, [*inside, cap + 1], [-cap - 5, *inside], near + TOTALS, [], [0]):
        got = guarded_many(totals, bits, g)
        assert [Fraction(x) for x in got] == [Fraction(guarded(t, bits, g)) for t in totals]
        assert all(type(x) is float for x in got)
