"""ValidQuery + policy + requested (ε, δ) → a frozen :class:`QueryPlan`.

Every SQL aggregate becomes noisy *primitives* (per-group counts and sums) that the database
computes exactly on the contribution-bounded relation:

====================  =============================================================
aggregate             primitives (post-processing in ``release/postprocess.py``)
====================  =============================================================
COUNT(*), COUNT(x)    a count of rows (of non-NULL x)
COUNT(DISTINCT unit)  a count of privacy units
SUM(x)                a sum of x clamped to its interval
AVG(x)                a count of x and a sum of x − c (c the middle of x's interval)
VAR/STDDEV(x)         a count of x, a sum of x − c and a sum of (x − c)²
====================  =============================================================

Identical primitives are shared between aggregates. The budget is composed basically: under
Laplace the per-query ε (less the partition-selection share, if any) is split equally between
primitives; under Gaussian it is converted to a zCDP ρ, split equally, and converted back.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from sqlglot import exp

from dpproxy.analysis.bounds import bounds_of, square
from dpproxy.analysis.sensitivity import PrimitiveKind, Stability, sensitivity, stability
from dpproxy.catalog.model import MechanismKind, Neighbouring, PrivacyPolicy
from dpproxy.errors import PrivacyParameterError, UnboundedColumn
from dpproxy.mechanisms.base import (
    Gaussian,
    Laplace,
    approx_to_zcdp,
    zcdp_to_approx,
)
from dpproxy.planning.plan import AggregatePlan, Primitive, QueryPlan, Release, Selection
from dpproxy.sql.validate import AggKind, ValidQuery
from dpproxy.values import Cost, Interval, ln_up


def plan_query(
    query: ValidQuery,
    policy: PrivacyPolicy,
    *,
    epsilon: Fraction | None = None,
    delta: Fraction | None = None,
    mechanism: MechanismKind | None = None,
) -> QueryPlan:
    """Plan a validated query; see the module docstring."""
    eps = policy.epsilon if epsilon is None else epsilon
    dlt = policy.delta if delta is None else delta
    mech = mechanism or policy.mechanism
    if eps <= 0:
        raise PrivacyParameterError("ε must be positive")
    if not 0 <= dlt < 1:
        raise PrivacyParameterError("δ must be in [0, 1)")
    grouped = bool(query.keys)
    table = query.table
    # A unique unit column (proved by a backend constraint) means one row per unit already.
    stab = Stability(1, 1, 1) if table.unit_is_unique else stability(table.bound, grouped=grouped)
    rel = policy.neighbouring
    builder = _PrimitiveBuilder(query)
    aggs = tuple(builder.aggregate(i) for i in range(len(query.aggregates)))
    prims = builder.primitives
    private_keys = grouped and not query.public_keys

    eps_agg, delta_agg = eps, dlt
    selection_prim = None
    if private_keys:
        if dlt == 0:
            raise PrivacyParameterError(
                "grouping by columns without a public domain needs δ > 0 (partition selection)",
                hint="give the GROUP BY columns a domain in the schema, or set a positive delta",
            )
        share = policy.selection_share if prims else Fraction(1)
        eps_sel = eps * share
        eps_agg = eps - eps_sel
        delta_sel = dlt / 2 if mech is MechanismKind.GAUSSIAN and prims else dlt
        delta_agg = dlt - delta_sel
        selection_prim = Primitive("__units", PrimitiveKind.UNITS, None)
    if mech is MechanismKind.GAUSSIAN and prims and delta_agg <= 0:
        raise PrivacyParameterError("the Gaussian mechanism needs δ > 0")

    releases: list[Release] = []
    if prims:
        share_eps = eps_agg / len(prims)
        rho_each = (
            approx_to_zcdp(eps_agg, delta_agg) / len(prims)
            if mech is MechanismKind.GAUSSIAN
            else Fraction(0)
        )
        for p in prims:
            sens = sensitivity(p.kind, stab, rel, p.values, grouped=grouped)
            if mech is MechanismKind.LAPLACE:
                lap = Laplace.calibrate(sens, share_eps)
                releases.append(Release(p, sens, lap, Cost(lap.epsilon(sens))))
            else:
                gau = Gaussian.calibrate(sens, rho_each)
                releases.append(Release(p, sens, gau, Cost(Fraction(0), rho=gau.rho(sens))))

    selection = None
    if selection_prim is not None:
        sens = sensitivity(PrimitiveKind.UNITS, stab, rel, grouped=True)
        lap = Laplace.calibrate(sens, eps_sel)
        groups = stab.groups
        ratio = Fraction(groups, 1) / (2 * delta_sel)
        if rel is Neighbouring.SUBSTITUTE:
            ratio = Fraction(groups, 1) / delta_sel
        threshold = 1 + lap.scale * ln_up(ratio)
        selection = Selection(
            Release(selection_prim, sens, lap, Cost(lap.epsilon(sens), delta_sel)), threshold
        )
    cost = total_cost(tuple(releases), selection, delta_agg)
    return QueryPlan(
        query=query,
        neighbouring=rel,
        stability=stab,
        needs_bounding=not table.unit_is_unique,
        primitives=tuple(prims) + ((selection_prim,) if selection_prim is not None else ()),
        releases=tuple(releases),
        selection=selection,
        aggregates=aggs,
        requested=Cost(eps, dlt),
        cost=cost,
    )


def total_cost(
    releases: tuple[Release, ...], selection: Selection | None, delta_gauss: Fraction
) -> Cost:
    """Basic composition: Laplace ε's add; Gaussian ρ's add and convert once at ``delta_gauss``."""
    eps = sum((r.cost.epsilon for r in releases), Fraction(0))
    rho = sum((r.cost.rho for r in releases), Fraction(0))
    cost = Cost(eps)
    if rho:
        cost = cost + Cost(zcdp_to_approx(rho, delta_gauss), delta_gauss, rho)
    if selection is not None:
        cost = cost + selection.release.cost
    return cost


class _PrimitiveBuilder:
    def __init__(self, query: ValidQuery) -> None:
        self.query = query
        self.primitives: list[Primitive] = []

    def _add(self, p: Primitive) -> str:
        for q in self.primitives:
            if q.key == p.key:
                return q.name
        p = replace(p, name=f"__p{len(self.primitives)}")
        self.primitives.append(p)
        return p.name

    def _bounds(self, measure: exp.Expression, what: str) -> Interval:
        iv = bounds_of(measure, self.query.table)
        if iv is None:
            return Interval.point(0)
        if not iv.bounded:
            raise UnboundedColumn(
                f"{what}({measure.sql('postgres')}) has no finite bounds",
                hint="declare lower/upper for the column in the schema, or clamp it with "
                "LEAST(GREATEST(x, lo), hi)",
            )
        return iv

    def aggregate(self, i: int) -> AggregatePlan:
        agg = self.query.aggregates[i]
        k = agg.kind
        if k is AggKind.COUNT_STAR:
            return AggregatePlan(k, (self._add(Primitive("", PrimitiveKind.COUNT, None)),), None)
        if k is AggKind.COUNT_UNITS:
            return AggregatePlan(k, (self._add(Primitive("", PrimitiveKind.UNITS, None)),), None)
        assert agg.measure is not None
        if k is AggKind.COUNT:
            return AggregatePlan(
                k, (self._add(Primitive("", PrimitiveKind.COUNT, agg.measure)),), None
            )
        iv = self._bounds(agg.measure, "SUM" if k is AggKind.SUM else k.value.upper())
        if k is AggKind.SUM:
            p = Primitive("", PrimitiveKind.SUM, agg.measure, iv)
            return AggregatePlan(k, (self._add(p),), iv)
        assert iv.lo is not None and iv.hi is not None
        center = (iv.lo + iv.hi) / 2
        count = self._add(Primitive("", PrimitiveKind.COUNT, agg.measure))
        centred = iv - Interval.point(center)
        s1 = self._add(Primitive("", PrimitiveKind.SUM, agg.measure, centred, center))
        if k is AggKind.AVG:
            return AggregatePlan(k, (count, s1), iv, center)
        s2 = self._add(
            Primitive("", PrimitiveKind.SUM, agg.measure, square(centred), center, squared=True)
        )
        return AggregatePlan(k, (count, s1, s2), iv, center)
