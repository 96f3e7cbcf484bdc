"""Date group keys beyond 0001…9999, released and ordered, on both engines.

A date column stores BC dates, years past 9999 and ±infinity on DuckDB and PostgreSQL.
PostgreSQL's client raised on reading them (a DataError decided by one row's date: the
``DATE_KEYS`` family of ``tests/property/test_totality_families.py``), and DuckDB's gives
them as text: once such a key was released beside ordinary dates, ``ORDER BY`` of the keys
failed in Python after the query had run and been charged. Both backends now give them as
:class:`dpproxy.backends.fardate.FarDate`, which orders as the day it names.

Each key below is held by 500 units, so that all four are released (the noise is off).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from dpproxy.engine import Engine
from tests.totality import DuckDBWorld, ExtremeDate, PostgresWorld, check_query, neighbour

DAYS = (
    ExtremeDate("5874897-12-31"),
    datetime.date(2000, 1, 1),
    ExtremeDate("infinity"),
    ExtremeDate("4713-01-01 (BC)", "4713-01-01 BC"),
)
ROWS = tuple((u, 1, 1, 1, 1.0, 1.0, "X", None, True, DAYS[u % 4]) for u in range(2000))
ASCENDING = ["4713-01-01 (BC)", datetime.date(2000, 1, 1), datetime.date.max, "5874897-12-31"]


@pytest.fixture(
    scope="module", params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    if request.param == "duckdb":
        world: DuckDBWorld | PostgresWorld = DuckDBWorld(tmp_path_factory.mktemp("far"))
    else:
        world = PostgresWorld(request.getfixturevalue("pg_session_dsn"))
    try:
        yield world.engines("rows", False, ROWS, neighbour(ROWS, 0))[0]
    finally:
        world.close()


@pytest.mark.parametrize("desc", [False, True])
def test_far_date_keys_are_released_in_date_order(engine: Engine, desc: bool) -> None:
    sql = f"SELECT day AS k, COUNT(*) FROM t GROUP BY 1 ORDER BY 1{' DESC' if desc else ''}"
    outcome = check_query(engine, sql, run=False)
    assert outcome.sqlstate is None and not outcome.violations
    rows = engine.run(sql, analyst="far").released.rows
    assert [r[0] for r in rows] == (ASCENDING[::-1] if desc else ASCENDING)
