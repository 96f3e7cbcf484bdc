"""Local sensitivity of AVG and of order statistics: PTR distances, smooth bounds, EM scores.

Setting. One privacy unit owns at most K = ``rows`` rows of the relation; values are clamped
to [lo, hi], w = hi − lo > 0. A *unit step* is one neighbouring step of the schema:

* ``ADD_REMOVE``: one unit (0..K rows) is added or removed: at most K row insertions or
  deletions, the row count n moves by at most K (:func:`size_step`);
* ``SUBSTITUTE``: one unit's rows (0..K) are replaced by another's (0..K): at most K deletions
  and K insertions; n still moves by at most K (units may own 0 rows after WHERE).

In both, p ≤ K insertions and d ≤ K deletions. Every bound below depends on them only through
max(p, d) ≤ K — not p + d — so :func:`row_radius` is K under both relations (the proofs for
the mean, the order statistics and the scores each say why; ``tests/property/
test_local_bruteforce.py`` checks all three against every substitute neighbour, and that K − 1
is caught).

Everything here rounds toward *more* noise: sensitivities up, distances down.

**Mean** (f = mean of the n values, f(∅) = (lo + hi)/2). Removing a ≤ K of n > a rows moves
the mean by a·|mean(removed) − mean(kept)|/n ≤ a·w/n; adding b ≤ K rows to m ≥ 1 rows moves it
by b·w/(m + b) ≤ K·w/m; any two means lie in [lo, hi], so differ by ≤ w. Hence under
add/remove LS(x) ≤ LS'(n) = min(w, K·w/n) (w when n = 0). A substitution removes a ≤ K rows
(mean r) and adds b ≤ K (mean s) to the m = n − a kept rows (mean μ): the change is
b(s − μ)/(m + b) − a(r − μ)/n, at most b(hi − μ)/(m + b) + a(μ − lo)/n in absolute value (or
the same with hi and lo swapped). As b/(m + b) ≤ K/(m + K) ≤ K/n (m + K ≥ n) and a ≤ K, this is
≤ K(hi − μ)/n + K(μ − lo)/n = K·w/n; with n = 0 or m + b = 0 the two means are within w ≤ K·w/n
(n ≤ K there) of each other. So LS'(n) = min(w, K·w/n) under substitution too. LS' is
non-increasing in n, and a dataset k unit steps from x has at least max(n − kK, 0) rows, so
A(f, x, k) = max_{d(x,y) ≤ k} LS(f, y) ≤ LS'(max(n − kK, 0)), a function of n only.

* PTR (Dwork–Lei 2009; ``reading/000`` definition 18): :func:`mean_distance` is the least k
  with LS'(max(n − kK, 0)) > b. Every y within k' < d steps has LS(y) ≤ b, so d lower-bounds the
  distance to instability, and d ≥ 1 gives LS(x) ≤ b. Neighbours' n differ by ≤ K, and d is
  ⌊(n − T)/K⌋ + 1 (T = Kw/b), so it moves by at most 1: global sensitivity 1.
* Smooth sensitivity (Nissim–Raskhodnikova–Smith 2007, Definition 2.1: S ≥ LS and
  S(x) ≤ e^β·S(x') for neighbours; built as in their Lemma 2.3 from an upper bound U(x, k) on
  A(f, x, k) with U(x', k) ≤ U(x, k + 1)): :func:`mean_smooth` is max_k e^{−βk}·U(k) with
  U(k) = LS'(max(n − kK, 0)). It is ≥ LS(x) (k = 0); a neighbour x' has n' ≥ n − K, so term k
  of x' is ≤ e^β × term k + 1 of x, hence S(x') ≤ e^β·S(x).

**Order statistics.** x_(1) ≤ … ≤ x_(n) sorted, padded x_(i) = lo for i ≤ 0 and hi for i > n.
:func:`quantile_ranks` gives (a, b) with f(x) ∈ [x_(a), x_(b)].

*Lemma.* If y is reached from x by p row insertions and d deletions (j = max(p, d)) then
f(y) ∈ [x_(a − j), x_(b + j)]. Proof: one insertion gives y_(i) ∈ [x_(i−1), x_(i)], one deletion
y_(i) ∈ [x_(i), x_(i+1)] (padding included: inserted values lie in [lo, hi]); by induction
y_(i) ∈ [x_(i−p), x_(i+d)]. The ranks of y (n' = n + p − d rows) move with q: for "cont",
h' = h + q(p − d), so ⌊h'⌋ − p > h − 1 − ((1 − q)p + q·d) ≥ a − 1 − j and, being an integer,
⌊h'⌋ − p ≥ a − j; likewise ⌈h'⌉ + d < h + 1 + (q·p + (1 − q)d) ≤ b + 1 + j, so ⌈h'⌉ + d ≤ b + j
((1 − q)p + q·d and q·p + (1 − q)d are averages of p and d, so ≤ j). For "disc" the same holds
for ⌈q·n'⌉ (⌈q·n'⌉ − p ≥ q·n − j > ⌈q·n⌉ − 1 − j; ⌈q·n'⌉ + d < q·n + 1 + j), and max(1, ·) keeps
both (1 − p ≥ 1 − j, 1 + d ≤ 1 + j). So f(y) ∈ [y_(a'), y_(b')] ⊆ [x_(a'−p), x_(b'+d)] ⊆
[x_(a−j), x_(b+j)]. An empty y has f(y) = lo = x_(a−j) since a ≤ n ≤ d ≤ j. (With j = p + d
the lemma is looser and holds trivially.)

Let R = :func:`row_radius` = K. A y within k unit steps and its neighbour are both reached
from x by at most (k+1)K insertions and at most (k+1)K deletions, so A(f, x, k) ≤ Ā(k) =
x_(b + (k+1)R) − x_(a − (k+1)R) (:func:`quantile_local_bound`). For a neighbour x' (p, d ≤ R),
the same index argument (x'_(a'−m) ≥ x_(a'−p−m) with a' − p ≥ a − R, and likewise above) gives
Ā_{x'}(k) ≤ Ā_x(k + 1) (float subtraction rounds monotonically, so this holds as computed).
Hence :func:`quantile_distance` (least k with Ā(k) > b) moves by ≤ 1 between neighbours and
lower-bounds the distance to instability, and :func:`quantile_smooth`, with Ā replaced beyond
``kmax`` by w ≥ every Ā, is a β-smooth upper bound on LS as above. Both need the ranks
a − (kmax+1)R … b + (kmax+1)R (:func:`smooth_window`).

Rounding. Smooth bounds use one decay factor u, e^{−β}·(1 + 2^-48) ≤ u ≤ e^{−β}·(1 + 2^-47)
(an exact Taylor bound), in place of e^{−β}: max_k u^k·Ā(k) is ≥ the exact max_k e^{−βk}·Ā(k)
and satisfies S(x) ≤ S(x')/u by the argument above. u^k is bounded above with 96-bit rounding
and the result rounded up, so what is returned is within a factor (1 + 2^-50) above that
function, and S(x) ≤ (1 + 2^-50)/u·S(x') ≤ e^β·S(x'): rounding never breaks smoothness.
(Rounding each e^{−βk} up on its own could: the ratio of two upper bounds can exceed e^β.)

**Exponential mechanism** (McSherry–Talwar 2007). :func:`quantile_scores`: with L_i the rows
below cell i, score_i = max(0, L_i − q·n, q·n − L_i − c_i). Adding one row to cell j changes
L_i − q·n by [j < i] − q ∈ [−q, 1 − q] and q·n − L_i − c_i by q − [j < i] − [j = i] ∈
[q − 1, q]; deleting one moves them within [q − 1, q] and [−q, 1 − q]. With p insertions and d
deletions each branch moves within [−(q·p + (1 − q)d), (1 − q)p + q·d] or its mirror, averages
of p and d, so by at most max(p, d) ≤ K; a maximum of functions that each move by ≤ K moves by
≤ K, so a unit step moves every score by at most R = K under both relations. Adding or removing
one unit is p ≤ K insertions and no deletion (or the reverse): each branch then moves within
[−qK, (1 − q)K] or [−(1 − q)K, qK], so every score by at most K·max(q, 1 − q) (Tumult's ΔU for
its quantile); :func:`score_sensitivity`. (The release scores cells by *interpolated*
positions instead, ``mechanisms/quantile.py``, with the same Δ; these rank scores remain the
reference of the older audits.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.values import float_down, float_up, ln_up

Stat = Callable[[int], float]  # i ↦ x_(i), padded with lo below 1 and hi above n

_BITS = 96  # significant bits of the decay powers u^k
_SLACK = 1 + Fraction(1, 2**48)  # u ≥ e^{−β}·_SLACK absorbs all later rounding
_SERIES_BITS = 224  # fixed-point bits of the series for e^{−β} (_decay)
Dyadic = tuple[int, int]  # (m, e): m·2^e


def row_radius(neighbouring: Neighbouring, rows: int) -> int:
    """How far one unit step moves an order statistic's index, a mean's K in K·w/n, or a
    quantile score: max(insertions, deletions) = K under both relations (module docstring)."""
    _check_rows(rows)
    return rows


def size_step(neighbouring: Neighbouring, rows: int) -> int:
    """The most the row count changes in one unit step: K for both relations."""
    _check_rows(rows)
    return rows


def _check_rows(rows: int) -> None:
    if rows < 1:
        raise InternalError("a privacy unit's row bound must be at least 1")


# --------------------------------------------------------------------------------------- mean


def mean_local_bound(n: int, width: Fraction, rows: int, neighbouring: Neighbouring) -> Fraction:
    """LS'(n): a bound on the mean's local sensitivity at every dataset with n rows.

    >>> mean_local_bound(32561, Fraction(100), 1, Neighbouring.ADD_REMOVE)
    Fraction(100, 32561)
    >>> mean_local_bound(4, Fraction(10), 3, Neighbouring.SUBSTITUTE)
    Fraction(15, 2)
    """
    c = row_radius(neighbouring, rows)  # K·w/n under both relations
    if n < 0 or width <= 0:
        raise InternalError("mean bound of a negative size or width")
    return Fraction(width) if n == 0 else min(Fraction(width), c * Fraction(width) / n)


def mean_distance(
    n: int, width: Fraction, rows: int, neighbouring: Neighbouring, bound: Fraction
) -> int | None:
    """The PTR distance: least k ≥ 0 with LS'(max(n − kK, 0)) > bound; None if none exists.

    >>> mean_distance(32561, Fraction(100), 1, Neighbouring.ADD_REMOVE, Fraction(1, 200))
    12562
    >>> mean_distance(10, Fraction(1), 2, Neighbouring.SUBSTITUTE, Fraction(1)) is None
    True
    """
    mean_local_bound(n, width, rows, neighbouring)  # validates
    if width <= bound:
        return None  # LS' ≤ w ≤ bound everywhere: the test always passes
    if bound <= 0:
        return 0
    # For m ≥ 0 rows, LS'(m) > bound ⟺ m < t (m = 0 gives w > bound; m ≥ 1 gives Kw/m > bound).
    t = row_radius(neighbouring, rows) * Fraction(width) / Fraction(bound)
    if n < t:
        return 0
    return math.floor((n - t) / size_step(neighbouring, rows)) + 1


def mean_smooth(
    n: int, width: Fraction, rows: int, neighbouring: Neighbouring, beta: Fraction
) -> Fraction:
    """S(x) = max_k e^{−βk}·LS'(max(n − kK, 0)), a β-smooth upper bound on LS (rounded up).

    O(1): LS' equals w once n − kK ≤ K (from k_f on, where the maximum is at k_f), and before
    that log(e^{−βk}·Kw/(n − kK)) is convex in k, so its maximum is at k = 0 or k_f − 1.

    >>> mean_smooth(32561, Fraction(100), 1, Neighbouring.ADD_REMOVE, Fraction(1, 40))
    Fraction(100, 32561)
    >>> mean_smooth(0, Fraction(3), 1, Neighbouring.ADD_REMOVE, Fraction(1, 2))
    Fraction(3, 1)
    """
    first = mean_local_bound(n, width, rows, neighbouring)
    u = _decay(beta)
    if _fraction(u) >= 1:
        return Fraction(width)  # the constant w is a β-smooth upper bound too
    ck, k_step = row_radius(neighbouring, rows), size_step(neighbouring, rows)  # cK and K
    k_flat = max(0, -((ck - n) // k_step))  # ⌈(n − cK)/K⌉: least k with n − kK ≤ cK
    best = first
    for k in {k_flat - 1, k_flat} - {0, -1}:
        p = _power_up(u, k)
        # Skip terms below the k = 0 term without building a huge Fraction: u^k ≤ 1/max(n, 1)
        # gives u^k·LS' ≤ w/max(n, 1) ≤ LS'(n).
        if p[1] < 0 and p[0] * max(n, 1) <= 1 << min(-p[1], 2 * _BITS + n.bit_length() + 1):
            continue
        best = max(
            best, _fraction(p) * mean_local_bound(max(n - k * k_step, 0), width, rows, neighbouring)
        )
    return best


def _decay(beta: Fraction | float) -> Dyadic:
    """u with e^{−β}·(1 + 2^-48) ≤ u ≤ e^{−β}·(1 + 2^-47), as a dyadic.

    e^{−b} for 0 < b ≤ 1/2 is an alternating series with decreasing terms t_j = b^j/j!, so a
    partial sum that ends on a positive term is an upper bound, off by at most the next term;
    larger β is halved first and the bound squared back (rounding up). No floating point is
    involved: the relative slack compounds as u^k, so it must be far below 1/k for any k that
    matters.

    The sum runs in integers scaled by 2^_SERIES_BITS (b = p/q exactly): each term is carried
    as a floor and a ceiling (t_{j+1} = t_j·p/(q(j+1)), rounded both ways from the previous
    pair), negative terms subtract their floor and positive ones add their ceiling, so the
    total is at least the exact partial sum (hence at least e^{−b}) and exceeds it by less
    than 2^-200 relative. This is what Fraction arithmetic computed before, without a gcd
    per step: b's denominator has hundreds of digits (``ln_up``), and reducing every partial
    sum took 2–4 ms per call (issue 21).
    """
    b = Fraction(beta)
    if b <= 0:
        raise InternalError("the smoothing parameter β must be positive")
    p, q = b.numerator, b.denominator
    halvings = 0
    while 2 * p > q:  # b > 1/2: halve
        q *= 2
        halvings += 1
    one = 1 << _SERIES_BITS
    low = high = total = one  # t_0 = 1 exactly
    i = 0
    while i < 2 or high > one >> 110:
        d = q * (i + 1)
        low, high = low * p // d, -(-high * p // d)
        total -= low  # − t_{i+1}, at its floor
        d = q * (i + 2)
        low, high = low * p // d, -(-high * p // d)
        total += high  # + t_{i+2}, at its ceiling
        i += 2
    u = _round_up(Fraction(total, one))
    for _ in range(halvings):
        u = _mul_up(u, u)
    return _mul_up(u, _round_up(_SLACK))


def _round_up(x: Fraction) -> Dyadic:
    n, d = x.numerator, x.denominator
    shift = _BITS - (n.bit_length() - d.bit_length())
    q, r = divmod(n << shift, d) if shift >= 0 else divmod(n, d << -shift)
    return (q + 1 if r else q), -shift


def _mul_up(x: Dyadic, y: Dyadic) -> Dyadic:
    m, e = x[0] * y[0], x[1] + y[1]
    extra = m.bit_length() - _BITS
    if extra > 0:
        m, e = -(-m >> extra), e + extra  # ⌈m / 2^extra⌉
    return m, e


def _power_up(u: Dyadic, k: int) -> Dyadic:
    """An upper bound on u^k within a factor (1 + 2^-80) for k < 2^64."""
    result, base = (1, 0), u
    while k:
        if k & 1:
            result = _mul_up(result, base)
        base = _mul_up(base, base)
        k >>= 1
    return result


def _fraction(x: Dyadic) -> Fraction:
    return Fraction(x[0] << x[1]) if x[1] >= 0 else Fraction(x[0], 1 << -x[1])


# ------------------------------------------------------------------------------ order statistics


def quantile_ranks(q: Fraction, n: int, kind: str) -> tuple[int, int]:
    """(a, b) with the statistic in [x_(a), x_(b)]; (0, 0) for the empty set (its value is lo).

    >>> quantile_ranks(Fraction(1, 2), 10, "disc"), quantile_ranks(Fraction(1, 2), 10, "cont")
    ((5, 5), (5, 6))
    >>> quantile_ranks(Fraction(0), 7, "disc"), quantile_ranks(Fraction(1), 7, "cont")
    ((1, 1), (7, 7))
    """
    q = Fraction(q)
    if not 0 <= q <= 1 or n < 0 or kind not in ("disc", "cont"):
        raise InternalError(f"invalid quantile {q}, size {n} or kind {kind!r}")
    if n == 0:
        return 0, 0
    if kind == "disc":
        r = max(1, math.ceil(q * n))
        return r, r
    h = 1 + q * (n - 1)
    return math.floor(h), math.ceil(h)


def quantile_value(stat: Stat, q: Fraction, n: int, kind: str) -> float:
    """The statistic from padded order statistics (PostgreSQL's PERCENTILE_DISC / _CONT).

    >>> xs = [0.0, 1.0, 2.0, 4.0, 8.0, 8.0]  # lo = 0, hi = 8: x_(i) = xs[i] padded
    >>> stat = lambda i: xs[min(max(i, 0), 5)]
    >>> half = Fraction(1, 2)
    >>> quantile_value(stat, half, 4, "disc"), quantile_value(stat, half, 4, "cont")
    (2.0, 3.0)
    """
    a, b = quantile_ranks(q, n, kind)
    lo_v = stat(a)
    if a == b:
        return lo_v
    hi_v = stat(b)
    t = 1 + Fraction(q) * (n - 1) - a
    return min(max(lo_v + float(t) * (hi_v - lo_v), lo_v), hi_v)


def quantile_local_bound(stat: Stat, a: int, b: int, radius: int, k: int) -> float:
    """Ā(k) = x_(b + (k+1)·radius) − x_(a − (k+1)·radius), rounded up: ≥ A(f, x, k).

    >>> stat = lambda i: float(min(max(i, 0), 10))  # x_(i) = i on [0, 10]
    >>> quantile_local_bound(stat, 5, 6, 2, 1)  # x_(10) − x_(1)
    9.0
    """
    j = (k + 1) * radius
    return _diff_up(stat(b + j), stat(a - j))


def _diff_up(x: float, y: float) -> float:
    """The smallest float ≥ x − y (exact when the subtraction is), for y ≤ x."""
    if y > x:
        raise InternalError("order statistics out of order")
    s = x - y
    if not math.isfinite(s):
        return math.inf
    bv = s - x  # TwoSum(x, −y): the exact error of the rounded difference
    err = (x - (s - bv)) + (-y - bv)
    return math.nextafter(s, math.inf) if err > 0 else s


def _float_range(lo: float | Fraction, hi: float | Fraction) -> float:
    """⌈float_up(hi) − float_down(lo)⌉: bounds every difference of statistics whose values lie
    in [lo, hi] after any rounding of lo and hi to floats (so also the true LS)."""
    flo, fhi = Fraction(lo), Fraction(hi)
    if not flo < fhi:
        raise InternalError("quantile bounds must satisfy lo < hi")
    return _diff_up(float_up(fhi), float_down(flo))


def quantile_distance(
    stat: Stat,
    a: int,
    b: int,
    radius: int,
    bound: float | Fraction,
    kmax: int,
    *,
    lo: float | Fraction,
    hi: float | Fraction,
) -> int | None:
    """The PTR distance for order statistics: least k ≤ ``kmax`` with Ā(k) > ``bound``.

    Returns ``kmax + 1`` when there is none up to ``kmax`` (``stat`` is only known on the ranks
    a − (kmax+1)·radius … b + (kmax+1)·radius), and None when the value range hi − lo (as
    floats, rounded outward) is ≤ bound: no dataset is unstable, the test always passes.
    Ā is non-decreasing in k, so this bisects (O(log kmax) calls of ``stat``).

    >>> stat = lambda i: float(min(max(i, 0), 10))  # x_(i) = i on [0, 10]
    >>> quantile_distance(stat, 5, 5, 1, 4.5, 8, lo=0, hi=10)
    2
    >>> quantile_distance(stat, 5, 5, 1, 10, 8, lo=0, hi=10) is None
    True
    """
    if kmax < 0:
        raise InternalError("kmax must be ≥ 0")
    if Fraction(_float_range(lo, hi)) <= Fraction(bound):
        return None
    first, last = 0, kmax + 1  # invariant: Ā(k) ≤ bound for k < first; answer ≤ last
    while first < last:
        mid = (first + last) // 2
        if Fraction(quantile_local_bound(stat, a, b, radius, mid)) > Fraction(bound):
            last = mid
        else:
            first = mid + 1
    return first


def quantile_smooth(
    stat: Stat,
    a: int,
    b: int,
    radius: int,
    beta: Fraction | float,
    lo: float | Fraction,
    hi: float | Fraction,
    kmax: int,
) -> float:
    """max(max_{k ≤ kmax} e^{−βk}·Ā(k), e^{−β(kmax+1)}·(hi − lo)), rounded up: β-smooth.

    hi − lo is taken as floats rounded outward (≥ every Ā when the values of ``stat`` lie in
    [lo, hi] as floats; a value outside raises InternalError). Stops early once u^k·(hi − lo)
    is at most the running maximum: nothing later can exceed it.

    >>> stat = lambda i: float(min(max(i, 0), 10))
    >>> s = quantile_smooth(stat, 5, 5, 1, Fraction(1, 10), 0, 10, 100)  # Ā(k) = min(2k + 2, 10)
    >>> round(s, 6), round(math.exp(-0.4) * 10, 6)  # the maximum is at k = 4
    (6.7032, 6.7032)
    """
    if kmax < 0:
        raise InternalError("kmax must be ≥ 0")
    w = Fraction(_float_range(lo, hi))
    u = _decay(beta)
    if _fraction(u) >= 1:
        return float(w)  # the constant w is a β-smooth upper bound too
    best, p = Fraction(0), (1, 0)
    for k in range(kmax + 1):
        pk = _fraction(p)
        if pk * w <= best:
            break  # u^j·Ā(j) ≤ u^k·w ≤ best for every j ≥ k, the tail included
        ak = Fraction(quantile_local_bound(stat, a, b, radius, k))
        if ak > w:
            raise InternalError("an order statistic lies outside the bounds")
        best = max(best, pk * ak)
        p = _mul_up(p, u)
    else:
        best = max(best, _fraction(p) * w)
    return float_up(best)


def smooth_window(radius: int, beta: Fraction, cap: int = 20000) -> tuple[int, int]:
    """(kmax, J): kmax = ⌈ln(10^6)/β⌉ and J = (kmax + 1)·radius ranks per side of [a, b].

    When J > ``cap``: J = cap and kmax = J // radius − 1 (at least 0; then J = radius even if
    that exceeds ``cap``, as k = 0 needs ``radius`` ranks per side).

    >>> smooth_window(1, Fraction(1, 10))
    (139, 140)
    >>> smooth_window(4, Fraction(1, 1000))
    (4999, 20000)
    """
    if radius < 1 or Fraction(beta) <= 0:
        raise InternalError("smooth_window needs radius ≥ 1 and β > 0")
    kmax = math.ceil(ln_up(Fraction(10**6)) / Fraction(beta))
    if (kmax + 1) * radius <= cap:
        return kmax, (kmax + 1) * radius
    kmax = max(0, cap // radius - 1)
    return kmax, max(cap, (kmax + 1) * radius)


# ------------------------------------------------------------------------ exponential mechanism


@dataclass(frozen=True, slots=True)
class Cells:
    """Cells i < ``bins``: [lo + i·width, lo + (i+1)·width); cell ``bins`` is {hi}."""

    lo: Fraction
    width: Fraction
    bins: int
    integer: bool  # one cell per integer lo..hi

    @property
    def count(self) -> int:
        return self.bins + 1

    @property
    def hi(self) -> Fraction:
        return self.lo + self.bins * self.width

    def value(self, i: int) -> Fraction:
        """The cell's representative: its integer, the midpoint of a real cell, or hi."""
        if not 0 <= i <= self.bins:
            raise InternalError(f"cell {i} out of range")
        if self.integer or i == self.bins:
            return self.lo + i * self.width
        return self.lo + (2 * i + 1) * self.width / 2

    def index(self, v: Fraction) -> int:
        """The cell that holds the (clamped) value v."""
        if v >= self.hi:
            return self.bins
        return max(0, math.floor((Fraction(v) - self.lo) / self.width))


def quantile_cells(lo: Fraction, hi: Fraction, integer: bool, bins: int) -> Cells:
    """The candidate cells: the integers lo..hi when ``integer`` and hi − lo ≤ 10000 (integral
    bounds), else ``bins`` equal cells plus {hi}; the single cell {lo} when lo = hi.

    >>> c = quantile_cells(Fraction(0), Fraction(10), False, 4)
    >>> c.count, c.width, c.value(0), c.value(4), c.index(Fraction(5))
    (5, Fraction(5, 2), Fraction(5, 4), Fraction(10, 1), 2)
    >>> quantile_cells(Fraction(-2), Fraction(3), True, 1000).value(1)
    Fraction(-1, 1)
    """
    lo, hi = Fraction(lo), Fraction(hi)
    if lo == hi and bins >= 0:  # a constant measure (MAX(NULLIF(1, x))): one cell, {lo}
        return Cells(lo, Fraction(1), 0, True)
    if not lo < hi or bins < 1:
        raise InternalError("cells need lo ≤ hi and at least one bin")
    if integer and lo.denominator == 1 and hi.denominator == 1 and hi - lo <= 10_000:
        return Cells(lo, Fraction(1), int(hi - lo), True)
    return Cells(lo, (hi - lo) / bins, bins, False)


def quantile_scores(counts: Sequence[int], q: Fraction) -> list[Fraction]:
    """score_i = max(0, L_i − q·n, q·n − L_i − c_i): 0 at the quantile, lower is better.

    >>> [str(s) for s in quantile_scores([2, 0, 3, 1], Fraction(1, 2))]  # 3rd of 6 in cell 2
    ['1', '1', '0', '2']
    """
    q = Fraction(q)
    if not 0 <= q <= 1 or any(c < 0 for c in counts):
        raise InternalError("quantile scores need q in [0, 1] and counts ≥ 0")
    target = q * sum(counts)
    below, out = 0, []
    for c in counts:
        out.append(max(Fraction(0), below - target, target - below - c))
        below += c
    return out


def score_sensitivity(neighbouring: Neighbouring, rows: int, q: Fraction | None = None) -> Fraction:
    """How far one unit step moves any score of the quantile q: K·max(q, 1 − q) when a unit is
    added or removed (only insertions, or only deletions: p ≤ K, d = 0 or the reverse in the
    module docstring's bound), else (substitution, or q not given) the row radius K.

    >>> str(score_sensitivity(Neighbouring.ADD_REMOVE, 2, Fraction(9, 10)))
    '9/5'
    >>> str(score_sensitivity(Neighbouring.SUBSTITUTE, 2, Fraction(9, 10)))
    '2'
    """
    k = Fraction(row_radius(neighbouring, rows))
    if q is None or neighbouring is Neighbouring.SUBSTITUTE:
        return k
    q = Fraction(q)
    if not 0 <= q <= 1:
        raise InternalError("quantile scores need q in [0, 1]")
    return k * max(q, 1 - q)
