"""``release/cells.py``: a bare column read in one pass gives every cell's value and error bound
exactly as the per-cell functions do, for every type a released cell can hold."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

import pytest

from dpproxy.errors import InternalError
from dpproxy.release.cells import bare_column, bare_half_widths, half_width, number

CELLS: list[Any] = [
    0, 1, -7, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**400, -(10**400), True, False,
    0.0, -0.0, 2.5, -1e300, math.inf, -math.inf, math.nan, None, "text", Decimal("2.5"),
    datetime.date(2024, 2, 29),
]  # fmt: skip
SPANS: list[tuple[float, float] | None] = [None, (0.0, 1.0), (-3.0, 9.5), (5.0, 5.0)]


def test_a_bare_column_is_every_cell_through_number() -> None:
    envs = [{"__agg_0": v, "other": 1} for v in CELLS]
    got = bare_column("__agg_0", envs)
    want = [number(v) for v in CELLS]
    assert [(type(g), repr(g)) for g in got] == [(type(w), repr(w)) for w in want]
    assert got[3] == 2**63 - 1 and type(got[3]) is int and got[5] == 2.0**63  # beyond 64 bits
    assert got[7] == math.inf and got[8] == -math.inf and got[9] is True  # beyond doubles


def test_its_error_bounds_are_every_cell_through_half_width() -> None:
    groups = [({}, {"__agg_0": s}) for s in SPANS for _ in CELLS]
    values = [number(v) for _ in SPANS for v in CELLS]
    got = bare_half_widths("__agg_0", groups, values)
    want = [half_width(spans["__agg_0"], v) for (_, spans), v in zip(groups, values, strict=True)]
    assert [repr(g) for g in got] == [repr(w) for w in want]
    assert got[len(CELLS) + 9] is None  # a bool has no error bound
    assert got[len(CELLS) + 2] == 8.0  # -7 and the span (0, 1): max(-7 - 0, 1 + 7, 0)
    assert bare_half_widths("__agg_1", groups[:2], values[:2]) == [None, None]  # no span


def test_an_unbound_name_is_an_internal_error() -> None:
    with pytest.raises(InternalError):
        bare_column("__agg_3", [{"__agg_0": 1}])


def test_a_query_without_output_columns_releases_one_empty_row_per_group() -> None:
    """``SELECT FROM t GROUP BY k`` (PostgreSQL allows an empty select list): the column-wise
    assembly has no column to transpose, so the rows are built from the groups themselves,
    as before it (a regression the SQL fuzzer found: zip of no columns against the groups
    raised ValueError after the database had answered, charged as an internal error)."""
    import dpproxy

    con = dpproxy.connect(budget_epsilon=1000, budget_delta="0.5")
    try:
        cur = con.cursor()
        for sql in (
            "SELECT FROM adult GROUP BY sex",
            "SELECT FROM (SELECT * FROM adult WHERE age IS NULL) t GROUP BY sex",
        ):
            cur.execute(sql)
            assert cur.description == () and cur.fetchall() == [(), ()]
    finally:
        con.close()
