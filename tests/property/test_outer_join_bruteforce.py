"""Outer joins keep their sensitivity, checked against brute force.

The argument of ``dpproxy/sql/outer.py``: a LEFT, RIGHT or FULL join whose ON clause ties the
nullable private side to the kept side's unit gives rows that each belong to one unit and depend
on that unit's rows alone (a customer without orders keeps one row with NULLs, whatever the
other customers hold), so the keyed truncation to τ rows per unit bounds them as it bounds an
inner join; a private table's LEFT JOIN with a public one keeps each private row max(1, m)
times; a public table kept by a RIGHT JOIN adds rows that every accepted aggregate ignores
(it reads a column of the private side, NULL there).

The harness is the one of ``test_join_bruteforce.py`` (customers, their orders and line items,
a public ``nation`` whose keys are sometimes duplicated or missing; D and all its neighbours
D ∓ one customer with all its rows, including heavy ones beyond the schema, NaN and ±inf, run
through the rewritten SQL without noise and with a fixed secret): for every neighbour, every
primitive moves within the plan's sensitivity in L1, L2 and L∞.

The honest sensitivity of COUNT(*) over a public table kept by an outer join (an added
customer empties the NULL rows of the nation rows it matches and adds its own rows: the change
is at most max(1, rows per unit) per nation row only if the matches are counted after the
truncation) is not what dpproxy's SQL computes — the outer join decides which public rows are
unmatched before the truncation — so that query is refused (``test_count_star_over_kept_public
_rows_is_refused``).

Teeth: the same oracle fails when the plan under-states the bound it derived — every
sensitivity halved, or the public fan-out factor (``nation`` rows per key) dropped from the
rows one customer has after a LEFT JOIN with a public table, or after an inner join with it
followed by a LEFT JOIN (``test_understated_sensitivity_is_caught``).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpproxy.engine import Prepared
from dpproxy.errors import UnsupportedQuery
from dpproxy.planning.plan import QueryPlan
from tests.property.test_join_bruteforce import (
    ADDED0,
    D0,
    EXAMPLES,
    FIXED_ADDED,
    NATIONS,
    SCHEMAS,
    Customer,
    Db,
    Harness,
    check_neighbours,
    databases,
    harness_fixture,
    new_customers,
)

QUERIES = {
    "left_is_null": "SELECT {hint}COUNT(*) FROM customer c LEFT JOIN orders o "
    "ON c.c_custkey = o.o_custkey WHERE o.o_orderkey IS NULL",
    "left_counts": "SELECT {hint}COUNT(o_orderkey), COUNT(*), SUM(o_totalprice) "
    "FROM customer LEFT JOIN orders ON c_custkey = o_custkey",
    "right_kept_orders": "SELECT {hint}COUNT(*), SUM(c_acctbal), COUNT(c_custkey) "
    "FROM customer RIGHT JOIN orders ON c_custkey = o_custkey",
    "full": "SELECT {hint}COUNT(c_custkey), COUNT(o_orderkey), COUNT(*) "
    "FROM customer FULL OUTER JOIN orders ON c_custkey = o_custkey",
    "orders_left_items": "SELECT {hint}COUNT(l_orderkey), SUM(l_quantity), COUNT(*) "
    "FROM orders LEFT JOIN lineitem ON o_orderkey = l_orderkey",
    "left_public_grouped": "SELECT {hint}n_name, COUNT(*), SUM(c_acctbal) "
    "FROM customer LEFT JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name",
    "public_kept": "SELECT {hint}COUNT(c_custkey), SUM(c_acctbal) "
    "FROM customer RIGHT JOIN nation ON c_nationkey = n_nationkey",
    "inner_then_left": "SELECT {hint}COUNT(o_orderkey), SUM(o_totalprice) FROM customer "
    "JOIN nation ON c_nationkey = n_nationkey LEFT JOIN orders ON c_custkey = o_custkey",
}
HINTS = ("", "max_rows=1", "max_rows=3")


def make_sql(name: str, hint: str) -> str:
    return QUERIES[name].format(hint=f"/*+ dpproxy {hint} */ " if hint else "")


harness = harness_fixture("outer_join_bruteforce")


@pytest.mark.parametrize("name", list(QUERIES))
@EXAMPLES
@given(
    schema=st.sampled_from(SCHEMAS),
    nation=st.sampled_from(list(NATIONS)),
    hint=st.sampled_from(HINTS),
    d=databases(),
    added=st.lists(new_customers(), min_size=1, max_size=2),
)
def test_outer_join_neighbours_within_sensitivity(
    harness: Harness,
    name: str,
    schema: str,
    nation: str,
    hint: str,
    d: Db,
    added: list[Customer],
) -> None:
    """|f(D) − f(D')| ≤ Δ for every neighbour D' = D ∓ one customer with all its rows."""
    sql = make_sql(name, hint)
    try:
        prepared = harness.prepare(schema, nation, sql)
    except UnsupportedQuery as e:  # τ from DP needs a cap the schema may not give
        pytest.fail(f"{sql}: {e}")
    assert " JOIN " in (prepared.sql or "")
    check_neighbours(harness, prepared, nation, d, [*added, *FIXED_ADDED])


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("nation", list(NATIONS))
def test_every_outer_join_on_fixed_data(harness: Harness, schema: str, nation: str) -> None:
    """Every query and hint on hand-picked data with the fixed added customers (NaN, ±inf)."""
    for name in QUERIES:
        for hint in HINTS:
            prepared = harness.prepare(schema, nation, make_sql(name, hint))
            check_neighbours(harness, prepared, nation, D0, ADDED0)


def test_count_star_over_kept_public_rows_is_refused(harness: Harness) -> None:
    """COUNT(*) would count the unmatched public rows, decided before the truncation."""
    with pytest.raises(UnsupportedQuery, match="public rows without a match"):
        harness.prepare(
            "declared",
            "unique",
            "SELECT COUNT(*) FROM customer RIGHT JOIN nation ON c_nationkey = n_nationkey",
        )


def understated(prepared: Prepared, k: Fraction) -> Prepared:
    """The same SQL with a plan claiming k × every sensitivity (k < 1: a broken bound)."""
    plan = prepared.plan
    assert isinstance(plan, QueryPlan)
    releases = tuple(replace(r, sensitivity=r.sensitivity.scaled(k)) for r in plan.releases)
    return replace(prepared, plan=replace(plan, releases=releases))


@pytest.mark.parametrize(
    ("name", "nation", "k", "why"),
    [
        ("left_counts", "unique", Fraction(1, 2), "every sensitivity halved"),
        ("orders_left_items", "unique", Fraction(1, 2), "every sensitivity halved"),
        ("right_kept_orders", "unique", Fraction(1, 2), "every sensitivity halved"),
        ("left_public_grouped", "dup_spread", Fraction(1, 3), "nation fan-out 3 dropped"),
        ("inner_then_left", "dup_spread", Fraction(1, 3), "nation fan-out 3 dropped"),
    ],
)
def test_understated_sensitivity_is_caught(
    harness: Harness, name: str, nation: str, k: Fraction, why: str
) -> None:
    """The harness has teeth: the honest plan passes on the fixed data, and the same SQL with
    a plan claiming less (every sensitivity halved, or the fan-out dropped) is caught — some
    neighbour moves a primitive past the bound."""
    prepared = harness.prepare("declared", nation, make_sql(name, ""))
    check_neighbours(harness, prepared, nation, D0, ADDED0)
    with pytest.raises(AssertionError, match="brute force L1"):
        check_neighbours(harness, understated(prepared, k), nation, D0, ADDED0)
