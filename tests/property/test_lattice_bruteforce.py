"""Brute force (the method of reading/004) for a JOINT mean noised on the fixed-point grid
(``release/stats.py``'s ``joint_grid``/``joint_parts``, ``release/local.py``'s
``joint_releases_on_grid``).

Every dataset of up to two units, each with up to K rows over two groups and values on the grid
of [lo, hi] (NULL included), against every neighbour (add/remove one unit, or substitute one),
with the planner's own plan and grid:

* the integer parts (Σ(x − lo)·2^bits, Σ(hi − x)·2^bits) that ``joint_parts`` computes from the
  count and the integer total T = Σ(x − c)·2^bits the SQL returns are exactly the parts of the
  continuous mechanism times w·2^bits;
* their vector over the groups moves by at most w·2^bits times the L1 sensitivity the planner
  calibrates the parts at (stat.scale · stat.epsilon), and that is attained: noise of scale
  stat.scale·w on the lattice is then exactly the planned ε (``OpenDPNoise.laplace_lattice``);
* the values handed to the noise are multiples of the lattice's step 2^k.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpproxy.catalog.model import Neighbouring
from dpproxy.mechanisms.noise import lattice_exponent
from dpproxy.planning.plan import Method
from dpproxy.release.stats import joint_grid, joint_parts
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


def parts(
    ds: tuple[int, ...], grid: tuple[int, int, int], centre: Fraction
) -> dict[str, tuple[int, int]]:
    bits = grid[0]
    n = dict.fromkeys(GROUPS, 0)
    total = dict.fromkeys(GROUPS, Fraction(0))
    for u in ds:
        for g, x in UNITS[u]:
            if x is not None:
                n[g] += 1
                total[g] += (x - centre) * Fraction(2) ** bits  # what the SQL sums
    out = {}
    for g in GROUPS:
        assert total[g].denominator == 1  # integer-valued x: no rounding on the grid
        out[g] = joint_parts(grid, n[g], int(total[g]))
    return out


@pytest.mark.parametrize("rel", [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE])
def test_the_integer_parts_are_exact_and_move_within_the_calibration(rel: Neighbouring) -> None:
    plan = plan_of("SELECT g, COUNT(x), AVG(x) FROM t GROUP BY g", rel, nullable=True)
    mean = plan.aggregates[1]
    assert mean.method is Method.JOINT and mean.stat is not None
    stat = mean.stat
    grid = joint_grid(stat, sum_grids(plan))
    assert grid is not None
    bits = grid[0]
    unit = Fraction(2) ** bits
    w = HI - LO
    claimed = stat.scale * stat.epsilon * w * unit  # in the grid's integers
    k = lattice_exponent(stat.scale * w, bits)
    worst = Fraction(0)
    for ds in datasets(2):
        v = parts(ds, grid, stat.center)
        for g in GROUPS:
            xs = [x for u in ds for gg, x in UNITS[u] if gg == g and x is not None]
            assert v[g] == (sum(x - LO for x in xs) * unit, sum(HI - x for x in xs) * unit)
            for p in v[g]:
                assert math.ldexp(math.ldexp(float(p), -bits), -k).is_integer()
        for other in neighbours(ds, rel):
            v2 = parts(other, grid, stat.center)
            moved = sum(abs(v[g][0] - v2[g][0]) + abs(v[g][1] - v2[g][1]) for g in GROUPS)
            assert moved <= claimed, (ds, other, moved, claimed)
            worst = max(worst, Fraction(moved))
    assert worst == claimed  # tight: a smaller calibration would be caught here
