"""A statistically valid lower bound on the privacy loss ε of a mechanism, from samples.

A mechanism M is (ε, δ)-DP when, for neighbouring databases D and D' and every event E,

    P[M(D) ∈ E] ≤ e^ε · P[M(D') ∈ E] + δ        (and the same with D and D' swapped).

So any event E and any pair of probabilities p ≤ P[M(D) ∈ E], q ≥ P[M(D') ∈ E] give

    ε ≥ ln((p − δ) / q).

The audit samples M(D) and M(D') independently, many times, and takes for p a one-sided
Clopper–Pearson lower confidence bound on the frequency of E among the outputs of M(D) and for
q an upper bound on its frequency among the outputs of M(D'). Doing this for several events,
in both directions (D over D' and D' over D), costs four one-sided bounds per event; each is
taken at level α / (4·#events) (Bonferroni), so that with probability at least 1 − α *every*
bound holds at once, and then the largest ln((p − δ)/q) over events and directions is a lower
bound on the true ε of M on this pair. A correct (ε, δ)-DP mechanism therefore exceeds its
claimed ε in this bound with probability at most α; a broken one exceeds it as soon as there are
enough samples to see the excess.

The events must not be chosen by looking at the samples they are evaluated on (the bound would
then be biased upwards). :func:`threshold_events` and :func:`select_events` choose them from a
separate *pilot* sample instead; the main sample only evaluates them.

This is the standard black-box audit of Ding et al. (CCS 2018) and Jagielski, Ullman and Oprea
(NeurIPS 2020), with exact binomial intervals. It only ever *lower*-bounds ε: a passing audit
does not prove a mechanism private, it fails to find evidence that it is not, on the chosen
neighbours and events.

Outputs are float arrays; a refusal (``None``, PTR's ⊥) is represented as NaN, which no
threshold event contains.

>>> import numpy as np
>>> d = np.array([1.0] * 80 + [0.0] * 20)
>>> d2 = np.array([1.0] * 20 + [0.0] * 80)
>>> bound = epsilon_lower_bound(d, d2, [above(0.5), below(0.5)], delta=0.0, alpha=0.05)
>>> round(bound.epsilon, 2), bound.event, bound.direction
(0.77, 'output > 0.5', "D over D'")
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

Mask = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, slots=True)
class Event:
    """A set of outputs: ``contains`` maps an array of outputs to a boolean mask."""

    name: str
    contains: Mask


def above(t: float) -> Event:
    """The outputs greater than ``t`` (never a refusal)."""
    return Event(f"output > {t:.6g}", lambda x: x > t)


def below(t: float) -> Event:
    """The outputs smaller than ``t`` (never a refusal)."""
    return Event(f"output < {t:.6g}", lambda x: x < t)


def equals(v: float) -> Event:
    """The outputs equal to ``v`` (a discrete output, e.g. the index chosen)."""
    return Event(f"output == {v:.6g}", lambda x: x == v)


def refused() -> Event:
    """The refusals (NaN, PTR's ⊥)."""
    return Event("refused", np.isnan)


def released() -> Event:
    """The outputs that are not refusals."""
    return Event("released", lambda x: ~np.isnan(x))


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson lower bound: P[p ≥ bound] ≥ 1 − alpha for k successes in n.

    >>> cp_lower(0, 10, 0.05)
    0.0
    >>> round(cp_lower(5, 10, 0.05), 4)
    0.2224
    """
    return 0.0 if k <= 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound: P[p ≤ bound] ≥ 1 − alpha for k successes in n.

    >>> cp_upper(10, 10, 0.05)
    1.0
    >>> round(cp_upper(5, 10, 0.05), 4)
    0.7776
    """
    return 1.0 if k >= n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))


def _log_ratio(p: float, q: float, delta: float) -> float:
    """ln((p − δ)/q), −∞ when the numerator is not positive."""
    if p <= delta:
        return -math.inf
    return math.log((p - delta) / q) if q > 0 else math.inf


@dataclass(frozen=True, slots=True)
class Bound:
    """The audit's answer: ε ≥ ``epsilon`` with confidence 1 − ``alpha``.

    ``event`` and ``direction`` name where the maximum was reached; ``hits`` are the counts of
    that event among the first and second samples (of sizes ``sizes``)."""

    epsilon: float
    event: str
    direction: str
    hits: tuple[int, int]
    sizes: tuple[int, int]
    alpha: float

    def __str__(self) -> str:
        return (
            f"ε ≥ {self.epsilon:.3f} (confidence {1 - self.alpha:.7g}) from {self.event!r}, "
            f"{self.direction}: {self.hits[0]}/{self.sizes[0]} vs {self.hits[1]}/{self.sizes[1]}"
        )


def epsilon_lower_bound(
    first: np.ndarray, second: np.ndarray, events: Sequence[Event], *, delta: float, alpha: float
) -> Bound:
    """The largest ln((p − δ)/q) over ``events`` and both directions, where p and q are
    Clopper–Pearson bounds at level α/(4·#events) each: a lower bound on the ε of a mechanism
    whose outputs on D are ``first`` and on D' are ``second``, valid with probability 1 − α
    (never below 0; ε ≥ 0 holds trivially)."""
    if not events:
        raise ValueError("no events to audit")
    level = alpha / (4 * len(events))
    n1, n2 = len(first), len(second)
    best = Bound(0.0, "none", "none", (0, 0), (n1, n2), alpha)
    for event in events:
        k1 = int(np.count_nonzero(event.contains(first)))
        k2 = int(np.count_nonzero(event.contains(second)))
        candidates = (
            (_log_ratio(cp_lower(k1, n1, level), cp_upper(k2, n2, level), delta), "D over D'"),
            (_log_ratio(cp_lower(k2, n2, level), cp_upper(k1, n1, level), delta), "D' over D"),
        )
        for value, direction in candidates:
            if value > best.epsilon:
                best = Bound(value, event.name, direction, (k1, k2), (n1, n2), alpha)
    return best


def threshold_events(pilot: np.ndarray, count: int) -> list[Event]:
    """Tail events ``> t`` and ``< t`` for ``count`` thresholds t at evenly spaced quantiles
    (0.5 % to 99.5 %) of the released outputs in ``pilot`` (a sample not used afterwards)."""
    values = pilot[~np.isnan(pilot)]
    if values.size == 0:
        return []
    ts = np.unique(np.quantile(values, np.linspace(0.005, 0.995, count)))
    return [above(float(t)) for t in ts] + [below(float(t)) for t in ts]


def select_events(
    pilot_first: np.ndarray,
    pilot_second: np.ndarray,
    candidates: Sequence[Event],
    *,
    keep: int,
    delta: float,
    alpha: float = 0.05,
) -> list[Event]:
    """The ``keep`` candidates whose pilot lower bound (at the loose level ``alpha``) is highest:
    the events worth spending the main sample's confidence on."""

    def score(event: Event) -> float:
        return epsilon_lower_bound(
            pilot_first, pilot_second, [event], delta=delta, alpha=alpha
        ).epsilon

    scored = sorted(candidates, key=score, reverse=True)
    return scored[:keep]
