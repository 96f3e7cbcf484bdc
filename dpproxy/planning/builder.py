"""The primitives of a query's aggregates and their even releases (``planning/planner.py``).

:class:`PrimitiveBuilder` turns each aggregate into the noisy primitives the database computes
(the table in ``planning/planner.py``'s docstring), sharing identical ones; :class:`Memo` holds
what one :func:`~dpproxy.planning.planner.plan_query` would otherwise compute more than once;
:func:`even_releases` and :func:`release` calibrate primitives at a share of the budget, and
:func:`total_cost` composes what a plan releases.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from sqlglot import exp

from dpproxy.analysis.bounds import bounds_of, square
from dpproxy.analysis.sensitivity import PrimitiveKind, Stability, sensitivity
from dpproxy.catalog.model import MechanismKind, Neighbouring, Table
from dpproxy.errors import UnboundedColumn
from dpproxy.mechanisms.base import Gaussian, Laplace, approx_to_zcdp, zcdp_to_approx
from dpproxy.planning import derived
from dpproxy.planning.plan import AggregatePlan, Primitive, Release, Selection, StatPlan
from dpproxy.sql.validate import AggKind, ValidQuery
from dpproxy.values import Cost, Interval

_ZERO = Fraction(0)


def exact_sum(terms: Iterable[Fraction]) -> Fraction:
    """Σ terms (0 when none), exactly: the nonzero terms over one denominator, normalised once
    (each Fraction addition normalises its sum); a lone nonzero term is returned itself.

    >>> exact_sum([Fraction(1, 6), Fraction(0), Fraction(1, 3)]), exact_sum([])
    (Fraction(1, 2), Fraction(0, 1))
    """
    n, d, count, last = 0, 1, 0, _ZERO
    for t in terms:
        if t:
            tn, td = t.numerator, t.denominator
            n, d = (n + tn, d) if td == d else (n * td + tn * d, d * td)
            count, last = count + 1, t
    if count < 2:
        return last if type(last) is Fraction else Fraction(last)
    return Fraction(n, d)


def even_releases(
    prims: list[Primitive],
    stab: Stability,
    rel: Neighbouring,
    mech: MechanismKind,
    eps_agg: Fraction,
    delta_agg: Fraction,
    grouped: bool,
) -> list[Release]:
    """Basic composition with the budget split evenly between primitives."""
    releases: list[Release] = []
    if not prims:
        return releases
    share_eps = eps_agg / len(prims)
    rho_each = (
        approx_to_zcdp(eps_agg, delta_agg) / len(prims)
        if mech is MechanismKind.GAUSSIAN
        else Fraction(0)
    )
    for p in prims:
        releases.append(release(p, stab, rel, mech, share_eps, rho_each, grouped))
    return releases


def release(
    p: Primitive,
    stab: Stability,
    rel: Neighbouring,
    mech: MechanismKind,
    eps: Fraction,
    rho: Fraction,
    grouped: bool,
) -> Release:
    sens = sensitivity(p.kind, stab, rel, p.values, grouped=grouped)
    if mech is MechanismKind.LAPLACE:
        lap = Laplace.calibrate(sens, eps)
        return Release(p, sens, lap, Cost(lap.epsilon(sens)))
    gau = Gaussian.calibrate(sens, rho)
    return Release(p, sens, gau, Cost(Fraction(0), rho=gau.rho(sens)))


def unbounded_hint(query: ValidQuery, measure: exp.Expression | None = None) -> str:
    """What to do about an aggregate without finite bounds: a column of the schema can be
    given bounds there; a value a per-unit subquery computes can only be clamped; LENGTH of a
    text column is bounded by the column's public domain (analysis/bounds.py)."""
    if measure is not None and measure.find(exp.Length) is not None:
        return (
            "LENGTH of a text column is bounded when the schema declares the column's public "
            "domain or max_length; otherwise clamp it with LEAST(LENGTH(x), n)"
        )
    if query.per_unit is not None:
        return (
            "clamp it with LEAST(GREATEST(x, lo), hi): a value computed per unit by the "
            "subquery has no bounds in the schema"
        )
    return (
        "declare lower/upper for the column in the schema, or clamp it with "
        "LEAST(GREATEST(x, lo), hi)"
    )


def total_cost(
    releases: tuple[Release, ...],
    selection: Selection | None,
    delta_gauss: Fraction,
    stats: tuple[StatPlan, ...] = (),
) -> Cost:
    """Basic composition: Laplace ε's add; Gaussian ρ's add and convert once at ``delta_gauss``;
    every other release adds its own (ε, δ)."""
    eps = exact_sum(r.cost.epsilon for r in releases)
    rho = exact_sum(r.cost.rho for r in releases)
    cost = Cost(eps)
    if rho:
        cost = cost + Cost(zcdp_to_approx(rho, delta_gauss), delta_gauss, rho)
    for st in stats:
        cost = cost + st.cost
    if selection is not None:
        cost = cost + selection.release.cost
    return cost


class Memo:
    """What one :func:`plan_query` would otherwise compute more than once: ``bounds_of`` by
    measure node (a node of the query, unchanged while planning; kept, so that its id stays
    its own). Candidates are memoised by numbers across queries (:data:`_SCORED`)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._bounds: dict[int, tuple[exp.Expression, Interval | None]] = {}

    def bounds(self, measure: exp.Expression) -> Interval | None:
        hit = self._bounds.get(id(measure))
        if hit is None or hit[0] is not measure:
            hit = (measure, bounds_of(measure, self.table))
            self._bounds[id(measure)] = hit
        return hit[1]


class PrimitiveBuilder:
    def __init__(self, query: ValidQuery, memo: Memo | None = None) -> None:
        self.query = query
        self.primitives: list[Primitive] = []
        self.memo = memo or Memo(query.table)

    def _add(self, p: Primitive) -> str:
        for q in self.primitives:
            if q.key == p.key:
                return q.name
        # ``p`` is the caller's new unnamed primitive, seen by nobody else yet: named in place
        # (dataclasses.replace would build a second one, checking every field again)
        object.__setattr__(p, "name", f"__p{len(self.primitives)}")
        self.primitives.append(p)
        return p.name

    def _count(self, measure: exp.Expression) -> Primitive:
        """COUNT(measure), or COUNT(*) when the database declares the measure's column NOT
        NULL (``derived.declared_not_null``): the same number over the same rows, so the
        counts of several such columns, of an AVG and a VAR, and a COUNT(*) beside them are
        one primitive, computed once and released once, with the share of ε the query's split
        gives it (fewer primitives: a larger share each). Its sensitivity is the same (one row
        per row a unit may hold), and reading one release several times is post-processing."""
        if derived.declared_not_null(self.query, measure):
            return Primitive("", PrimitiveKind.COUNT, None)
        return Primitive("", PrimitiveKind.COUNT, measure)

    def _bounds(self, measure: exp.Expression, what: str) -> Interval:
        iv = self.memo.bounds(measure)
        if iv is None:
            return Interval.point(0)
        if not iv.bounded:
            raise UnboundedColumn(
                f"{what}({measure.sql('postgres')}) has no finite bounds",
                hint=unbounded_hint(self.query),
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
            return AggregatePlan(k, (self._add(self._count(agg.measure)),), None)
        if k is AggKind.COUNT_DISTINCT:
            return AggregatePlan(
                k, (self._add(Primitive("", PrimitiveKind.DISTINCT, agg.measure)),), None
            )
        iv = self._bounds(agg.measure, "SUM" if k is AggKind.SUM else k.value.upper())
        if k is AggKind.SUM:
            p = Primitive("", PrimitiveKind.SUM, agg.measure, iv, distinct=agg.distinct)
            return AggregatePlan(k, (self._add(p),), iv)
        assert iv.lo is not None and iv.hi is not None
        center = (iv.lo + iv.hi) / 2
        centred = iv - Interval.point(center)
        if agg.distinct:  # AVG(DISTINCT): c + Σ distinct q / #distinct q, the same q both times
            n = Primitive("", PrimitiveKind.DISTINCT, agg.measure, centred, center, distinct=True)
            s = Primitive("", PrimitiveKind.SUM, agg.measure, centred, center, distinct=True)
            return AggregatePlan(k, (self._add(n), self._add(s)), iv, center)
        count = self._add(self._count(agg.measure))
        s1 = self._add(Primitive("", PrimitiveKind.SUM, agg.measure, centred, center))
        if k is AggKind.AVG:
            return AggregatePlan(k, (count, s1), iv, center)
        s2 = self._add(
            Primitive("", PrimitiveKind.SUM, agg.measure, square(centred), center, squared=True)
        )
        return AggregatePlan(k, (count, s1, s2), iv, center)
