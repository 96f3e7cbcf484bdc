r"""ValidQuery + policy + requested (ε, δ) → a frozen :class:`QueryPlan`.

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

AVG, order statistics (MEDIAN, PERCENTILE_CONT/DISC, MIN, MAX) and statistics without a usable
sensitivity (CORR, COVAR, REGR) have other plans too (``planning/methods.py``: joint release,
propose-test-release, smooth sensitivity, the exponential mechanism, sample-and-aggregate). When
a query has such an aggregate, each aggregate gets a share of (ε, δ) in proportion to the number
of primitives its GS plan would use (:func:`methods.weight`), its candidates' errors are
predicted, and the lowest wins (or the forced one). GS aggregates then release their
primitives with their shares; the others are calibrated as :class:`StatPlan`\ s.

No budget is spent on estimating the data's size to choose. For AVG every candidate's predicted
error but SAA's (never chosen automatically) scales as 1/n, so their ranking is the same at
every size; n — the schema's public size, or a reference size — only sets the figures
``explain`` shows and PTR's automatic bound. For order statistics over a real-valued range the
exponential mechanism's prediction adds half a cell's width, so there the reference size can
decide between it and smooth sensitivity; declaring ``public_rows`` makes that choice exact.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

from sqlglot import exp

from dpproxy.analysis.bounds import bounds_of, integral, square
from dpproxy.analysis.sensitivity import PrimitiveKind, Stability, sensitivity, stability
from dpproxy.catalog.model import (
    ContributionBound,
    MechanismKind,
    Neighbouring,
    PrivacyPolicy,
    Table,
)
from dpproxy.errors import (
    InvalidParameter,
    PrivacyParameterError,
    UnboundedColumn,
    UnsupportedQuery,
)
from dpproxy.mechanisms.base import (
    Gaussian,
    Laplace,
    approx_to_zcdp,
    zcdp_to_approx,
)
from dpproxy.mechanisms.selection import exclusive_groups, selection_threshold
from dpproxy.planning import derived, selfselect
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
from dpproxy.planning.plan import (
    AggregatePlan,
    Candidate,
    Method,
    Primitive,
    QueryPlan,
    Release,
    Selection,
    StatPlan,
)
from dpproxy.sql.validate import AggKind, Aggregate, ValidQuery
from dpproxy.values import Cost, Interval, check_privacy_parameters

if TYPE_CHECKING:  # imported where a bound is derived: a declared one needs no Truncation
    from dpproxy.planning.truncation import Truncation


def plan_query(
    query: ValidQuery,
    policy: PrivacyPolicy,
    *,
    epsilon: Fraction | None = None,
    delta: Fraction | None = None,
    mechanism: MechanismKind | None = None,
    options: MethodOptions | None = None,
    chosen_rows: int | None = None,
    reused: bool = False,
) -> QueryPlan:
    """Plan a validated query; see the module docstring.

    ``chosen_rows`` is the bound on rows per unit the engine drew with DP
    (``planning/truncation.py``) for a query that needs one; without it such a plan is
    calibrated at the largest candidate, which is what explain shows."""
    eps = policy.epsilon if epsilon is None else epsilon
    dlt = policy.delta if delta is None else delta
    mech = mechanism or policy.mechanism
    opts = options or MethodOptions()
    check_privacy_parameters(eps, dlt)
    if query.source is not None and query.source.sides is not None:
        truncation = None  # set below: the join's stability, not a bound per unit
    else:
        query, truncation = _truncation(query, policy, eps, opts, chosen_rows, reused)
    if truncation is not None and truncation.epsilon:
        eps = eps - truncation.epsilon
    grouped = bool(query.keys)
    table = query.table
    two_units = query.source is not None and query.source.sides is not None
    if two_units:
        stab, truncation = _two_units(query, policy, opts)
        opts = replace(opts, method=Method.GS)
    # A unique unit column (proved by a backend constraint) means one row per unit already.
    elif table.unit_is_unique:
        stab = Stability(1, 1, 1)
    else:
        stab = stability(table.bound, grouped=grouped)
    rel = policy.neighbouring
    kinds = [a.kind for a in query.aggregates]
    gs_only = all(_methods(a) == (Method.GS,) for a in query.aggregates)
    if opts.method is not None and opts.method is not Method.GS:
        if not any(opts.method in _methods(a) for a in query.aggregates):
            raise InvalidParameter(
                f"no aggregate of this query can use the {opts.method.value} plan",
                hint="gs, joint, ptr, smooth and saa answer AVG; exponential, ptr, smooth and "
                "saa answer MEDIAN and percentiles; saa answers CORR, COVAR and REGR",
            )
    private_keys = grouped and not query.public_keys
    shared: Primitive | None = None  # a released count partition selection thresholds
    memo = _Memo(table)

    eps_agg, delta_agg = eps, dlt
    eps_sel = delta_sel = Fraction(0)
    if private_keys:
        if dlt == 0:
            raise PrivacyParameterError(
                "grouping by columns without a public domain needs δ > 0 (partition selection)",
                hint="give the GROUP BY columns a domain in the schema, or set a positive delta",
            )
        share = policy.selection_share if kinds else Fraction(1)
        eps_sel = eps * share
        eps_agg = eps - eps_sel
        delta_sel = dlt / 2 if (mech is MechanismKind.GAUSSIAN or not gs_only) and kinds else dlt
        delta_agg = dlt - delta_sel
        if gs_only and mech is MechanismKind.LAPLACE and kinds:
            probe = _PrimitiveBuilder(query, memo)
            for i in range(len(query.aggregates)):
                probe.aggregate(i)
            shared = selfselect.shared_count(probe.primitives, stab, rel, eps, dlt, share)
            if shared is not None:  # threshold the released count at the whole ε
                eps_sel, eps_agg, delta_sel, delta_agg = Fraction(0), eps, dlt, Fraction(0)

    if gs_only:
        builder = _PrimitiveBuilder(query, memo)
        aggs = tuple(builder.aggregate(i) for i in range(len(query.aggregates)))
        prims = builder.primitives
        if mech is MechanismKind.GAUSSIAN and prims and delta_agg <= 0:
            raise PrivacyParameterError("the Gaussian mechanism needs δ > 0")
        releases = _even_releases(prims, stab, rel, mech, eps_agg, delta_agg, grouped)
        stats: tuple[StatPlan, ...] = ()
        delta_gauss = delta_agg
    else:
        planned = _derived_first(query, stab, rel, mech, eps_agg, delta_agg, opts, memo)
        if planned is None:
            planned = _plan_methods(query, stab, rel, mech, eps_agg, delta_agg, opts, None, memo)
            better = derived.split(query, planned[0], planned[2])
            if better is not None:  # a COUNT read off a JOINT mean, or a better split
                again = _plan_methods(
                    query, stab, rel, mech, eps_agg, delta_agg, opts, better, memo
                )
                if all(again[0][j].method is Method.JOINT for j in better.derived.values()):
                    planned = again
        first = selfselect.count_first(query, stab, rel, share) if private_keys else None
        if first is not None and mech is MechanismKind.LAPLACE and kinds:
            # the COUNT at the selection's share, thresholded itself (planning/selfselect.py)
            alt = _plan_methods(query, stab, rel, mech, eps, delta_agg, opts, first[1], memo)
            shared = selfselect.better_than_apart(
                alt[0], alt[2], planned[0], planned[2], first[0], stab, rel, eps_sel, delta_sel
            )
            if shared is not None:
                planned, eps_sel = alt, Fraction(0)
        aggs, prims, releases, stats, delta_gauss = planned

    selection_prim = None
    selection = None
    if private_keys and shared is not None:
        counted = next(r for r in releases if r.primitive.name == shared.name)
        assert isinstance(counted.mechanism, Laplace)
        threshold = selfselect.shared_threshold(
            counted.mechanism.scale, stab.rows_per_group, delta_sel
        )
        own = Release(
            counted.primitive, counted.sensitivity, counted.mechanism, Cost(Fraction(0), delta_sel)
        )
        selection = Selection(own, threshold, shared=True)
    elif private_keys:
        selection_prim = Primitive("__units", PrimitiveKind.UNITS, None)
        sens = sensitivity(PrimitiveKind.UNITS, stab, rel, grouped=True)
        lap = Laplace.calibrate(sens, eps_sel)  # selection is always Laplace (discrete)
        exclusive = exclusive_groups(stab.groups, rel)
        threshold = selection_threshold(lap.scale, exclusive, delta_sel)
        selection = Selection(
            Release(selection_prim, sens, lap, Cost(lap.epsilon(sens), delta_sel)), threshold
        )
    cost = total_cost(tuple(releases), selection, delta_gauss, stats)
    if truncation is not None and truncation.epsilon:
        cost = cost + Cost(truncation.epsilon)
        eps = eps + truncation.epsilon
    # Contribution bounding is needed unless the unit column is unique — or unless nothing
    # reads the bounded relation (only ungrouped sample-and-aggregate, which needs no bound).
    reads_bounded = bool(prims) or any(st.bounded for st in stats) or private_keys
    return QueryPlan(
        query=query,
        neighbouring=rel,
        stability=stab,
        needs_bounding=not table.unit_is_unique and reads_bounded and not two_units,
        primitives=tuple(prims) + ((selection_prim,) if selection_prim is not None else ()),
        releases=tuple(releases),
        selection=selection,
        aggregates=aggs,
        requested=Cost(eps, dlt),
        cost=cost,
        truncation=truncation,
    )


GS_KINDS = frozenset(
    {
        AggKind.COUNT_STAR,
        AggKind.COUNT,
        AggKind.SUM,
        AggKind.AVG,
        AggKind.VAR_POP,
        AggKind.VAR_SAMP,
        AggKind.STDDEV_POP,
        AggKind.STDDEV_SAMP,
    }
)


def _two_units(
    query: ValidQuery, policy: PrivacyPolicy, opts: MethodOptions
) -> tuple[Stability, Truncation]:
    """The stability of a join between two units' rows (``sql/joins.py``: reading/002's
    T_a·S_b·M_b + T_b·S_a·M_a rows change when one unit is added or removed).

    Those rows belong to no single unit, and a unit's removal can also let rows of others in
    (DropExcess), so only what holds for any change of K rows is answered: counts and sums
    of clamped values (and AVG, VAR, STDDEV from them) with global sensitivity, under
    add/remove, and without private group keys (partition selection counts units)."""
    assert query.source is not None and query.source.sides is not None
    if policy.neighbouring is not Neighbouring.ADD_REMOVE:
        raise UnsupportedQuery(
            "a join of two people's rows is supported under add/remove neighbours only"
        )
    if query.keys and not query.public_keys:
        raise UnsupportedQuery(
            "a join of two people's rows can only be grouped by keys with a public domain",
            hint="partition selection counts people, and these rows belong to two",
        )
    for agg in query.aggregates:
        if agg.kind not in GS_KINDS or (
            opts.method is not None and opts.method not in (Method.GS,)
        ):
            raise UnsupportedQuery(
                f"{agg.kind.value.upper()} is not supported over a join of two people's rows",
                hint="COUNT, SUM, AVG, VAR and STDDEV with global sensitivity are",
            )
    join_rows = opts.join_rows or 1
    k = query.source.stability(join_rows)
    a, b = query.source.sides
    parts = []
    for side in (a, b):
        t, st = side.truncation(join_rows)
        how = "DropNonUnique" if side.unique_key else f"DropExcess({t})"
        parts.append(f"{side.description}: {how}, T = {t}, S = {st}, M = {side.rows_per_unit}")
    derivation = (
        f"{query.source.derivation}; " + "; ".join(parts) + f"; T_a·S_b·M_b + T_b·S_a·M_a = {k}"
    )
    stab = Stability(k, k, k) if query.keys else Stability(k, 1, k)
    from dpproxy.planning.truncation import Truncation

    return stab, Truncation("join", k, derivation=derivation, join_rows=join_rows)


def _bound_text(bound: ContributionBound) -> str:
    parts = []
    if bound.max_rows is not None:
        parts.append(f"max_rows={bound.max_rows}")
    if bound.max_groups is not None:
        parts.append(f"max_groups={bound.max_groups}")
        parts.append(f"max_rows_per_group={bound.max_rows_per_group}")
    return " ".join(parts)


def _truncation(
    query: ValidQuery,
    policy: PrivacyPolicy,
    eps: Fraction,
    opts: MethodOptions,
    chosen_rows: int | None,
    reused: bool = False,
) -> tuple[ValidQuery, Truncation | None]:
    """The query with the rows-per-unit bound it is planned at, and where that bound comes from.

    A hint ``max_rows`` fixes it; a declared (or join-derived) bound is used as is; otherwise
    it is chosen with DP (``planning/truncation.py``) at a share of ε."""
    table = query.table
    if not table.private:
        return query, None
    hinted = opts.max_rows is not None or opts.max_groups is not None
    if table.unit_is_unique and not hinted:
        return query, None  # a constraint proves one row per unit
    # planning/truncation.py is imported by the branches that build a Truncation: a declared
    # bound on a single table (the demo's) needs none
    if hinted:
        from dpproxy.planning.truncation import Truncation

        bound = ContributionBound(opts.max_rows, opts.max_groups, opts.max_rows_per_group)
        rows = bound.rows_total()
        assert rows is not None
        bounded = replace(table, bound=bound, unit_is_unique=False)
        return replace(query, table=bounded), Truncation(
            "hint", rows, derivation=_bound_text(bound)
        )
    elif table.bound.declared:
        if query.source is None:
            return query, None
        rows = table.bound.rows_total()
        assert rows is not None
        from dpproxy.planning.truncation import Truncation

        return query, Truncation("schema", rows, derivation=query.source.derivation)
    else:
        from dpproxy.planning.truncation import DEFAULT_CAP, Truncation, grid

        cap = opts.max_rows_cap or DEFAULT_CAP
        candidates = grid(cap)
        if chosen_rows is not None and chosen_rows not in candidates:
            raise InvalidParameter(f"{chosen_rows} is not a candidate bound")
        tau = chosen_rows if chosen_rows is not None else candidates[-1]
        truncation = Truncation(
            "dp",
            tau,
            Fraction(0) if reused and chosen_rows is not None else eps * policy.truncation_share,
            opts.coverage or policy.truncation_coverage,
            candidates,
            chosen_rows is not None,
            query.source.derivation if query.source is not None else "",
            reused and chosen_rows is not None,
        )
    bounded = replace(table, bound=ContributionBound(max_rows=tau), unit_is_unique=False)
    return replace(query, table=bounded), truncation


def _even_releases(
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
        releases.append(_release(p, stab, rel, mech, share_eps, rho_each, grouped))
    return releases


def _release(
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


# What :func:`_plan_methods` returns: the aggregates' plans, the primitives, their releases,
# the methods' statistics and the δ of the Gaussian releases.
PlannedMethods = tuple[
    tuple[AggregatePlan, ...], list[Primitive], list[Release], tuple[StatPlan, ...], Fraction
]


def _plan_methods(
    query: ValidQuery,
    stab: Stability,
    rel: Neighbouring,
    mech: MechanismKind,
    eps_agg: Fraction,
    delta_agg: Fraction,
    opts: MethodOptions,
    better: derived.Split | None = None,
    memo: _Memo | None = None,
) -> PlannedMethods:
    """Choose a method per aggregate and calibrate it; the budget is split by weight, or by
    ``better`` (``planning/derived.py``: COUNTs read off a JOINT mean get no share).

    ``memo``: what an earlier call of the same :func:`plan_query` computed (:class:`_Memo`)."""
    memo = memo or _Memo(query.table)
    grouped = bool(query.keys)
    weights = [weight(a.kind) for a in query.aggregates]
    total_weight = sum(weights)
    fractions = better.fractions if better else [Fraction(w, total_weight) for w in weights]
    reads = better.derived if better else {}
    n_ref, public = reference_rows(query)
    builder = _PrimitiveBuilder(query, memo)
    gaussian = mech is MechanismKind.GAUSSIAN
    aggs: list[AggregatePlan] = []
    stats: list[StatPlan] = []
    released: dict[str, tuple[Fraction, Fraction]] = {}  # primitive → (ε share, δ share)
    for i, agg in enumerate(query.aggregates):
        if i in reads:
            aggs.append(AggregatePlan(agg.kind, (), None))  # filled in below
            continue
        epsilon, delta = eps_agg * fractions[i], delta_agg * fractions[i]
        if _methods(agg) == (Method.GS,):  # its (ε, δ) is all it reads of a Budget
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
    eps_gs = sum((e for e, _ in released.values()), Fraction(0))
    delta_gs = sum((d for _, d in released.values()), Fraction(0))
    if gaussian and released and delta_gs <= 0:
        raise PrivacyParameterError("the Gaussian mechanism needs δ > 0")
    rho_gs = approx_to_zcdp(eps_gs, delta_gs) if gaussian and released else Fraction(0)
    for prim in prims:
        if prim.name not in released:
            continue  # an exact input of a JOINT/PTR/SMOOTH release
        e, _ = released[prim.name]
        rho = rho_gs * e / eps_gs if gaussian else Fraction(0)
        releases.append(_release(prim, stab, rel, mech, e, rho, grouped))
    return tuple(aggs), prims, releases, tuple(stats), (delta_gs if gaussian else Fraction(0))


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
    memo: _Memo,
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
    memo: _Memo,
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
    options = _methods(agg)
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


def _derived_first(
    query: ValidQuery,
    stab: Stability,
    rel: Neighbouring,
    mech: MechanismKind,
    eps_agg: Fraction,
    delta_agg: Fraction,
    opts: MethodOptions,
    memo: _Memo,
) -> PlannedMethods | None:
    """The plan in which COUNTs are read off a JOINT mean (``planning/derived.py``), planned
    in one pass; ``None`` when the planner must take its two passes (a plan at the weights,
    then one at the split ``derived.split`` draws from it).

    Exactly what the two passes give: the split reads of the plan at the weights only whether
    each mean is JOINT there (scored here at the same budget, as that pass scores it), the
    JOINT release's sensitivity Δ_J (``stat_plan`` writes scale = Δ_J/ε, so scale·ε = Δ_J, a
    function of the stability and the relation) and each COUNT's (its ``_release``'s
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
            if _methods(agg) == (Method.GS,):
                continue
            bounds = memo.bounds(agg.measure) if agg.measure is not None else None
            if _choose(query, j, budget, bounds, stab, rel, opts, memo)[1] is Method.JOINT:
                joint.add(j)
        builder = _PrimitiveBuilder(query, memo)
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
        again = _plan_methods(query, stab, rel, mech, eps_agg, delta_agg, opts, better, memo)
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
    for p in plan.parts:
        e, d = released.get(p, (Fraction(0), Fraction(0)))
        released[p] = (e + epsilon / len(plan.parts), d + delta / len(plan.parts))
    return plan


def _tame(agg: Aggregate, memo: _Memo) -> bool:
    """Are all of the aggregate's arguments bounded within ±SAA_ARGUMENT_LIMIT?"""
    for arg in (agg.measure, agg.second):
        if arg is None:
            continue
        iv = memo.bounds(arg)
        if iv is None:
            continue  # always NULL
        if not iv.bounded or iv.max_abs() > SAA_ARGUMENT_LIMIT:
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
    eps = sum((r.cost.epsilon for r in releases), Fraction(0))
    rho = sum((r.cost.rho for r in releases), Fraction(0))
    cost = Cost(eps)
    if rho:
        cost = cost + Cost(zcdp_to_approx(rho, delta_gauss), delta_gauss, rho)
    for st in stats:
        cost = cost + st.cost
    if selection is not None:
        cost = cost + selection.release.cost
    return cost


def _methods(agg: Aggregate) -> tuple[Method, ...]:
    """SUM(DISTINCT)/AVG(DISTINCT) have global-sensitivity plans only (``Primitive``)."""
    return (Method.GS,) if agg.distinct else methods_for(agg.kind)


class _Memo:
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


class _PrimitiveBuilder:
    def __init__(self, query: ValidQuery, memo: _Memo | None = None) -> None:
        self.query = query
        self.primitives: list[Primitive] = []
        self.memo = memo or _Memo(query.table)

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
