"""The cheaper exact arithmetic of planning (issue 21) against Fraction's own operators.

``values.at_most``, ``planning.builder.exact_sum``, ``Interval.__mul__``/``__sub__`` and
``Cost.covers`` compute with numerators and denominators instead of Fraction operators: on
random rationals (zero, negative, integral and not) each must give the same value, and the
same normalised Fraction (so the same repr), as the operators they replace."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from dpproxy.planning.builder import exact_sum
from dpproxy.values import Cost, Interval, at_most

fractions = st.one_of(
    st.integers(-(10**6), 10**6).map(Fraction),
    st.fractions(max_denominator=10**4),
    st.builds(Fraction, st.integers(-(10**30), 10**30), st.integers(1, 10**30)),
)
numbers = st.one_of(fractions, st.integers(-50, 50))


def same(a: Fraction, b: Fraction) -> bool:
    """Equal and both Fractions in lowest terms (as repr shows them)."""
    return type(a) is Fraction and type(b) is Fraction and repr(a) == repr(b)


@given(numbers, numbers)
def test_at_most_is_le(a: Fraction | int, b: Fraction | int) -> None:
    assert at_most(a, b) == (a <= b)


@given(st.lists(st.one_of(fractions, st.just(Fraction(0))), max_size=6))
def test_exact_sum_is_sum(terms: list[Fraction]) -> None:
    assert same(exact_sum(terms), sum(terms, Fraction(0)))
    assert same(exact_sum(iter(terms)), sum(terms, Fraction(0)))


def interval(a: Fraction, b: Fraction) -> Interval:
    return Interval(min(a, b), max(a, b))


@given(fractions, fractions, fractions, fractions)
def test_interval_product_is_the_hull_of_the_fraction_products(
    a: Fraction, b: Fraction, c: Fraction, d: Fraction
) -> None:
    x, y = interval(a, b), interval(c, d)
    assert x.lo is not None and x.hi is not None and y.lo is not None and y.hi is not None
    products = [x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi]
    got = x * y
    assert got.lo is not None and got.hi is not None
    assert same(got.lo, min(products)) and same(got.hi, max(products))


@given(fractions, fractions, fractions, fractions, st.booleans(), st.booleans())
def test_interval_difference_is_sum_of_the_negation(
    a: Fraction, b: Fraction, c: Fraction, d: Fraction, open_lo: bool, open_hi: bool
) -> None:
    x = interval(a, b)
    y = interval(c, d)
    if open_lo:
        y = Interval(None, y.hi)
    if open_hi:
        x = Interval(x.lo, None)
    want = x + (-y)
    got = x - y
    for g, w in ((got.lo, want.lo), (got.hi, want.hi)):
        assert (g is None and w is None) or (g is not None and w is not None and same(g, w))


@given(fractions, fractions, fractions, fractions)
def test_covers_is_le_on_both(a: Fraction, b: Fraction, c: Fraction, d: Fraction) -> None:
    big, small = Cost(abs(a), abs(b)), Cost(abs(c), abs(d))
    assert big.covers(small) == (small.epsilon <= big.epsilon and small.delta <= big.delta)


def test_point_shares_an_exact_fraction() -> None:
    assert Interval.point(3) == Interval(Fraction(3), Fraction(3))
    assert same(Interval.point(Fraction(1, 2)).lo or Fraction(0), Fraction(1, 2))


def _old_check(eps: Fraction, dlt: Fraction) -> str:
    """The comparisons ``check_privacy_parameters`` made with Fraction operators."""
    from dpproxy.values import MAX_EPSILON, MIN_DELTA, MIN_EPSILON

    if eps <= 0:
        return "ε must be positive"
    if not 0 <= dlt < 1:
        return "δ must be in [0, 1)"
    if not MIN_EPSILON <= eps <= MAX_EPSILON:
        return "ε = "
    if 0 < dlt < MIN_DELTA:
        return "δ = "
    return ""


edges = st.sampled_from(
    [Fraction(0), Fraction(1), Fraction(1000), Fraction(1, 10**9), Fraction(1, 10**300)]
)
privacy = st.one_of(
    edges,
    edges.map(lambda f: f * Fraction(10**12 + 1, 10**12)),
    edges.map(lambda f: f * Fraction(10**12 - 1, 10**12)),
    edges.map(lambda f: -f),
    st.fractions(min_value=-2, max_value=2000, max_denominator=10**6),
)


@given(privacy, privacy)
def test_privacy_parameters_refused_as_before(eps: Fraction, dlt: Fraction) -> None:
    from dpproxy.errors import DPProxyError
    from dpproxy.values import check_privacy_parameters

    try:
        check_privacy_parameters(eps, dlt)
        got = ""
    except DPProxyError as e:
        got = e.message
    want = _old_check(eps, dlt)
    assert got.startswith(want) and bool(got) == bool(want)


@given(fractions, fractions, st.integers(1, 8), st.integers(1, 8))
def test_weight_shares_are_the_products(eps: Fraction, dlt: Fraction, w: int, extra: int) -> None:
    from dpproxy.planning.choosing import _shares

    eps, dlt, total = abs(eps), abs(dlt), w + extra
    got = _shares(eps, dlt, None, 0, w, total)
    want = (eps * Fraction(w, total), dlt * Fraction(w, total))
    assert same(got[0], want[0]) and same(got[1], want[1])
