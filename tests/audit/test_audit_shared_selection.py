"""Audit of partition selection on the released count itself (``planning/selfselect.py``).

The planner's plan of ``SELECT city, COUNT(*) ... GROUP BY city`` under add/remove with one
group per unit thresholds the released count (no separate unit count). The proof needs a group
that only one neighbour holds — the differing unit's single row — to be kept with probability
at most δ. The real release (``release/noise.py``'s ``apply_noise`` with OpenDP's discrete
Laplace) runs on a D' with one large shared group and 1,000 one-unit groups per call; a
one-sided Clopper–Pearson lower bound at confidence 1 − 10⁻⁸ on the keep rate must stay at or
below δ, the rate must match the law p^τ/(1 + p) (p = e^{-1/s}) within six standard errors,
and a threshold one lower, through the same code, is caught above δ.

ε = 1, δ = 0.07: b = 1, p = 1/e, τ = 3, keep rate p³/(1 + p) ≈ 0.036 = 0.52·δ; at τ = 2 it is
p²/(1 + p) ≈ 0.099 = 1.41·δ (2·10⁴ draws: 13 standard errors above δ).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms.base import Laplace
from dpproxy.planning.check import check_plan
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.release.exact import ExactResult
from dpproxy.release.noise import apply_noise
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import float_up
from tests.audit.estimator import cp_lower
from tests.audit.harness import NOISE, SIGMAS
from tests.unit.test_shared_selection import SCHEMA

ALPHA = 1e-8
UNITS = 1_000
CALLS = 20


def plan() -> QueryPlan:
    sql = "SELECT city, COUNT(*) FROM orders GROUP BY city"
    catalog = parse_catalog(SCHEMA.format(relation=Neighbouring.ADD_REMOVE.value, groups=1, rows=1))
    query = validate(parse(sql), catalog, sql)
    p = plan_query(query, catalog.policy, epsilon=Fraction(1), delta=Fraction(7, 100))
    check_plan(p)
    assert p.selection is not None and p.selection.shared
    return p


def keep_rate(p: QueryPlan) -> tuple[int, int]:
    sel = p.selection
    assert sel is not None
    name = sel.release.primitive.name
    rows = [("shared", 1000)] + [(f"u{i}", 1) for i in range(UNITS)]
    exact = ExactResult(("__key_0", name), tuple(rows))
    hits = 0
    for _ in range(CALLS):
        kept = {g.key[0] for g in apply_noise(p, exact, NOISE)}
        assert "shared" in kept
        hits += len(kept) - 1
    return hits, CALLS * UNITS


@functools.cache
def measured() -> tuple[QueryPlan, tuple[int, int], tuple[int, int]]:
    p = plan()
    assert p.selection is not None
    lower = dataclasses.replace(
        p, selection=dataclasses.replace(p.selection, threshold=p.selection.threshold - 1)
    )
    ok, broken = keep_rate(p), keep_rate(lower)
    print(f"τ={p.selection.threshold}: {ok}; τ−1: {broken}")
    return p, ok, broken


def test_a_one_unit_group_is_kept_with_probability_at_most_delta() -> None:
    p, (hits, n), _ = measured()
    assert p.selection is not None
    assert cp_lower(hits, n, ALPHA) <= float(p.selection.release.cost.delta), (hits, n)


def test_the_keep_rate_is_the_law_of_the_noise_drawn() -> None:
    p, (hits, n), _ = measured()
    sel = p.selection
    assert sel is not None and isinstance(sel.release.mechanism, Laplace)
    base = math.exp(-1 / float_up(sel.release.mechanism.scale))
    expected = base**sel.threshold / (1 + base)
    se = math.sqrt(expected * (1 - expected) / n)
    assert abs(hits / n - expected) <= SIGMAS * se, (hits / n, expected)


def test_a_threshold_one_lower_is_caught() -> None:
    p, _, (hits, n) = measured()
    assert cp_lower(hits, n, ALPHA) > float(p.selection.release.cost.delta), (hits, n)  # type: ignore[union-attr]
