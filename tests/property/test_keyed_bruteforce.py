"""The keyed release of a correlated subquery keeps its plan's sensitivity, checked against
brute force (``planning/keyed.py``).

A correlated subquery keyed on a public table (here ``nation``) is released as one grouped query
over the public set of keys: ``WHERE <inner key> IN (k0, k1, ...) GROUP BY <inner key>`` (one
integer key; ``GROUP BY CASE WHEN ... THEN <index> ... END`` otherwise), every key released, a
customer's rows bounded per unit across all the keys they touch. The harness is
the one of ``test_join_bruteforce.py`` (customers, their orders and line items, a public
``nation`` table; D and all its neighbours D ∓ one customer with all its rows, run through the
rewritten SQL of the keyed release without noise, with a fixed secret): for every neighbour, the
change of every primitive stays within the plan's sensitivity in L1, L2 and L∞. One query keys
line items by their quantity (``l_quantity = n_nationkey``), so one customer's rows spread over
several keys: the L1 bound must hold across the groups, not per group. Customers also use a
nation key no nation row has (4): their rows are outside the domain and must not count.

Teeth: the same oracle fails when the keyed release's plan under-states its bound — every
sensitivity halved (``test_understated_sensitivity_is_caught``, with a customer whose line items
all fall on one key, so that the quantity-keyed count moves by the whole τ).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpproxy.engine import Prepared
from dpproxy.planning.keyed import KeyedPart
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.scalars import ComposedPlan
from tests.property.test_join_bruteforce import (
    ADDED0,
    D0,
    EXAMPLES,
    FIXED_ADDED,
    NATIONS,
    NEW_KEY,
    NEW_ORDER,
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
    # one row per customer, one key per customer
    "balance_per_nation": "SELECT {hint}COUNT(*) FROM nation WHERE n_name <> 'EGYPT' AND 0 < "
    "(SELECT AVG(c_acctbal) FROM customer WHERE c_nationkey = n_nationkey)",
    # a customer's line items spread over several keys
    "items_by_quantity": "SELECT {hint}n_name FROM nation WHERE 2 < "
    "(SELECT SUM(l_quantity) FROM lineitem WHERE l_quantity = n_nationkey)",
    # COUNT only (0 over no rows), through a join of orders and customers
    "orders_per_nation": "SELECT {hint}COUNT(*) FROM nation n WHERE 1 > (SELECT COUNT(*) "
    "FROM orders o JOIN customer c ON o.o_custkey = c.c_custkey WHERE c.c_nationkey = "
    "n.n_nationkey AND o.o_totalprice > 10)",
}
HINTS = ("", "max_rows=1", "max_rows=3", "max_rows_cap=4")
SECRET = 0x10_1A_5EC7
# The nation tables with keys: an empty one leaves no key to release, so there is no keyed
# release to check (test_no_keys_no_private_release).
KEYED_NATIONS = [n for n, rows in NATIONS.items() if rows]


def keyed(harness: Harness, schema: str, nation: str, name: str, hint: str) -> Prepared:
    """The prepared keyed release (fixed secret) of the query's correlated subquery."""
    sql = QUERIES[name].format(hint=f"/*+ dpproxy {hint} */ " if hint else "")
    composed = harness.engine(schema, nation).prepare(sql).plan
    assert isinstance(composed, ComposedPlan)
    (part,) = composed.scalars
    assert isinstance(part, KeyedPart)
    kept = {k for k, n in NATIONS[nation] if n != "EGYPT" or name != "balance_per_nation"}
    assert {k for (k,) in part.keys} == kept  # the public domain, exactly
    prepared = harness.prepare(schema, nation, part.sql)
    assert isinstance(prepared.plan, QueryPlan) and prepared.plan.selection is None
    (group,) = prepared.plan.query.keys  # one integer key: grouped by itself over its IN list
    assert group.domain is not None and set(group.domain) == kept  # public: every key released
    return prepared


harness = harness_fixture("keyed_bruteforce")


@pytest.mark.parametrize("name", list(QUERIES))
@EXAMPLES
@given(
    schema=st.sampled_from(SCHEMAS),
    nation=st.sampled_from(KEYED_NATIONS),
    hint=st.sampled_from(HINTS),
    d=databases(),
    added=st.lists(new_customers(), min_size=1, max_size=2),
)
def test_keyed_neighbours_within_sensitivity(
    harness: Harness, name: str, schema: str, nation: str, hint: str, d: Db, added: list[Customer]
) -> None:
    """|f(D) − f(D')| ≤ Δ for every neighbour D' = D ∓ one customer with all its rows."""
    prepared = keyed(harness, schema, nation, name, hint)
    check_neighbours(harness, prepared, nation, d, [*added, *FIXED_ADDED])


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_keyed_release_on_fixed_data(harness: Harness, schema: str) -> None:
    """Every query and hint on hand-picked data with the fixed added customers (NaN, ±inf)."""
    for name in QUERIES:
        for nation in KEYED_NATIONS:
            for hint in HINTS:
                prepared = keyed(harness, schema, nation, name, hint)
                check_neighbours(harness, prepared, nation, D0, ADDED0)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_no_keys_no_private_release(harness: Harness, schema: str) -> None:
    """An empty nation table when the engine reads it: no key, so no subquery value is released
    and the query reads the public table alone (answered exactly and at no cost)."""
    for name in QUERIES:
        for hint in HINTS:
            sql = QUERIES[name].format(hint=f"/*+ dpproxy {hint} */ " if hint else "")
            plan = harness.engine(schema, "empty").prepare(sql).plan
            assert isinstance(plan, PublicPlan) and plan.tables == ("nation",), (name, plan)


# A customer whose 16 line items all have quantity 3 (a nation key): the quantity-keyed query's
# count moves by the whole τ = 16, its sum by 48.
KEYED_HEAVY = Customer(
    NEW_KEY, 1, 10.0, tuple(Order(NEW_ORDER + i, 100.0, "a", (3.0,) * 4) for i in range(4))
)


def understated(prepared: Prepared, k: Fraction) -> Prepared:
    """The same SQL with a plan claiming k × every sensitivity (k < 1: a broken bound)."""
    plan = prepared.plan
    assert isinstance(plan, QueryPlan)
    releases = tuple(replace(r, sensitivity=r.sensitivity.scaled(k)) for r in plan.releases)
    return replace(prepared, plan=replace(plan, releases=releases))


@pytest.mark.parametrize("name", list(QUERIES))
def test_understated_sensitivity_is_caught(harness: Harness, name: str) -> None:
    """The harness has teeth: the honest keyed release passes on the fixed data, and the same
    SQL with a plan claiming half of every sensitivity is caught — some neighbour moves a
    primitive past the bound."""
    prepared = keyed(harness, "declared", "unique", name, "")
    added = (*ADDED0, KEYED_HEAVY)
    check_neighbours(harness, prepared, "unique", D0, added)
    with pytest.raises(AssertionError, match="brute force L1"):
        check_neighbours(harness, understated(prepared, Fraction(1, 2)), "unique", D0, added)
