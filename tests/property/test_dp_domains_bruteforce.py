"""The counts of ``schema init --dp-bounds``' domains (``dpproxy/mechanisms/dp_domains.py``) move
as its privacy argument says between neighbouring datasets, brute force, on the real SQL.

For a drawn table of (unit, value) rows (several rows and values per unit, NULL values, rows
without a unit), the per-value unit counts are computed by the SQL the command runs
(``backends/opener.domain_sql``) on DuckDB. For every neighbour — each unit removed; a new unit
added with 1..3 rows of values old or new; each unit's rows replaced by other rows
(substitution) — the count vectors must be at L1 distance at most ``SENSITIVITY`` (at most 1
under add/remove), and the values one dataset holds and the other not must number at most
``EXCLUSIVE`` (1 under add/remove), each with exactly one unit where it is held. Tightness: a
substitution attains both constants.
"""

from __future__ import annotations

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpproxy.backends.opener import count_for_domain, domain_sql
from dpproxy.mechanisms.dp_domains import EXCLUSIVE, SENSITIVITY

Rows = list[tuple[int | None, str | None]]
VALUES = ("a", "b", "c", "d", "it's", "")
NEW = (("new",), ("a", "new"), ("a", "b", "c"), (None, "zz"))  # an added unit's values

_CON = duckdb.connect()
_CON.execute("CREATE TABLE t (u INTEGER, x VARCHAR)")
_SQL = domain_sql("t", "u", "x")


def counts(rows: Rows) -> dict[str, int]:
    _CON.execute("DELETE FROM t")
    if rows:
        _CON.executemany("INSERT INTO t VALUES (?, ?)", rows)
    out = count_for_domain(_CON, _SQL)
    assert len({v for v, _ in out}) == len(out) and all(n >= 1 for _, n in out)
    return dict(out)


def moves(a: dict[str, int], b: dict[str, int]) -> tuple[int, list[tuple[str, int]]]:
    """(the L1 distance, the values only one side holds with their count there)."""
    l1 = sum(abs(a.get(v, 0) - b.get(v, 0)) for v in a.keys() | b.keys())
    only = [(v, a[v]) for v in a.keys() - b.keys()] + [(v, b[v]) for v in b.keys() - a.keys()]
    return l1, only


def neighbours(rows: Rows) -> list[tuple[str, bool, Rows]]:
    """(name, is a substitution, rows) for every neighbour tried."""
    units = sorted({u for u, _ in rows if u is not None})
    new = max(units, default=0) + 1
    out: list[tuple[str, bool, Rows]] = [
        (f"remove {u}", False, [r for r in rows if r[0] != u]) for u in units
    ]
    for values in NEW:
        out.append((f"add {values}", False, rows + [(new, v) for v in values]))
    for u in units:
        kept = [r for r in rows if r[0] != u]
        for values in NEW:
            out.append((f"replace {u} by {values}", True, kept + [(u, v) for v in values]))
    return out


row_strategy = st.tuples(
    st.one_of(st.none(), st.integers(1, 6)),
    st.one_of(st.none(), st.sampled_from(VALUES)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_strategy, min_size=0, max_size=25))
def test_every_neighbour_moves_the_counts_within_the_argument(rows: Rows) -> None:
    base = counts(rows)
    for name, substitution, other in neighbours(rows):
        l1, only = moves(base, counts(other))
        assert l1 <= (SENSITIVITY if substitution else 1), name
        assert len(only) <= (EXCLUSIVE if substitution else 1), name
        assert all(n == 1 for _, n in only), name


def test_the_reduction_is_a_function_of_the_units_own_rows() -> None:
    """A unit's value does not depend on its rows' order or on other units."""
    rows: Rows = [(1, "b"), (1, "a"), (1, "c"), (1, "a")]
    alone = counts(rows)
    assert sum(alone.values()) == 1
    assert counts(list(reversed(rows))) == alone
    assert counts([*rows, (2, "z"), (2, None), (None, "q")]) == {**alone, "z": 1}


def test_the_constants_are_attained() -> None:
    rows: Rows = [(u, "a") for u in range(1, 6)] + [(6, "b")]
    l1, only = moves(counts(rows), counts([*rows[:-1], (6, "c")]))
    assert l1 == SENSITIVITY and len(only) == EXCLUSIVE  # "b" vanishes, "c" appears
    l1, only = moves(counts(rows), counts([*rows, (7, "new")]))
    assert l1 == 1 and only == [("new", 1)]
