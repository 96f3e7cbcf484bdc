"""Brute force (the method of reading/004) for a COUNT read off a JOINT mean.

Every dataset of up to three units, each with up to K rows over two groups and values on a grid
of [lo, hi] (NULL included), against every neighbour (add/remove one unit, or substitute one):

* the joint release's vector (A_g, B_g) over all groups, A_g = Σ(x − lo)/w, B_g = Σ(hi − x)/w,
  moves by at most the L1 sensitivity the planner calibrates it at (stat.scale · stat.epsilon),
  and that bound is attained (a smaller claim would be caught);
* A_g + B_g is exactly the group's count of non-NULL x: the identity that makes the derived
  COUNT post-processing (``planning/derived.py``);
* teeth: with NULLs, A_g + B_g is not COUNT(*), and the planner does not derive COUNT(*) from a
  nullable measure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from fractions import Fraction

import pytest

from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Neighbouring
from dpproxy.planning.check import check_plan
from dpproxy.planning.derived import derivable_counts
from dpproxy.planning.plan import Method, QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate

LO, HI = Fraction(0), Fraction(10)
VALUES: tuple[Fraction | None, ...] = (LO, Fraction(3), HI, None)
GROUPS = ("F", "M")
K = 2

SCHEMA = """
version: 1
dataset: t
privacy:
  neighbouring: {relation}
  epsilon: 1
  delta: 1.0e-6
  mechanism: laplace
tables:
  t:
    private: true
    privacy_unit: pid
    max_rows_per_unit: {k}
    columns:
      pid: {{type: integer}}
      g: {{type: text, domain: ["F", "M"]}}
      x: {{type: integer, lower: 0, upper: 10, nullable: {nullable}}}
"""

Row = tuple[str, Fraction | None]
Unit = tuple[Row, ...]


def plan_of(sql: str, rel: Neighbouring, nullable: bool = False) -> QueryPlan:
    text = SCHEMA.format(relation=rel.value, k=K, nullable=str(nullable).lower())
    catalog = parse_catalog(text)
    query = validate(parse(sql), catalog, sql)
    plan = plan_query(query, catalog.policy, epsilon=Fraction(1), delta=Fraction(1, 10**6))
    check_plan(plan)
    return plan


def units() -> list[Unit]:
    rows = [(g, v) for g in GROUPS for v in VALUES]
    out: list[Unit] = []
    for n in range(1, K + 1):
        out += [tuple(c) for c in itertools.combinations_with_replacement(rows, n)]
    return out


UNITS = units()


def datasets(max_units: int) -> Iterator[tuple[Unit, ...]]:
    for n in range(0, max_units + 1):
        yield from itertools.combinations_with_replacement(range(len(UNITS)), n)  # type: ignore[misc]


def vector(ds: Sequence[int]) -> dict[str, tuple[Fraction, Fraction, int, int]]:
    """Per group: A, B, the count of non-NULL x, and COUNT(*)."""
    w = HI - LO
    out = {g: (Fraction(0), Fraction(0), 0, 0) for g in GROUPS}
    for u in ds:
        for g, x in UNITS[u]:
            a, b, n, star = out[g]
            if x is None:
                out[g] = (a, b, n, star + 1)
            else:
                out[g] = (a + (x - LO) / w, b + (HI - x) / w, n + 1, star + 1)
    return out


def neighbours(ds: tuple[int, ...], rel: Neighbouring) -> Iterator[tuple[int, ...]]:
    if rel is Neighbouring.ADD_REMOVE:
        for u in range(len(UNITS)):
            yield (*ds, u)
        for i in range(len(ds)):
            yield ds[:i] + ds[i + 1 :]
    else:
        for i in range(len(ds)):
            for u in range(len(UNITS)):
                yield (*ds[:i], u, *ds[i + 1 :])


@pytest.mark.parametrize("rel", [Neighbouring.ADD_REMOVE, Neighbouring.SUBSTITUTE])
def test_the_joint_vector_moves_within_its_calibration_and_determines_the_count(
    rel: Neighbouring,
) -> None:
    plan = plan_of("SELECT g, COUNT(x), AVG(x) FROM t GROUP BY g", rel)
    mean = plan.aggregates[1]
    assert mean.method is Method.JOINT and mean.stat is not None
    claimed = mean.stat.scale * mean.stat.epsilon
    worst = Fraction(0)
    for ds in datasets(2):
        v = vector(ds)
        for g in GROUPS:
            a, b, n, _ = v[g]
            assert a + b == n
        for other in neighbours(ds, rel):
            v2 = vector(other)
            moved = sum(abs(v[g][0] - v2[g][0]) + abs(v[g][1] - v2[g][1]) for g in GROUPS)
            assert moved <= claimed, (ds, other, moved, claimed)
            worst = max(worst, moved)
    assert worst == claimed  # tight: a smaller calibration would be caught here


def test_teeth_count_star_of_a_nullable_measure_is_not_the_joint_count() -> None:
    """With a NULL row A + B misses it: deriving COUNT(*) there would be wrong, and the
    planner does not."""
    ds = (UNITS.index((("F", None),)),)
    a, b, n, star = vector(ds)["F"]
    assert a + b == n == 0 and star == 1
    sql = "SELECT g, COUNT(*), AVG(x) FROM t GROUP BY g"
    nullable = plan_of(sql, Neighbouring.ADD_REMOVE, nullable=True)
    assert derivable_counts(nullable.query) == {}
    assert nullable.aggregates[0].derived is None
    strict = plan_of(sql, Neighbouring.ADD_REMOVE, nullable=False)
    assert strict.aggregates[0].derived is not None
