"""The second computation of every privacy-relevant number in a plan.

The planner calibrates mechanisms from sensitivities; this module recomputes each sensitivity
from the plan's own stability, relation and value intervals, each mechanism's cost from its
noise scale, and their composition, and refuses the plan (XX000) if any figure disagrees with
what the planner wrote or exceeds the request. (The sensitivity function is memoised, so this
catches a planner that paired a release with the wrong inputs; the formulas themselves are
checked against brute force in ``tests/property/``.)
"""

from __future__ import annotations

from fractions import Fraction

from dpproxy.analysis.local import row_radius, score_sensitivity
from dpproxy.analysis.sensitivity import PrimitiveKind, sensitivity
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace
from dpproxy.planning.builder import exact_sum, total_cost
from dpproxy.planning.plan import Method, QueryPlan, StatPlan
from dpproxy.values import Cost, at_most, exp_down, float_up, ln_down, ln_up


def check_plan(plan: QueryPlan) -> None:
    """Raise :class:`InternalError` unless the plan's privacy arithmetic holds."""
    grouped = bool(plan.query.keys)
    for r in plan.releases:
        p = r.primitive
        sens = sensitivity(p.kind, plan.stability, plan.neighbouring, p.values, grouped=grouped)
        if sens != r.sensitivity:
            raise InternalError("plan check failed: sensitivity", log_detail=repr((sens, r)))
        m = r.mechanism
        if isinstance(m, Laplace):
            if m.epsilon(sens) != r.cost.epsilon or r.cost.delta or r.cost.rho:
                raise InternalError("plan check failed: Laplace cost", log_detail=repr(r))
        elif isinstance(m, Gaussian):
            if m.rho(sens) != r.cost.rho or r.cost.epsilon:
                raise InternalError("plan check failed: Gaussian cost", log_detail=repr(r))
    for st in plan.stats:
        _check_stat(st, plan)
    delta_gauss = plan.cost.delta - (plan.selection.release.cost.delta if plan.selection else 0)
    delta_gauss -= exact_sum(st.cost.delta for st in plan.stats)
    recomputed = total_cost(plan.releases, plan.selection, delta_gauss, plan.stats)
    if plan.truncation is not None and plan.truncation.epsilon:
        recomputed = recomputed + Cost(plan.truncation.epsilon)
    if recomputed != plan.cost or not plan.requested.covers(recomputed):
        raise InternalError("plan check failed: composition", log_detail=repr(plan.cost))
    if plan.selection is not None:
        _check_selection(plan)


def _check_selection(plan: QueryPlan) -> None:
    """The unit counts' calibration, and the threshold against the law of the noise drawn:
    a group of one unit passes with probability p^τ/(1 + p), p = e^{-1/s}, for discrete Laplace
    noise at the float scale s the sampler uses; N such groups (G, or 2G under substitution)
    must together stay within δ: τ/s ≥ ln(N/δ) − ln(1 + p), with outward rounding."""
    sel = plan.selection
    assert sel is not None
    if sel.shared:
        _check_shared_selection(plan)
        return
    r = sel.release
    sens = sensitivity(PrimitiveKind.UNITS, plan.stability, plan.neighbouring, grouped=True)
    lap = r.mechanism
    if r.primitive.kind is not PrimitiveKind.UNITS or not r.integer or sens != r.sensitivity:
        raise InternalError("plan check failed: selection counts", log_detail=repr(r))
    if not isinstance(lap, Laplace) or lap.scale <= 0 or lap.epsilon(sens) != r.cost.epsilon:
        raise InternalError("plan check failed: selection noise", log_detail=repr(r))
    dlt = r.cost.delta
    tau = sel.threshold
    if not 0 < dlt < 1 or r.cost.rho or Fraction(tau).denominator != 1 or tau < 0:
        raise InternalError("plan check failed: selection threshold", log_detail=repr(sel))
    groups = plan.stability.groups * (2 if plan.neighbouring is Neighbouring.SUBSTITUTE else 1)
    s = Fraction(float_up(lap.scale))  # what OpenDP draws with (mechanisms/noise.py)
    if Fraction(tau) / s < ln_up(Fraction(groups) / dlt) - ln_down(1 + exp_down(-1 / s)):
        raise InternalError("plan check failed: selection threshold", log_detail=repr(sel))


def _check_shared_selection(plan: QueryPlan) -> None:
    """A threshold on a released count (``planning/selfselect.py``): add/remove, one group per
    unit, the count's own release, and p^(τ − R + 1)/(1 + p) ≤ δ at the drawn scale."""
    sel = plan.selection
    assert sel is not None
    r = sel.release
    mine = [x for x in plan.releases if x.primitive.name == r.primitive.name]

    def fail() -> None:
        raise InternalError("plan check failed: shared selection", log_detail=repr(sel))

    if plan.neighbouring is not Neighbouring.ADD_REMOVE or plan.stability.groups != 1:
        fail()
    if len(mine) != 1 or mine[0].mechanism != r.mechanism or mine[0].sensitivity != r.sensitivity:
        fail()
    lap = r.mechanism
    if not isinstance(lap, Laplace) or not r.integer or r.cost.epsilon or r.cost.rho:
        fail()
    assert isinstance(lap, Laplace)
    dlt = r.cost.delta
    least = sel.threshold - plan.stability.rows_per_group + 1  # Z ≥ least keeps R rows
    if not 0 < dlt < 1 or lap.scale <= 0 or least < 0:
        fail()
    s = Fraction(float_up(lap.scale))
    if Fraction(least) / s < ln_up(1 / dlt) - ln_down(1 + exp_down(-1 / s)):
        fail()


def _check_stat(st: StatPlan, plan: QueryPlan) -> None:
    """Each method's calibration against its privacy argument (``planning/methods.py``)."""

    def fail(what: str) -> None:
        raise InternalError(f"plan check failed: {st.method.value} {what}", log_detail=repr(st))

    eps, dlt = st.epsilon, st.delta
    if eps.numerator <= 0 or st.groups < 1 or st.rows < 1:  # ε's sign: its numerator's
        fail("budget")
    grouped = bool(plan.query.keys)
    stab = plan.stability
    if st.rows != (stab.rows_per_group if grouped else stab.rows):
        fail("rows per unit")
    if st.method is not Method.JOINT and st.groups != (stab.groups if grouped else 1):
        fail("groups per unit")
    if st.method is Method.JOINT:
        sens = stab.rows * (2 if st.neighbouring is Neighbouring.SUBSTITUTE else 1)
        if st.groups != 1 or not at_most(sens, st.scale * eps) or dlt:
            fail("scale")
    elif st.method is Method.PTR:
        if dlt <= 0 or st.bound is None or st.bound <= 0:
            fail("δ or bound")
        assert st.bound is not None
        eps_t = 1 / st.test_scale
        eps_r = st.bound / st.scale
        if eps_t + eps_r > eps or Fraction(st.threshold).denominator != 1:
            fail("test")
        # passes iff d + Z ≥ τ + 1 with Z discrete Laplace at the drawn scale: p^(τ+1)/(1+p) ≤ δ
        s = Fraction(float_up(st.test_scale))
        if Fraction(st.threshold + 1) / s < ln_up(1 / dlt) - ln_down(1 + exp_down(-1 / s)):
            fail("test")
    elif st.method is Method.SMOOTH:
        if dlt <= 0 or st.beta <= 0 or st.beta * 2 * ln_down(2 / dlt) > eps:
            fail("β")
        if st.scale * eps < 2:
            fail("scale")
    elif st.method is Method.EXPONENTIAL:
        if st.scale * eps < 2 * score_sensitivity(st.neighbouring, st.rows, st.q) or dlt:
            fail("scale")
    elif st.method is Method.SAA:
        out = st.output
        if out is None or out.lo is None or out.hi is None or st.chunks < 2 or dlt:
            fail("range")
        assert out is not None and out.lo is not None and out.hi is not None
        if st.scale * st.chunks * eps < out.hi - out.lo:
            fail("scale")
        if grouped and not st.bounded and plan.needs_bounding:
            fail("grouped chunks need the bounded relation")
    else:
        fail("unknown method")
    if (
        st.method in (Method.PTR, Method.SMOOTH)
        and st.kind.quantile
        and st.window < (st.kmax + 1) * row_radius(st.neighbouring, st.rows)
    ):
        fail("window")
