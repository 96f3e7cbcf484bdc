r"""Counts read off a joint mean's release, and the budget split that minimises predicted error.

**What is derived.** A JOINT mean (``planning/methods.py``; Kulesza–Suresh–Wang, ``reading/003``)
releases, per group, A = Σ(x − lo)/w + Z_A and B = Σ(hi − x)/w + Z_B with Z_A, Z_B independent
Laplace(b), b = Δ_J/ε_J, over the rows whose clamped x is not NULL. Every such row adds
(x − lo)/w + (hi − x)/w = 1 to A + B, so

    A + B = n + Z_A + Z_B,    n = the number of rows with a non-NULL x,

which is COUNT(x) — and COUNT(*) when x is a NOT NULL column of the query's only table, read
with no FILTER, join or per-unit subquery (every row then has a non-NULL x). The count is
therefore a function of values already released: **post-processing** (Dwork–Roth 2014,
Prop. 2.1) costs no budget and needs no privacy argument of its own; the query's cost is the
joint release's, unchanged, and the accounting stays exact (the count's share simply goes to
the mean).

**Its law, for the error bound.** Z_A + Z_B, the sum of two independent Laplace(b), has
variance 4b² and P(|Z_A + Z_B| > u·b) = e^{−u}(1 + u/2) (``mechanisms/base.py``,
:func:`laplace_sum_half_width`); a released count, discrete Laplace(Δ_C/ε_C), has variance
≈ 2(Δ_C/ε_C)². Released counts are rounded to integers (post-processing) like any other count.

**Which is better, predicted from public information only.** Let the *pool* be the budget the
COUNT and the mean it can be read off would share (their weights, ``methods.weight``), c the
number of such COUNT outputs and Δ_C, Δ_J the two L1 sensitivities. Each output's predicted
variance is measured against the variance it would have with the whole pool to itself; the plan
minimises the sum over the requested outputs:

* separate release at the best split (a share f of the pool to the count, 1 − f to the mean):
  c/f² + 1/(1 − f)², smallest where ((1 − f)/f)³ = 1/c, i.e. f* = 1/(1 + c^{−1/3});
* derived (the whole pool to the mean): c·2(Δ_J/Δ_C)² + 1.

Under add/remove Δ_J = Δ_C = K (one unit's rows), so the derived plan scores c·2 + 1 against
≥ 8 for c = 1: derived wins. Under substitution Δ_J = 2K while an ungrouped count moves by K:
derived scores 9 against 8, and the separate release at the best split is kept. Ties go to the
derived plan (one release fewer).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpproxy.planning.methods import weight
from dpproxy.planning.plan import AggregatePlan, Method, Release
from dpproxy.sql.validate import AggKind, ValidQuery

__all__ = ["Split", "derivable_counts", "derived_score", "separate_score", "split", "split_of"]


@dataclass(frozen=True, slots=True)
class Split:
    """Each aggregate's fraction of the aggregates' budget, and the COUNTs read off a mean
    (count index → mean index)."""

    fractions: tuple[Fraction, ...]
    derived: dict[int, int]
    reason: str


def derivable_counts(query: ValidQuery) -> dict[int, int]:
    """COUNT aggregates equal, row for row, to the count of some AVG's joint release."""
    out: dict[int, int] = {}
    aggs = query.aggregates
    for i, c in enumerate(aggs):
        if c.kind not in (AggKind.COUNT_STAR, AggKind.COUNT) or c.distinct:
            continue
        for j, a in enumerate(aggs):
            if a.kind is not AggKind.AVG or a.distinct or a.measure is None:
                continue
            if c.kind is AggKind.COUNT and c.measure is not None and c.measure == a.measure:
                out[i] = j
                break
            if c.kind is AggKind.COUNT_STAR and _never_null(query, a.measure):
                out[i] = j
                break
    return out


def _never_null(query: ValidQuery, measure: exp.Expression) -> bool:
    """Does the schema say ``measure`` holds no NULL (a column of the query's only table
    without ``nullable: true``)? Then ``COUNT(*)`` is read off the mean's release.

    The schema's word is trusted here, unlike :func:`declared_not_null`'s database
    constraint, because a false one costs accuracy, never privacy. Where the column does hold
    NULLs, the released ``COUNT(*)`` is A + B, that is COUNT(x) plus noise: wrong by the rows
    whose x is NULL (``schema check --database`` notes every such promise the database does
    not declare), but a function of the JOINT release alone, which is private whatever the
    rows hold: its SQL, its plan and its cost do not read the claim's truth, and between
    neighbours the pair (A, B) moves by at most Δ_J in L1 (a unit's at most K rows each add
    (x − lo)/w + (hi − x)/w = 1 to A + B if x is not NULL, 0 if it is; clamped), so A + B moves
    by at most Δ_J, the sensitivity the plan charges. Groups are chosen by a count primitive of
    their own, never by A + B (``release/noise.py``). Checked with the noise off on both
    engines, adding and removing units whose x is NULL: ``tests/attacks/test_false_not_null.py``.
    """
    if query.source is not None or query.per_unit is not None:
        return False
    if not isinstance(measure, exp.Column):
        return False
    col = query.table.column(measure.name)
    return col is not None and not col.nullable


def declared_not_null(query: ValidQuery, measure: exp.Expression) -> bool:
    """Is ``measure`` a column of the query's one stored table that the database declares
    NOT NULL (``Column.not_null``, set by the backend from its metadata)? Then COUNT(measure)
    is COUNT(*) over the same rows, whatever the rows are. The schema's ``nullable: false``
    is not enough here: a COUNT(*) in place of an AVG's count would silently divide by the
    rows where the column is NULL too if that promise is false (a CSV declares nothing)."""
    if query.source is not None or query.per_unit is not None or query.union is not None:
        return False
    if not isinstance(measure, exp.Column):
        return False
    col = query.table.column(measure.name)
    return col is not None and col.not_null


@functools.lru_cache(maxsize=64)
def separate_score(counts: int) -> tuple[float, Fraction]:
    """The best split's predicted normalised variance c/f² + 1/(1 − f)², and f (the count's
    share of the pool), rounded to a fraction (any f is private; it only sets the noise).
    A function of one small integer, kept (``limit_denominator`` was a tenth of planning an
    AVG with a COUNT: issue 21); both values are immutable."""
    r = (1 / counts) ** (1 / 3)  # (1 − f)/f at the optimum
    f = Fraction(1 / (1 + r)).limit_denominator(1000)
    ff = float(f)
    return counts / ff**2 + 1 / (1 - ff) ** 2, f


def derived_score(counts: int, joint_sens: Fraction, count_sens: Fraction) -> float:
    """c·Var(Z_A + Z_B)/Var(separate count at the whole pool) + 1 = c·2(Δ_J/Δ_C)² + 1."""
    return counts * 2 * float(joint_sens / count_sens) ** 2 + 1


def split(
    query: ValidQuery, aggs: tuple[AggregatePlan, ...], releases: list[Release]
) -> Split | None:
    """A better split than the weights for a query whose COUNT can be read off a JOINT mean,
    or None (no such COUNT, the mean not JOINT, or the weights already best)."""
    pairs = {i: j for i, j in derivable_counts(query).items() if aggs[j].method is Method.JOINT}
    count_rel = {r.primitive.name: r for r in releases}

    def joint_sens(j: int) -> Fraction:
        stat = aggs[j].stat
        assert stat is not None
        return stat.scale * stat.epsilon

    return split_of(
        query,
        pairs,
        joint_sens,
        lambda i: aggs[i].parts[0],
        lambda part: count_rel[part].sensitivity.l1,
    )


def split_of(
    query: ValidQuery,
    pairs: dict[int, int],
    joint_sens: Callable[[int], Fraction],
    count_part: Callable[[int], str],
    count_sens: Callable[[str], Fraction],
) -> Split | None:
    """:func:`split` from what it reads of a plan: ``pairs`` (each derivable COUNT → its mean,
    for the means that are JOINT), each JOINT release's sensitivity Δ_J, each COUNT's
    primitive and each such primitive's sensitivity Δ_C."""
    if not pairs:
        return None
    weights = [Fraction(weight(a.kind)) for a in query.aggregates]
    total = sum(weights)
    fractions = [w / total for w in weights]
    derived: dict[int, int] = {}
    notes = []
    for j in sorted(set(pairs.values())):
        mine = [i for i, m in pairs.items() if m == j]
        sens_j = joint_sens(j)
        parts = {count_part(i) for i in mine}
        if len(parts) != 1:
            continue  # COUNT(*) and COUNT(x) released apart: leave the weights
        sens_c = count_sens(parts.pop())
        pool = fractions[j] + sum(fractions[i] for i in mine)
        sep, f = separate_score(len(mine))
        der = derived_score(len(mine), sens_j, sens_c)
        if der <= sep:
            for i in mine:
                fractions[i] = Fraction(0)
                derived[i] = j
            fractions[j] = pool
            notes.append(f"derived from the joint release (predicted {der:.3g} against {sep:.3g})")
        else:
            # all the counts share one primitive: the count's share is split among them
            for i in mine:
                fractions[i] = pool * f / len(mine)
            fractions[j] = pool * (1 - f)
            notes.append(f"released apart at a share {float(f):.3g} ({sep:.3g} against {der:.3g})")
    if not notes:
        return None
    return Split(tuple(fractions), derived, "; ".join(notes))
