"""Brute force (the method of reading/004) for the guard of a SUM's exact total
(``release/guard.py``): the public map f (round to h = 2^j, clamp to ±T) applied to each
group's exact fixed-point total before the noise.

Every dataset of up to two units, each with up to K rows over two groups and values on the grid
of [lo, hi] (NULL included), against every neighbour (add/remove one unit, or substitute one),
with the planner's own plan, grid and sensitivity, and a guard made small (h of the order of one
row's value, T a few rows' worth, and the rounding to that few significant bits) so that both
the rounding and the clamp bite:

* the guarded vector moves by at most Δ₁ + K·h in L1, K the number of groups a neighbour can
  change (``changed_coordinates``), the sensitivity the drawn noise is calibrated for;
* teeth: the guard moves some neighbours' vectors further apart than their exact totals, and
  (add/remove) further than Δ₁: the inflation is needed;
* the production guard's drawn scale is the plan's times (Δ₁ + K·h)/Δ₁ ≤ 1 + 2^-12, so the
  plan's ε = (Δ₁ + K·h)/b' exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms.base import Laplace
from dpproxy.planning.plan import Method, Release
from dpproxy.release.guard import (
    STEP_BITS,
    changed_coordinates,
    drawn_release,
    guard_for,
    guarded,
)
from dpproxy.release.stats import joint_grid
from dpproxy.rewrite.fixed import sum_grids
from tests.property.test_derived_bruteforce import (
    GROUPS,
    HI,
    LO,
    UNITS,
    datasets,
    neighbours,
    plan_of,
)
from tests.property.test_lattice_bruteforce import parts as joint_parts_of


def totals(ds: tuple[int, ...], r: Release, bits: int) -> dict[str, int]:
    """Each group's exact total on the grid, as the SQL computes it."""
    p = r.primitive
    assert p.values is not None and p.values.lo is not None and p.values.hi is not None
    out = dict.fromkeys(GROUPS, 0)
    for u in ds:
        for g, x in UNITS[u]:
            if x is not None:
                q = (min(max(x, p.values.lo), p.values.hi) - p.center) * Fraction(2) ** bits
                assert q.denominator == 1
                out[g] += q.numerator
    return out


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("rel", [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE])
def test_the_guarded_totals_move_within_the_inflated_sensitivity(
    rel: Neighbouring, grouped: bool
) -> None:
    sql = "SELECT g, SUM(x) FROM t GROUP BY g" if grouped else "SELECT SUM(x) FROM t"
    plan = plan_of(sql, rel)
    (r,) = [r for r in plan.releases if r.primitive.name in sum_grids(plan)]
    bits = sum_grids(plan)[r.primitive.name]
    sens = r.sensitivity.l1
    k = changed_coordinates(plan)
    g = guard_for(sens, Fraction(k), step_bits=0, span_bits=1)
    h = Fraction(2) ** g.step
    assert Fraction(1) <= h <= sens  # of the order of one row's value: the rounding bites
    bound = sens + k * h
    worst, clamped, grew = Fraction(0), False, False
    for ds in datasets(2):
        if not grouped and any(x is not None and gg != "F" for u in ds for gg, x in UNITS[u]):
            continue  # ungrouped: one coordinate (use group F's rows only)
        a = totals(ds, r, bits)
        fa = {gg: Fraction(guarded(t, bits, g)) for gg, t in a.items()}
        clamped |= any(abs(v) == h * 2**g.span for v in fa.values())
        for nb in neighbours(ds, rel):
            b = totals(nb, r, bits)
            if not grouped and any(b[gg] for gg in GROUPS if gg != "F"):
                continue
            fb = {gg: Fraction(guarded(t, bits, g)) for gg, t in b.items()}
            exact = sum(abs(Fraction(a[gg] - b[gg])) for gg in GROUPS) / 2**bits
            assert exact <= sens  # the planner's Δ₁ holds for the exact totals
            dist = sum(abs(fa[gg] - fb[gg]) for gg in GROUPS)
            assert dist <= bound, (ds, nb, dist, bound)
            worst = max(worst, dist)
            grew |= dist > exact
    assert clamped  # the clamp bites
    assert grew  # teeth: the rounding moves some vectors further apart than the exact totals
    if rel is Neighbouring.ADD_REMOVE:  # (under substitution T = 2h is below Δ₁ here)
        assert worst > sens  # ... and further than Δ₁: the inflation is needed


@pytest.mark.parametrize("rel", [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE])
def test_the_drawn_scale_is_calibrated_for_the_inflated_sensitivity(rel: Neighbouring) -> None:
    plan = plan_of("SELECT g, SUM(x) FROM t GROUP BY g", rel)
    (r,) = [r for r in plan.releases if r.primitive.name in sum_grids(plan)]
    g, m = drawn_release(plan, r)
    assert g is not None and isinstance(m, Laplace) and isinstance(r.mechanism, Laplace)
    k = changed_coordinates(plan)
    sens = r.sensitivity.l1
    assert (sens + k * Fraction(2) ** g.step) / m.scale == sens / r.mechanism.scale
    assert 1 < m.scale / r.mechanism.scale <= 1 + Fraction(1, 2**STEP_BITS)


@pytest.mark.parametrize("rel", [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE])
def test_the_guarded_joint_parts_move_within_the_inflated_sensitivity(rel: Neighbouring) -> None:
    """``joint_releases_on_grid``: the parts' vector moves by D ≤ b·ε·w (the planner's
    calibration), the guarded one by at most D + C·h, C = 2 parts per changed group, the
    sensitivity its drawn scale w·b' = w·b + C·h/ε is calibrated for at the plan's ε."""
    plan = plan_of("SELECT g, COUNT(x), AVG(x) FROM t GROUP BY g", rel, nullable=True)
    stat = plan.aggregates[1].stat
    assert stat is not None and stat.method is Method.JOINT
    grid = joint_grid(stat, sum_grids(plan))
    assert grid is not None
    bits = grid[0]
    w = HI - LO
    d = stat.scale * stat.epsilon * w
    c = 2 * changed_coordinates(plan)
    g = guard_for(d, Fraction(c), step_bits=0, span_bits=2)
    h = Fraction(2) ** g.step
    bound = d + c * h
    # the drawn scale's ε (production guard) is the plan's, exactly
    prod = guard_for(d, Fraction(c))
    wide = stat.scale * w + c * Fraction(2) ** prod.step / stat.epsilon
    assert (d + c * Fraction(2) ** prod.step) / wide <= stat.epsilon
    grew = False
    for ds in datasets(2):
        v = joint_parts_of(ds, grid, stat.center)
        fv = {k: tuple(Fraction(guarded(p, bits, g)) for p in v[k]) for k in GROUPS}
        for other in neighbours(ds, rel):
            v2 = joint_parts_of(other, grid, stat.center)
            f2 = {k: tuple(Fraction(guarded(p, bits, g)) for p in v2[k]) for k in GROUPS}
            moved = sum(abs(fv[k][i] - f2[k][i]) for k in GROUPS for i in (0, 1))
            exact = sum(abs(v[k][i] - v2[k][i]) for k in GROUPS for i in (0, 1)) / 2**bits
            assert exact <= d
            assert moved <= bound, (ds, other, moved, bound)
            grew |= moved > exact
    assert grew  # teeth: the guard does move some parts


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("rel", [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE])
def test_the_staircase_step_covers_every_guarded_move(rel: Neighbouring, grouped: bool) -> None:
    """The staircase (``release/noise.py``, ``_staircase``) is built for K changed coordinates
    (``changed_coordinates``) each moving by at most Δ∞ + h. With the guard made small as
    above, for every neighbour: at most K group totals change, each guarded total by at most
    the step (``shift`` lattice units) — and, ungrouped, some move beyond Δ∞ (the step needs
    the h). The
    production plan of the ungrouped SUM draws the staircase at the plan's ε; the grouped one
    (K = 2 here, 4 under substitution) would give each coordinate at most ε/2 = 1/2, where it
    does not help: the Laplace. (``tests/unit/test_staircase.py`` has a grouped plan that
    draws it.)"""
    from dpproxy.mechanisms.noise import lattice_exponent
    from dpproxy.mechanisms.staircase import Staircase
    from dpproxy.release.noise import drawn

    sql = "SELECT g, SUM(x) FROM t GROUP BY g" if grouped else "SELECT SUM(x) FROM t"
    plan = plan_of(sql, rel)
    (r,) = [r for r in plan.releases if r.primitive.name in sum_grids(plan)]
    production = drawn(plan, r).mechanism
    changed = changed_coordinates(plan)
    assert isinstance(r.mechanism, Laplace)
    if grouped:  # K = 2 groups a unit, twice that under substitution
        assert changed == (2 if rel is Neighbouring.ADD_REMOVE else 4)
        assert not isinstance(production, Staircase)
    else:
        assert changed == 1 and isinstance(production, Staircase)
        assert production.epsilon <= r.cost.epsilon
        step = guard_for(r.sensitivity.l1, Fraction(1)).step
        assert production.shift == math.floor(
            (r.sensitivity.linf + Fraction(2) ** step) / Fraction(2) ** production.k
        )
    bits = sum_grids(plan)[r.primitive.name]
    g = guard_for(r.sensitivity.l1, Fraction(changed), step_bits=0, span_bits=1)
    h = Fraction(2) ** g.step
    k = lattice_exponent(r.mechanism.scale, bits)
    law = Staircase(
        math.floor((r.sensitivity.linf + h) / Fraction(2) ** k),
        1,
        Fraction(1),
        k,
        r.mechanism.scale,
    )  # the step for this guard (its inner part is immaterial)
    worst = 0
    groups = GROUPS if grouped else ("F",)
    for ds in datasets(2):
        if not grouped and any(x is not None and gg != "F" for u in ds for gg, x in UNITS[u]):
            continue  # ungrouped: one coordinate (use group F's rows only)
        a = totals(ds, r, bits)
        fa = {gg: Fraction(guarded(a[gg], bits, g)) for gg in groups}
        for nb in neighbours(ds, rel):
            b = totals(nb, r, bits)
            if not grouped and any(b[gg] for gg in GROUPS if gg != "F"):
                continue
            moves = [
                abs(fa[gg] - Fraction(guarded(b[gg], bits, g))) / Fraction(2) ** k for gg in groups
            ]
            assert sum(1 for mv in moves if mv) <= changed, (ds, nb, moves)
            for mv in moves:
                assert mv.denominator == 1 and mv <= law.shift, (ds, nb, mv, law.shift)
                worst = max(worst, mv.numerator)
    if not grouped:  # teeth: the step needs the guard's h
        assert worst > r.sensitivity.linf / Fraction(2) ** k
