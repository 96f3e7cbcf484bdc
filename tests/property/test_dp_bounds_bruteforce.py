"""The scores of ``schema init --dp-bounds`` (``dpproxy/mechanisms/dp_bounds.py``) move by at most
their declared sensitivity between neighbouring datasets, brute force, on the real SQL.

For a drawn table of (unit, value) rows (several rows per unit, NULLs, rows without a unit), the
counts are computed by the SQL the command runs (``backends/opener.bounds_sql``) on DuckDB, then
the score vectors with their penalties (``lower_scores``/``upper_scores`` + ``penalty``). For every
neighbour — each unit removed; a new unit added with 1..5 rows of extreme values; each unit's rows
replaced by extreme ones (substitution) — the L∞ distance between the vectors must not exceed
``SENSITIVITY``. Tightness: one neighbour attains 19 (add/remove) or 20 (substitution), so the
constant is not larger than needed either.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpproxy.backends.opener import bounds_sql
from dpproxy.mechanisms.dp_bounds import (
    QUANTILE,
    SENSITIVITY,
    candidates,
    lower_scores,
    penalty,
    upper_scores,
)

GRID = candidates(integer=True)
SCALE = Fraction(160)  # ε′ = 1/4: any data-independent penalty cancels out
EXTREMES = (-(10**16), -7, 0, 3, 10**16, None)

Rows = list[tuple[int | None, int | None]]


_CON = duckdb.connect()
_CON.execute("CREATE TABLE t (u INTEGER, x BIGINT)")
_SQL = bounds_sql("t", "u", "x", GRID)


def scores(rows: Rows) -> tuple[list[int], list[int]]:
    con = _CON
    con.execute("DELETE FROM t")
    if rows:
        values = ", ".join(
            f"({'NULL' if u is None else u}, {'NULL' if x is None else x})" for u, x in rows
        )
        con.execute(f"INSERT INTO t VALUES {values}")
    row = con.execute(_SQL).fetchone()
    assert row is not None
    k = len(GRID)
    n, below, above = int(row[0]), row[1 : k + 1], row[k + 1 :]
    last = k - 1
    lows = [s + penalty(last - i, SCALE) for i, s in enumerate(lower_scores(below, n))]
    highs = [s + penalty(i, SCALE) for i, s in enumerate(upper_scores(above, n))]
    return lows, highs


def distance(a: tuple[list[int], list[int]], b: tuple[list[int], list[int]]) -> int:
    return max(max(abs(x - y) for x, y in zip(a[i], b[i], strict=True)) for i in (0, 1))


def neighbours(rows: Rows) -> list[tuple[str, Rows]]:
    units = sorted({u for u, _ in rows if u is not None})
    out: list[tuple[str, Rows]] = []
    for u in units:
        out.append((f"remove {u}", [r for r in rows if r[0] != u]))
    new = max(units, default=0) + 1
    for many in (1, 5):
        for value in EXTREMES:
            out.append((f"add {many}×{value}", rows + [(new, value)] * many))
    for u in units:
        kept = [r for r in rows if r[0] != u]
        for value in (EXTREMES[0], EXTREMES[4], 1):
            out.append((f"replace {u} by {value}", [*kept, (u, value), (u, value)]))
    return out


row_strategy = st.tuples(
    st.one_of(st.none(), st.integers(1, 8)),
    st.one_of(st.none(), st.integers(-1000, 1000), st.sampled_from([-(10**12), 10**12])),
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_strategy, min_size=0, max_size=30))
def test_every_score_moves_by_at_most_the_sensitivity(rows: Rows) -> None:
    base = scores(rows)
    for name, other in neighbours(rows):
        assert distance(base, scores(other)) <= SENSITIVITY, name


def test_the_sensitivity_is_attained() -> None:
    assert SENSITIVITY == QUANTILE.denominator
    rows: Rows = [(u, 10 * u) for u in range(1, 41)]
    base = scores(rows)
    added = scores([*rows, (41, -(10**16))])  # one unit below every candidate but the first
    assert distance(base, added) == SENSITIVITY - 1
    replaced = scores([r for r in rows if r[0] != 40] + [(40, -(10**16))])
    assert distance(base, replaced) == SENSITIVITY
