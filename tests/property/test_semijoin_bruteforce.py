"""Semi- and anti-joins keep the sensitivity of the outer query, checked against brute force.

The stability argument of ``dpproxy/sql/semijoins.py``: an ``EXISTS`` / ``NOT EXISTS`` /
``[NOT] IN (SELECT …)`` filter whose subquery reads public rows, or private rows tied to the
outer row's unit (``l.l_orderkey = o.o_orderkey``, ``o_custkey = c_custkey``), changes for an
outer row only with that row's own unit's data, so adding or removing one customer moves only
that customer's rows, which the rewrite then bounds to τ like any filtered rows. Its plan has
the sensitivity of the same query without the filter.

The harness is the one of ``test_join_bruteforce.py`` (customers, their orders and line items,
a public ``nation`` table; D and all its neighbours D ∓ one customer with all its rows, run
through the rewritten SQL without noise, with a fixed secret): for every neighbour, the change
of every primitive stays within the plan's sensitivity in L1, L2 and L∞. The added customers
include the heavy ones of that module (more orders and line items than any τ, values beyond the
bounds), whose rows make EXISTS true for their own orders only. Two queries join tables inside
the subquery (orders and line items tied along the chain of references; a public table).

Teeth: the same oracle catches an uncorrelated subquery over the line items when the proof of
``sql/semijoins.py`` is switched off (one added customer's line item then flips the filter for
every order), and the planner refuses that query when it is on.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpproxy.errors import UnsupportedQuery
from dpproxy.sql import semijoins
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

QUERIES = {
    "exists_items": "SELECT {hint}COUNT(*), SUM(o_totalprice) FROM orders o WHERE EXISTS "
    "(SELECT 1 FROM lineitem l WHERE l.l_orderkey = o.o_orderkey AND l.l_quantity > 20)",
    "not_exists_items": "SELECT {hint}COUNT(*), AVG(o_totalprice) FROM orders o WHERE NOT EXISTS "
    "(SELECT * FROM lineitem l WHERE l.l_orderkey = o.o_orderkey AND l.l_quantity < 10)",
    "in_items": "SELECT {hint}COUNT(*) FROM orders WHERE o_orderkey IN "
    "(SELECT l_orderkey FROM lineitem WHERE l_quantity BETWEEN 5 AND 45)",
    "not_in_items": "SELECT {hint}SUM(o_totalprice) FROM orders WHERE o_orderkey NOT IN "
    "(SELECT l_orderkey FROM lineitem WHERE l_quantity > 30)",
    "customers_without_orders": "SELECT {hint}COUNT(*), SUM(c_acctbal) FROM customer WHERE "
    "NOT EXISTS (SELECT 1 FROM orders WHERE o_custkey = c_custkey AND o_totalprice > 500)",
    "customers_in_orders": "SELECT {hint}COUNT(*) FROM customer WHERE c_custkey IN "
    "(SELECT o_custkey FROM orders WHERE o_totalprice < 300)",
    # A line item and the other line items of its order (TPC-H Q21's l1, l2, l3).
    "items_of_the_same_order": "SELECT {hint}COUNT(*), SUM(l1.l_quantity) FROM lineitem l1 "
    "WHERE EXISTS (SELECT 1 FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey "
    "AND l2.l_quantity > l1.l_quantity) AND NOT EXISTS (SELECT 1 FROM lineitem l3 "
    "WHERE l3.l_orderkey = l1.l_orderkey AND l3.l_quantity < 5)",
    "join_grouped_not_exists": "SELECT {hint}n_name, COUNT(*) FROM orders o "
    "JOIN customer c ON o.o_custkey = c.c_custkey JOIN nation n ON c.c_nationkey = n.n_nationkey "
    "WHERE NOT EXISTS (SELECT 1 FROM lineitem l WHERE l.l_orderkey = o.o_orderkey) "
    "GROUP BY n_name",
    "public_in": "SELECT {hint}COUNT(*), SUM(c_acctbal) FROM customer WHERE c_nationkey IN "
    "(SELECT n_nationkey FROM nation WHERE n_name <> 'BRAZIL')",
    # Joins inside the subquery: line items tied through their order, a public nation.
    "chain_orders_items": "SELECT {hint}COUNT(*), SUM(c_acctbal) FROM customer c WHERE EXISTS "
    "(SELECT 1 FROM orders o JOIN lineitem l ON l.l_orderkey = o.o_orderkey "
    "WHERE o.o_custkey = c.c_custkey AND l.l_quantity > 40)",
    "customer_nation_inside": "SELECT {hint}COUNT(*) FROM orders o WHERE NOT EXISTS "
    "(SELECT 1 FROM customer c2 JOIN nation n ON c2.c_nationkey = n.n_nationkey "
    "WHERE c2.c_custkey = o.o_custkey AND n.n_name = 'BRAZIL')",
}
HINTS = ("", "max_rows=1", "max_rows=3", "max_rows_cap=4")
NATION = "dup_spread"


def make_sql(name: str, hint: str) -> str:
    return QUERIES[name].format(hint=f"/*+ dpproxy {hint} */ " if hint else "")


harness = harness_fixture("semijoin_bruteforce")


@pytest.mark.parametrize("name", list(QUERIES))
@EXAMPLES
@given(
    schema=st.sampled_from(SCHEMAS),
    hint=st.sampled_from(HINTS),
    d=databases(),
    added=st.lists(new_customers(), min_size=1, max_size=2),
)
def test_semijoin_neighbours_within_sensitivity(
    harness: Harness, name: str, schema: str, hint: str, d: Db, added: list[Customer]
) -> None:
    """|f(D) − f(D')| ≤ Δ for every neighbour D' = D ∓ one customer with all its rows."""
    prepared = harness.prepare(schema, NATION, make_sql(name, hint))
    assert "EXISTS" in (prepared.sql or "")
    check_neighbours(harness, prepared, NATION, d, [*added, *FIXED_ADDED])


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_semijoin_on_fixed_data(harness: Harness, schema: str) -> None:
    """Every query and hint on hand-picked data with the fixed added customers (NaN, ±inf)."""
    for name in QUERIES:
        for hint in HINTS:
            prepared = harness.prepare(schema, NATION, make_sql(name, hint))
            check_neighbours(harness, prepared, NATION, D0, ADDED0)


UNCORRELATED = (
    "SELECT /*+ dpproxy max_rows=3 */ COUNT(*) FROM orders o WHERE EXISTS "
    "(SELECT 1 FROM lineitem l WHERE l.l_quantity > 45)"
)


def test_an_uncorrelated_subquery_would_break_the_bound(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the proof, one customer's line item decides the filter of every other order:
    the oracle sees the change exceed the sensitivity. With it, the query is refused."""
    with pytest.raises(UnsupportedQuery, match="must be tied to the outer row's privacy unit"):
        harness.engine("declared", NATION).prepare(UNCORRELATED, secret=1)
    monkeypatch.setattr(semijoins, "prove_tied", lambda *args: None)
    prepared = harness.engine("declared", NATION).prepare(UNCORRELATED, secret=1)
    # Several customers with small quantities; the added one has a quantity of 50.
    d = Db(tuple(Customer(k, 0, 1.0, (Order(10 * k, 1.0, None, (1.0,)),)) for k in (1, 2, 3, 4)))
    loud = Customer(50_000, 0, 1.0, (Order(60_000, 1.0, None, (50.0,)),))
    with pytest.raises(AssertionError, match="brute force L1"):
        check_neighbours(harness, prepared, NATION, d, [loud])
