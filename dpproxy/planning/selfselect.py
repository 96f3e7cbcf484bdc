r"""Partition selection on a released count itself, at the query's whole ε.

The default plan of a private GROUP BY spends a share of ε (``selection_share``) on a separate
noisy count of units per group and keeps a group when it exceeds a threshold
(``planning/plan.py``'s :class:`Selection`). When each unit touches at most one group, the
query already releases a per-group count (COUNT(*), COUNT(x) or COUNT(DISTINCT unit)), and the
neighbours are add/remove, that count can be thresholded instead: the whole ε goes to the
released primitives, and the selection costs only its δ.

**Threshold.** A group that only one neighbour holds consists of the differing unit's rows, at
most R = ``rows_per_group`` of them, so its count c lies in [0, R]. The count is released with
discrete Laplace noise Z of scale b (``release/noise.py``, integer releases) and the group is
kept when c + Z > τ. With τ = τ₁ + R − 1, where τ₁ = :func:`selection_threshold`\ (b, 1, δ)
is the smallest integer with P(Z ≥ τ₁) ≤ δ at the scale OpenDP actually draws
(``mechanisms/selection.py``), P(c + Z > τ) ≤ P(Z ≥ τ − R + 1) = P(Z ≥ τ₁) ≤ δ.

**Privacy argument** (add/remove, G = 1). Let D' = D + u, u's rows all in group g; every
released primitive is noised independently per group, and all values of a group are released
only if it passes the threshold.

* g also occurs in D (shared): every released vector, over the groups both hold, moves by at
  most its L1 sensitivity; the releases together are ε-DP (Laplace, basic composition, the
  same ε the plan charges), and the keep/drop decisions are post-processing of the released
  counts. No δ is used.
* g occurs only in D': u contributes to no other group, so every other group's values have the
  same law on D and D'. Couple the two runs with the same noise on those groups: the outputs
  differ only when g is kept, with probability ≤ δ. So for every event E,
  P[M(D') ∈ E] ≤ P[M(D) ∈ E] + δ and P[M(D) ∈ E] ≤ P[M(D') ∈ E] + δ.

Either way (ε, δ)-DP, which is what the plan charges: the releases' ε plus this selection's δ
(:class:`Selection` with ``shared``; its release's cost is (0, δ)). Under substitution a unit
may leave one group and enter another, moving shared groups too; the separate unit count is
kept there.

**Queries with other plans** (AVG, order statistics: :func:`count_first`). The first COUNT is
released on its own at the selection's share of ε (it is then read off no joint mean,
``planning/derived.py``) and thresholded itself; the other aggregates share the rest by weight.
The argument above holds as it is: every per-group release (the JOINT, PTR or smooth values
too) is independent across groups and released only for kept groups, and their δ adds to the
selection's. :func:`better_than_apart` keeps this plan when the COUNT's predicted error and
its threshold are both at most those of the plan with a separate unit count.

**Choice.** The separate plan gives the count and the unit count ε·(1 − share) and ε·share;
thresholding the count gives it the whole ε. The shared plan is chosen when both its predicted
95% count error and its threshold are at most the separate plan's (always the case at R = 1:
a larger scale raises both). The Gaussian variant (a Gaussian count thresholded at
σ·Φ⁻¹(1 − δ)) is compared too: at G = 1 its σ at the same (ε, δ) exceeds the Laplace scale
several times over (σ ≈ 5 against b = 1 at ε = 1, δ = 10⁻⁵), so it is predicted worse and not
implemented; the comparison is :func:`gaussian_threshold`.
"""

from __future__ import annotations

from fractions import Fraction

from dpproxy.analysis.sensitivity import PrimitiveKind, Stability, sensitivity
from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms.base import (
    Gaussian,
    Laplace,
    Sensitivity,
    approx_to_zcdp,
    laplace_sum_half_width,
)
from dpproxy.mechanisms.selection import selection_threshold
from dpproxy.planning.derived import Split
from dpproxy.planning.methods import weight
from dpproxy.planning.plan import AggregatePlan, Primitive, Release
from dpproxy.sql.validate import AggKind, ValidQuery

__all__ = [
    "better_than_apart",
    "count_first",
    "gaussian_threshold",
    "shared_count",
    "shared_threshold",
]

_COUNTS = (PrimitiveKind.COUNT, PrimitiveKind.UNITS)
_COUNT_KINDS = (AggKind.COUNT_STAR, AggKind.COUNT, AggKind.COUNT_UNITS)


def shared_threshold(scale: Fraction, rows: int, delta: Fraction) -> int:
    """τ for a released count whose exclusive groups hold at most ``rows`` rows."""
    return selection_threshold(scale, 1, delta) + rows - 1


def gaussian_threshold(epsilon: Fraction, delta: Fraction) -> float:
    """The Gaussian variant's threshold at G = 1 (δ split between zCDP and selection)."""
    rho = approx_to_zcdp(epsilon, delta / 2)
    one = Sensitivity(Fraction(1), Fraction(1), Fraction(1))
    sigma = float(Gaussian.calibrate(one, rho).sigma)
    from statistics import NormalDist  # the Gaussian variant only (fast start)

    return 1 + sigma * NormalDist().inv_cdf(1 - float(delta) / 2)


def shared_count(
    prims: list[Primitive],
    stab: Stability,
    rel: Neighbouring,
    epsilon: Fraction,
    delta: Fraction,
    share: Fraction,
) -> Primitive | None:
    """The count to threshold, when the shared plan applies and is predicted better."""
    if rel is not Neighbouring.ADD_REMOVE or stab.groups != 1 or not 0 < delta < 1:
        return None
    counts = [p for p in prims if p.kind in _COUNTS and not p.distinct]
    if not counts or share <= 0 or share >= 1:
        return None
    # COUNT(*) first: it holds every row of a group
    count = min(counts, key=lambda p: (p.measure is not None, p.kind is PrimitiveKind.UNITS))
    n_prims = len(prims)
    sens = sensitivity(count.kind, stab, rel, grouped=True)
    units = sensitivity(PrimitiveKind.UNITS, stab, rel, grouped=True)
    shared = Laplace.calibrate(sens, epsilon / n_prims)
    apart = Laplace.calibrate(sens, epsilon * (1 - share) / n_prims)
    sep_units = Laplace.calibrate(units, epsilon * share)
    tau_shared = shared_threshold(shared.scale, stab.rows_per_group, delta)
    tau_apart = selection_threshold(sep_units.scale, 1, delta)
    err_shared = shared.half_width(0.05, integer=True)
    err_apart = apart.half_width(0.05, integer=True)
    return count if err_shared <= err_apart and tau_shared <= tau_apart else None


def count_first(
    query: ValidQuery, stab: Stability, rel: Neighbouring, share: Fraction
) -> tuple[int, Split] | None:
    """For a query whose other aggregates have plans of their own (AVG, medians...): give its
    first COUNT the selection's share of ε (it is then thresholded itself, and read off no
    joint mean) and the others the rest, by weight. None where the shared plan cannot apply."""
    if rel is not Neighbouring.ADD_REMOVE or stab.groups != 1 or not 0 < share < 1:
        return None
    aggs = query.aggregates
    counts = [i for i, a in enumerate(aggs) if a.kind in _COUNT_KINDS and not a.distinct]
    if not counts:
        return None
    first = counts[0]
    others = sum(Fraction(weight(a.kind)) for i, a in enumerate(aggs) if i != first)
    fractions = tuple(
        share if i == first else (1 - share) * weight(a.kind) / others if others else Fraction(0)
        for i, a in enumerate(aggs)
    )
    return first, Split(fractions, {}, "the COUNT is released and thresholded itself")


def better_than_apart(
    shared_plan: tuple[AggregatePlan, ...],
    shared_releases: list[Release],
    apart_plan: tuple[AggregatePlan, ...],
    apart_releases: list[Release],
    index: int,
    stab: Stability,
    rel: Neighbouring,
    eps_sel: Fraction,
    delta_sel: Fraction,
) -> Primitive | None:
    """The count to threshold when, for the COUNT at ``index``, both the predicted 95% error
    and the threshold of the shared plan are at most those of the plan with a separate unit
    count (whose COUNT may be read off a joint mean)."""
    agg = shared_plan[index]
    if len(agg.parts) != 1:
        return None
    mine = next((r for r in shared_releases if r.primitive.name == agg.parts[0]), None)
    if mine is None or not isinstance(mine.mechanism, Laplace) or not mine.integer:
        return None
    tau_shared = shared_threshold(mine.mechanism.scale, stab.rows_per_group, delta_sel)
    err_shared = mine.half_width(0.05)
    units = sensitivity(PrimitiveKind.UNITS, stab, rel, grouped=True)
    tau_apart = selection_threshold(Laplace.calibrate(units, eps_sel).scale, 1, delta_sel)
    other = apart_plan[index]
    if other.derived is not None:
        err_apart = laplace_sum_half_width(other.derived.scale, 0.05)
    else:
        theirs = next(r for r in apart_releases if r.primitive.name == other.parts[0])
        err_apart = theirs.half_width(0.05)
    if err_shared <= err_apart and tau_shared <= tau_apart:
        return mine.primitive
    return None
