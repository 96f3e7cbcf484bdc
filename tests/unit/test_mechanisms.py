"""Mechanism cost boundaries, conservative rounding helpers, and the independent plan checker.

Boundaries are pinned the way OpenDP pins its privacy maps (``check(1, 0.5)`` passes where
``check(1, 0.49999)`` fails): the exact figure is reached, and nothing below it. The rounding
helpers of :mod:`dpproxy.values` are checked with exact integer or high-precision decimal
arithmetic, never against another float.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import MechanismKind
from dpproxy.errors import InternalError, PrivacyParameterError
from dpproxy.mechanisms.base import (
    Gaussian,
    Laplace,
    Sensitivity,
    approx_to_zcdp,
    zcdp_to_approx,
)
from dpproxy.planning.check import check_plan
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import float_down, float_up, ln_down, ln_up, sqrt_down, sqrt_up

EXACT = settings(max_examples=200, deadline=None)

positive = st.fractions(min_value=Fraction(1, 10**9), max_value=10**9, max_denominator=10**9)
nonnegative = st.fractions(min_value=0, max_value=10**9, max_denominator=10**9)


def sens(l1: Fraction | int, l2: Fraction | int | None = None) -> Sensitivity:
    l1 = Fraction(l1)
    l2 = l1 if l2 is None else Fraction(l2)
    return Sensitivity(l1, l2, l1)


def exact_ln(x: Fraction, digits: int = 80) -> Fraction:
    """ln(x) to ``digits`` significant digits (Decimal's ln is correctly rounded)."""
    with localcontext() as ctx:
        ctx.prec = digits
        return Fraction(Decimal(x.numerator).ln() - Decimal(x.denominator).ln())


def ulp_margin(v: Fraction, digits: int = 80) -> Fraction:
    """A bound on the error of :func:`exact_ln`'s result (two roundings and a subtraction)."""
    return (abs(v) + 10**6) * Fraction(1, 10 ** (digits - 10))


# --------------------------------------------------------------------------------------------
# Laplace


def test_laplace_boundary_like_opendp() -> None:
    """Laplace(2) on Δ₁ = 1 is exactly ½-DP: it passes a budget of ½ and fails ½ − 10⁻⁵."""
    eps = Laplace(Fraction(2)).epsilon(sens(1))
    assert eps == Fraction(1, 2)
    assert eps <= Fraction(1, 2)
    assert not eps <= Fraction(49_999, 100_000)


@EXACT
@given(delta=positive, eps=positive)
def test_laplace_calibrate_is_exact_inverse(delta: Fraction, eps: Fraction) -> None:
    """calibrate(Δ, ε).epsilon(Δ) == ε exactly, and a smaller scale would cost more."""
    lap = Laplace.calibrate(sens(delta), eps)
    assert lap.epsilon(sens(delta)) == eps
    assert Laplace(lap.scale * Fraction(999_999, 1_000_000)).epsilon(sens(delta)) > eps


@EXACT
@given(scale=positive, delta=positive)
def test_laplace_epsilon_is_l1_over_scale(scale: Fraction, delta: Fraction) -> None:
    """ε = Δ₁/b uses the L1 norm only."""
    s = Sensitivity(delta, delta * 7, delta / 3)
    assert Laplace(scale).epsilon(s) == delta / scale


@given(scale=nonnegative)
def test_zero_sensitivity_costs_nothing(scale: Fraction) -> None:
    """Nothing can change: ε = 0 and ρ = 0, even with no noise at all."""
    zero = Sensitivity(Fraction(0), Fraction(0), Fraction(0))
    assert Laplace(scale).epsilon(zero) == 0
    assert Gaussian(scale).rho(zero) == 0


def test_zero_scale_on_sensitive_value_is_refused() -> None:
    with pytest.raises(InternalError):
        Laplace(Fraction(0)).epsilon(sens(1))
    with pytest.raises(InternalError):
        Gaussian(Fraction(0)).rho(sens(1))


@pytest.mark.parametrize("bad", [Fraction(-1), Fraction(-1, 10**12)])
def test_negative_scale_or_sensitivity_is_an_error(bad: Fraction) -> None:
    with pytest.raises(InternalError) as e:
        Laplace(bad)
    assert e.value.sqlstate == "XX000"
    with pytest.raises(InternalError):
        Gaussian(bad)
    for args in ((bad, 1, 1), (1, bad, 1), (1, 1, bad)):
        with pytest.raises(InternalError):
            Sensitivity(*(Fraction(a) for a in args))


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(-1)])
def test_calibrating_to_a_non_positive_budget_is_refused(bad: Fraction) -> None:
    with pytest.raises(PrivacyParameterError) as e:
        Laplace.calibrate(sens(1), bad)
    assert e.value.sqlstate == "ZD003"
    with pytest.raises(PrivacyParameterError):
        Gaussian.calibrate(sens(1), bad)


# --------------------------------------------------------------------------------------------
# Gaussian and the zCDP ↔ (ε, δ) conversions


def test_gaussian_rho_boundary() -> None:
    """N(0, 1) on Δ₂ = 1 is exactly ½-zCDP; σ = 2 on Δ₂ = 3 is 9/8-zCDP; L1 is ignored."""
    assert Gaussian(Fraction(1)).rho(sens(1)) == Fraction(1, 2)
    assert Gaussian(Fraction(2)).rho(
        Sensitivity(Fraction(100), Fraction(3), Fraction(1))
    ) == Fraction(9, 8)


@EXACT
@given(delta=positive, rho=positive)
def test_gaussian_calibrate_never_exceeds_rho(delta: Fraction, rho: Fraction) -> None:
    """σ is rounded up: the realised ρ is ≤ the target, and within 10⁻⁹ of it."""
    g = Gaussian.calibrate(sens(1, delta), rho)
    got = g.rho(sens(1, delta))
    assert got <= rho
    assert got >= rho * (1 - Fraction(1, 10**9))


@EXACT
@given(
    eps=st.fractions(min_value=Fraction(1, 10**6), max_value=100, max_denominator=10**9),
    delta=st.fractions(
        min_value=Fraction(1, 10**30), max_value=Fraction(1, 2), max_denominator=10**30
    ),
)
def test_approx_to_zcdp_round_trip_never_exceeds_epsilon(eps: Fraction, delta: Fraction) -> None:
    """ρ = approx_to_zcdp(ε, δ) converts back to at most ε, and loses at most 0.1 % of it."""
    rho = approx_to_zcdp(eps, delta)
    assert rho > 0
    back = zcdp_to_approx(rho, delta)
    assert back <= eps
    assert back >= eps * Fraction(999, 1000)


@pytest.mark.parametrize("eps", [Fraction(1, 10**7), Fraction(1, 10**12)])
def test_approx_to_zcdp_is_positive_for_small_epsilon(eps: Fraction) -> None:
    """Every ε > 0 admits a positive ρ (about ε²/(4 ln(1/δ)) here); ρ = 0 would make the
    Gaussian plan fail with "ρ must be positive" for a valid request."""
    delta = Fraction(1, 10**5)
    rho = approx_to_zcdp(eps, delta)
    assert rho > 0
    assert zcdp_to_approx(rho, delta) <= eps
    assert zcdp_to_approx(rho, delta) >= eps / 2


@EXACT
@given(
    rho=st.fractions(min_value=Fraction(1, 10**12), max_value=100, max_denominator=10**12),
    delta=st.fractions(
        min_value=Fraction(1, 10**30), max_value=Fraction(99, 100), max_denominator=10**30
    ),
)
def test_zcdp_to_approx_is_conservative(rho: Fraction, delta: Fraction) -> None:
    """The returned ε is ≥ ρ + 2√(ρ ln(1/δ)) computed to 80 digits (Bun–Steinke Prop. 1.3)."""
    with localcontext() as ctx:
        ctx.prec = 80
        r = Decimal(rho.numerator) / Decimal(rho.denominator)
        ln = Decimal(delta.denominator).ln() - Decimal(delta.numerator).ln()
        exact = r + 2 * (r * ln).sqrt()
    assert zcdp_to_approx(rho, delta) >= Fraction(exact) * (1 + Fraction(1, 10**70))


def test_zcdp_conversion_edges() -> None:
    assert zcdp_to_approx(Fraction(0), Fraction(1, 10)) == 0
    for bad in (Fraction(0), Fraction(1), Fraction(2)):
        with pytest.raises(PrivacyParameterError):
            zcdp_to_approx(Fraction(1), bad)
        with pytest.raises(PrivacyParameterError):
            approx_to_zcdp(Fraction(1), bad)
    with pytest.raises(PrivacyParameterError):
        approx_to_zcdp(Fraction(0), Fraction(1, 10))


# --------------------------------------------------------------------------------------------
# Conservative helpers (dpproxy/values.py)

fractions_any = st.fractions(min_value=0, max_value=10**30, max_denominator=10**30)


@EXACT
@given(x=fractions_any)
def test_sqrt_up_and_down_bracket_the_root(x: Fraction) -> None:
    """sqrt_down(x)² ≤ x ≤ sqrt_up(x)², checked in exact rational arithmetic, and tight."""
    up, down = sqrt_up(x), sqrt_down(x)
    assert up * up >= x
    assert down >= 0 and down * down <= x
    assert up - down <= Fraction(2, 10**12)


@EXACT
@given(q=st.fractions(min_value=0, max_value=10**15, max_denominator=10**15))
def test_sqrt_up_is_exact_on_squares(q: Fraction) -> None:
    assert sqrt_up(q * q) == q


def test_sqrt_up_of_a_negative_is_an_error() -> None:
    with pytest.raises(InternalError):
        sqrt_up(Fraction(-1))


finite_range = st.fractions(min_value=-(10**300), max_value=10**300, max_denominator=10**300)


@EXACT
@given(x=finite_range)
def test_float_up_and_down_are_the_nearest_floats_on_the_safe_side(x: Fraction) -> None:
    """float_up(x) is the smallest float ≥ x and float_down(x) the largest ≤ x, exactly."""
    up, down = float_up(x), float_down(x)
    assert Fraction(up) >= x
    assert Fraction(math.nextafter(up, -math.inf)) < x
    assert Fraction(down) <= x
    assert Fraction(math.nextafter(down, math.inf)) > x
    if Fraction(float(x)) == x:
        assert up == down == float(x)


def test_float_up_of_a_third() -> None:
    """1/3 rounds to nearest *below* 1/3; float_up must take the next float up."""
    assert Fraction(float(Fraction(1, 3))) < Fraction(1, 3)
    assert Fraction(float_up(Fraction(1, 3))) > Fraction(1, 3)
    assert float_up(Fraction(1, 3)) == math.nextafter(1 / 3, 1)


ln_args = st.fractions(min_value=Fraction(1, 10**40), max_value=10**40, max_denominator=10**40)


@EXACT
@given(x=ln_args.filter(lambda v: v > 0))
def test_ln_up_and_down_bracket_the_logarithm(x: Fraction) -> None:
    """ln_down(x) ≤ ln(x) ≤ ln_up(x), with ln(x) computed to 80 digits (and math.log too)."""
    exact = exact_ln(x)
    margin = ulp_margin(exact)
    assert ln_up(x) >= exact + margin
    assert ln_down(x) <= exact - margin
    # math.log first rounds x to a float, which near 1 moves ln(x) by far more than an ulp; it
    # is only a meaningful reference for floats away from 1.
    if Fraction(float(x)) == x and abs(x - 1) > Fraction(1, 1000):
        assert ln_up(x) >= Fraction(math.log(x)) >= ln_down(x)


def test_ln_up_bounds_the_logarithm_of_huge_fractions() -> None:
    """A ratio of two ~7,000-digit integers close to 1: math.log of each loses more than the
    helpers' absolute margin of 10⁻¹², so the float difference must not be trusted as is."""
    d = 3**15014
    x = Fraction(d + 2 ** (d.bit_length() - 30), d)  # ln(x) ≈ 1.206e-9
    exact = exact_ln(x, digits=120)
    up, down = ln_up(x), ln_down(x)
    assert up >= exact, f"ln_up {float(up)!r} < ln {float(exact)!r}"
    assert down <= exact, f"ln_down {float(down)!r} > ln {float(exact)!r}"


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(-1)])
def test_ln_of_non_positive_is_an_error(bad: Fraction) -> None:
    with pytest.raises(InternalError):
        ln_up(bad)
    with pytest.raises(InternalError):
        ln_down(bad)


# --------------------------------------------------------------------------------------------
# The plan checker refuses tampered plans

SCHEMA = """
version: 1
dataset: shop
privacy:
  neighbouring: add_remove
  epsilon: 1
  delta: 1.0e-6
tables:
  orders:
    private: true
    privacy_unit: customer
    max_rows_per_unit: 3
    columns:
      customer: {type: integer}
      region: {type: text, domain: [north, south]}
      city: {type: text}
      amount: {type: float, lower: 0, upper: 100}
"""


def make_plan(sql: str, mechanism: MechanismKind | None = None) -> QueryPlan:
    catalog = parse_catalog(SCHEMA)
    return plan_query(validate(parse(sql), catalog, sql), catalog.policy, mechanism=mechanism)


def refused(plan: QueryPlan) -> None:
    with pytest.raises(InternalError) as e:
        check_plan(plan)
    assert e.value.sqlstate == "XX000"


@pytest.mark.parametrize("mechanism", [MechanismKind.LAPLACE, MechanismKind.GAUSSIAN])
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*), SUM(amount) FROM orders",
        "SELECT region, AVG(amount) FROM orders GROUP BY region",
        "SELECT city, COUNT(*) FROM orders GROUP BY city",
    ],
)
def test_untampered_plans_pass_the_checker(sql: str, mechanism: MechanismKind) -> None:
    check_plan(make_plan(sql, mechanism))


def _replace_release(plan: QueryPlan, i: int, **changes: object) -> QueryPlan:
    releases = list(plan.releases)
    releases[i] = dataclasses.replace(releases[i], **changes)  # type: ignore[arg-type]
    return dataclasses.replace(plan, releases=tuple(releases))


@pytest.mark.parametrize("i", [0, 1])
def test_a_smaller_laplace_scale_is_refused(i: int) -> None:
    plan = make_plan("SELECT COUNT(*), SUM(amount) FROM orders")
    lap = plan.releases[i].mechanism
    assert isinstance(lap, Laplace)
    refused(_replace_release(plan, i, mechanism=Laplace(lap.scale / 2)))
    refused(_replace_release(plan, i, mechanism=Laplace(lap.scale * Fraction(999_999, 10**6))))


def test_a_smaller_gaussian_sigma_is_refused() -> None:
    plan = make_plan(
        "SELECT region, SUM(amount) FROM orders GROUP BY region", MechanismKind.GAUSSIAN
    )
    g = plan.releases[0].mechanism
    assert isinstance(g, Gaussian)
    refused(_replace_release(plan, 0, mechanism=Gaussian(g.sigma * Fraction(9, 10))))


def test_a_smaller_sensitivity_with_a_matching_scale_is_refused() -> None:
    """Scale and cost stay consistent with each other, but Δ is not the schema's."""
    plan = make_plan("SELECT SUM(amount) FROM orders")
    r = plan.releases[0]
    lap = r.mechanism
    assert isinstance(lap, Laplace)
    half = r.sensitivity.scaled(Fraction(1, 2))
    refused(_replace_release(plan, 0, sensitivity=half, mechanism=Laplace(lap.scale / 2)))


def test_an_understated_release_cost_is_refused() -> None:
    plan = make_plan("SELECT COUNT(*), SUM(amount) FROM orders")
    r = plan.releases[0]
    refused(_replace_release(plan, 0, cost=dataclasses.replace(r.cost, epsilon=r.cost.epsilon / 2)))


@pytest.mark.parametrize("lower", [Fraction(1), Fraction(1, 10)])
def test_a_lower_selection_threshold_is_refused(lower: Fraction) -> None:
    """One less is unsafe (the threshold is the smallest integer within δ); a fraction is not
    an integer threshold."""
    plan = make_plan("SELECT city, COUNT(*) FROM orders GROUP BY city")
    sel = plan.selection
    assert sel is not None
    check_plan(plan)
    lowered = dataclasses.replace(sel, threshold=sel.threshold - lower)  # type: ignore[arg-type]
    refused(dataclasses.replace(plan, selection=lowered))


def test_selection_noise_other_than_discrete_laplace_is_refused() -> None:
    """The threshold bounds discrete Laplace noise at the planned scale: not continuous noise
    (a SUM primitive is released without ``integer``), nor a smaller scale than the cost says."""
    plan = make_plan("SELECT city, COUNT(*) FROM orders GROUP BY city")
    sel = plan.selection
    assert sel is not None
    r = sel.release
    lap = r.mechanism
    assert isinstance(lap, Laplace)
    as_sum = dataclasses.replace(r.primitive, kind=PrimitiveKind.SUM)
    for release in (
        dataclasses.replace(r, primitive=as_sum),
        dataclasses.replace(r, mechanism=Laplace(lap.scale / 2)),
    ):
        tampered = dataclasses.replace(sel, release=release)
        with pytest.raises(InternalError, match="selection"):
            check_plan(dataclasses.replace(plan, selection=tampered))


@pytest.mark.parametrize(
    "b", [Fraction(1, 4), Fraction(1, 2), Fraction(1), Fraction(3), Fraction(37, 10)]
)
@pytest.mark.parametrize("alpha", [0.05, 0.025, 0.01])
def test_discrete_laplace_half_width_is_the_exact_tail_quantile(b: Fraction, alpha: float) -> None:
    """P(|X| > w) ≤ α for the discrete Laplace, and w is the smallest such integer."""
    p = math.exp(-1 / float(b))

    def tail(w: float) -> float:  # P(|X| > w) = P(|X| ≥ w + 1) = 2 p^(w+1) / (1 + p)
        return 2 * p ** (w + 1) / (1 + p)

    w = Laplace(b).half_width(alpha, integer=True)
    assert w == int(w) and tail(w) <= alpha
    assert w == 0 or tail(w - 1) > alpha


def test_integer_gaussian_half_width_is_conservative() -> None:
    """The sub-Gaussian bound is at least the continuous quantile."""
    g = Gaussian(Fraction(3))
    assert g.half_width(0.05, integer=True) >= g.half_width(0.05)
