"""The plan: everything decided about a query before any data is touched (frozen values)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import TYPE_CHECKING

from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind, Stability
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace, Mechanism, Sensitivity, Staircase
from dpproxy.sql.validate import AggKind, ValidQuery
from dpproxy.values import Cost, Interval

if TYPE_CHECKING:  # the planner imports it for a bound it derives (planner._truncation)
    from dpproxy.planning.truncation import Truncation


@dataclass(frozen=True, slots=True)
class Primitive:
    """One exact per-group aggregate the database computes: ``name`` is its SQL alias.

    ``measure`` is the row-level expression over base columns (``None`` for COUNT(*));
    ``values`` the interval every row's measure is clamped to (SUM only); ``center`` is
    subtracted from the measure before summing (and squaring, when ``squared``).

    ``distinct`` (SUM(DISTINCT x), AVG(DISTINCT x)): the database sums, or counts, the
    *distinct* per-row integers q of ``rewrite/fixed.py`` — the clamped, centred value on the
    sum's grid — over the bounded rows. A SUM primitive then has SUM's sensitivity: adding or
    removing one row adds or removes at most one distinct q, |q·2^-k| ≤ max|x| over
    ``values``; a unit's r_g rows in group g change that group's set by at most r_g terms, so
    the add/remove bounds (L1 K·max|x|, L∞ R·max|x|, packed L2) are SUM's. Substituted, the
    group's total moves by Σ(new terms not already present) − Σ(old terms no longer present),
    two sums of at most r_g distinct values of ``values``: within SUM's bounds (ungrouped,
    both lie in [min(0, K·lo), max(0, K·hi)], so the change is at most that width; grouped,
    removal then addition, twice). A DISTINCT primitive with ``distinct`` counts the same
    distinct q (an AVG(DISTINCT)'s count, consistent with its sum): COUNT(DISTINCT)'s argument.
    """

    name: str
    kind: PrimitiveKind
    measure: exp.Expression | None
    values: Interval | None = None
    center: Fraction = Fraction(0)
    squared: bool = False
    distinct: bool = False

    @property
    def key(self) -> tuple[object, ...]:
        """Identity for sharing: equal keys compute equal values (sqlglot compares trees)."""
        return (self.kind, self.measure, self.center, self.squared, self.distinct)


@dataclass(frozen=True, slots=True)
class Release:
    """A primitive released with calibrated noise; ``cost`` is its own privacy cost."""

    primitive: Primitive
    sensitivity: Sensitivity
    mechanism: Mechanism
    cost: Cost

    @property
    def integer(self) -> bool:
        return self.primitive.kind is not PrimitiveKind.SUM

    def half_width(self, alpha: float) -> float:
        """The noise's (1 − α) two-sided bound, for the distribution this release samples."""
        return self.mechanism.half_width(alpha, integer=self.integer)


@dataclass(frozen=True, slots=True)
class Selection:
    """DP partition selection: keep a group when its noisy unit count exceeds ``threshold`` τ,
    an integer (the noisy counts are integers, so "exceeds" means ≥ τ + 1).

    Privacy argument. The unit counts get discrete Laplace noise, P(Z = z) ∝ p^|z| with
    p = e^{-1/b} and b = Δ/ε_sel, where Δ = G (add/remove) or 2G (substitution) is their L1
    sensitivity (a unit touches ≤ G groups, moving each count by 1): ε_sel-DP for the groups
    both neighbours hold (GRS 2012; noise is always Laplace here, also under the gaussian
    mechanism, so there is no Gaussian law to derive). A group that only one neighbour holds
    has just the differing unit (count 1), and there are at most N = Δ of them. Such a group is
    kept when Z ≥ τ, with probability p^τ/(1 + p); τ is the smallest integer with
    N·p^τ/(1 + p) ≤ δ, computed with outward-rounded logarithms at the scale OpenDP actually
    draws with (``mechanisms/selection.py``). With M, M' the outputs on the neighbours with and
    without the k ≤ N exclusive groups and E any set of outputs:

    * P[M ∈ E] ≤ P[M ∈ E, none of them kept] + k·δ/N, and the first term is a post-processing
      of the shared counts, so P[M ∈ E] ≤ e^{ε_sel}·P[M' ∈ E] + δ (Korolova et al. 2009;
      Wilson et al. 2020);
    * conversely the shared counts move by at most Δ − k, so with x = k/Δ,
      P[M' ∈ E] ≤ e^{ε_sel(1−x)}·P[M ∈ E]/(1 − x·δ), and e^{ε(1−x)}·q − e^{ε}(1 − xδ)·q ≤ δ for
      q, x ∈ [0, 1] (convex in x, ≤ δ at both ends as δ ≤ 1): P[M' ∈ E] ≤ e^{ε_sel}·P[M ∈ E] + δ.

    Under substitution each neighbour may hold exclusive groups (k + k' ≤ 2G = Δ); the same two
    steps, applied to both at once, give the same bound.
    """

    release: Release
    threshold: int
    # The threshold is applied to a released count's own noise (``planning/selfselect.py``,
    # add/remove, one group per unit): ``release`` is that count's release with cost (0, δ).
    shared: bool = False


class Method(Enum):
    """How an aggregate is made private (``planning/methods.py`` holds each privacy argument)."""

    GS = "gs"  # noisy SUM/COUNT primitives at global sensitivity (AVG: sum and count split)
    JOINT = "joint"  # AVG: Kulesza–Suresh–Wang joint release of Σ(x−lo) and Σ(hi−x)
    PTR = "ptr"  # propose-test-release
    SMOOTH = "smooth"  # smooth sensitivity with Laplace noise
    EXPONENTIAL = "exponential"  # order statistics by the exponential mechanism over cells
    SAA = "saa"  # sample-and-aggregate


@dataclass(frozen=True, slots=True)
class Candidate:
    """One way to answer an aggregate, with its error predicted from public information."""

    method: Method
    error95: float | None  # predicted 95% half-width at the reference size (None: n/a)
    formula: str  # how the error scales, for people: "≈ ±1.23e+03/n"
    applicable: bool
    note: str = ""  # why not applicable, or what the prediction leaves out


@dataclass(frozen=True, slots=True)
class StatPlan:
    """The calibration of one aggregate answered by a method other than GS.

    Per-group figures: ``epsilon``/``delta`` are what one group's release costs, ``rows`` the
    most rows one unit has in one group, ``groups`` how many groups one unit can touch (the
    plan's cost is ``groups`` times the per-group cost, by basic composition).
    """

    method: Method
    name: str  # the key of the released value in a NoisyGroup
    kind: AggKind
    measure: exp.Expression
    second: exp.Expression | None
    bounds: Interval  # the measure's value interval
    epsilon: Fraction
    delta: Fraction
    rows: int
    groups: int
    neighbouring: Neighbouring
    bounded: bool  # read the contribution-bounded relation (else every row of every unit)
    q: Fraction | None = None
    count: str | None = None  # exact primitive names (mean methods)
    total: str | None = None
    center: Fraction = Fraction(0)
    scale: Fraction = Fraction(0)  # joint: per part; PTR: release; exp.: noisy-min; SAA: Laplace
    test_scale: Fraction = Fraction(0)  # PTR
    threshold: Fraction = Fraction(0)  # PTR
    bound: Fraction | None = None  # PTR's proposed local-sensitivity bound
    beta: Fraction = Fraction(0)  # smooth sensitivity
    kmax: int = 0  # order-statistic methods: distances covered by the fetched window
    window: int = 0  # ranks fetched on each side of the statistic
    cells: int = 0  # exponential: number of cells
    integer_cells: bool = False
    chunks: int = 0  # SAA
    output: Interval | None = None  # SAA: clipping interval of the chunk statistics

    @property
    def cost(self) -> Cost:
        if self.groups == 1:  # the common case: the per-group figures themselves
            return Cost(self.epsilon, self.delta)
        return Cost(self.epsilon * self.groups, self.delta * self.groups)


@dataclass(frozen=True, slots=True)
class AggregatePlan:
    """How one SQL aggregate is assembled from noisy primitives (post-processing), or released
    by a :class:`StatPlan`."""

    kind: AggKind
    parts: tuple[str, ...]  # primitive names: (count,), (sum,), (count, sum) or (count, s1, s2)
    bounds: Interval | None  # value interval of the measure (AVG/VAR clip)
    center: Fraction = Fraction(0)
    method: Method = Method.GS
    stat: StatPlan | None = None
    candidates: tuple[Candidate, ...] = ()
    reason: str = ""  # why ``method`` was chosen
    # A COUNT read off a JOINT mean's two released parts, (A + B) — post-processing, no
    # budget of its own (``planning/derived.py``); ``parts`` is then empty.
    derived: StatPlan | None = None


@dataclass(frozen=True, slots=True)
class QueryPlan:
    query: ValidQuery
    neighbouring: Neighbouring
    stability: Stability
    needs_bounding: bool
    primitives: tuple[Primitive, ...]
    releases: tuple[Release, ...]
    selection: Selection | None
    aggregates: tuple[AggregatePlan, ...]
    requested: Cost
    cost: Cost
    truncation: Truncation | None = None  # how the rows per unit are bounded, when not declared

    def __post_init__(self) -> None:
        names = [p.name for p in self.primitives]
        if len(set(names)) != len(names):
            raise InternalError("duplicate primitive names in a plan")
        if not self.requested.covers(self.cost):
            raise InternalError("a plan costs more than was requested")

    @property
    def stats(self) -> tuple[StatPlan, ...]:
        return tuple(a.stat for a in self.aggregates if a.stat is not None)

    def release_for(self, name: str) -> Release:
        for r in self.releases:
            if r.primitive.name == name:
                return r
        if self.selection is not None and self.selection.release.primitive.name == name:
            return self.selection.release
        raise InternalError(f"no release for primitive {name}")


def describe_mechanism(m: Mechanism) -> str:
    if isinstance(m, Laplace):
        return f"Laplace(b={float(m.scale):.6g})"
    if isinstance(m, Gaussian):
        return f"Gaussian(σ={float(m.sigma):.6g})"
    if isinstance(m, Staircase):
        step = math.ldexp(float(m.shift), m.k)
        return f"Staircase(ε={float(m.epsilon):.6g}, step={step:.6g}, γ={m.inner / m.shift:.4f})"
    raise InternalError("unknown mechanism")


def one_method(plan: QueryPlan) -> Method | None:
    """The method every statistic of ``plan`` uses, if they share one."""
    methods = {st.method for st in plan.stats}
    return methods.pop() if len(methods) == 1 else None


def needs_choice(plan: QueryPlan) -> bool:
    """Is ``plan``'s bound of rows per unit still to be drawn with DP?"""
    t = plan.truncation
    return t is not None and t.source == "dp" and not t.chosen
