"""``dpproxy/mechanisms/dp_bounds.py``: the public grid, the scores, the choice and its cost.
(The sensitivity is checked by brute force in tests/property/test_dp_bounds_bruteforce.py, the
command in tests/integration/test_own_data.py.)"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpproxy.backends.opener import _literal
from dpproxy.mechanisms.dp_bounds import (
    QUANTILE,
    SENSITIVITY,
    candidates,
    choose_bounds,
    epsilon_each,
    lower_scores,
    penalty,
    upper_scores,
)
from tests.noise import NoNoise


def test_the_grid_is_public_sorted_symmetric_and_exact() -> None:
    for integer in (True, False):
        grid = candidates(integer=integer)
        assert list(grid) == sorted(set(grid))
        assert [-c for c in reversed(grid)] == list(grid)
        assert Fraction(0) in grid and max(grid) == 5 * 10**15
        for c in grid:
            assert Fraction(_literal(c)) == c  # the SQL literal is the exact value
    assert all(c.denominator == 1 for c in candidates(integer=True))
    assert Fraction(1, 1000) in candidates(integer=False)
    assert Fraction(2, 1000) not in candidates(integer=True)


def test_scores_are_integers_scaled_by_one_over_q() -> None:
    assert QUANTILE == Fraction(1, 20) and SENSITIVITY == 20
    assert lower_scores([0, 5, 40], 100) == [100, 0, 700]  # |20·a − n|
    assert upper_scores([100, 5], 100) == [1900, 0]


def _counts(values: list[int], grid: tuple[Fraction, ...]) -> tuple[list[int], list[int]]:
    return [sum(v < c for v in values) for c in grid], [sum(v > c for v in values) for c in grid]


def test_without_noise_the_choice_is_the_nearest_candidate_to_the_quantiles() -> None:
    grid = candidates(integer=True)
    ages = [18 + (i * 37) % 73 for i in range(2000)]  # 18..90, spread evenly
    below, above = _counts(ages, grid)
    chosen = choose_bounds(grid, below, above, len(ages), Fraction(1, 4), NoNoise())
    assert (chosen.lower, chosen.upper) == (20, 100)
    # all negative values: the penalty keeps the bounds next to the data, not at ±5e15
    neg = [-v for v in ages]
    below, above = _counts(neg, grid)
    chosen = choose_bounds(grid, below, above, len(neg), Fraction(1, 4), NoNoise())
    assert (chosen.lower, chosen.upper) == (-100, -20)


def test_the_noise_scale_and_the_split_of_epsilon() -> None:
    noise = NoNoise()
    grid = candidates(integer=True)
    below, above = _counts([5] * 50, grid)
    choose_bounds(grid, below, above, 50, Fraction(1, 8), noise)
    # two choices, each report-noisy-min at scale 2Δ/ε′
    assert noise.calls == [("select", len(grid), Fraction(320), True)] * 2
    assert epsilon_each(Fraction(1), 4) == Fraction(1, 8)
    assert 8 * epsilon_each(Fraction(3, 7), 4) == Fraction(3, 7)  # basic composition: exact
    assert penalty(3, Fraction(320)) == 960 and penalty(1, Fraction(1000, 3)) == 334
    with pytest.raises(ValueError):
        choose_bounds(grid, below, above, 50, Fraction(0), noise)
