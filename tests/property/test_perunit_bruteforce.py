"""Per-unit subqueries keep stability 1, checked against brute force.

The argument of ``dpproxy/sql/perunit.py``: a subquery grouped by the privacy unit has at most
one row per unit, a function of that unit's rows alone (rows with a NULL unit are dropped), so
adding or removing one customer with all its rows adds or removes at most one row of the derived
relation and the outer query is planned with one row per unit and no contribution bounding.

The harness is the one of ``test_join_bruteforce.py`` (customers, their orders and line items,
a public ``nation`` table; D and all its neighbours D ∓ one customer with all its rows, run
through the rewritten SQL without noise, with a fixed secret): for every neighbour, the change
of every primitive stays within the plan's sensitivity in L1, L2 and L∞. The added customers
include the heavy ones of that module (more orders and line items than the schema declares,
values beyond the bounds, NaN and ±inf), so the checks cover the clamps of the derived columns
(``COUNT ∈ [0, ∞)`` clamped by ``LEAST`` in the outer query, SUM of a clamped price ≥ 0).

Teeth: the same oracle catches a subquery grouped by the *order* instead of the customer when the
check of ``sql/perunit.py`` is switched off (one added customer then adds one derived row per
order), and the planner refuses that query when it is on.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpproxy.errors import UnsupportedQuery
from dpproxy.planning import scalars
from dpproxy.sql import perunit
from tests.property.test_join_bruteforce import (
    ADDED0,
    D0,
    EXAMPLES,
    FIXED_ADDED,
    SCHEMAS,
    Customer,
    Db,
    Harness,
    Order,
    check_neighbours,
    databases,
    harness_fixture,
    new_customers,
)

PER_CUSTOMER = (
    "(SELECT o_custkey, COUNT(*) AS n, SUM(o_totalprice) AS spent, MAX(o_totalprice) AS top "
    "FROM orders GROUP BY o_custkey) t"
)
QUERIES = {
    "count_spenders": "SELECT {hint}COUNT(*) FROM " + PER_CUSTOMER + " WHERE spent > 500",
    "sum_least": "SELECT {hint}SUM(LEAST(n, 3)), AVG(top) FROM " + PER_CUSTOMER,
    "avg_least_join": "SELECT {hint}AVG(LEAST(n, 5)) FROM (SELECT c_custkey, COUNT(*) AS n "
    "FROM customer JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey) t",
    "histogram": "SELECT {hint}n, COUNT(*) FROM " + PER_CUSTOMER + " GROUP BY n",
    "buckets": "SELECT {hint}CASE WHEN n > 2 THEN 'many' ELSE 'few' END AS b, COUNT(*), "
    "SUM(LEAST(spent, 2000)) FROM " + PER_CUSTOMER + " GROUP BY 1",
    "q13_left_join": "SELECT {hint}c_count, COUNT(*) FROM (SELECT c_custkey, COUNT(o_orderkey) "
    "FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_totalprice > 100 "
    "GROUP BY c_custkey) AS c_orders (c_custkey, c_count) GROUP BY c_count",
    "items_per_customer": "SELECT {hint}SUM(LEAST(q, 100)), COUNT(*) FROM (SELECT o_custkey, "
    "SUM(l_quantity) AS q FROM orders JOIN lineitem ON l_orderkey = o_orderkey "
    "GROUP BY o_custkey HAVING COUNT(*) > 1) t",
    "arithmetic": "SELECT {hint}AVG(LEAST(GREATEST(mean, 0), 500)), SUM(LEAST(spread, 100)) "
    "FROM (SELECT o_custkey, SUM(o_totalprice) / COUNT(*) AS mean, MAX(o_totalprice) - "
    "MIN(o_totalprice) AS spread FROM orders GROUP BY o_custkey) t",
    "cte_distinct": "WITH pc AS (SELECT o_custkey, COUNT(DISTINCT o_tags) AS k FROM orders "
    "WHERE o_totalprice < 900 GROUP BY o_custkey) SELECT {hint}SUM(LEAST(k, 2)) FROM pc",
}
HINTS = ("", "max_rows=1", "max_rows=3")
NATION = "dup_spread"


def make_sql(name: str, hint: str) -> str:
    return QUERIES[name].format(hint=f"/*+ dpproxy {hint} */ " if hint else "")


harness = harness_fixture("perunit_bruteforce")


@pytest.mark.parametrize("name", list(QUERIES))
@EXAMPLES
@given(
    schema=st.sampled_from(SCHEMAS),
    hint=st.sampled_from(HINTS),
    d=databases(),
    added=st.lists(new_customers(), min_size=1, max_size=2),
)
def test_per_unit_neighbours_within_sensitivity(
    harness: Harness, name: str, schema: str, hint: str, d: Db, added: list[Customer]
) -> None:
    """|f(D) − f(D')| ≤ Δ for every neighbour D' = D ∓ one customer with all its rows."""
    prepared = harness.prepare(schema, NATION, make_sql(name, hint))
    assert "__derived" in (prepared.sql or "")
    check_neighbours(harness, prepared, NATION, d, [*added, *FIXED_ADDED])


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_per_unit_query_on_fixed_data(harness: Harness, schema: str) -> None:
    """Every query and hint on hand-picked data with the fixed added customers (NaN, ±inf)."""
    for name in QUERIES:
        for hint in HINTS:
            prepared = harness.prepare(schema, NATION, make_sql(name, hint))
            assert prepared.plan.stability.rows == 1 or hint
            check_neighbours(harness, prepared, NATION, D0, ADDED0)


PER_ORDER = (
    "SELECT COUNT(*) FROM (SELECT o_orderkey, COUNT(*) AS n FROM orders GROUP BY o_orderkey) t"
)


def test_grouping_by_another_key_would_break_the_bound(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the check, a subquery grouped by the order has one row per order: one added
    customer moves the outer COUNT by its number of orders, beyond the sensitivity 1 that the
    planner assumes. With the checks, the query is refused: an aggregate subquery grouped by
    anything but the unit is released first only over a public key domain
    (``planning/relations.py``), which o_orderkey has not, and never taken as per-unit."""
    with pytest.raises(UnsupportedQuery, match="o_orderkey, which has no public domain"):
        harness.engine("declared", NATION).prepare(PER_ORDER, secret=1)
    monkeypatch.setattr(scalars, "find_relations", lambda tree, catalog: [])
    with pytest.raises(UnsupportedQuery, match="must be exactly the privacy unit"):
        harness.engine("declared", NATION).prepare(PER_ORDER, secret=1)
    monkeypatch.setattr(
        perunit, "_unit_key", lambda inner, group, scope: scope.resolve(group.expressions[0])
    )
    prepared = harness.engine("declared", NATION).prepare(PER_ORDER, secret=1)
    d = Db(tuple(Customer(k, 0, 1.0, (Order(10 * k, 1.0, None, (1.0,)),)) for k in (1, 2, 3)))
    loud = Customer(50_000, 0, 1.0, tuple(Order(60_000 + i, 1.0, None, (1.0,)) for i in range(3)))
    with pytest.raises(AssertionError, match="brute force L1"):
        check_neighbours(harness, prepared, NATION, d, [loud])
