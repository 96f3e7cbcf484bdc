"""``dpproxy.spending`` and ``dpproxy.budget`` (``server/spending.py``) for an analyst who has
released nothing yet: empty spending, one budget row — not the internal error DuckDB's
``executemany`` with no rows used to cause (every BI tool's first look at the budget)."""

from __future__ import annotations

from fractions import Fraction

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.server import spending
from dpproxy.values import Cost


def test_a_new_analyst_sees_an_empty_spending_table_and_a_full_budget() -> None:
    accountant = MemoryAccountant(Cost(Fraction(10), Fraction(1, 10**5)))
    status, releases = accountant.status("zoe"), accountant.releases("zoe")
    assert releases == []
    fields, rows = spending.answer("SELECT * FROM dpproxy.spending", status, releases)
    assert rows == [] and [f[0] for f in fields][:3] == ["seq", "time", "kind"]
    fields, rows = spending.answer(
        "SELECT total_epsilon, spent_epsilon, remaining_epsilon FROM dpproxy.budget",
        status,
        releases,
    )
    assert rows == [(10.0, 0.0, 10.0)]
