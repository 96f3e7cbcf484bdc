"""``Cost`` addition and subtraction (``values.py``) skip zero terms; the result must be the
exact term-by-term sum, and the difference clamped at zero, whatever the terms."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

from dpproxy.values import Cost

TERMS = [
    Fraction(0),
    Fraction(1),
    Fraction(1, 3),
    Fraction(10**9),
    Fraction(1, 10**6),
    Fraction(7, 2),
]


def _costs() -> list[Cost]:
    rng = random.Random(7)
    picked = [Cost(e, d, r) for e, d, r in itertools.product(TERMS, repeat=3)]
    return picked + [
        Cost(*(Fraction(rng.randint(0, 9), rng.randint(1, 9)) for _ in range(3)))
        for _ in range(200)
    ]


def test_sums_and_differences_are_exact_term_by_term() -> None:
    costs = _costs()
    rng = random.Random(11)
    pairs = [(a, b) for a in costs[:216:7] for b in costs[:216:5]]
    pairs += [(rng.choice(costs), rng.choice(costs)) for _ in range(2000)]
    for a, b in pairs:
        s = a + b
        assert (s.epsilon, s.delta, s.rho) == (
            a.epsilon + b.epsilon,
            a.delta + b.delta,
            a.rho + b.rho,
        )
        d = a - b
        assert (d.epsilon, d.delta, d.rho) == tuple(
            max(Fraction(0), x - y)
            for x, y in ((a.epsilon, b.epsilon), (a.delta, b.delta), (a.rho, b.rho))
        )
        assert all(isinstance(x, Fraction) for x in (*_terms(s), *_terms(d)))


def _terms(c: Cost) -> tuple[Fraction, Fraction, Fraction]:
    return c.epsilon, c.delta, c.rho


def test_a_zero_cost_changes_nothing() -> None:
    for c in _costs():
        assert c + Cost.zero() == c == Cost.zero() + c
        assert c - Cost.zero() == c
        assert c - c == Cost.zero()
