"""Clamping bounds chosen with DP, for ``dpproxy schema init --dp-bounds --epsilon E``.

A schema's bounds are public. Read from the data they would leak it; chosen by this mechanism
they are differentially private releases, charged to the data steward's account in the ledger
like any answer, and the rest of dpproxy treats them as any declared bound (values outside are
clamped, so a bound that is too tight biases answers, never breaks privacy).

**The mechanism.** For one numeric column ``x`` of a table whose privacy unit is ``u``:

1. Each unit is reduced to one value: ``lo_u = MIN(x)`` over its rows for the lower bound,
   ``hi_u = MAX(x)`` for the upper bound (NULLs and rows without a unit are ignored). Let
   ``n`` be the number of units with a value.
2. The candidates are a fixed public grid ``G`` (:func:`candidates`): 0 and ±m·10^k for
   m in {1, 2, 5} and k from -3 to 15 (k ≥ 0 and whole numbers only for an
   ``integer`` column). ``G`` does not depend on the data.
3. Lower bound: the score of c ∈ G is ``|#{u : lo_u < c} − q·n|`` with q = 1/20, the distance in
   rank from the q-quantile of the units' minima. Upper bound: ``|#{u : hi_u > c} − q·n|``.
   Every candidate beyond the data ties (no unit below it), so a data-independent penalty of one
   noise scale per grid step outwards (towards smaller candidates for the lower bound, larger
   ones for the upper) is added: the nearest of the tied candidates is the likely one. Each
   bound is chosen by report-noisy-min with exponential noise of scale 2Δ/ε′ (OpenDP's
   ``make_noisy_max``, :meth:`NoiseSource.noisy_min_index`), ε′ = E / (2 × number of columns).
4. Post-processing: if the lower bound exceeds the upper one they are swapped.

**Privacy argument.** Neighbouring datasets differ in all the rows of one unit (added, removed,
or, under substitution, replaced). Step 1 maps each unit to a single value, so the multisets
``{lo_u}`` and ``{hi_u}`` differ in one element (one added or removed: ``n`` changes by 1; one
replaced: ``n`` is unchanged), however many rows the unit has. For one candidate c, the count
``a = #{lo_u < c}`` changes by at most 1 and ``q·n`` by at most q, in the same direction when a
unit is added or removed below c; so ``a − q·n`` changes by at most max(1 − q, q) ≤ 1, and under
substitution by at most 1. The scores are computed multiplied by 1/q = 20, ``|20·a − n|``, so
that they are exact integers (their floats are exact: no rounding stretches the sensitivity),
with sensitivity Δ = 20: the ``linf`` distance between neighbours' score vectors is at most 19
under add/remove and 20 under substitution (``tests/property/test_dp_bounds_bruteforce.py``
checks it by brute force). The penalty does not depend on the data and is an integer too, so it
changes no sensitivity. Report-noisy-min with exponential noise of scale 2Δ/ε′ on such scores is
ε′-DP (McKenna & Sheldon 2020, permute-and-flip; OpenDP's ``make_noisy_max`` with
``monotonic=False``). There are 2 choices per column, each ε′-DP, so by basic composition the
draft is (2 × columns × ε′ = E, 0)-DP; step 4 and writing the file are post-processing. The grid
is public, so nothing else about the data is released (column names and types are metadata).

The column types, hence which columns get bounds and whether the grid holds fractions, are taken
as public, like the schema's own types. For a CSV file DuckDB infers them from the values; a
steward who considers that inference sensitive should use Parquet or a DuckDB table, whose types
are declared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.mechanisms.noise import NoiseSource

QUANTILE = Fraction(1, 20)  # q: the bounds aim to clamp about 5% of units at each end
SENSITIVITY = 20  # Δ of every (integer, scaled by 1/q) score: module docstring
_MANTISSAS = (Fraction(1), Fraction(2), Fraction(5))


def candidates(*, integer: bool) -> tuple[Fraction, ...]:
    """The public grid G, ascending (see the module docstring)."""
    positive = sorted(
        {m * Fraction(10) ** k for k in range(0 if integer else -3, 16) for m in _MANTISSAS}
    )
    if integer:
        positive = [c for c in positive if c.denominator == 1]
    return tuple([-c for c in reversed(positive)] + [Fraction(0)] + positive)


def lower_scores(below: Sequence[int], units: int) -> list[int]:
    """Scores of the candidates for the lower bound, ``|a/q − n|`` with ``a = below[i]`` the
    number of units whose minimum is below G[i]: integers, sensitivity ≤ ``SENSITIVITY``."""
    return [abs(a * QUANTILE.denominator - units * QUANTILE.numerator) for a in below]


def upper_scores(above: Sequence[int], units: int) -> list[int]:
    """Scores for the upper bound; ``above[i]``: the units whose maximum is above G[i]."""
    return [abs(a * QUANTILE.denominator - units * QUANTILE.numerator) for a in above]


@dataclass(frozen=True, slots=True)
class ChosenBounds:
    lower: Fraction
    upper: Fraction


def choose_bounds(
    grid: Sequence[Fraction],
    below: Sequence[int],
    above: Sequence[int],
    units: int,
    epsilon_each: Fraction,
    noise: NoiseSource,
) -> ChosenBounds:
    """One column's bounds: two ε′-DP choices (``epsilon_each`` = ε′), then post-processing."""
    if epsilon_each <= 0:
        raise ValueError("ε per choice must be positive")
    scale = Fraction(2 * SENSITIVITY) / epsilon_each
    last = len(grid) - 1
    lows = [s + penalty(last - i, scale) for i, s in enumerate(lower_scores(below, units))]
    highs = [s + penalty(i, scale) for i, s in enumerate(upper_scores(above, units))]
    lo = grid[noise.noisy_min_index([float(s) for s in lows], scale)]
    hi = grid[noise.noisy_min_index([float(s) for s in highs], scale)]
    return ChosenBounds(min(lo, hi), max(lo, hi))


def penalty(steps: int, scale: Fraction) -> int:
    """The data-independent penalty of a candidate ``steps`` grid steps outwards: one noise
    scale per step, rounded up to an integer (so that a score plus it is an exact float)."""
    return math.ceil(steps * scale)


def epsilon_each(total: Fraction, columns: int) -> Fraction:
    """ε′ for each of the 2 × ``columns`` choices, so that they compose to ``total``."""
    return total / (2 * columns)
