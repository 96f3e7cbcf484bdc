"""The exponential mechanism's interpolated-position scores (``dpproxy/mechanisms/quantile.py``)
against brute-force neighbours: every neighbour of small random datasets (the datasets and
neighbour relations of ``test_local_bruteforce.py``) moves every cell's score by at most
``score_sensitivity`` — K·max(q, 1 − q) under add/remove, K under substitution — and the
floored integer scores by at most ``GRID_STEPS``, whatever fixed function assigns values to
cells (the exact one, or one that misplaces values the way floating-point rounding could).
The positions are checked against their definition, inf{p : P(p) ≥ e}, computed here
independently, and the zero-score cell against PERCENTILE_CONT.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from dpproxy.analysis import local
from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms import quantile
from tests.property.test_local_bruteforce import BRUTE, GRID, HI, LO, QS, Dataset, Rows, cases, hood

Summary = tuple[list[int], list[Fraction | None], list[Fraction | None]]
CellOf = Callable[[Fraction], int]


def summarise(rows: Rows, count: int, cell_of: CellOf) -> Summary:
    counts = [0] * count
    mins: list[Fraction | None] = [None] * count
    maxs: list[Fraction | None] = [None] * count
    for v in rows:
        i = cell_of(v)
        counts[i] += 1
        lo, hi = mins[i], maxs[i]
        mins[i] = v if lo is None else min(lo, v)
        maxs[i] = v if hi is None else max(hi, v)
    return counts, mins, maxs


def cell_scores(rows: Rows, cells: local.Cells, cell_of: CellOf, q: Fraction) -> list[Fraction]:
    """The scores of ``rows`` (values already in the cells' units) as ``release/stats.py``."""
    counts, mins, maxs = summarise(rows, cells.count, cell_of)
    cut = quantile.edges(cells.lo, cells.width, cells.bins, cells.integer)
    rho = quantile.positions(cut, counts, mins, maxs, cells.lo, cells.hi)
    return quantile.scores(rho, len(rows), q)


def position(rows: Rows, e: Fraction) -> Fraction:
    """inf{p ∈ [−1, n] : P(p) ≥ e}, P through (−1, lo), (i, x_i), (n, hi); by definition."""
    pts = [(Fraction(-1), LO)] + [(Fraction(i), v) for i, v in enumerate(sorted(rows))]
    pts.append((Fraction(len(rows)), HI))
    if e <= LO:
        return Fraction(-1)
    for (p0, v0), (p1, v1) in itertools.pairwise(pts):
        if v1 >= e:
            return p1 if v1 == v0 else p0 + (e - v0) / (v1 - v0)
    raise AssertionError("e above hi")


def percentile_cont(rows: Sequence[Fraction], q: Fraction) -> Fraction:
    xs = sorted(rows)
    h = q * (len(xs) - 1)
    lo = int(h)
    return xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])


INTEGER = {v: Fraction(i) for i, v in enumerate(GRID)}  # integer cells: the i-th value is i


def layouts(bins: int, integer: bool, shift: int) -> tuple[local.Cells, list[CellOf]]:
    """The cells and three fixed cell functions: the exact one, one that moves a value on an
    edge into the cell below (as rounding down could), and an arbitrary fixed scramble."""
    if integer:
        cells = local.quantile_cells(Fraction(0), Fraction(len(GRID) - 1), True, bins)
        exact: CellOf = lambda v: int(v)  # noqa: E731  (ROUND of an integer)
        values = list(INTEGER.values())
    else:
        cells = local.quantile_cells(LO, HI, False, bins)
        exact = cells.index
        values = list(GRID)
    cut = quantile.edges(cells.lo, cells.width, cells.bins, cells.integer)

    def low(v: Fraction) -> int:
        i = exact(v)
        return i - 1 if i > 0 and v == cut[i] else i

    def scramble(v: Fraction) -> int:
        return (values.index(v) * 7 + shift) % cells.count

    return cells, [exact, low, scramble]


def units(rows: Rows, integer: bool) -> Rows:
    return tuple(INTEGER[v] for v in rows) if integer else rows


@BRUTE
@given(
    case=cases(5),
    bins=st.sampled_from([1, 2, 3, 7]),
    integer=st.booleans(),
    shift=st.integers(0, 6),
)
def test_position_scores_move_by_at_most_the_score_sensitivity(
    case: tuple[Neighbouring, int, Dataset], bins: int, integer: bool, shift: int
) -> None:
    rel, k_rows, d = case
    h = hood(d, rel, k_rows, depth=1)
    cells, funcs = layouts(bins, integer, shift)
    for q in QS:
        sens = local.score_sensitivity(rel, k_rows, q)
        for cell_of in funcs:
            sx = cell_scores(units(h.rows, integer), cells, cell_of, q)
            fx = quantile.floored(sx, sens)
            for y in h.near:
                sy = cell_scores(units(y, integer), cells, cell_of, q)
                assert max(abs(u - v) for u, v in zip(sx, sy, strict=True)) <= sens, (d, y, q)
                fy = quantile.floored(sy, sens)
                moved = max(abs(u - v) for u, v in zip(fx, fy, strict=True))
                assert moved <= quantile.GRID_STEPS, (d, y, q)


@BRUTE
@given(
    values=st.lists(st.sampled_from(GRID), max_size=12),
    bins=st.sampled_from([1, 2, 3, 7, 40]),
    integer=st.booleans(),
    shift=st.integers(0, 6),
    q=st.sampled_from(QS),
    scale=st.sampled_from([Fraction(1, 50), Fraction(1, 10), Fraction(9, 5), Fraction(40)]),
)
def test_the_fast_path_is_the_reference_capped(
    values: list[Fraction], bins: int, integer: bool, shift: int, q: Fraction, scale: Fraction
) -> None:
    """``selection_scores`` (floats to skip far cells, integers for the rest) equals
    min(floored(scores(positions(…))), C) for every cell-assignment function."""
    cells, funcs = layouts(bins, integer, shift)
    rows = units(tuple(sorted(values)), integer)
    sens = local.score_sensitivity(Neighbouring.ADD_REMOVE, 1, q)
    cap = min(int(quantile.CAP_SCALES * scale * quantile.GRID_STEPS / sens), quantile.SCORE_CAP)
    layout = (cells.lo, cells.width, cells.bins, cells.integer)
    for cell_of in funcs:
        counts, mins, maxs = summarise(rows, cells.count, cell_of)
        reference = quantile.floored(cell_scores(rows, cells, cell_of, q), sens)
        got = quantile.selection_scores(
            layout, counts, mins, maxs, cells.lo, cells.hi, q, sens, scale
        )
        assert got == [min(m, cap) for m in reference]
        assert min(got) == 0


@BRUTE
@given(case=cases(5), bins=st.sampled_from([1, 3, 7]))
def test_positions_and_the_zero_cell_match_their_definitions(
    case: tuple[Neighbouring, int, Dataset], bins: int
) -> None:
    """With the exact cell function, ρ_i = inf{p : P(p) ≥ e_i}; the cell holding
    PERCENTILE_CONT(q) scores 0, and so may the cell below it when the percentile is its edge."""
    _, _, d = case
    rows = hood(d, Neighbouring.ADD_REMOVE, 1, depth=1).rows
    cells, (exact, _, _) = layouts(bins, False, 0)
    cut = quantile.edges(cells.lo, cells.width, cells.bins, cells.integer)
    counts, mins, maxs = summarise(rows, cells.count, exact)
    rho = quantile.positions(cut, counts, mins, maxs, LO, HI)
    assert rho == [position(rows, e) for e in cut]
    for q in QS:
        s = quantile.scores(rho, len(rows), q)
        assert all(v >= 0 for v in s)
        if rows:
            at = percentile_cont(rows, q)
            home = cells.index(at)
            zero = [i for i, v in enumerate(s) if v == 0]
            assert home in zero and all(
                i == home or (i == home - 1 and at == cut[home]) for i in zero
            )


def test_worked_example() -> None:
    """Values 0, 1, 1, 4 in [0, 4], cells [0, 2), [2, 4), {4}; 90th percentile h = 2.7:
    P(2.7) = 1 + 0.7·3 = 3.1, in cell 1. ρ(2) = 2 + (2 − 1)/(4 − 1) = 7/3, ρ(4) = 3."""
    lo, hi = Fraction(0), Fraction(4)
    cut = quantile.edges(lo, Fraction(2), 2, False)
    rho = quantile.positions(
        cut, [3, 0, 1], [Fraction(0), None, hi], [Fraction(1), None, hi], lo, hi
    )
    assert rho == [-1, Fraction(7, 3), 3]
    s = quantile.scores(rho, 4, Fraction(9, 10))
    assert s == [Fraction(27, 10) - Fraction(7, 3), 0, Fraction(3) - Fraction(27, 10)]
    assert quantile.floored([Fraction(0)], Fraction(9, 10)) == [0]
    empty = quantile.positions(cut, [0, 0, 0], [None] * 3, [None] * 3, lo, hi)
    assert empty == [-1, -Fraction(1, 2), 0]  # no data: P runs from (−1, lo) to (0, hi)
