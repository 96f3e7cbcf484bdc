"""Named attack: the row cap of a public outer query around released parts, hit after the charge.

An answer over public tables and released rows is capped (``public_max_rows``; an answer with
more rows is refused with 53400, never cut short). Around an aggregate relation, how many rows
the outer query returns depends on the released rows — which keys' noisy counts survive — so
the cap was checked only once the parts were released and charged: ``SELECT cat, n FROM
(SELECT cat, COUNT(*) AS n FROM t GROUP BY cat) d`` with ``public_max_rows: 1`` was charged
and refused (XX000) on a database where both keys survive, answered on its neighbour where
one does: the analyst paid for nothing, and the outcome depended on the data through the
noise only, but an unreleased answer was charged. Now ``composed.check_outer_rows`` bounds the
rows before the budget is reserved (``planning/rowbound.py``: every key kept, each public
table with its rows, counted first) and refuses (53400, nothing charged) when the bound is over
the cap, on every database alike; a LIMIT within the cap, or a cap above the bound, answers.
On DuckDB, PostgreSQL and Spark, each on a database and its neighbour without unit 1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.attacks.test_composed_charge_for_nothing import (
    NEIGHBOUR,
    ROWS,
    SCHEMA,
    _duckdb,
    _postgres,
    _spark_pair,
)
from tests.noise import NoNoise

D = "(SELECT cat, COUNT(*) AS n FROM t GROUP BY cat) d"  # 2 keys: a, b
KEYED = "(SELECT SUM(x) FROM t WHERE t.k = p.k)"  # keys: p's 3 values of k
# (query, the cap, the outcome on every database: None answered, or the SQLSTATE)
CASES = (
    (f"SELECT cat, n FROM {D}", 1, "53400"),  # both keys may survive
    (f"SELECT cat, n FROM {D}", 2, None),
    (f"SELECT cat, n FROM {D} ORDER BY cat LIMIT 1", 1, None),
    (f"SELECT d.cat, p.name FROM {D} CROSS JOIN p", 5, "53400"),  # up to 2 × 3 rows
    (f"SELECT d.cat, p.name FROM {D} CROSS JOIN p", 6, None),
    (f"SELECT d.cat, p.name FROM {D} CROSS JOIN p ORDER BY 1, 2 LIMIT 5", 5, None),
    (f"SELECT COUNT(*) FROM {D} CROSS JOIN p", 1, None),  # one row whatever survives
    (f"WITH e AS (SELECT cat FROM {D}) SELECT e.cat FROM e, e AS f", 3, "53400"),
    (f"SELECT name FROM p WHERE y > {KEYED}", 3, None),  # keyed: p's rows at most
)


@pytest.fixture(scope="module", params=["duckdb", "postgres", "spark"])
def databases(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[int], tuple[Engine, Engine]]]:
    """A maker of engines at a given cap over the database and over its neighbour (each a
    new engine, so no plan of another cap is reused, over the module's two backends)."""
    tmp = tmp_path_factory.mktemp("rowcap")
    if request.param == "duckdb":
        base = (_duckdb(tmp / "d.duckdb", ROWS), _duckdb(tmp / "nb.duckdb", NEIGHBOUR))
    elif request.param == "spark":  # skips without PySpark or Java, fails under CI
        (tmp / "d").mkdir()
        (tmp / "nb").mkdir()
        base = _spark_pair(request.getfixturevalue("spark_master"), tmp / "d", tmp / "nb")
    else:
        dsn = request.getfixturevalue("pg_session_dsn")
        base = (_postgres(dsn, "rcd", ROWS), _postgres(dsn, "rcnb", NEIGHBOUR))

    def make(cap: int) -> tuple[Engine, Engine]:
        a, b = (
            Engine(parse_catalog(SCHEMA), e.backend, noise=NoNoise(), public_max_rows=cap)
            for e in base
        )
        return a, b

    yield make
    for e in base:
        e.close()


def outcome(engine: Engine, sql: str) -> tuple[str | None, bool, int]:
    """The SQLSTATE of the refusal (None: answered), whether it charged, the rows."""
    before = engine.remaining("mallory")
    rows = -1
    try:
        rows = len(engine.run(sql, analyst="mallory").released.rows)
        state = None
    except DPProxyError as e:
        state = e.sqlstate
    return state, engine.remaining("mallory") != before, rows


@pytest.mark.parametrize(("sql", "cap", "expected"), CASES)
def test_the_row_cap_is_proved_before_the_charge(
    databases: Any, sql: str, cap: int, expected: str | None
) -> None:
    for engine in databases(cap):
        state, charged, rows = outcome(engine, sql)
        assert (state, charged) == (expected, expected is None), (engine.backend.dialect, sql)
        assert expected is not None or 0 <= rows <= cap


def test_the_refusal_names_the_bound_and_the_fix(databases: Any) -> None:
    engine, _ = databases(1)
    with pytest.raises(DPProxyError) as refused:
        engine.run(f"SELECT cat, n FROM {D}", analyst="mallory")
    assert "up to 2 rows" in refused.value.message
    assert refused.value.hint is not None and "LIMIT 1" in refused.value.hint
