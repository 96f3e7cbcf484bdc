"""The comparison of the brute-force sensitivity oracles (the method of reading/004): how far
each noisy primitive moves between a dataset and a neighbour, against its analytic sensitivity.

Shared by ``tests/property/test_sensitivity_bruteforce.py`` (one table) and
``tests/property/test_join_bruteforce.py`` (joins); each computes the vectors its own way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from dpproxy.planning.plan import QueryPlan, Release
from dpproxy.rewrite.context import RewriteContext
from dpproxy.rewrite.fixed import sum_grids, unscale
from dpproxy.rewrite.pipeline import groups_left_to_release

# Per group key, per primitive name: the exact value the database computed.
Vector = dict[tuple[Any, ...], dict[str, Fraction]]


def exact(v: Any) -> Fraction:
    """A value the database returned, as an exact fraction (NULL: 0)."""
    if v is None:
        return Fraction(0)
    if isinstance(v, float):
        assert math.isfinite(v), f"a primitive evaluated to {v!r}: a clamp is missing"
    assert isinstance(v, int | float | Decimal), repr(v)
    return Fraction(v)


def exact_row(plan: QueryPlan, cols: Sequence[str], values: Sequence[Any]) -> dict[str, Fraction]:
    """One result row's primitives, by name, exactly as the proxy reads them: a SUM comes back
    as an integer total on its grid (``rewrite/fixed.py``) and is scaled back exactly."""
    grids = sum_grids(plan)
    out: dict[str, Fraction] = {}
    for c, v in zip(cols, values, strict=True):
        if c in grids:
            assert v is None or isinstance(v, int), f"the sum {c} came back as {v!r}"
            out[c] = unscale(v, grids[c])
        else:
            out[c] = exact(v)
    return out


def released(plan: QueryPlan) -> tuple[Release, ...]:
    """Every noisy release, including the unit counts of partition selection."""
    sel = (plan.selection.release,) if plan.selection is not None else ()
    return (*plan.releases, *sel)


def group_keys(plan: QueryPlan, a: Vector, b: Vector) -> list[tuple[Any, ...]]:
    """The groups to compare: the whole public domain (a group computed outside it fails the
    test), the single group of an ungrouped query, or every group either side has."""
    q = plan.query
    if q.keys and q.public_keys:
        keys = list(itertools.product(*(k.domain or () for k in q.keys)))
        outside = (set(a) | set(b)) - set(keys)
        # Text and boolean keys are filtered by the release, not the SQL (rewrite/pipeline.py)
        if outside and not groups_left_to_release(RewriteContext(plan, 0)):
            raise AssertionError(f"groups outside the public domain were computed: {outside}")
        return keys
    if not q.keys:
        assert set(a) <= {()} and set(b) <= {()}
        return [()]
    return list(set(a) | set(b))


@dataclass(frozen=True)
class Distance:
    l1: Fraction
    l2_squared: Fraction
    linf: Fraction


def distance(plan: QueryPlan, name: str, a: Vector, b: Vector) -> Distance:
    """How far primitive ``name`` moved between ``a`` and ``b`` (a missing group counts 0)."""
    diffs = [
        abs(a.get(k, {}).get(name, Fraction(0)) - b.get(k, {}).get(name, Fraction(0)))
        for k in group_keys(plan, a, b)
    ]
    return Distance(
        sum(diffs, Fraction(0)),
        sum((d * d for d in diffs), Fraction(0)),
        max(diffs, default=Fraction(0)),
    )


def within(release: Release, d: Distance) -> bool:
    """Does the observed move stay within the analytic sensitivity (L1, L2 and L∞)? Exactly:
    sums are exact integers on a grid (``rewrite/fixed.py``), so no tolerance is needed."""
    s = release.sensitivity
    return d.l1 <= s.l1 and d.l2_squared <= s.l2**2 and d.linf <= s.linf
