"""The choice of a plan per aggregate and the budget's split (``planning/planner.py``).

:func:`plan_methods` scores every candidate plan of the aggregates that have more than global
sensitivity (``planning/methods.py``), chooses one per aggregate and calibrates it at its share
of (ε, δ); :func:`derived_first` plans in one pass the COUNTs read off a JOINT mean
(``planning/derived.py``). Scores are memoised by numbers in :data:`_SCORED`.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from dpproxy.analysis.bounds import integral
from dpproxy.analysis.sensitivity import PrimitiveKind, Stability, sensitivity
from dpproxy.catalog.model import MechanismKind, Neighbouring
from dpproxy.errors import PrivacyParameterError, UnboundedColumn
from dpproxy.mechanisms.base import Gaussian, Laplace, approx_to_zcdp
from dpproxy.planning import derived
from dpproxy.planning.builder import Memo, PrimitiveBuilder, exact_sum, release, unbounded_hint
from dpproxy.planning.methods import (
    REFERENCE_ROWS,
    SAA_ARGUMENT_LIMIT,
    Budget,
    MethodOptions,
    candidates,
    choose,
    methods_for,
    stat_plan,
    weight,
)
from dpproxy.planning.plan import AggregatePlan, Candidate, Method, Primitive, Release, StatPlan
from dpproxy.sql.validate import AggKind, Aggregate, ValidQuery
from dpproxy.values import Interval, at_most


def reference_rows(query: ValidQuery) -> tuple[int, bool]:
    """The size predictions use, per group, and whether it is the schema's public size."""
    public = query.table.public_rows
    if public is None or query.filters:
        return REFERENCE_ROWS, False
    if not query.keys:
        return public, True
    if query.public_keys:
        groups = 1
        for k in query.keys:
            assert k.domain is not None
            groups *= max(len(k.domain), 1)
        return max(public // groups, 1), True
    return REFERENCE_ROWS, False


# What :func:`plan_methods` returns: the aggregates' plans, the primitives, their releases,
# the methods' statistics and the δ of the Gaussian releases.
PlannedMethods = tuple[
    tuple[AggregatePlan, ...], list[Primitive], list[Release], tuple[StatPlan, ...], Fraction
]


def plan_methods(
    query: ValidQuery,
    stab: Stability,
    rel: Neighbouring,
    mech: MechanismKind,
    eps_agg: Fraction,
    delta_agg: Fraction,
    opts: MethodOptions,
    better: derived.Split | None = None,
    memo: Memo | None = None,
) -> PlannedMethods:
    """Choose a method per aggregate and calibrate it; the budget is split by weight, or by
    ``better`` (``planning/derived.py``: COUNTs read off a JOINT mean get no share).

    ``memo``: what an earlier call of the same :func:`plan_query` computed (:class:`Memo`)."""
    memo = memo or Memo(query.table)
    grouped = bool(query.keys)
    weights = [weight(a.kind) for a in query.aggregates]
    total_weight = sum(weights)
    reads = better.derived if better else {}
    n_ref, public = reference_rows(query)
    builder = PrimitiveBuilder(query, memo)
    gaussian = mech is MechanismKind.GAUSSIAN
    aggs: list[AggregatePlan] = []
    stats: list[StatPlan] = []
    released: dict[str, tuple[Fraction, Fraction]] = {}  # primitive → (ε share, δ share)
    for i, agg in enumerate(query.aggregates):
        if i in reads:
            aggs.append(AggregatePlan(agg.kind, (), None))  # filled in below
            continue
        epsilon, delta = _shares(eps_agg, delta_agg, better, i, weights[i], total_weight)
        if methods_of(agg) == (Method.GS,):  # its (ε, δ) is all it reads of a Budget
            aggs.append(_share_of(builder.aggregate(i), epsilon, delta, released))
            continue
        budget = _budget(query, i, stab, rel, epsilon, delta, n_ref, public, gaussian, memo)
        bounds = memo.bounds(agg.measure) if agg.measure is not None else None
        cands, method, reason = _choose(query, i, budget, bounds, stab, rel, opts, memo)
        if method is Method.GS:
            plan = replace(builder.aggregate(i), candidates=cands, reason=reason)
            aggs.append(_share(plan, budget, released))
            continue
        count = total = None
        center = Fraction(0)
        if agg.kind is AggKind.AVG and method in (Method.JOINT, Method.PTR, Method.SMOOTH):
            inner = builder.aggregate(i)  # exact count and centred sum, never released
            count, total = inner.parts
            center = inner.center
        grouped_bounded = grouped or method is not Method.SAA
        stat = stat_plan(
            method,
            agg,
            bounds,
            budget,
            opts,
            name=f"__s{i}",
            bounded=grouped_bounded,
            count=count,
            total=total,
            center=center,
        )
        stats.append(stat)
        aggs.append(
            AggregatePlan(
                agg.kind,
                (stat.name,),
                bounds if bounds is not None and bounds.bounded else None,
                center,
                method,
                stat,
                cands,
                reason,
            )
        )
    for i, j in reads.items():
        aggs[i] = replace(aggs[i], derived=aggs[j].stat, reason=better.reason if better else "")
    prims = builder.primitives
    releases: list[Release] = []
    eps_gs = exact_sum(e for e, _ in released.values())
    delta_gs = exact_sum(d for _, d in released.values())
    if gaussian and released and delta_gs <= 0:
        raise PrivacyParameterError("the Gaussian mechanism needs δ > 0")
    rho_gs = approx_to_zcdp(eps_gs, delta_gs) if gaussian and released else Fraction(0)
    for prim in prims:
        if prim.name not in released:
            continue  # an exact input of a JOINT/PTR/SMOOTH release
        e, _ = released[prim.name]
        rho = rho_gs * e / eps_gs if gaussian else Fraction(0)
        releases.append(release(prim, stab, rel, mech, e, rho, grouped))
    return tuple(aggs), prims, releases, tuple(stats), (delta_gs if gaussian else Fraction(0))


def _shares(
    eps: Fraction, delta: Fraction, better: derived.Split | None, i: int, w: int, total: int
) -> tuple[Fraction, Fraction]:
    """Aggregate ``i``'s (ε, δ): ``better``'s fraction of them, or its weight ``w`` of
    ``total``. The weight's share is one Fraction per product, (ε.n·w)/(ε.d·total) normalised,
    the value of ε·Fraction(w, total) (two normalisations; δ = 0, most often, is 0 as is)."""
    if better is not None:
        f = better.fractions[i]
        return eps * f, delta * f
    share = Fraction(eps.numerator * w, eps.denominator * total)
    if not delta:
        return share, _ZERO
    return share, Fraction(delta.numerator * w, delta.denominator * total)


_ZERO = Fraction(0)


def _budget(
    query: ValidQuery,
    i: int,
    stab: Stability,
    rel: Neighbouring,
    epsilon: Fraction,
    delta: Fraction,
    n_ref: int,
    public: bool,
    gaussian: bool,
    memo: Memo,
) -> Budget:
    """Aggregate ``i``'s share (ε, δ) of the budget, with what its candidates read."""
    agg = query.aggregates[i]
    grouped = bool(query.keys)
    return Budget(
        epsilon=epsilon,
        delta=delta,
        groups=stab.groups if grouped else 1,
        rows=stab.rows_per_group if grouped else stab.rows,
        total_rows=stab.rows,
        neighbouring=rel,
        reference_rows=n_ref,
        public_size=public,
        gaussian=gaussian,
        integral=agg.measure is not None and integral(agg.measure, query.table),
        arguments_tame=_tame(agg, memo),
    )


def _choose(
    query: ValidQuery,
    i: int,
    budget: Budget,
    bounds: Interval | None,
    stab: Stability,
    rel: Neighbouring,
    opts: MethodOptions,
    memo: Memo,
) -> tuple[tuple[Candidate, ...], Method, str]:
    """The candidates of aggregate ``i`` (not GS-only) at ``budget``, and the method chosen
    among them with the reason.

    Scoring is a pure function of numbers and flags alone (what :func:`candidates` and
    :func:`_gs_candidate` read: the aggregate's kind and fraction, its bounds, the budget,
    the options, the stability, the relation, whether the query groups), so it is memoised
    by them in :data:`_SCORED`, like ``sensitivity``: a query whose measures have the bounds
    and budget of one planned before scores nothing again (issue 21). Candidates are frozen;
    a scoring that raises is not memoised (it raises again)."""
    agg = query.aggregates[i]
    options = methods_of(agg)
    if not budget.arguments_tame:
        args = ", ".join(a.sql("postgres") for a in (agg.measure, agg.second) if a is not None)
        raise UnboundedColumn(
            f"{agg.kind.value.upper()}({args}) needs finite bounds (within ±1e100)",
            hint=unbounded_hint(query, agg.measure),
        )
    grouped = bool(query.keys)
    key = (agg.kind, agg.q, options, bounds, budget, opts, stab, rel, grouped)
    cands = _SCORED.get(key)
    if cands is None:
        cands = candidates(agg, bounds, budget, opts)
        if Method.GS in options:
            cands = tuple(
                _gs_candidate(agg, bounds, budget, stab, rel, grouped)
                if c.method is Method.GS
                else c
                for c in cands
            )
        if len(_SCORED) >= 1024:  # budgets and bounds come and go with sessions and schemas
            _SCORED.clear()
        _SCORED[key] = cands
    forced = opts.method if opts.method in options else None
    method, reason = choose(cands, forced, agg.kind)
    return cands, method, reason


_SCORED: dict[tuple[object, ...], tuple[Candidate, ...]] = {}  # _choose's memo, by numbers


def derived_first(
    query: ValidQuery,
    stab: Stability,
    rel: Neighbouring,
    mech: MechanismKind,
    eps_agg: Fraction,
    delta_agg: Fraction,
    opts: MethodOptions,
    memo: Memo,
) -> PlannedMethods | None:
    """The plan in which COUNTs are read off a JOINT mean (``planning/derived.py``), planned
    in one pass; ``None`` when the planner must take its two passes (a plan at the weights,
    then one at the split ``derived.split`` draws from it).

    Exactly what the two passes give: the split reads of the plan at the weights only whether
    each mean is JOINT there (scored here at the same budget, as that pass scores it), the
    JOINT release's sensitivity Δ_J (``stat_plan`` writes scale = Δ_J/ε, so scale·ε = Δ_J, a
    function of the stability and the relation) and each COUNT's (its ``release``'s
    ``sensitivity``, memoised); :func:`derived.split_of` computes the same split from them.
    The plan at the weights is then what the two passes keep only when the second plan has a
    mean that is not JOINT, or when planning fails: this returns ``None`` for both, and the
    two passes run as before (planning is pure; ``memo`` only holds exact values), so the
    plan, or the error, is theirs."""
    pairs = derived.derivable_counts(query)
    if not pairs:
        return None
    grouped = bool(query.keys)
    try:
        weights = [weight(a.kind) for a in query.aggregates]
        total_weight = sum(weights)
        n_ref, public = reference_rows(query)
        gaussian = mech is MechanismKind.GAUSSIAN
        joint: set[int] = set()
        for j in sorted(set(pairs.values())):
            agg = query.aggregates[j]
            share = Fraction(weights[j], total_weight)
            budget = _budget(
                query,
                j,
                stab,
                rel,
                eps_agg * share,
                delta_agg * share,
                n_ref,
                public,
                gaussian,
                memo,
            )
            if methods_of(agg) == (Method.GS,):
                continue
            bounds = memo.bounds(agg.measure) if agg.measure is not None else None
            if _choose(query, j, budget, bounds, stab, rel, opts, memo)[1] is Method.JOINT:
                joint.add(j)
        builder = PrimitiveBuilder(query, memo)
        parts = {i: builder.aggregate(i).parts[0] for i, j in pairs.items() if j in joint}
        joint_sens = Fraction(stab.rows * (2 if rel is Neighbouring.SUBSTITUTE else 1))
        count_sens = sensitivity(PrimitiveKind.COUNT, stab, rel, None, grouped=grouped).l1
        better = derived.split_of(
            query,
            {i: j for i, j in pairs.items() if j in joint},
            lambda j: joint_sens,
            lambda i: parts[i],
            lambda part: count_sens,
        )
        if better is None:
            return None
        again = plan_methods(query, stab, rel, mech, eps_agg, delta_agg, opts, better, memo)
    except Exception:  # the two passes raise it again, or theirs first
        return None
    if all(again[0][j].method is Method.JOINT for j in better.derived.values()):
        return again
    return None


def _share(
    plan: AggregatePlan, budget: Budget, released: dict[str, tuple[Fraction, Fraction]]
) -> AggregatePlan:
    """Add a GS aggregate's (ε, δ) share, split evenly over its parts, to their primitives."""
    return _share_of(plan, budget.epsilon, budget.delta, released)


def _share_of(
    plan: AggregatePlan,
    epsilon: Fraction,
    delta: Fraction,
    released: dict[str, tuple[Fraction, Fraction]],
) -> AggregatePlan:
    """:func:`_share` of the share (ε, δ)."""
    n = len(plan.parts)
    share = (epsilon, delta) if n == 1 else (epsilon / n, delta / n)  # exact either way
    for p in plan.parts:
        spent = released.get(p)
        released[p] = share if spent is None else (spent[0] + share[0], spent[1] + share[1])
    return plan


def _tame(agg: Aggregate, memo: Memo) -> bool:
    """Are all of the aggregate's arguments bounded within ±SAA_ARGUMENT_LIMIT?"""
    for arg in (agg.measure, agg.second):
        if arg is None:
            continue
        iv = memo.bounds(arg)
        if iv is None:
            continue  # always NULL
        if not iv.bounded or not at_most(iv.max_abs(), SAA_ARGUMENT_LIMIT):
            return False
    return True


def _gs_candidate(
    agg: Aggregate,
    bounds: Interval | None,
    budget: Budget,
    stab: Stability,
    rel: Neighbouring,
    grouped: bool,
) -> Candidate:
    """The predicted error of AVG as noisy centred sum over noisy count.

    Like every candidate's, this is the typical 95% error: with the mean near the middle of the
    bounds the count's noise hardly matters, so it is the sum's noise over n. (The error bound
    printed for the released cell is the guaranteed one, a union bound over both parts.)"""
    if bounds is None or not bounds.bounded:
        return Candidate(Method.GS, None, "", False, "the measure has no finite bounds")
    assert bounds.lo is not None and bounds.hi is not None
    half = (bounds.hi - bounds.lo) / 2
    centred = Interval(-half, half)
    s_sum = sensitivity(PrimitiveKind.SUM, stab, rel, centred, grouped=grouped)
    alpha = 0.05
    if budget.gaussian:
        rho = approx_to_zcdp(budget.epsilon, budget.delta) / 2 if budget.delta > 0 else None
        if rho is None:
            return Candidate(Method.GS, None, "", False, "the Gaussian mechanism needs δ > 0")
        c = Gaussian.calibrate(s_sum, rho).half_width(alpha)
    else:
        c = Laplace.calibrate(s_sum, budget.epsilon / 2).half_width(alpha)
    n = budget.reference_rows
    size = f" at n = {n:,}" + ("" if budget.public_size else " (reference size)")
    return Candidate(Method.GS, c / n, f"≈ ±{c:.4g}/n", True, size + ", mean mid-range")


def methods_of(agg: Aggregate) -> tuple[Method, ...]:
    """SUM(DISTINCT)/AVG(DISTINCT) have global-sensitivity plans only (``Primitive``)."""
    return (Method.GS,) if agg.distinct else methods_for(agg.kind)
