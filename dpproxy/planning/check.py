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

from dpproxy.analysis.sensitivity import sensitivity
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import total_cost
from dpproxy.values import ln_down


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
    delta_gauss = plan.cost.delta - (plan.selection.release.cost.delta if plan.selection else 0)
    recomputed = total_cost(plan.releases, plan.selection, delta_gauss)
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
