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

This module holds :func:`plan_query` and the bound on rows per unit (:func:`_truncation`);
``planning/builder.py`` the primitives and their even releases, ``planning/choosing.py`` the
choice of a plan per aggregate and the budget's split.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

from dpproxy.analysis.sensitivity import PrimitiveKind, Stability, sensitivity, stability
from dpproxy.catalog.model import ContributionBound, MechanismKind, Neighbouring, PrivacyPolicy
from dpproxy.errors import InvalidParameter, PrivacyParameterError, UnsupportedQuery
from dpproxy.mechanisms.base import Laplace
from dpproxy.mechanisms.selection import exclusive_groups, selection_threshold
from dpproxy.planning import derived, selfselect
from dpproxy.planning.builder import Memo, PrimitiveBuilder, even_releases, total_cost
from dpproxy.planning.choosing import derived_first, methods_of, plan_methods
from dpproxy.planning.methods import MethodOptions
from dpproxy.planning.plan import Method, Primitive, QueryPlan, Release, Selection, StatPlan
from dpproxy.sql.validate import AggKind, ValidQuery
from dpproxy.values import Cost, check_privacy_parameters

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
    opts = options or _NO_OPTIONS
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
    gs_only = all(methods_of(a) == (Method.GS,) for a in query.aggregates)
    if opts.method is not None and opts.method is not Method.GS:
        if not any(opts.method in methods_of(a) for a in query.aggregates):
            raise InvalidParameter(
                f"no aggregate of this query can use the {opts.method.value} plan",
                hint="gs, joint, ptr, smooth and saa answer AVG; exponential, ptr, smooth and "
                "saa answer MEDIAN and percentiles; saa answers CORR, COVAR and REGR",
            )
    private_keys = grouped and not query.public_keys
    shared: Primitive | None = None  # a released count partition selection thresholds
    memo = Memo(table)

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
            probe = PrimitiveBuilder(query, memo)
            for i in range(len(query.aggregates)):
                probe.aggregate(i)
            shared = selfselect.shared_count(probe.primitives, stab, rel, eps, dlt, share)
            if shared is not None:  # threshold the released count at the whole ε
                eps_sel, eps_agg, delta_sel, delta_agg = Fraction(0), eps, dlt, Fraction(0)

    if gs_only:
        builder = PrimitiveBuilder(query, memo)
        aggs = tuple(builder.aggregate(i) for i in range(len(query.aggregates)))
        prims = builder.primitives
        if mech is MechanismKind.GAUSSIAN and prims and delta_agg <= 0:
            raise PrivacyParameterError("the Gaussian mechanism needs δ > 0")
        releases = even_releases(prims, stab, rel, mech, eps_agg, delta_agg, grouped)
        stats: tuple[StatPlan, ...] = ()
        delta_gauss = delta_agg
    else:
        planned = derived_first(query, stab, rel, mech, eps_agg, delta_agg, opts, memo)
        if planned is None:
            planned = plan_methods(query, stab, rel, mech, eps_agg, delta_agg, opts, None, memo)
            better = derived.split(query, planned[0], planned[2])
            if better is not None:  # a COUNT read off a JOINT mean, or a better split
                again = plan_methods(query, stab, rel, mech, eps_agg, delta_agg, opts, better, memo)
                if all(again[0][j].method is Method.JOINT for j in better.derived.values()):
                    planned = again
        first = selfselect.count_first(query, stab, rel, share) if private_keys else None
        if first is not None and mech is MechanismKind.LAPLACE and kinds:
            # the COUNT at the selection's share, thresholded itself (planning/selfselect.py)
            alt = plan_methods(query, stab, rel, mech, eps, delta_agg, opts, first[1], memo)
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


_NO_OPTIONS = MethodOptions()  # frozen: one for every plan without options

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
    """The stability of a join between two units' rows (``sql/twounits.py``: reading/002's
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
