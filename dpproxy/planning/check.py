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
from dpproxy.analysis.sensitivity import sensitivity
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace
from dpproxy.planning.plan import Method, QueryPlan, StatPlan
from dpproxy.planning.planner import total_cost
from dpproxy.values import Cost, ln_down


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
    delta_gauss -= sum((st.cost.delta for st in plan.stats), Fraction(0))
    recomputed = total_cost(plan.releases, plan.selection, delta_gauss, plan.stats)
    if plan.truncation is not None and plan.truncation.epsilon:
        recomputed = recomputed + Cost(plan.truncation.epsilon)
    if recomputed != plan.cost or not plan.requested.covers(recomputed):
        raise InternalError("plan check failed: composition", log_detail=repr(plan.cost))
    if plan.selection is not None:
        sel = plan.selection
        lap = sel.release.mechanism
        assert isinstance(lap, Laplace)
        groups = plan.stability.groups
        # P(new group released) summed over its groups must not exceed δ:
        # G · ½ · exp(-(τ - 1)/b) ≤ δ  ⇔  (τ - 1)/b ≥ ln(G / (2δ)).
        bound = Fraction(groups, 1) / (2 * sel.release.cost.delta)
        if lap.scale == 0 or (sel.threshold - 1) / lap.scale < ln_down(bound):
            raise InternalError("plan check failed: selection threshold")


def _check_stat(st: StatPlan, plan: QueryPlan) -> None:
    """Each method's calibration against its privacy argument (``planning/methods.py``)."""

    def fail(what: str) -> None:
        raise InternalError(f"plan check failed: {st.method.value} {what}", log_detail=repr(st))

    eps, dlt = st.epsilon, st.delta
    if eps <= 0 or st.groups < 1 or st.rows < 1:
        fail("budget")
    grouped = bool(plan.query.keys)
    stab = plan.stability
    if st.rows != (stab.rows_per_group if grouped else stab.rows):
        fail("rows per unit")
    if st.method is not Method.JOINT and st.groups != (stab.groups if grouped else 1):
        fail("groups per unit")
    if st.method is Method.JOINT:
        sens = stab.rows * (2 if st.neighbouring is Neighbouring.SUBSTITUTE else 1)
        if st.groups != 1 or st.scale * eps < sens or dlt:
            fail("scale")
    elif st.method is Method.PTR:
        if dlt <= 0 or st.bound is None or st.bound <= 0:
            fail("δ or bound")
        assert st.bound is not None
        eps_t = 1 / st.test_scale
        eps_r = st.bound / st.scale
        if eps_t + eps_r > eps or st.threshold * eps_t < ln_down(1 / (2 * dlt)):
            fail("test")
    elif st.method is Method.SMOOTH:
        if dlt <= 0 or st.beta <= 0 or st.beta * 2 * ln_down(2 / dlt) > eps:
            fail("β")
        if st.scale * eps < 2:
            fail("scale")
    elif st.method is Method.EXPONENTIAL:
        if st.scale * eps < 2 * score_sensitivity(st.neighbouring, st.rows) or dlt:
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
