"""Partition selection on the released count itself (``dpproxy/planning/selfselect.py``).

Under add/remove with one group per unit the planner thresholds the query's own COUNT at the
whole ε instead of a separate unit count at ε/2: the count's noise halves and the threshold
falls (ε = 1, δ = 10⁻⁵: τ = 12 instead of 23). The plan checker recomputes the threshold from
the law of the noise drawn and refuses a lower one, or a shared selection where the argument
does not hold (substitution).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Laplace
from dpproxy.mechanisms.selection import selection_threshold
from dpproxy.planning import selfselect
from dpproxy.planning.check import check_plan
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import Cost

SCHEMA = """
version: 1
dataset: shop
privacy:
  neighbouring: {relation}
  epsilon: 1
  delta: 1.0e-5
  mechanism: laplace
tables:
  orders:
    private: true
    privacy_unit: customer
    max_groups_per_unit: {groups}
    max_rows_per_group_per_unit: {rows}
    columns:
      customer: {{type: integer}}
      city: {{type: text}}
      amount: {{type: integer, lower: 0, upper: 100}}
"""
DELTA = Fraction(1, 10**5)


def plan_of(
    sql: str, rel: Neighbouring = Neighbouring.ADD_REMOVE, groups: int = 1, rows: int = 1
) -> QueryPlan:
    catalog = parse_catalog(SCHEMA.format(relation=rel.value, groups=groups, rows=rows))
    query = validate(parse(sql), catalog, sql)
    plan = plan_query(query, catalog.policy, epsilon=Fraction(1), delta=DELTA)
    check_plan(plan)
    return plan


def test_the_count_is_thresholded_at_the_whole_epsilon() -> None:
    plan = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city")
    sel = plan.selection
    assert sel is not None and sel.shared
    (count,) = plan.releases
    assert sel.release.primitive == count.primitive  # no __units primitive
    assert [p.name for p in plan.primitives] == [count.primitive.name]
    assert isinstance(count.mechanism, Laplace) and count.mechanism.scale == 1
    assert sel.threshold == selection_threshold(Fraction(1), 1, DELTA) == 12
    assert plan.cost == Cost(Fraction(1), DELTA)


def test_with_a_sum_the_count_keeps_its_share_and_the_threshold() -> None:
    plan = plan_of("SELECT city, COUNT(*), SUM(amount) FROM orders GROUP BY city")
    assert plan.selection is not None and plan.selection.shared
    assert plan.cost == Cost(Fraction(1), DELTA)


@pytest.mark.parametrize(
    ("rel", "groups", "rows"),
    [(Neighbouring.SUBSTITUTE, 1, 1), (Neighbouring.ADD_REMOVE, 2, 1)],
)
def test_elsewhere_the_separate_unit_count_stays(rel: Neighbouring, groups: int, rows: int) -> None:
    plan = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city", rel, groups, rows)
    assert plan.selection is not None and not plan.selection.shared
    assert plan.primitives[-1].name == "__units"


def test_more_rows_per_unit_raise_the_threshold_and_the_separate_count_wins() -> None:
    """R = 2: an exclusive group may hold 2 rows, τ = τ₁ + 1 at twice the scale (24 against
    the separate plan's 23)."""
    plan = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city", rows=2)
    assert plan.selection is not None and not plan.selection.shared
    assert selfselect.shared_threshold(Fraction(2), 2, DELTA) == 24


def test_the_gaussian_variant_is_predicted_worse() -> None:
    assert selfselect.gaussian_threshold(Fraction(1), DELTA) > 12 + 10  # σ ≈ 5 against b = 1


def test_the_checker_refuses_a_lower_threshold_or_substitution() -> None:
    plan = plan_of("SELECT city, COUNT(*) FROM orders GROUP BY city")
    assert plan.selection is not None
    lower = dataclasses.replace(plan.selection, threshold=plan.selection.threshold - 1)
    with pytest.raises(InternalError):
        check_plan(dataclasses.replace(plan, selection=lower))
    with pytest.raises(InternalError):
        check_plan(dataclasses.replace(plan, neighbouring=Neighbouring.SUBSTITUTE))


def test_next_to_an_avg_the_count_takes_the_selection_share_and_is_thresholded() -> None:
    """COUNT(*) and AVG by private keys: the COUNT gets the selection's ε/2 as a released
    count (read off no joint mean) and is thresholded itself; the AVG keeps ε/2; the threshold
    is the one the separate unit count had, the count's error is lower than the derived one."""
    plan = plan_of("SELECT city, COUNT(*), AVG(amount) FROM orders GROUP BY city")
    sel = plan.selection
    assert sel is not None and sel.shared
    count, mean = plan.aggregates
    assert count.derived is None and mean.stat is not None and mean.stat.epsilon == Fraction(1, 2)
    (release,) = plan.releases
    assert isinstance(release.mechanism, Laplace) and release.mechanism.scale == 2
    assert sel.threshold == selection_threshold(Fraction(2), 1, DELTA / 2)
    assert plan.cost.epsilon == 1 and plan.cost.delta <= DELTA


def test_next_to_an_avg_under_substitution_the_unit_count_stays() -> None:
    plan = plan_of(
        "SELECT city, COUNT(*), AVG(amount) FROM orders GROUP BY city", Neighbouring.SUBSTITUTE
    )
    assert plan.selection is not None and not plan.selection.shared
