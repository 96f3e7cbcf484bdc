"""Local-sensitivity formulas (``dpproxy/analysis/local.py``) against brute-force neighbours.

The method of ``../shared/reading/004_*`` (empirical local sensitivity by enumerating every
neighbour), on small datasets: a dataset is a tuple of privacy units, each a sorted tuple of
0..K values from a small grid in [lo, hi] that contains lo and hi. The neighbours of a dataset
are *all* of them:

* ``add_remove``: remove any unit, or add a unit with any multiset of ≤ K grid values;
* ``substitute``: replace any unit by any unit of ≤ K grid values (0 rows included).

Neighbours of neighbours give the true A(f, x, 1) = max over y with d(x, y) ≤ 1 of LS(f, y).
The statistics are computed exactly (:class:`fractions.Fraction`) by definitions written here,
independently of the module under test (percentiles by 0-based position, as PostgreSQL and
numpy do), and every claimed bound must dominate the brute-force value. A few deliberately
wrong formulas are checked to be caught by the same oracle, so that it has teeth.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpproxy.analysis import local
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.values import exp_down, exp_up, float_up, ln_up

GRID = (Fraction(-1), Fraction(-1, 4), Fraction(0), Fraction(1), Fraction(5, 2))
LO, HI = GRID[0], GRID[-1]
WIDTH = HI - LO
RELATIONS = (Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE)
QS = (Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(9, 10), Fraction(1))
KINDS = ("disc", "cont")
BETAS = (Fraction(1, 10), Fraction(1, 2), Fraction(1))  # terminating decimals: exact e^β check

_BASE = settings.default.max_examples if settings.default is not None else 100
BRUTE = settings(
    max_examples=40 if _BASE <= 100 else _BASE // 5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

Rows = tuple[Fraction, ...]  # sorted values of all units
Unit = tuple[Fraction, ...]
Dataset = tuple[Unit, ...]


# ---------------------------------------------------------------------------------------------
# Datasets, neighbours and the exact statistics.


@functools.cache
def all_units(k_rows: int) -> tuple[Unit, ...]:
    return tuple(
        u for size in range(k_rows + 1) for u in itertools.combinations_with_replacement(GRID, size)
    )


def canonical(units: Sequence[Unit]) -> Dataset:
    return tuple(sorted(units))


def rows_of(d: Dataset) -> Rows:
    return tuple(sorted(v for u in d for v in u))


def neighbours(d: Dataset, rel: Neighbouring, k_rows: int) -> list[Dataset]:
    out: set[Dataset] = set()
    for i in range(len(d)):
        rest = d[:i] + d[i + 1 :]
        if rel is Neighbouring.ADD_REMOVE:
            out.add(rest)
        else:
            out.update(canonical((*rest, u)) for u in all_units(k_rows))
    if rel is Neighbouring.ADD_REMOVE:
        out.update(canonical((*d, u)) for u in all_units(k_rows))
    out.discard(d)
    return sorted(out)


@dataclass(frozen=True)
class Hood:
    """x's rows, its neighbours' rows, and for each y in [x, *neighbours] its neighbours' rows."""

    rows: Rows
    near: tuple[Rows, ...]
    far: tuple[tuple[Rows, tuple[Rows, ...]], ...]


@functools.cache
def hood(d: Dataset, rel: Neighbouring, k_rows: int, depth: int = 2) -> Hood:
    near = neighbours(d, rel, k_rows)
    far: list[tuple[Rows, tuple[Rows, ...]]] = []
    if depth >= 2:
        for y in (d, *near):
            far.append((rows_of(y), tuple({rows_of(z) for z in neighbours(y, rel, k_rows)})))
    return Hood(rows_of(d), tuple({rows_of(y) for y in near}), tuple(far))


@functools.cache
def mean_exact(rows: Rows) -> Fraction:
    return sum(rows, Fraction(0)) / len(rows) if rows else (LO + HI) / 2


@functools.cache
def quantile_exact(rows: Rows, q: Fraction, kind: str) -> Fraction:
    """PERCENTILE_DISC: the first value whose cumulative share is ≥ q; PERCENTILE_CONT: linear
    interpolation at 0-based position q·(n − 1). The empty set gives lo."""
    n = len(rows)
    if n == 0:
        return LO
    if kind == "disc":
        return rows[max(1, math.ceil(q * n)) - 1]
    pos = q * (n - 1)
    i = math.floor(pos)
    nxt = rows[min(i + 1, n - 1)]
    return rows[i] + (pos - i) * (nxt - rows[i])


Stat = Callable[[Rows], Fraction]


def true_ls(f: Stat, rows: Rows, near: Sequence[Rows]) -> Fraction:
    fx = f(rows)
    return max((abs(f(r) - fx) for r in near), default=Fraction(0))


def true_a1(f: Stat, h: Hood) -> Fraction:
    """A(f, x, 1): the largest LS(f, y) over y = x and its neighbours."""
    return max(true_ls(f, y, ny) for y, ny in h.far)


def padded(rows: Rows) -> local.Stat:
    values = [float(v) for v in rows]
    n, lo, hi = len(values), float(LO), float(HI)
    return lambda i: lo if i < 1 else hi if i > n else values[i - 1]


def quantile_fn(q: Fraction, kind: str) -> Stat:
    return lambda rows: quantile_exact(rows, q, kind)


def exp_lower(beta: Fraction) -> Fraction:
    """A lower bound on e^β, 45 digits tight (β a terminating decimal)."""
    with localcontext() as ctx:
        ctx.prec = 60
        d = Decimal(beta.numerator) / Decimal(beta.denominator)
        assert Fraction(d) == beta
        return Fraction(d.exp()) * (1 - Fraction(1, 10**45))


def assert_smooth(s_x: Fraction, s_y: Fraction, beta: Fraction, what: str) -> None:
    assert s_y > 0 and s_x <= exp_lower(beta) * s_y, (what, s_x, s_y, beta)


@st.composite
def cases(draw: st.DrawFn, max_units: int = 5) -> tuple[Neighbouring, int, Dataset]:
    rel = draw(st.sampled_from(RELATIONS))
    k_rows = draw(st.integers(1, 2))
    cap = max_units if rel is Neighbouring.ADD_REMOVE or k_rows == 1 else max_units - 1
    us = draw(st.lists(st.lists(st.sampled_from(GRID), max_size=k_rows), max_size=cap))
    return rel, k_rows, canonical([tuple(sorted(u)) for u in us])


def small_datasets(k_rows: int, max_units: int) -> Iterator[Dataset]:
    """Every dataset of at most ``max_units`` units (as multisets of units)."""
    for m in range(max_units + 1):
        for units in itertools.combinations_with_replacement(all_units(k_rows), m):
            yield canonical(units)


# ---------------------------------------------------------------------------------------------
# Mean.


def ls_prime(n: int, rel: Neighbouring, k_rows: int) -> Fraction:
    return local.mean_local_bound(n, WIDTH, k_rows, rel)


def check_mean_bounds(rel: Neighbouring, k_rows: int, d: Dataset) -> None:
    h = hood(d, rel, k_rows)
    n, step = len(h.rows), local.size_step(rel, k_rows)
    assert true_ls(mean_exact, h.rows, h.near) <= ls_prime(n, rel, k_rows), d
    assert true_a1(mean_exact, h) <= ls_prime(max(n - step, 0), rel, k_rows), d


@BRUTE
@given(case=cases(4))
def test_mean_local_bound_dominates_ls_and_a1(case: tuple[Neighbouring, int, Dataset]) -> None:
    """LS(x) ≤ LS'(n) and A(f, x, 1) ≤ LS'(max(n − K, 0)), from all neighbours (of neighbours)."""
    check_mean_bounds(*case)


@pytest.mark.parametrize("rel", RELATIONS)
def test_mean_local_bound_exhaustive_small(rel: Neighbouring) -> None:
    """The same, on every dataset of ≤ 3 units of ≤ 1 row."""
    for d in small_datasets(1, 3):
        check_mean_bounds(rel, 1, d)


def mean_bounds_to_test() -> list[Fraction]:
    return [WIDTH * Fraction(p, 12) for p in (1, 2, 3, 4, 6, 8, 11, 12, 13)]


@BRUTE
@given(case=cases(4))
def test_mean_distance_has_sensitivity_one_and_guards_ls(
    case: tuple[Neighbouring, int, Dataset],
) -> None:
    """|d(x) − d(x')| ≤ 1 over all neighbours; d ≥ 1 ⇒ LS ≤ b; d ≥ 2 ⇒ A(f, x, 1) ≤ b."""
    rel, k_rows, d = case
    h = hood(d, rel, k_rows)
    ls, a1 = true_ls(mean_exact, h.rows, h.near), true_a1(mean_exact, h)
    for b in mean_bounds_to_test():
        raw = local.mean_distance(len(h.rows), WIDTH, k_rows, rel, b)
        assert (raw is None) == (b >= WIDTH)
        dx = math.inf if raw is None else raw
        for y in h.near:
            other = local.mean_distance(len(y), WIDTH, k_rows, rel, b)
            dy = math.inf if other is None else other
            assert dx == dy or abs(dx - dy) <= 1, (d, y, b, dx, dy)
        if dx >= 1:
            assert ls <= b, (d, b, dx, ls)
        if dx >= 2:
            assert a1 <= b, (d, b, dx, a1)


@BRUTE
@given(case=cases(4))
def test_mean_smooth_is_a_smooth_upper_bound(case: tuple[Neighbouring, int, Dataset]) -> None:
    """S(x) ≥ LS(x), S(x) ≥ e^{−β}·A(f, x, 1), and S(x) ≤ e^β·S(x') for every neighbour."""
    rel, k_rows, d = case
    h = hood(d, rel, k_rows)
    ls, a1 = true_ls(mean_exact, h.rows, h.near), true_a1(mean_exact, h)
    for beta in BETAS:
        s = local.mean_smooth(len(h.rows), WIDTH, k_rows, rel, beta)
        assert s >= ls and s >= exp_down(-beta) * a1, (d, beta, s, ls, a1)
        for y in h.near:
            s_y = local.mean_smooth(len(y), WIDTH, k_rows, rel, beta)
            assert_smooth(s, s_y, beta, f"{d} → {y}")
            assert_smooth(s_y, s, beta, f"{y} → {d}")


def smooth_by_definition(
    n: int, k_rows: int, rel: Neighbouring, beta: Fraction, up: bool
) -> Fraction:
    """max_k e^{−βk}·LS'(max(n − kK, 0)) with every exponential rounded up (or down), by the
    loop of the definition (k up to where n − kK reaches 0, the last term that can matter)."""
    bound = exp_up if up else exp_down
    step = local.size_step(rel, k_rows)
    return max(
        bound(-beta * k) * ls_prime(max(n - k * step, 0), rel, k_rows) for k in range(n // step + 2)
    )


@pytest.mark.parametrize("rel", RELATIONS)
@pytest.mark.parametrize("k_rows", [1, 2, 3])
@pytest.mark.parametrize("beta", [Fraction(1, 100), Fraction(1, 5), Fraction(2)])
def test_mean_smooth_equals_the_definition(rel: Neighbouring, k_rows: int, beta: Fraction) -> None:
    """The O(1) closed form equals the maximum over all k, up to the upward rounding."""
    for n in [*range(0, 40), 97, 250, 1001]:
        s = local.mean_smooth(n, WIDTH, k_rows, rel, beta)
        lower = smooth_by_definition(n, k_rows, rel, beta, up=False)
        upper = smooth_by_definition(n, k_rows, rel, beta, up=True)
        assert lower <= s <= upper * (1 + Fraction(1, 10**8)), (n, s, lower, upper)


def test_mean_smooth_is_fast_for_large_n() -> None:
    start = time.perf_counter()
    for n in (10**7, 10**9, 10**15):
        for beta in (Fraction(1, 100), Fraction(1, 10**6)):
            s = local.mean_smooth(n, Fraction(100), 1, Neighbouring.ADD_REMOVE, beta)
            assert Fraction(100, n) <= s <= Fraction(100)
    s = local.mean_smooth(10**7, Fraction(100), 1, Neighbouring.ADD_REMOVE, Fraction(1, 100))
    assert s == Fraction(100, 10**7)  # e^{−βk}·100/(n − k) is decreasing in k here
    assert time.perf_counter() - start < 2


def test_adult_mean_age_distance_and_smooth_sensitivity() -> None:
    """reading/000's example: n = 32561 ages, u = 100, b = 0.005; δ = 1/n², ε = 1."""
    n, w = 32561, Fraction(100)
    rel = Neighbouring.ADD_REMOVE
    assert local.mean_distance(n, w, 1, rel, Fraction("0.005")) == 12562
    beta = 1 / (2 * ln_up(Fraction(2 * n * n)))  # β rounded down: more smoothing
    s = local.mean_smooth(n, w, 1, rel, beta)
    assert Fraction(100, n) <= s <= Fraction(100, n) * (1 + Fraction(1, 10**9))
    assert s == Fraction(100, n)  # the maximum is at k = 0 and nothing is rounded there


# ---------------------------------------------------------------------------------------------
# Order statistics.


def rank_window(rows: Rows, q: Fraction, kind: str, j: int) -> tuple[Fraction, Fraction]:
    """[x_(a − j), x_(b + j)] with padding, computed here from exact values."""
    a, b = local.quantile_ranks(q, len(rows), kind)

    def at(i: int) -> Fraction:
        return LO if i < 1 else HI if i > len(rows) else rows[i - 1]

    return at(a - j), at(b + j)


def row_edits(rows: Rows) -> set[Rows]:
    """Every dataset one row insertion (any grid value) or deletion away."""
    out = {tuple(sorted((*rows, v))) for v in GRID}
    out.update(rows[:i] + rows[i + 1 :] for i in range(len(rows)))
    return out


@settings(max_examples=_BASE, deadline=None)
@given(values=st.lists(st.sampled_from(GRID), max_size=9))
def test_quantile_lemma_for_row_edits(values: list[Fraction]) -> None:
    """y within j row insertions/deletions of x ⇒ f(y) ∈ [x_(a − j), x_(b + j)], j = 1, 2."""
    x = tuple(sorted(values))
    one = row_edits(x)
    two = set().union(*(row_edits(y) for y in one))
    for q, kind in itertools.product(QS, KINDS):
        for j, ys in ((1, one), (2, two)):
            lo_v, hi_v = rank_window(x, q, kind, j)
            for y in ys:
                assert lo_v <= quantile_exact(y, q, kind) <= hi_v, (x, y, q, kind, j)


def check_quantile_bounds(rel: Neighbouring, k_rows: int, d: Dataset) -> None:
    h = hood(d, rel, k_rows)
    radius = local.row_radius(rel, k_rows)
    stat = padded(h.rows)
    for q, kind in itertools.product(QS, KINDS):
        f = quantile_fn(q, kind)
        a, b = local.quantile_ranks(q, len(h.rows), kind)
        assert true_ls(f, h.rows, h.near) <= Fraction(
            local.quantile_local_bound(stat, a, b, radius, 0)
        ), (d, q, kind)
        assert true_a1(f, h) <= Fraction(local.quantile_local_bound(stat, a, b, radius, 1)), (
            d,
            q,
            kind,
        )


@BRUTE
@given(case=cases(4))
def test_quantile_local_bounds_dominate_ls_and_a1(case: tuple[Neighbouring, int, Dataset]) -> None:
    """LS ≤ Ā(0) and A(f, x, 1) ≤ Ā(1) for PERCENTILE_DISC / _CONT at several q."""
    check_quantile_bounds(*case)


@pytest.mark.parametrize("rel", RELATIONS)
def test_quantile_local_bounds_exhaustive_small(rel: Neighbouring) -> None:
    for d in small_datasets(1, 3):
        check_quantile_bounds(rel, 1, d)


QUANTILE_BOUNDS = (0.0, 0.25, 0.75, 1.0, 1.25, 2.0, 3.0, 3.5, 4.0)  # w = 3.5


@BRUTE
@given(case=cases(4), kmax=st.sampled_from([0, 1, 3]))
def test_quantile_distance_has_sensitivity_one_and_guards_ls(
    case: tuple[Neighbouring, int, Dataset], kmax: int
) -> None:
    """|d(x) − d(x')| ≤ 1, d ≥ 1 ⇒ LS ≤ b, d ≥ 2 ⇒ A(f, x, 1) ≤ b; and d is the least k with
    Ā(k) > b (by a linear scan), capped at kmax + 1."""
    rel, k_rows, d = case
    h = hood(d, rel, k_rows)
    radius = local.row_radius(rel, k_rows)

    def distance(rows: Rows, q: Fraction, kind: str, b: float) -> float:
        a, bb = local.quantile_ranks(q, len(rows), kind)
        dist = local.quantile_distance(padded(rows), a, bb, radius, b, kmax, lo=LO, hi=HI)
        return math.inf if dist is None else dist

    for q, kind in itertools.product(QS, KINDS):
        f = quantile_fn(q, kind)
        ls, a1 = true_ls(f, h.rows, h.near), true_a1(f, h)
        a, b_rank = local.quantile_ranks(q, len(h.rows), kind)
        for b in QUANTILE_BOUNDS:
            dx = distance(h.rows, q, kind, b)
            scan = next(
                (
                    k
                    for k in range(kmax + 1)
                    if local.quantile_local_bound(padded(h.rows), a, b_rank, radius, k) > b
                ),
                kmax + 1,
            )
            assert dx == (math.inf if b >= WIDTH else scan), (d, q, kind, b)
            for y in h.near:
                dy = distance(y, q, kind, b)
                assert dx == dy or abs(dx - dy) <= 1, (d, y, q, kind, b, dx, dy)
            if dx >= 1:
                assert ls <= Fraction(b), (d, q, kind, b, dx, ls)
            if dx >= 2:
                assert a1 <= Fraction(b), (d, q, kind, b, dx, a1)


@BRUTE
@given(case=cases(4), kmax=st.sampled_from([0, 1, 5]))
def test_quantile_smooth_is_a_smooth_upper_bound(
    case: tuple[Neighbouring, int, Dataset], kmax: int
) -> None:
    """S(x) ≥ LS(x), S(x) ≥ e^{−β}·A(f, x, 1) (kmax ≥ 1), and S(x) ≤ e^β·S(x')."""
    rel, k_rows, d = case
    h = hood(d, rel, k_rows)
    radius = local.row_radius(rel, k_rows)

    def smooth(rows: Rows, q: Fraction, kind: str, beta: Fraction) -> Fraction:
        a, b = local.quantile_ranks(q, len(rows), kind)
        return Fraction(local.quantile_smooth(padded(rows), a, b, radius, beta, LO, HI, kmax))

    for q, kind in itertools.product(QS, KINDS):
        f = quantile_fn(q, kind)
        ls, a1 = true_ls(f, h.rows, h.near), true_a1(f, h)
        for beta in BETAS[:2]:
            s = smooth(h.rows, q, kind, beta)
            assert s >= ls and s >= exp_down(-beta) * a1, (d, q, kind, beta, s, ls, a1)
            for y in h.near:
                s_y = smooth(y, q, kind, beta)
                assert_smooth(s, s_y, beta, f"{d} → {y} {q} {kind}")
                assert_smooth(s_y, s, beta, f"{y} → {d} {q} {kind}")


@settings(max_examples=_BASE, deadline=None)
@given(
    values=st.lists(st.integers(-50, 50), max_size=30),
    beta=st.sampled_from(BETAS),
    kmax=st.integers(0, 40),
    radius=st.integers(1, 4),
    q=st.sampled_from(QS),
    kind=st.sampled_from(KINDS),
)
def test_quantile_smooth_equals_the_definition(
    values: list[int], beta: Fraction, kmax: int, radius: int, q: Fraction, kind: str
) -> None:
    """max(max_{k ≤ kmax} e^{−βk}·Ā(k), e^{−β(kmax+1)}·w) up to the upward rounding."""
    xs = sorted(float(v) for v in values)
    n = len(xs)

    def stat(i: int) -> float:
        return -50.0 if i < 1 else 50.0 if i > n else xs[i - 1]

    a, b = local.quantile_ranks(q, n, kind)
    terms = [
        (k, Fraction(local.quantile_local_bound(stat, a, b, radius, k))) for k in range(kmax + 1)
    ] + [(kmax + 1, Fraction(100))]
    lower = max(exp_down(-beta * k) * t for k, t in terms)
    upper = max(exp_up(-beta * k) * t for k, t in terms)
    s = Fraction(local.quantile_smooth(stat, a, b, radius, beta, -50, 50, kmax))
    assert lower <= s <= upper * (1 + Fraction(1, 10**8))


@settings(max_examples=_BASE, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_subnormal=False), min_size=1, max_size=40),
    q=st.one_of(st.sampled_from(QS), st.integers(0, 40).map(lambda i: Fraction(i, 40))),
)
def test_quantile_value_agrees_with_numpy(values: list[float], q: Fraction) -> None:
    xs = sorted(values)
    n = len(xs)

    def stat(i: int) -> float:
        return -1e6 if i < 1 else 1e6 if i > n else xs[i - 1]

    disc = local.quantile_value(stat, q, n, "disc")
    cont = local.quantile_value(stat, q, n, "cont")
    assert disc == np.quantile(xs, float(q), method="inverted_cdf")
    assert math.isclose(
        cont, float(np.quantile(xs, float(q), method="linear")), rel_tol=1e-12, abs_tol=1e-9
    )
    a, b = local.quantile_ranks(q, n, "cont")
    assert stat(a) <= cont <= stat(b)


def test_quantile_value_of_the_empty_set_is_lo() -> None:
    for kind in KINDS:
        assert (
            local.quantile_value(lambda i: -3.0 if i < 1 else 7.0, Fraction(1, 2), 0, kind) == -3.0
        )


def test_quantile_ranks() -> None:
    half = Fraction(1, 2)
    assert local.quantile_ranks(half, 0, "disc") == local.quantile_ranks(half, 0, "cont") == (0, 0)
    assert local.quantile_ranks(Fraction(0), 5, "disc") == (1, 1)
    assert local.quantile_ranks(Fraction(1), 5, "disc") == (5, 5)
    assert local.quantile_ranks(Fraction(9, 10), 10, "disc") == (9, 9)
    assert local.quantile_ranks(Fraction(1, 4), 10, "cont") == (3, 4)  # h = 3.25
    assert local.quantile_ranks(Fraction(1, 4), 5, "cont") == (2, 2)
    for bad in (
        (Fraction(-1), 3, "disc"),
        (Fraction(2), 3, "cont"),
        (half, -1, "disc"),
        (half, 3, "median"),
    ):
        with pytest.raises(InternalError):
            local.quantile_ranks(*bad)


@settings(max_examples=_BASE, deadline=None)
@given(x=st.floats(-1e300, 1e300), y=st.floats(-1e300, 1e300))
def test_quantile_local_bound_rounds_the_subtraction_up(x: float, y: float) -> None:
    """Ā is the smallest float ≥ the exact difference of the two order statistics."""
    small, big = min(x, y), max(x, y)
    got = local.quantile_local_bound(lambda i: big if i > 1 else small, 1, 1, 1, 0)
    assert got == float_up(Fraction(big) - Fraction(small))


def test_quantile_local_bound_examples() -> None:
    got = local.quantile_local_bound(lambda i: 0.3 if i > 1 else 0.1, 1, 1, 1, 0)
    assert got == float_up(Fraction(0.3) - Fraction(0.1))
    got = local.quantile_local_bound(lambda i: 1.0 if i > 1 else -1e-30, 1, 1, 1, 0)
    assert got == math.nextafter(1.0, 2.0)  # 1 + 10^-30 rounds to 1.0: one ulp up
    assert local.quantile_local_bound(lambda i: 1e308 if i > 1 else -1e308, 1, 1, 1, 0) == math.inf
    with pytest.raises(InternalError):
        local.quantile_local_bound(lambda i: -float(i), 3, 3, 1, 0)  # not sorted


def test_smooth_window() -> None:
    assert local.smooth_window(1, Fraction(1, 10)) == (139, 140)  # ⌈ln(10^6)/0.1⌉ = 139
    assert local.smooth_window(4, Fraction(1, 10)) == (139, 560)
    assert local.smooth_window(3, Fraction(1, 1000)) == (6665, 20000)  # capped
    assert local.smooth_window(30000, Fraction(1, 10)) == (0, 30000)  # k = 0 needs a radius
    for radius in (1, 2, 7):
        for beta in (Fraction(1, 1000), Fraction(1, 50), Fraction(3)):
            kmax, j = local.smooth_window(radius, beta)
            assert j >= (kmax + 1) * radius and kmax >= 0
            full = math.ceil(math.log(10**6) / beta)
            assert kmax == full or j >= 20000 - radius


# ---------------------------------------------------------------------------------------------
# Exponential mechanism.


def test_quantile_cells() -> None:
    c = local.quantile_cells(Fraction(0), Fraction(4), True, 1000)
    assert (c.count, c.width, c.integer) == (5, Fraction(1), True)
    assert [c.value(i) for i in range(c.count)] == [0, 1, 2, 3, 4]
    assert [c.index(Fraction(v)) for v in range(5)] == [0, 1, 2, 3, 4]
    r = local.quantile_cells(LO, HI, False, 7)
    assert (r.count, r.width, r.integer, r.hi) == (8, WIDTH / 7, False, HI)
    assert r.value(0) == LO + WIDTH / 14 and r.value(7) == HI
    assert r.index(LO) == 0 and r.index(HI) == 7 and r.index(HI - Fraction(1, 10**9)) == 6
    wide = local.quantile_cells(Fraction(0), Fraction(20000), True, 1000)
    assert (wide.count, wide.integer) == (1001, False)
    assert local.quantile_cells(Fraction(1, 2), Fraction(3), True, 10).integer is False
    for i in range(r.count - 1):  # representatives lie in their cells
        assert r.index(r.value(i)) == i
    one = local.quantile_cells(Fraction(1), Fraction(1), False, 3)  # a constant: {1}
    assert (one.count, one.value(0), one.index(Fraction(1))) == (1, 1, 0)
    with pytest.raises(InternalError):
        local.quantile_cells(Fraction(2), Fraction(1), False, 3)


@BRUTE
@given(case=cases(5), bins=st.sampled_from([1, 3, 7]), integer=st.booleans())
def test_quantile_scores_move_by_at_most_the_score_sensitivity(
    case: tuple[Neighbouring, int, Dataset], bins: int, integer: bool
) -> None:
    """For every neighbour and every cell, |score_i(x) − score_i(x')| ≤ score_sensitivity:
    K·max(q, 1 − q) under add/remove, K under substitution (and K without q, the old bound)."""
    rel, k_rows, d = case
    h = hood(d, rel, k_rows, depth=1)
    if integer:  # the grid's i-th value stands for the integer i, over integer cells 0..4
        cells = local.quantile_cells(Fraction(0), Fraction(len(GRID) - 1), True, bins)
        to_cell = {v: cells.index(Fraction(i)) for i, v in enumerate(GRID)}
    else:
        cells = local.quantile_cells(LO, HI, False, bins)
        to_cell = {v: cells.index(v) for v in GRID}

    def counts(rows: Rows) -> list[int]:
        out = [0] * cells.count
        for v in rows:
            out[to_cell[v]] += 1
        return out

    assert local.score_sensitivity(rel, k_rows) == k_rows
    for q in QS:
        sens = local.score_sensitivity(rel, k_rows, q)
        assert sens == (k_rows if rel is Neighbouring.SUBSTITUTE else k_rows * max(q, 1 - q))
        sx = local.quantile_scores(counts(h.rows), q)
        assert min(sx) == 0  # some cell holds the quantile
        for y in h.near:
            sy = local.quantile_scores(counts(y), q)
            assert max(abs(u - v) for u, v in zip(sx, sy, strict=True)) <= sens, (d, y, q)


def test_quantile_scores_examples() -> None:
    assert local.quantile_scores([], Fraction(1, 2)) == []
    assert local.quantile_scores([0, 0], Fraction(1, 2)) == [0, 0]
    assert local.quantile_scores([1, 1, 1, 1], Fraction(0)) == [0, 1, 2, 3]
    assert local.quantile_scores([1, 1, 1, 1], Fraction(1)) == [3, 2, 1, 0]
    with pytest.raises(InternalError):
        local.quantile_scores([1, -1], Fraction(1, 2))


@BRUTE
@given(k_rows=st.integers(1, 2), data=st.data())
def test_substitute_bounds_use_k_not_2k(k_rows: int, data: st.DataObject) -> None:
    """Under substitution the formulas use K, not the triangle bound 2K (removal then
    addition): the mean moves by ≤ K·w/n and p ≤ K insertions with d ≤ K deletions keep an
    order statistic within max(p, d) ≤ K ranks (``analysis/local.py``'s proofs). The planner's
    own functions are checked here, at k = 0 and 1, against every substitute neighbour."""
    rel = Neighbouring.SUBSTITUTE
    assert local.row_radius(rel, k_rows) == local.score_sensitivity(rel, k_rows) == k_rows
    us = data.draw(st.lists(st.lists(st.sampled_from(GRID), max_size=k_rows), max_size=4 - k_rows))
    d = canonical([tuple(sorted(u)) for u in us])
    h = hood(d, rel, k_rows)
    n = len(h.rows)
    assert true_ls(mean_exact, h.rows, h.near) <= ls_prime(n, rel, k_rows)
    assert ls_prime(n, rel, k_rows) == (WIDTH if n == 0 else min(WIDTH, k_rows * WIDTH / n))
    assert true_a1(mean_exact, h) <= ls_prime(max(n - k_rows, 0), rel, k_rows)
    stat = padded(h.rows)
    radius = local.row_radius(rel, k_rows)
    for q, kind in itertools.product(QS, KINDS):
        f = quantile_fn(q, kind)
        a, b = local.quantile_ranks(q, n, kind)
        assert true_ls(f, h.rows, h.near) <= Fraction(
            local.quantile_local_bound(stat, a, b, radius, 0)
        )
        assert true_a1(f, h) <= Fraction(local.quantile_local_bound(stat, a, b, radius, 1))


# ---------------------------------------------------------------------------------------------
# The oracle has teeth: wrong formulas are caught.


def first_violation(
    rel: Neighbouring, k_rows: int, max_units: int, claim: Callable[[Hood], bool]
) -> Hood | None:
    for d in small_datasets(k_rows, max_units):
        h = hood(d, rel, k_rows, depth=1)
        if not claim(h):
            return h
    return None


def test_oracle_rejects_the_teaching_texts_u_over_n_plus_1() -> None:
    """reading/000's LS = u/(n + 1) (adding one maximal row) ignores removals: with both
    bounds, w/(n + 1) is exceeded, e.g. by removing lo from {lo, hi}."""
    rel = Neighbouring.ADD_REMOVE
    bad = first_violation(
        rel, 1, 3, lambda h: true_ls(mean_exact, h.rows, h.near) <= WIDTH / (len(h.rows) + 1)
    )
    assert bad is not None
    assert true_ls(mean_exact, bad.rows, bad.near) <= ls_prime(len(bad.rows), rel, 1)


def test_oracle_rejects_mean_bound_without_k() -> None:
    """min(w, w/n) is not a bound when a unit owns 2 rows."""
    for rel in RELATIONS:
        bad = first_violation(
            rel,
            2,
            3,
            lambda h: (
                true_ls(mean_exact, h.rows, h.near) <= min(WIDTH, WIDTH / max(len(h.rows), 1))
            ),
        )
        assert bad is not None, rel


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_rejects_quantile_radius_without_k(kind: str) -> None:
    """Ā(0) with radius 1 instead of K = 2 misses a unit of two rows (e.g. MIN, when the unit
    holding the two smallest values is removed)."""
    q = Fraction(0)

    def claim(h: Hood) -> bool:
        a, b = local.quantile_ranks(q, len(h.rows), kind)
        bound = Fraction(local.quantile_local_bound(padded(h.rows), a, b, 1, 0))
        return true_ls(quantile_fn(q, kind), h.rows, h.near) <= bound

    assert first_violation(Neighbouring.ADD_REMOVE, 2, 3, claim) is not None


def test_oracle_rejects_k_minus_one_under_substitution() -> None:
    """K is tight under substitution too: K − 1 = 1 for units of K = 2 rows is caught for the
    mean's bound, an order statistic's radius and the quantile scores (a unit of two rows at
    lo replaced by two at hi moves the scores of the cells between by 2)."""
    rel, k = Neighbouring.SUBSTITUTE, 2

    def mean_claim(h: Hood) -> bool:
        n = len(h.rows)
        return true_ls(mean_exact, h.rows, h.near) <= (
            WIDTH if n == 0 else min(WIDTH, (k - 1) * WIDTH / n)
        )

    assert first_violation(rel, k, 3, mean_claim) is not None
    q = Fraction(0)

    def quantile_claim(h: Hood) -> bool:
        a, b = local.quantile_ranks(q, len(h.rows), "disc")
        bound = Fraction(local.quantile_local_bound(padded(h.rows), a, b, k - 1, 0))
        return true_ls(quantile_fn(q, "disc"), h.rows, h.near) <= bound

    assert first_violation(rel, k, 3, quantile_claim) is not None
    before = local.quantile_scores([2, 0, 0, 2], Fraction(1, 2))
    after = local.quantile_scores([0, 0, 0, 4], Fraction(1, 2))  # the unit at lo moved to hi
    assert max(abs(x - y) for x, y in zip(before, after, strict=True)) == k > k - 1


def test_oracle_rejects_a_non_smooth_bound() -> None:
    """Local sensitivity itself (LS'(n), no smoothing) is not β-smooth: a neighbour with K
    fewer rows has a larger LS' by more than e^β."""
    rel, beta = Neighbouring.ADD_REMOVE, Fraction(1, 10)
    found = any(
        ls_prime(n, rel, 1) > exp_lower(beta) * ls_prime(n + 1, rel, 1) for n in range(1, 30)
    )
    assert found


# ---------------------------------------------------------------------------------------------
# Helpers and argument checks.


def test_radius_and_step() -> None:
    assert local.row_radius(Neighbouring.ADD_REMOVE, 3) == 3
    assert local.row_radius(Neighbouring.SUBSTITUTE, 3) == 3
    assert (
        local.size_step(Neighbouring.ADD_REMOVE, 3)
        == local.size_step(Neighbouring.SUBSTITUTE, 3)
        == 3
    )
    assert local.score_sensitivity(Neighbouring.SUBSTITUTE, 2) == 2
    with pytest.raises(InternalError):
        local.row_radius(Neighbouring.ADD_REMOVE, 0)


def test_mean_local_bound_values() -> None:
    w = Fraction(10)
    ar, sub = Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE
    assert local.mean_local_bound(0, w, 2, ar) == w
    assert local.mean_local_bound(4, w, 2, ar) == 5
    assert local.mean_local_bound(4, w, 2, sub) == 5
    assert local.mean_local_bound(40, w, 2, sub) == Fraction(1, 2)  # K·w/n, not 2K·w/n
    assert all(
        local.mean_local_bound(n, w, 3, sub) >= local.mean_local_bound(n + 1, w, 3, sub)
        for n in range(50)
    )
    assert local.mean_distance(5, w, 1, ar, Fraction(0)) == 0
    assert local.mean_distance(100, w, 2, ar, Fraction(1)) == 41  # n − 2k < 20 from k = 41
    with pytest.raises(InternalError):
        local.mean_local_bound(-1, w, 1, ar)
    with pytest.raises(InternalError):
        local.mean_smooth(5, w, 1, ar, Fraction(0))


def decimal_exp(x: Fraction) -> Fraction:
    with localcontext() as ctx:
        ctx.prec = 80
        return Fraction((Decimal(x.numerator) / Decimal(x.denominator)).exp())


@settings(max_examples=_BASE, deadline=None)
@given(num=st.integers(-200_000, 200_000), den=st.integers(1, 100))
def test_exp_bounds_bracket_the_exponential(num: int, den: int) -> None:
    x = Fraction(num, den)
    e = decimal_exp(x)
    tol = Fraction(1, 10**60) * e
    down, up = exp_down(x), exp_up(x)
    assert down <= e + tol and up >= e - tol
    assert up - down <= e * (Fraction(1, 10**5) if abs(x) > 700 else Fraction(3, 10**9))


def test_exp_bounds_far_out() -> None:
    assert exp_down(Fraction(-(10**7))) == 0 < exp_up(Fraction(-(10**7)))
    assert exp_up(Fraction(-(10**7))) <= exp_up(Fraction(-(10**6)))
    assert exp_down(Fraction(10**7)) >= exp_down(Fraction(10**6)) > 0
    with pytest.raises(InternalError):
        exp_up(Fraction(10**7))
