r"""Contribution bounds chosen with differential privacy: how many rows a unit may keep.

A table without ``max_rows_per_unit`` in the schema, and a join whose fan-out the schema does
not bound (``sql/joins.py``), need a bound τ on each unit's rows before any noisy sum can be
calibrated. A guess is either too small (the truncation drops real rows: bias) or too large
(noise ∝ τ). dpproxy instead spends a share of the query's ε (``truncation_share``, 10% by
default) on a DP choice of τ, the smallest candidate that keeps *all* the rows of a chosen share
of units (``truncation_coverage``, 99.9% by default) — the question of Google's DP library
issue #258 ("find maxContributions that covers 99.95% of data"), answered with DP.

**Mechanism.** Let c_u be unit u's number of rows in the query's relation (after the joins and
the WHERE clause), N the number of units, and g₁ < … < g_L the candidates (1, 2, …, 16, then
steps of at most 25% up to the cap, 10,000 by default or the hint ``max_rows_cap``). Candidate
j scores s_j = |#{u : c_u ≤ g_j} − q·N| + 2·(2/ε_τ)·ln g_j (lower is better; the second term,
which reads no data, breaks the tie between all the candidates above the largest count in
favour of the smaller) and is drawn by the exponential mechanism (report-noisy-min,
``release/local.exponential_index``) at scale 2/ε_τ.

**Privacy.** Adding or removing one unit changes N by 1 and each #{u : c_u ≤ g_j} by 0 or 1,
in the same direction, so each s_j moves by at most max(q, 1 − q) ≤ 1; substituting one unit
leaves N fixed and moves each count by at most 1. With sensitivity Δ = 1 the exponential
mechanism at scale 2Δ/ε_τ is ε_τ-DP (McSherry–Talwar 2007; ``reading/001``). The per-unit
counts c_u are computed by the database but only enter through these scores. The chosen τ is
then public: the rest of the query is planned with K = τ and ε − ε_τ (basic composition), and
the total is exactly the requested ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.errors import InternalError

DEFAULT_CAP = 10_000
STEP = Fraction(5, 4)
# Per e-fold of τ, in units of the mechanism's noise scale. Measured on TPC-H (60 draws per
# query, ε_τ = 0.1): 4 keeps τ within 1.3x the largest per-customer count at scale 1 but picks
# τ = 1 (−70% bias) when only ~100 customers are queried (scale 0.01); 1 overshoots 2-6x at
# the 90th percentile; 2 keeps scale 1 within 2x and small data near its counts.
PENALTY = 2


@dataclass(frozen=True, slots=True)
class Truncation:
    """How this query's rows per unit are bounded.

    ``source``: ``schema`` (declared, or derived through the joins), ``hint`` (``max_rows``) or
    ``dp`` (chosen with ε_τ). For ``dp``, ``chosen`` says whether τ was already drawn; before
    that the plan is calibrated at the largest candidate (what explain shows)."""

    source: str
    rows: int
    epsilon: Fraction = Fraction(0)
    coverage: Fraction | None = None
    grid: tuple[int, ...] = ()
    chosen: bool = True
    derivation: str = ""
    reused: bool = False  # τ was drawn for an earlier query over the same relation: free
    join_rows: int = 0  # a join of two units' rows: T of each DropExcess side

    def describe(self) -> str:
        if self.source == "schema":
            why = f" ({self.derivation})" if self.derivation else ""
            return f"{self.rows:,} row(s) per unit from the schema{why}"
        if self.source == "hint":
            return f"from the hint: {self.derivation}"
        if self.source == "join":
            return f"the join changes at most {self.rows:,} row(s) per unit ({self.derivation})"
        assert self.coverage is not None
        if self.reused:
            return (
                f"{self.rows:,} row(s) per unit, chosen with DP for an earlier query over the "
                "same rows (reusing a released value costs nothing)"
            )
        what = (
            f"chosen with DP: {self.rows:,} row(s) per unit"
            if self.chosen
            else f"chosen with DP when the query runs (the figures below assume the largest "
            f"candidate, {self.rows:,})"
        )
        return (
            f"{what}; ε = {float(self.epsilon):.4g} spent on the choice, target: keep every row "
            f"of {float(self.coverage) * 100:g}% of units; {len(self.grid)} candidates 1…"
            f"{self.grid[-1]:,}"
        )


def grid(cap: int) -> tuple[int, ...]:
    """The candidates: every integer to 16, then steps of at most 25%, ending at ``cap``.

    >>> grid(40)
    (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 25, 32, 40)
    """
    if cap < 1:
        raise InternalError("the truncation cap must be positive")
    values = list(range(1, min(cap, 16) + 1))
    while values[-1] < cap:
        values.append(min(cap, math.ceil(values[-1] * STEP)))
    return tuple(values)


def penalty(candidates: tuple[int, ...], scale: Fraction) -> list[Fraction]:
    """The data-independent part of the scores: PENALTY · scale · ln g_j (rounded to 1/1000).

    Above the largest count every candidate keeps all rows and the data part of the score is
    flat, so without it the mechanism would pick uniformly among all larger candidates. With
    it, doubling τ makes a candidate 4 (e^{2 ln 2}) times less likely. It depends on no data,
    so it changes no sensitivity."""
    return [PENALTY * scale * Fraction(round(math.log(g) * 1000), 1000) for g in candidates]


def scores(
    units_per_bin: list[int], coverage: Fraction, candidates: tuple[int, ...], scale: Fraction
) -> list[Fraction]:
    """s_j = |#{u : c_u ≤ g_j} − q·N| + penalty_j from the units per bin (bin j:
    g_{j−1} < c_u ≤ g_j; a last extra bin holds units above the cap). Lower is better; the data
    part moves by at most 1 between neighbours.

    >>> scores([5, 3, 2, 0], Fraction(1, 2), (1, 2, 3), Fraction(0))
    [Fraction(0, 1), Fraction(3, 1), Fraction(5, 1)]
    """
    if len(units_per_bin) != len(candidates) + 1:
        raise InternalError("one bin per candidate and one above the largest")
    n = sum(units_per_bin)
    target = coverage * n
    out: list[Fraction] = []
    cumulative = 0
    for count, extra in zip(units_per_bin[:-1], penalty(candidates, scale), strict=True):
        cumulative += count
        out.append(abs(cumulative - target) + extra)
    return out
