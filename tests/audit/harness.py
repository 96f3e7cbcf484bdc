"""The audit harness: sample a release on neighbours D and D', bound its ε, check the claim.

A test builds a :class:`Neighbours` (one release, run on D and on D', and the (ε, δ) the plan
claims for it) and calls :func:`run_audit`: a pilot sample chooses a few events among the
candidates, a fresh main sample bounds ε with confidence 1 − :data:`ALPHA`
(``tests/audit/estimator.py``). :func:`calibrate` asks the real planner
(``planning/methods.py``) for the calibration, so the audit covers data → exact summary →
``analysis/local.py`` → ``release/local.py`` → OpenDP noise.

Reliability: OpenDP samples from the OS's CSPRNG and cannot be seeded. An audit of a correct
release exceeds its claim with probability at most ALPHA = 10⁻⁷, a noise-scale check fails by
chance with probability ≈ 2·10⁻⁹ (:data:`SIGMAS` standard errors), and the "has power" and
"is caught" checks sit at least eight standard deviations of the bound (measured by
simulating the estimator 200–300 times per audit) inside their thresholds. With fewer than ten
audits in the suite, a correct implementation fails it with probability below 10⁻⁶ per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms.noise import OpenDPNoise
from dpproxy.planning.methods import Budget, MethodOptions, stat_plan
from dpproxy.planning.plan import Method, StatPlan
from dpproxy.sql.scope import AggKind, Aggregate
from dpproxy.values import Interval
from tests.audit.estimator import (
    Bound,
    Event,
    epsilon_lower_bound,
    equals,
    refused,
    released,
    select_events,
    threshold_events,
)

ALPHA = 1e-7  # each audit exceeds a correct claim with probability ≤ ALPHA
SIGMAS = 6.0  # standard errors allowed for a scale estimate (two-sided ≈ 2·10⁻⁹)
NOISE = OpenDPNoise()  # production noise, never numpy's

Output = float | None  # a release's output; None is PTR's refusal ⊥
Draw = Callable[[int], np.ndarray]  # n ↦ n independent outputs of one release (⊥ as NaN)
Candidates = Callable[[np.ndarray], list[Event]]  # pooled pilot outputs ↦ events to try


def repeat(release_once: Callable[[], Output]) -> Draw:
    """Draw by calling the release once per output, exactly as the engine would."""

    def draw(n: int) -> np.ndarray:
        out = np.empty(n)
        for i in range(n):
            v = release_once()
            out[i] = math.nan if v is None else v
        return out

    return draw


@dataclass(frozen=True, slots=True)
class Neighbours:
    """One release on D and on D', and the (ε, δ) it claims for such a pair."""

    name: str
    on_d: Draw
    on_d2: Draw
    epsilon: float
    delta: float


@dataclass(frozen=True, slots=True)
class Audit:
    """The bound an audit reached, with the main sample on D (the noise-scale tests reuse it)."""

    pair: Neighbours
    bound: Bound
    first: np.ndarray

    @property
    def reached(self) -> float:
        """The lower bound as a fraction of the claimed ε."""
        return self.bound.epsilon / self.pair.epsilon

    def __str__(self) -> str:
        p = self.pair
        return f"{p.name}: claimed ε = {p.epsilon:.4g}, δ = {p.delta:.3g}; {self.bound}"


def run_audit(
    pair: Neighbours, *, pilot: int, main: int, candidates: Candidates, keep: int = 4
) -> Audit:
    """Choose ``keep`` of the ``candidates`` (built on the pooled pilot) by their bound on a pilot
    sample of ``pilot`` outputs per side (take them all when ``pilot`` is 0), then bound ε on a
    fresh sample of ``main`` outputs per side at confidence 1 − ALPHA."""
    if pilot:
        p1, p2 = pair.on_d(pilot), pair.on_d2(pilot)
        pooled = np.concatenate([p1, p2])
        events = select_events(p1, p2, candidates(pooled), keep=keep, delta=pair.delta)
    else:
        events = candidates(np.empty(0))
    m1, m2 = pair.on_d(main), pair.on_d2(main)
    audit = Audit(pair, epsilon_lower_bound(m1, m2, events, delta=pair.delta, alpha=ALPHA), m1)
    print(audit)  # the reached bound, shown with pytest -s
    return audit


def tails(pilot: np.ndarray) -> list[Event]:
    """``> t`` and ``< t`` for 40 thresholds spread over the pilot's quantiles."""
    return threshold_events(pilot, 40)


def tails_and_refusals(pilot: np.ndarray) -> list[Event]:
    """Tails (which never contain ⊥), ⊥ itself and "released"."""
    return [*threshold_events(pilot, 40), refused(), released()]


def indices(count: int) -> Candidates:
    """Each index of a selection among ``count`` candidates."""
    return lambda _: [equals(float(i)) for i in range(count)]


def assert_within_claim(audit: Audit) -> None:
    """No evidence of a privacy violation: the lower bound stays at or below the claim."""
    assert audit.bound.epsilon <= audit.pair.epsilon, f"privacy violation found: {audit}"


def assert_has_power(audit: Audit, fraction: float) -> None:
    """The audit is not vacuous: on these neighbours it reaches ``fraction`` of the claim."""
    assert audit.reached > fraction, f"audit too weak to mean anything: {audit}"


def assert_laplace_scale(sample: np.ndarray, centre: float, scale: float) -> None:
    """The mean absolute deviation of centre + Laplace(b) is b, with standard error b/√N."""
    mad = float(np.mean(np.abs(sample - centre)))
    band = SIGMAS * scale / math.sqrt(len(sample))
    assert abs(mad - scale) <= band, (mad, scale, band)


def calibrate(
    method: Method,
    kind: AggKind,
    bounds: Interval,
    *,
    epsilon: Fraction,
    delta: Fraction = Fraction(0),
    rows: int = 1,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    q: Fraction | None = None,
    ptr_bound: Fraction | None = None,
    saa_chunks: int | None = None,
    bins: int | None = None,
) -> StatPlan:
    """The planner's calibration (``planning/methods.py``) of one ungrouped aggregate, with the
    options an analyst could set by a hint."""
    budget = Budget(
        epsilon=epsilon,
        delta=delta,
        groups=1,
        rows=rows,
        total_rows=rows,
        neighbouring=neighbouring,
        reference_rows=1000,
        public_size=True,
        gaussian=False,
    )
    agg = Aggregate(kind, exp.column("x"), q=q)
    opts = MethodOptions(ptr_bound=ptr_bound, saa_chunks=saa_chunks, bins=bins)
    return stat_plan(method, agg, bounds, budget, opts, name="x", bounded=True)


def claim(plan: StatPlan) -> tuple[float, float]:
    """(ε, δ) that the plan charges: what the release claims."""
    return float(plan.cost.epsilon), float(plan.cost.delta)


def order_statistics(data: Sequence[float], lo: float, hi: float) -> Callable[[int], float]:
    """i ↦ x_(i), padded with lo below 1 and hi above n (what the window query returns)."""
    xs = sorted(data)
    return lambda i: lo if i < 1 else hi if i > len(xs) else xs[i - 1]
