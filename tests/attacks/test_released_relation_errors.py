"""Named attack: the query around an aggregate relation fails on the values it released.

An aggregate subquery or CTE grouped by a public-domain key is released first, and the rest
of the query is then run exactly over the released rows, written as a VALUES list
(``planning/relations.py``). That outer query was planned by the public path, where
"totality is not required" (``planning/public.py``): its failures were taken to depend on
public rows alone. Here they depend on the released rows: which keys are kept (a key whose
noisy count rounds to 0 is left out) and the values. So ``SELECT SUM(s * 1e308) FROM (SELECT
cat, SUM(si) AS s FROM t GROUP BY cat) x`` overflowed on PostgreSQL (XX000, charged) on a
database where one unit has ``si = 5``, and answered NULL on its neighbour without that unit;
``CAST(s * 1e10 AS INTEGER)``, ``MOD(CAST(s AS INTEGER), 0)``, ``n / (n - 1)`` failed on both
engines, ``SQRT``/``LN``/``EXP``/``POWER`` of a released value on PostgreSQL. With the noise on,
such an outcome (answered or XX000) is decided by the noisy values: post-processing, but an
accepted query whose SQL fails, charged.

The outer query over released rows is now held to a total subset, checked before any data is
read (``planning/released.py``): comparisons of values of one type, AND/OR/NOT, IS [NOT] NULL,
IN, BETWEEN, CASE and COALESCE of such values, COUNT, MIN, MAX, SUM, AVG; anything that could
raise (arithmetic, functions, casts, LIKE) is refused (0A000) and nothing is charged. The
released values are written within ±1e140, so that SUM and AVG over at most 100,001 of them
cannot overflow either (PostgreSQL's AVG of doubles squares their deviations).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dpproxy.engine import Engine
from dpproxy.errors import UnsupportedQuery
from tests.totality import DuckDBWorld, PostgresWorld, Row, check_queries, neighbour

ROWS: tuple[Row, ...] = (
    (1, 5, 0, None, 0.0, None, "X", None, None, None),
    (2, -7, 0, None, 1e6, None, "y", None, None, None),
)
D = "(SELECT cat, SUM(si) AS s, COUNT(*) AS n, AVG(fb) AS a FROM t GROUP BY cat) x"

FAILED = (
    f"SELECT SUM(s * 1e308) FROM {D}",
    f"SELECT MAX(1 / (s - s)) FROM {D}",
    f"SELECT MAX(CAST(s * 1e10 AS INTEGER)) FROM {D}",
    f"SELECT MAX(SQRT(s)) FROM {D}",
    f"SELECT MAX(LN(s)) FROM {D}",
    f"SELECT MAX(POWER(s, 0.5)) FROM {D}",
    f"SELECT MAX(EXP(a)) FROM {D}",
    f"SELECT MAX(MOD(CAST(s AS INTEGER), 0)) FROM {D}",
    f"SELECT COUNT(*) FROM {D} WHERE n / (n - 1) > 0",
    f"SELECT VARIANCE(s * 1e200) FROM {D}",
    f"SELECT MAX(a) FROM {D} WHERE CAST(s AS DATE) IS NULL",
    f"SELECT MAX(s % 0) FROM {D}",
    f"SELECT COUNT(*) FROM {D} WHERE s > 'abc'",
    f"SELECT COUNT(*) FROM {D} WHERE cat LIKE 'a\\'",
    # a look-alike of dpproxy's placeholder (not checked) that evaluates a released value
    f"SELECT COUNT(*) FROM {D} WHERE EXISTS (SELECT CAST(NULL AS INTEGER) AS z WHERE FALSE "
    "HAVING x.s * 1e308 > 0)",
)
ANSWERED = (
    f"SELECT AVG(n) FROM {D}",
    f"SELECT AVG(a), SUM(s), MIN(n), MAX(cat) FROM {D}",
    f"SELECT cat, s FROM {D} WHERE s > (SELECT AVG(s) FROM {D}) ORDER BY s LIMIT 1",
    f"SELECT COUNT(*) FROM {D} WHERE s BETWEEN -1 AND 1e300 AND cat IN ('X', 'y')",
    f"SELECT MAX(CASE WHEN s > 0 THEN n ELSE 0 END), MIN(COALESCE(a, 0)) FROM {D}",
    f"SELECT COUNT(*) FROM {D} WHERE NOT (n >= 2 OR s IS NULL) AND cat <> ''",
)


def _engines(world: DuckDBWorld | PostgresWorld) -> tuple[Engine, Engine]:
    return world.engines("rows", False, ROWS, neighbour(ROWS, 1))


@pytest.fixture(scope="module")
def duckdb_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Engine]]:
    world = DuckDBWorld(tmp_path_factory.mktemp("released"))
    yield _engines(world)
    world.close()


@pytest.fixture(scope="module")
def postgres_engines(pg_session_dsn: str) -> Iterator[tuple[Engine, Engine]]:
    world = PostgresWorld(pg_session_dsn)
    yield _engines(world)
    world.close()


def _answered(engine: Engine, neighbour_engine: Engine, sql: str) -> None:
    """Answered on the database and on its neighbour (run on both: the oracle runs the
    database's only)."""
    assert not check_queries(engine, None, [sql])
    assert not check_queries(neighbour_engine, None, [sql])


@pytest.mark.parametrize("sql", FAILED)
def test_what_could_fail_on_a_released_value_is_refused_before_any_read(
    duckdb_engines: tuple[Engine, Engine], sql: str
) -> None:
    engine, _ = duckdb_engines
    with pytest.raises(UnsupportedQuery):
        engine.prepare(sql)


@pytest.mark.parametrize("sql", FAILED)
def test_what_could_fail_on_a_released_value_is_refused_on_postgres(
    postgres_engines: tuple[Engine, Engine], sql: str
) -> None:
    engine, neighbour_engine = postgres_engines
    _answered(engine, neighbour_engine, sql)  # refused: no violation
    with pytest.raises(UnsupportedQuery):
        engine.prepare(sql)


@pytest.mark.parametrize("sql", ANSWERED)
def test_the_total_subset_is_answered_on_duckdb(
    duckdb_engines: tuple[Engine, Engine], sql: str
) -> None:
    _answered(*duckdb_engines, sql)
    engine, _ = duckdb_engines
    engine.prepare(sql)


@pytest.mark.parametrize("sql", ANSWERED)
def test_the_total_subset_is_answered_on_postgres(
    postgres_engines: tuple[Engine, Engine], sql: str
) -> None:
    _answered(*postgres_engines, sql)
    engine, _ = postgres_engines
    engine.prepare(sql)


def test_a_huge_released_value_is_written_within_bounds() -> None:
    """SUM and AVG of the released values cannot overflow: each is written within ±1e140."""
    from dpproxy.planning.released import MAGNITUDE, written

    assert written(1e300) == MAGNITUDE
    assert written(-1e300) == -MAGNITUDE
    assert written(2.5) == 2.5
    assert written(7) == 7
