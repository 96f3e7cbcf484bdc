"""The partition-selection threshold against the exact law of the noise drawn.

A group that only one of two neighbours holds has one unit (count 1). The planner's threshold τ
(``dpproxy/mechanisms/selection.py``) keeps it when 1 + Z > τ, Z the discrete Laplace noise
OpenDP adds to unit counts: P(Z = z) ∝ p^|z|, p = e^{-1/s}, s the planned scale rounded up to a
float (``mechanisms/noise.py``; OpenDP converts that float to a rational exactly). Here the
probability is summed from the pmf in 60-digit decimal arithmetic, normalising constant
included, with the truncated tails bounded geometrically, independently of the closed form
p^τ/(1 + p) the planner uses. Over a grid of ε_sel, δ and G (the groups one unit may touch),
under add/remove and under substitution:

* N·P ≤ δ, N the number of groups one neighbour can hold and the other not (G, or 2G);
* τ is the smallest such integer: with τ − 1 the same sum exceeds δ.

The threshold dpproxy used before, τ_old = 1 + b·ln(G/(2δ)) (ln(G/δ) under substitution), came
from the continuous Laplace tail ½e^{-x/b}; with the discrete noise it keeps a one-unit group
with probability up to 2/(1 + e^{-1/b}) times δ/N. :func:`test_the_continuous_threshold_fails`
shows it on this grid (31 of its 100 add/remove cases, e.g. ε_sel = 1, δ = 10⁻⁵, G = 1: 1.22·δ;
ε_sel = 0.5: 1.04·δ), so these tests fail on the previous code.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import cache

import pytest
from sqlglot import exp

from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Laplace
from dpproxy.mechanisms.selection import exclusive_groups, selection_threshold
from dpproxy.planning.check import check_plan
from dpproxy.planning.hints import parse_hints
from dpproxy.planning.methods import Budget, MethodOptions, stat_plan
from dpproxy.planning.plan import Method, QueryPlan, Selection, StatPlan
from dpproxy.planning.planner import plan_query
from dpproxy.sql.parse import parse
from dpproxy.sql.scope import AggKind, Aggregate
from dpproxy.sql.validate import validate
from dpproxy.values import Interval, float_up, ln_up

EPSILONS = ["0.1", "0.5", "1", "2", "5"]  # ε_sel: the whole query ε goes to selection here
DELTAS = ["1e-3", "1e-5", "1e-6", "1e-7", "1e-9"]
GROUPS = [1, 2, 5, 10]
RELATIONS = [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE]
DIGITS = 60
CUT = Decimal(10) ** -45  # stop summing when a term falls below CUT times the sum

SCHEMA = """
version: 1
dataset: shop
privacy:
  neighbouring: {relation}
  epsilon: 1
  delta: 1.0e-6
tables:
  orders:
    private: true
    privacy_unit: customer
    max_groups_per_unit: {groups}
    max_rows_per_group_per_unit: 1
    columns:
      customer: {{type: integer}}
      city: {{type: text}}
"""
QUERY = "SELECT city FROM orders GROUP BY city"  # no aggregate: all of ε and δ go to selection


def plan_for(epsilon: Fraction, delta: Fraction, groups: int, rel: Neighbouring) -> QueryPlan:
    """The real planner's plan of a private GROUP BY key, checked by the plan checker."""
    catalog = parse_catalog(SCHEMA.format(relation=rel.value, groups=groups))
    query = validate(parse(QUERY), catalog, QUERY)
    plan = plan_query(query, catalog.policy, epsilon=epsilon, delta=delta)
    check_plan(plan)
    return plan


def plan_selection(epsilon: Fraction, delta: Fraction, groups: int, rel: Neighbouring) -> Selection:
    """The planner's selection, with all of ε and δ spent on it."""
    plan = plan_for(epsilon, delta, groups, rel)
    assert plan.selection is not None and plan.stability.groups == groups
    assert plan.selection.release.cost.delta == delta
    return plan.selection


def sampled_p(scale: Fraction) -> Decimal:
    """p = e^{-1/s} for the float scale OpenDP draws with (to DIGITS digits)."""
    s = Fraction(float_up(scale))
    return (-Decimal(s.denominator) / Decimal(s.numerator)).exp()


@cache
def _geometric(p: Decimal, start: int) -> tuple[Decimal, Decimal]:
    """Σ_{z ≥ start} p^z term by term: (the partial sum, a bound on the rest) — the rest is at
    most next term / (1 − p), p < 1."""
    term = p**start
    total = Decimal(0)
    while term > CUT * total or total == 0:
        total += term
        term *= p
    return total, term / (1 - p)


def keep_probability(scale: Fraction, least: int) -> tuple[Decimal, Decimal]:
    """Bounds (lo, hi) on P(Z ≥ least), least ≥ 0, from the pmf p^|z| / Σ_z p^|z|."""
    with localcontext() as ctx:
        ctx.prec = DIGITS
        p = sampled_p(scale)
        tail, tail_rest = _geometric(p, least)
        half, half_rest = _geometric(p, 1)  # normaliser: 1 + 2·Σ_{z ≥ 1} p^z
        norm_lo, norm_hi = 1 + 2 * half, 1 + 2 * (half + half_rest)
        return tail / norm_hi, (tail + tail_rest) / norm_lo


def old_threshold(scale: Fraction, groups: int, delta: Fraction, rel: Neighbouring) -> Fraction:
    """τ_old = 1 + b·ln(G/(2δ)), or 1 + b·ln(G/δ) under substitution (the previous planner)."""
    ratio = Fraction(groups) / (delta if rel is Neighbouring.SUBSTITUTE else 2 * delta)
    return 1 + scale * ln_up(ratio)


def old_least(tau_old: Fraction) -> int:
    """The smallest Z kept by the old rule 1 + Z > float_up(τ_old)."""
    return math.floor(float_up(tau_old) - 1) + 1


CASES = [
    (Fraction(e), Fraction(Decimal(d)), g, rel)
    for e in EPSILONS
    for d in DELTAS
    for g in GROUPS
    for rel in RELATIONS
]


def _id(case: tuple[Fraction, Fraction, int, Neighbouring]) -> str:
    e, d, g, rel = case
    return f"eps{float(e):g}-delta{float(d):g}-G{g}-{rel.value}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_a_one_unit_group_is_kept_with_probability_at_most_delta(
    case: tuple[Fraction, Fraction, int, Neighbouring],
) -> None:
    epsilon, delta, groups, rel = case
    sel = plan_selection(epsilon, delta, groups, rel)
    lap = sel.release.mechanism
    assert isinstance(lap, Laplace)
    n = exclusive_groups(groups, rel)
    assert lap.scale == Fraction(n) / epsilon  # Δ₁ = G, or 2G under substitution
    tau = sel.threshold
    assert isinstance(tau, int) and tau >= 0
    assert tau == selection_threshold(lap.scale, n, delta)
    budget = Decimal(delta.numerator) / Decimal(delta.denominator)
    _, hi = keep_probability(lap.scale, tau)
    assert n * hi <= budget, f"N·P = {n * hi:.6g} > δ"
    if tau > 0:  # minimal: one lower would exceed δ
        lo, _ = keep_probability(lap.scale, tau - 1)
        assert n * lo > budget, f"τ − 1 keeps N·P = {n * lo:.6g} ≤ δ: τ is not the smallest"


def test_the_continuous_threshold_fails() -> None:
    """The old threshold breaks δ on the add/remove grid; the documented pairs (ε_sel, δ, G):
    (1, 10⁻⁵, 1) at 1.22·δ, (0.5, 10⁻⁵, 1) at 1.04·δ, (0.5, 10⁻⁷, 1) at 1.15·δ."""
    ratios = {}
    for e in EPSILONS:
        for d in DELTAS:
            for g in GROUPS:
                epsilon, delta = Fraction(e), Fraction(Decimal(d))
                scale = Fraction(g) / epsilon
                least = old_least(old_threshold(scale, g, delta, Neighbouring.ADD_REMOVE))
                lo, _ = keep_probability(scale, least)
                ratios[(e, d, g)] = float(g * lo / Decimal(d))
    assert round(ratios[("1", "1e-5", 1)], 2) == 1.22
    assert round(ratios[("0.5", "1e-5", 1)], 2) == 1.04
    assert round(ratios[("0.5", "1e-7", 1)], 2) == 1.15
    assert sum(r > 1 for r in ratios.values()) == 31
    bound = max(2 / (1 + math.exp(-float(Fraction(e)) / g)) for (e, _, g) in ratios)
    assert max(ratios.values()) <= bound  # at most 2/(1 + e^{-1/b})


def test_the_threshold_rises_only_where_the_old_one_failed() -> None:
    """Where the old rule (keep Z ≥ m_old) stayed within δ, the new τ is at most m_old: the fix
    costs accuracy only where the old threshold was unsafe (64 of the 200 cases, both relations,
    where τ = m_old + 1)."""
    raised = 0
    for epsilon, delta, groups, rel in CASES:
        n = exclusive_groups(groups, rel)
        scale = Fraction(n) / epsilon
        least = old_least(old_threshold(scale, groups, delta, rel))
        tau = selection_threshold(scale, n, delta)
        _, hi = keep_probability(scale, least)
        if n * hi <= Decimal(delta.numerator) / Decimal(delta.denominator):
            assert tau <= least
        else:
            assert tau > least
            raised += 1
    assert raised == 64


def test_the_checker_counts_the_groups_of_both_substituted_units() -> None:
    """Under substitution 2G groups can hold one unit in one neighbour only (G that vanish, G that
    appear): a threshold computed for G of them is refused."""
    plan = plan_for(Fraction(1), Fraction(1, 10**6), 2, Neighbouring.SUBSTITUTE)
    sel = plan.selection
    assert sel is not None
    lap = sel.release.mechanism
    assert isinstance(lap, Laplace)
    half = selection_threshold(lap.scale, 2, sel.release.cost.delta)
    assert half < sel.threshold
    tampered = dataclasses.replace(plan, selection=dataclasses.replace(sel, threshold=half))
    with pytest.raises(InternalError, match="selection threshold"):
        check_plan(tampered)


# ---------------------------------------------------------------------------------------------
# Propose-test-release's test uses the same law: d + Z, Z discrete Laplace of scale 1/ε_t.

PTR_CASES = [(Fraction(e), Fraction(Decimal(d))) for e in EPSILONS for d in DELTAS]


def ptr_plan(epsilon: Fraction, delta: Fraction) -> StatPlan:
    """The planner's PTR calibration of an ungrouped AVG (``planning/methods.py``)."""
    budget = Budget(
        epsilon=epsilon,
        delta=delta,
        groups=1,
        rows=1,
        total_rows=1,
        neighbouring=Neighbouring.ADD_REMOVE,
        reference_rows=1000,
        public_size=True,
        gaussian=False,
    )
    agg = Aggregate(AggKind.AVG, exp.column("x"))
    opts = MethodOptions(ptr_bound=Fraction(1, 100))
    return stat_plan(
        Method.PTR, agg, Interval(Fraction(0), Fraction(1)), budget, opts, name="x", bounded=True
    )


@pytest.mark.parametrize(
    "case", PTR_CASES, ids=[f"eps{float(e):g}-delta{float(d):g}" for e, d in PTR_CASES]
)
def test_ptr_passes_a_dataset_at_distance_zero_with_probability_at_most_delta(
    case: tuple[Fraction, Fraction],
) -> None:
    """The test passes when d + Z > τ: at d = 0 that is Z ≥ τ + 1, summed from the pmf here;
    at most δ, and τ is the smallest such integer (one lower would exceed δ)."""
    epsilon, delta = case
    plan = ptr_plan(epsilon, delta)
    assert plan.test_scale == 2 / epsilon  # ε_t = ε/2
    tau = Fraction(plan.threshold)
    assert tau.denominator == 1
    budget = Decimal(delta.numerator) / Decimal(delta.denominator)
    _, hi = keep_probability(plan.test_scale, int(tau) + 1)
    assert hi <= budget, f"P = {hi:.6g} > δ"
    lo, _ = keep_probability(plan.test_scale, int(tau))
    assert lo > budget, f"τ − 1 passes with P = {lo:.6g} ≤ δ: τ is not the smallest"


PTR_SCHEMA = """
version: 1
dataset: shop
privacy:
  epsilon: 1
  delta: 1.0e-6
tables:
  orders:
    private: true
    privacy_unit: customer
    max_rows_per_unit: 1
    columns:
      customer: {type: integer}
      amount: {type: float, lower: 0, upper: 1}
"""


def test_the_plan_checker_refuses_a_lower_ptr_threshold() -> None:
    """The real planner's PTR plan passes the independent plan checker; the same plan with its
    threshold one lower (a test that passes a distance-0 dataset more often than δ) does not."""
    catalog = parse_catalog(PTR_SCHEMA)
    sql = "SELECT /*+ dpproxy mechanism=ptr ptr_bound=0.01 */ AVG(amount) FROM orders"
    plan = plan_query(
        validate(parse(sql), catalog, sql),
        catalog.policy,
        epsilon=Fraction(1),
        delta=Fraction(1, 10**6),
        options=parse_hints(sql),
    )
    check_plan(plan)
    agg = plan.aggregates[0]
    assert agg.stat is not None and agg.stat.method is Method.PTR
    lowered = dataclasses.replace(agg.stat, threshold=agg.stat.threshold - 1)
    bad = dataclasses.replace(plan, aggregates=(dataclasses.replace(agg, stat=lowered),))
    with pytest.raises(InternalError, match="ptr test"):
        check_plan(bad)
