"""The plan: everything decided about a query before any data is touched (frozen values)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind, Stability
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace, Mechanism, Sensitivity
from dpproxy.sql.validate import AggKind, ValidQuery
from dpproxy.values import Cost, Interval


@dataclass(frozen=True, slots=True)
class Primitive:
    """One exact per-group aggregate the database computes: ``name`` is its SQL alias.

    ``measure`` is the row-level expression over base columns (``None`` for COUNT(*));
    ``values`` the interval every row's measure is clamped to (SUM only); ``center`` is
    subtracted from the measure before summing (and squaring, when ``squared``).
    """

    name: str
    kind: PrimitiveKind
    measure: exp.Expression | None
    values: Interval | None = None
    center: Fraction = Fraction(0)
    squared: bool = False

    @property
    def key(self) -> tuple[object, ...]:
        """Identity for sharing: equal keys compute equal values (sqlglot compares trees)."""
        return (self.kind, self.measure, self.center, self.squared)


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
    """DP partition selection: keep a group when its noisy unit count exceeds ``threshold``.

    Privacy argument: the unit counts, noised with Laplace(b) where b = G/ε_sel, are ε_sel-DP
    under add/remove (a unit touches ≤ G groups, moving each count by 1). A group present in
    only one of two neighbours holds just that unit (count 1); it passes the threshold
    τ = 1 + b·ln(G/(2δ)) with probability ½·e^{-(τ-1)/b} = δ/G, so by a union bound over its
    ≤ G groups the release of new keys fails (ε, 0) only with probability δ (Korolova et al.
    2009; Wilson et al. 2020). Under substitution G is doubled and ln(G/δ) is used.
    """

    release: Release
    threshold: Fraction


@dataclass(frozen=True, slots=True)
class AggregatePlan:
    """How one SQL aggregate is assembled from noisy primitives (post-processing)."""

    kind: AggKind
    parts: tuple[str, ...]  # primitive names: (count,), (sum,), (count, sum) or (count, s1, s2)
    bounds: Interval | None  # value interval of the measure (AVG/VAR clip)
    center: Fraction = Fraction(0)


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

    def __post_init__(self) -> None:
        names = [p.name for p in self.primitives]
        if len(set(names)) != len(names):
            raise InternalError("duplicate primitive names in a plan")
        if not self.requested.covers(self.cost):
            raise InternalError("a plan costs more than was requested")

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
    raise InternalError("unknown mechanism")
