"""UNION ALL of private relations in FROM: stability adds up, checked against brute force.

The argument of ``dpproxy/sql/unionrel.py``: every row of the union belongs to the unit of its
branch's row, so adding or removing one customer with all its rows changes exactly its rows in
each branch; the planner bounds every unit's rows of the union in SQL (to the sum of the
branches' declared bounds, a hint, or a bound chosen with DP) and calibrates the noise to that
bound.

The harness is the one of ``test_join_bruteforce.py`` (customers, their orders and line items
— line items reach their customer through orders —, D and all its neighbours D ∓ one customer
with all its rows, run through the rewritten SQL without noise, with a fixed secret): for every
neighbour, the change of every primitive stays within the plan's sensitivity in L1, L2 and L∞.
The added customers include the heavy ones of that module (more orders and line items than the
schema declares, values beyond the bounds, NaN and ±inf), so the checks cover the per-unit
bounding of the union and the clamps of its columns.

Teeth: the same oracle catches a union whose order branch is tagged with the *order* key
instead of the customer (each order then counts as a unit of its own, so bounding per tag does
not bound a customer) when that branch's unit is switched; the real validator never does that.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from dpproxy.sql import unionrel
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

CUST_ORDERS = (
    "(SELECT 'cust' AS src, c_acctbal AS v FROM customer UNION ALL "
    "SELECT 'order', o_totalprice FROM orders WHERE o_totalprice > 100) u"
)
QUERIES = {
    "count_sum": "SELECT {hint}COUNT(*), SUM(v) FROM " + CUST_ORDERS,
    "tagged": "SELECT {hint}src, COUNT(*), SUM(v) FROM " + CUST_ORDERS + " GROUP BY src",
    "avg": "SELECT {hint}AVG(v) FROM " + CUST_ORDERS,
    "three": "SELECT {hint}src, COUNT(*), SUM(q) FROM (SELECT 'cust' AS src, NULL AS q FROM "
    "customer UNION ALL SELECT 'order', NULL FROM orders UNION ALL SELECT 'item', l_quantity "
    "FROM lineitem) u GROUP BY src",
    "self_union": "SELECT {hint}COUNT(*), SUM(v) FROM (SELECT c_acctbal AS v FROM customer "
    "UNION ALL SELECT c_acctbal FROM customer WHERE c_acctbal > 0) u",
    "distinct_units": "SELECT {hint}COUNT(DISTINCT k) FROM (SELECT c_custkey AS k FROM customer "
    "UNION ALL SELECT o_custkey FROM orders) u",
}
HINTS = ("", "max_rows=1", "max_rows=3")
NATION = "unique"


def make_sql(name: str, hint: str) -> str:
    return QUERIES[name].format(hint=f"/*+ dpproxy {hint} */ " if hint else "")


harness = harness_fixture("union_bruteforce")


@pytest.mark.parametrize("name", list(QUERIES))
@EXAMPLES
@given(
    schema=st.sampled_from(SCHEMAS),
    hint=st.sampled_from(HINTS),
    d=databases(),
    added=st.lists(new_customers(), min_size=1, max_size=2),
)
def test_union_neighbours_within_sensitivity(
    harness: Harness, name: str, schema: str, hint: str, d: Db, added: list[Customer]
) -> None:
    """|f(D) − f(D')| ≤ Δ for every neighbour D' = D ∓ one customer with all its rows."""
    prepared = harness.prepare(schema, NATION, make_sql(name, hint))
    assert "__union" in (prepared.sql or "") and prepared.plan.needs_bounding
    check_neighbours(harness, prepared, NATION, d, [*added, *FIXED_ADDED])


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_union_query_on_fixed_data(harness: Harness, schema: str) -> None:
    """Every query and hint on hand-picked data with the fixed added customers (NaN, ±inf).
    The declared schema bounds customer (1) and orders (4): their union has 5 rows per unit."""
    for name in QUERIES:
        for hint in HINTS:
            prepared = harness.prepare(schema, NATION, make_sql(name, hint))
            if name == "count_sum" and schema == "declared" and not hint:
                assert prepared.plan.stability.rows == 5
            check_neighbours(harness, prepared, NATION, D0, ADDED0)


PER_ORDER_TAG = (
    "SELECT /*+ dpproxy max_rows=1 */ COUNT(*) FROM (SELECT c_acctbal AS v FROM customer "
    "UNION ALL SELECT o_totalprice FROM orders) u"
)


def test_a_wrong_unit_in_a_branch_would_break_the_bound(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tag the orders branch with o_orderkey instead of its unit o_custkey: a customer with
    three orders then has three "units" of one row each, so one row per unit keeps all three
    and the COUNT moves by 4 where the planner assumed 1. The oracle catches it."""
    real = unionrel.union_scope

    def wrong(*args: object, **kwargs: object) -> unionrel.UnionScope:
        scope = real(*args, **kwargs)  # type: ignore[arg-type]
        assert scope.union is not None
        branches = tuple(
            unionrel.Branch(b.table, b.source, exp.column("o_orderkey"), b.outputs, b.filters)
            if b.table.name == "orders"
            else b
            for b in scope.union.branches
        )
        scope.union = unionrel.UnionRelation(
            branches, scope.union.columns, scope.union.description
        )
        return scope

    d = Db(tuple(Customer(k, 0, 1.0, (Order(10 * k, 500.0, None, ()),)) for k in (1, 2, 3)))
    loud = Customer(50_000, 0, 1.0, tuple(Order(60_000 + i, 500.0, None, ()) for i in range(3)))
    honest = harness.engine("declared", NATION).prepare(PER_ORDER_TAG, secret=1)
    check_neighbours(harness, honest, NATION, d, [loud])  # the real validator: within Δ
    # sql/fromclause.py imports union_scope from unionrel when it meets a UNION in FROM (lazily)
    monkeypatch.setattr(unionrel, "union_scope", wrong)
    broken = harness.engine("customer_only", NATION).prepare(PER_ORDER_TAG, secret=1)
    assert "o_orderkey AS __unit_of_row" in (broken.sql or "")
    with pytest.raises(AssertionError, match="brute force L1"):
        check_neighbours(harness, broken, NATION, d, [loud])
