"""Brute force (the method of reading/004) for partition selection on the released count.

The privacy argument of ``planning/selfselect.py`` rests on two facts about add/remove
neighbours when each unit's rows lie in one group: a group that only one side holds has a
count of at most R (the unit's rows in it), and every other group's count is the same on both
sides — or, when u's group is shared, the counts move by at most the count's L1 sensitivity
that the plan calibrates. Every dataset of up to three units (each with 1..R rows in one of
three groups) is compared with every neighbour. Teeth: with units that may touch two groups
(G = 2) the second fact fails, and the planner does not use a shared selection there.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction

from dpproxy.catalog.model import Neighbouring
from dpproxy.planning.plan import QueryPlan
from tests.unit.test_shared_selection import plan_of

GROUPS = ("a", "b", "c")
R = 2
Unit = tuple[str, ...]  # the group of each of the unit's rows


def units(groups_per_unit: int) -> list[Unit]:
    out: list[Unit] = []
    for n in range(1, R * groups_per_unit + 1):
        for rows in itertools.combinations_with_replacement(GROUPS, n):
            touched = Counter(rows)
            if len(touched) <= groups_per_unit and max(touched.values()) <= R:
                out.append(rows)
    return out


def counts(ds: tuple[Unit, ...]) -> Counter[str]:
    return Counter(g for u in ds for g in u)


def pairs(all_units: list[Unit]) -> Iterator[tuple[tuple[Unit, ...], Unit]]:
    for n in range(0, 3):
        for ds in itertools.combinations_with_replacement(all_units, n):
            for u in all_units:
                yield ds, u


def facts_hold(plan: QueryPlan, all_units: list[Unit]) -> bool:
    (count,) = plan.releases
    l1 = count.sensitivity.l1
    for ds, u in pairs(all_units):
        before, after = counts(ds), counts((*ds, u))
        exclusive = [g for g in after if g not in before]
        moved = sum(abs(after[g] - before[g]) for g in GROUPS if g in before)
        assert moved <= l1
        if any(after[g] > R for g in exclusive):
            return False
        if exclusive and moved != 0:
            return False  # u also moved a group both sides hold
    return True


def test_one_group_per_unit_the_facts_hold() -> None:
    plan = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city", rows=R)
    assert plan.stability.groups == 1 and plan.stability.rows_per_group == R
    assert facts_hold(plan, units(1))
    shared = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city")
    assert shared.selection is not None and shared.selection.shared
    # the threshold covers an exclusive group of R rows: τ − R + 1 is the one-row threshold
    assert shared.selection.threshold >= 1


def test_teeth_two_groups_per_unit_break_them_and_are_not_shared() -> None:
    plan = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city", groups=2, rows=R)
    assert plan.selection is not None and not plan.selection.shared
    (count,) = plan.releases
    assert count.sensitivity.l1 == Fraction(2 * R)
    assert not facts_hold(plan, units(2))
    assert plan.neighbouring is Neighbouring.ADD_REMOVE
