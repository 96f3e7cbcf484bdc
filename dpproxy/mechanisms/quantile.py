"""Scores of the exponential mechanism for order statistics: interpolated positions.

The quantile's cells (``analysis/local.py``'s :class:`~dpproxy.analysis.local.Cells`) are cut
at data-independent edges e_0 = lo < e_1 < … < e_B; cell i is [e_i, e_{i+1}) and the last cell
holds hi (integer layouts: cell i is the integer lo + i, edges half-way between integers). The
SQL (``rewrite/stats.py``) returns, per cell, the number of clamped values, their minimum and
their maximum; the cell of a value is a fixed (floating-point, monotone) function of the value.

**The score.** Let x_0 ≤ … ≤ x_{n−1} be the clamped values, extended by x_{−1} = lo and
x_n = hi, and P the piecewise-linear function through the points (p, x_p), p = −1 … n: P(h) at
h = q·(n − 1) is PERCENTILE_CONT(q). For an edge e_i, with L_i the values in cells < i, a_i
the largest of them (lo if none) and b_i the smallest value in cells ≥ i (hi if none), the
*interpolated position* of the edge is

    ρ_i = L_i − 1 + f(e_i, a_i, b_i),  f(e, a, b) = 0 if e ≤ a, 1 if e ≥ b > a, else (e − a)/(b − a)

(when the cells split the values exactly at e_i this is inf{p : P(p) ≥ e_i}; a value placed
in the cell next to its own by floating-point rounding only changes which fixed split is
used). Cell i scores

    s_i = max(0, ρ_i − h, h − ρ_{i+1})        (ρ_{B+1} = +∞: the last cell has no upper term),

0 for the cell that holds P(h) (and for the one below when P(h) is their common edge). The
score used before, max(0, L_i − q·n, q·n − L_{i+1}), counts ranks only, so every point of a gap
between two data values scored alike; here the score rises through the gap at one rank per
gap width, so the exponential mechanism puts its mass near the quantile inside a gap too
(pums, income's 90th percentile at ε = 1: median relative error 0.0162 → 0.0097 in law,
``benchmarks/compare``). The target h is PERCENTILE_CONT's position for every order statistic
(MIN: 0, MAX: n − 1; PERCENTILE_DISC's position is within one rank of it): a discrete position
would move by a whole rank, not by q, when a unit is added.

**Sensitivity.** Add one value y. If y falls in a cell < i: L_i grows by 1 and a_i to
max(a_i, y) ≥ a_i, and f does not increase when a grows, so ρ_i moves by 1 + f' − f ∈ [0, 1].
Else L_i and a_i stay and b_i falls to min(b_i, y); f does not decrease when b falls, so ρ_i
moves by f' − f ∈ [0, 1]. And h moves by exactly q. So ρ_i − h moves within [−q, 1 − q] and
h − ρ_{i+1} within [q − 1, q]; K added values (one unit of K rows) move them within
[−qK, (1 − q)K] and its mirror, and removing is the reverse: every s_i moves by at most
K·max(q, 1 − q) under add/remove. Under substitution h stays and ρ moves within [−K, K]: K.
That is ``analysis/local.score_sensitivity``, the Δ the planner calibrates the scale 2Δ/ε with
(``planning/methods.py``), the same as the rank score's; report-noisy-min with exponential
noise at scale 2Δ/ε over scores that each move by ≤ Δ is ε-DP (McKenna–Sheldon 2020).
``tests/property/test_quantile_positions_bruteforce.py`` checks the bound over all neighbours
of small datasets, with cell functions that misplace values too.

**Exact selection.** The scores are rationals with data-dependent denominators, so they are
floored to the grid g = Δ/2^20 and capped at 2^52 grid steps: m_i = min(⌊s_i/g⌋, 2^52), exact
integers that doubles hold exactly. Flooring is monotone and Δ is a whole number of steps, so
s' ≤ s + Δ gives ⌊s'/g⌋ ≤ ⌊s/g⌋ + Δ/g; a minimum with a constant moves no more than its
argument. Every m_i moves by at most Δ/g, and the scale in grid steps is the planned scale/g.
The release (``release/stats.py``) takes :func:`selection_scores`: the same integers, also
capped at 50 noise scales (a constant of the plan), computed without exact arithmetic for the
cells clearly beyond the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from dpproxy.errors import InternalError

__all__ = [
    "CAP_SCALES",
    "GRID_STEPS",
    "SCORE_CAP",
    "edges",
    "floored",
    "positions",
    "scores",
    "selection_scores",
]

GRID_STEPS = 2**20  # grid steps per Δ
SCORE_CAP = 2**52  # integer scores at most this: exact in a double
CAP_SCALES = 50  # scores beyond 50 noise scales are capped there (selection_scores)


def edges(lo: Fraction, width: Fraction, bins: int, integer: bool) -> list[Fraction]:
    """The left edge of each cell: lo + i·width, or for integer cells lo and then the points
    half-way between consecutive integers (the SQL rounds a value to its integer cell).

    >>> [str(e) for e in edges(Fraction(0), Fraction(1), 3, True)]
    ['0', '1/2', '3/2', '5/2']
    """
    if integer:
        return [lo] + [lo + i - Fraction(1, 2) for i in range(1, bins + 1)]
    return [lo + i * width for i in range(bins + 1)]


def _fraction(e: Fraction, a: Fraction, b: Fraction) -> Fraction:
    if e <= a:
        return Fraction(0)
    if e >= b:
        return Fraction(1)
    return (e - a) / (b - a)


def positions(
    cut: Sequence[Fraction],
    counts: Sequence[int],
    mins: Sequence[Fraction | None],
    maxs: Sequence[Fraction | None],
    lo: Fraction,
    hi: Fraction,
) -> list[Fraction]:
    """ρ_i for every edge (module docstring), from each cell's count, minimum and maximum
    (None for an empty cell); values are clamped to [lo, hi] again here."""
    k = len(cut)
    if not len(counts) == len(mins) == len(maxs) == k or any(c < 0 for c in counts):
        raise InternalError("cell summaries do not match the cells")

    def clamp(v: Fraction) -> Fraction:
        return min(max(v, lo), hi)

    below: list[tuple[int, Fraction]] = []  # (L_i, a_i)
    n, top = 0, lo
    for i in range(k):
        below.append((n, top))
        if counts[i] > 0:
            n += counts[i]
            m = maxs[i]
            top = max(top, clamp(m if m is not None else hi))
    out = [Fraction(0)] * k
    bottom = hi
    for i in range(k - 1, -1, -1):
        if counts[i] > 0:
            m = mins[i]
            bottom = min(bottom, clamp(m if m is not None else lo))
        size, a = below[i]
        out[i] = size - 1 + _fraction(cut[i], a, bottom)
    return out


def scores(rho: Sequence[Fraction], n: int, q: Fraction) -> list[Fraction]:
    """s_i = max(0, ρ_i − h, h − ρ_{i+1}) with h = q·(n − 1); the last cell has no upper term.

    >>> [str(s) for s in scores([Fraction(-1), Fraction(1, 2), Fraction(3, 2)], 3, Fraction(1, 2))]
    ['1/2', '0', '1/2']
    """
    if not 0 <= q <= 1 or n < 0:
        raise InternalError("quantile scores need q in [0, 1] and n ≥ 0")
    h = Fraction(q) * (n - 1)
    zero = Fraction(0)
    out = []
    for i, r in enumerate(rho):
        up = h - rho[i + 1] if i + 1 < len(rho) else zero
        out.append(max(zero, r - h, up))
    return out


def floored(values: Sequence[Fraction], sensitivity: Fraction) -> list[int]:
    """min(⌊s/g⌋, 2^52) with g = Δ/2^20: integer scores that move by ≤ 2^20 when the exact
    ones move by ≤ Δ (module docstring). Scores are ≥ 0.

    >>> floored([Fraction(0), Fraction(9, 10), Fraction(1)], Fraction(9, 10))
    [0, 1048576, 1165084]
    """
    if sensitivity <= 0 or any(s < 0 for s in values):
        raise InternalError("floored scores need Δ > 0 and scores ≥ 0")
    steps = GRID_STEPS / Fraction(sensitivity)
    return [min(math.floor(s * steps), SCORE_CAP) for s in values]


def selection_scores(
    cells: tuple[Fraction, Fraction, int, bool],
    counts: Sequence[int],
    mins: Sequence[Fraction | None],
    maxs: Sequence[Fraction | None],
    lo: Fraction,
    hi: Fraction,
    q: Fraction,
    sensitivity: Fraction,
    scale: Fraction,
) -> list[int]:
    """min(⌊s_i/g⌋, C) for every cell, C = ⌊50·``scale``/g⌋ (and at most 2^52): the integer
    scores of :func:`floored` over :func:`scores` of :func:`positions`, capped; ``cells`` is
    the layout (lo, width, bins, integer) of :func:`edges`.

    The cap is a constant of the plan, so the capped scores still move by at most Δ/g. Some
    cell always scores 0 (the last i with ρ_i ≤ h: ρ_0 = −1 ≤ h < ρ_{i+1}), so a capped cell
    had probability at most e^{−50} of that cell's before the cap. The cap is what makes this
    fast: a cell whose score, computed in floating point, is clearly beyond it takes C without
    exact arithmetic; the others are computed exactly. The result is the same function of
    the data either way, only cheaper: the exact part runs in integers over one common
    denominator (as fast as the old rank scores on pums' 1,001 cells).
    """
    first, width, bins, integer = cells
    k = bins + 1
    if not len(counts) == len(mins) == len(maxs) == k or any(c < 0 for c in counts):
        raise InternalError("cell summaries do not match the cells")
    if sensitivity <= 0 or scale <= 0 or not 0 <= q <= 1:
        raise InternalError("selection scores need Δ > 0, a positive scale and q in [0, 1]")
    steps = GRID_STEPS / Fraction(sensitivity)
    cap = min(math.floor(CAP_SCALES * scale * steps), SCORE_CAP)
    n = sum(counts)
    h = Fraction(q) * (n - 1)

    def edge(i: int) -> Fraction:  # edges()[i]
        if not integer:
            return first + i * width
        return first if i == 0 else first + i - Fraction(1, 2)

    below: list[tuple[int, Fraction, float]] = []  # (L_i, a_i, float(a_i)), as in positions()
    size, top, ftop = 0, lo, float(lo)
    for i in range(k):
        below.append((size, top, ftop))
        if counts[i] > 0:
            size += counts[i]
            m = maxs[i]
            v = min(max(m, lo), hi) if m is not None else hi
            if v > top:
                top, ftop = v, float(v)
    above: list[tuple[Fraction, float]] = [(hi, float(hi))] * k  # (b_i, float(b_i))
    bottom = above[-1]
    for i in range(k - 1, -1, -1):
        if counts[i] > 0:
            m = mins[i]
            v = min(max(m, lo), hi) if m is not None else lo
            if v < bottom[0]:
                bottom = (v, float(v))
        above[i] = bottom
    # ρ_i in floating point: its fractional part is in [0, 1] like the exact one (so off by at
    # most 1 however ill-conditioned e − a is, or however rounded e), its integer part exact,
    # and h off by ≤ 2^-50·|h|.
    f0, fw = float(first), float(width)
    rough = []
    for i in range(k):
        size_i, _, fa = below[i]
        fb = above[i][1]
        e = f0 + i * fw if not integer else (f0 if i == 0 else f0 + i - 0.5)
        part = 0.0 if e <= fa else 1.0 if e >= fb else (e - fa) / (fb - fa)
        rough.append(size_i - 1 + part)
    # The exact path in integers over one common denominator D of every edge and value
    # (Fractions are several times slower): ρ_i = p/r with r > 0.
    dens = [first.denominator, width.denominator, 2 if integer else 1]
    dens += [v.denominator for _, v, _ in below] + [v.denominator for v, _ in above]
    den = math.lcm(*set(dens))

    def scaled(v: Fraction) -> int:
        return v.numerator * (den // v.denominator)

    f0n, step = scaled(first), den if integer else scaled(width)

    exact: dict[int, tuple[int, int]] = {}

    def rho(i: int) -> tuple[int, int]:
        r = exact.get(i)
        if r is None:
            size_i, a, _ = below[i]
            e = f0n + i * step - (den // 2 if integer and i > 0 else 0)
            an, bn = scaled(a), scaled(above[i][0])
            if e <= an:
                r = (size_i - 1, 1)
            elif e >= bn:
                r = (size_i, 1)
            else:
                r = ((size_i - 1) * (bn - an) + e - an, bn - an)
            exact[i] = r
        return r

    hn, hd = h.numerator, h.denominator
    sn, sd = steps.numerator, steps.denominator

    hf = float(h)
    # Beyond the cap by more than that error in floats ⇒ beyond it exactly.
    bar = float(cap) / float(steps) + 2 + 1e-6 * abs(hf)
    out = []
    for i in range(k):
        up = hf - rough[i + 1] if i + 1 < k else 0.0
        if max(rough[i] - hf, up) > bar:
            out.append(cap)
            continue
        # ⌊max(0, x, y)·steps⌋ = max(0, ⌊x·steps⌋, ⌊y·steps⌋): floor is monotone
        p, r = rho(i)
        best = max(0, (p * hd - hn * r) * sn // (r * hd * sd))
        if i + 1 < k:
            p, r = rho(i + 1)
            best = max(best, (hn * r - p * hd) * sn // (r * hd * sd))
        out.append(min(best, cap))
    return out
