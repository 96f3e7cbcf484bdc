"""Named attack: a released value that post-processing makes infinite or NaN, substituted.

A scalar subquery is released first and its value written into the outer query as a constant
(``sql/scalars.constant``); an aggregate relation's and a keyed subquery's values are written
as literals too (``sql/correlated.number``). Arithmetic over a released aggregate is
post-processing in Python, where it overflows to ±inf (``SUM(si) * 1e308 * 1e308``) or gives
NaN (inf − inf): both raised ``ValueError: ... released a value that is not finite`` after the
release was charged — XX000. Whether it overflows depends on the released value: with the
noise off, ``SELECT COUNT(*) FROM t WHERE si > (SELECT SUM(si) * 1e308 * 1e308 FROM t)``
failed on a database where one unit has si = 5 and was answered on its neighbour without that
unit (the sum 0, and 0 * 1e308 * 1e308 = 0).

A value that is not finite is now written as NULL (a comparison with it is unknown, as with a
subquery over no rows; the same as a function over a released value outside its domain):
every such query is answered, on both engines, on the database and on its neighbour.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dpproxy.engine import Engine
from tests.totality import DuckDBWorld, PostgresWorld, Row, check_queries, neighbour

ROWS: tuple[Row, ...] = (
    (1, 5, 0, None, 0.0, None, "X", None, None, None),
    (2, 0, 0, None, 0.0, None, "y", None, None, None),
)
INF = "(SUM(si) * 1e308 * 1e308)"
QUERIES = (
    f"SELECT COUNT(*) FROM t WHERE si > (SELECT {INF} FROM t)",
    f"SELECT COUNT(*) FROM t WHERE fb > (SELECT -{INF} FROM t)",
    f"SELECT COUNT(*) FROM t WHERE si > (SELECT {INF} - {INF} FROM t)",
    f"SELECT MAX(v) FROM (SELECT cat, {INF} - {INF} AS v FROM t GROUP BY cat) x",
    f"SELECT COUNT(*) FROM (SELECT cat, {INF} AS v FROM t GROUP BY cat) x WHERE v > 0",
)


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def engines(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Engine]]:
    if request.param == "duckdb":
        world: DuckDBWorld | PostgresWorld = DuckDBWorld(tmp_path_factory.mktemp("nonfinite"))
    else:
        world = PostgresWorld(request.getfixturevalue("pg_session_dsn"))
    yield world.engines("rows", False, ROWS, neighbour(ROWS, 1))
    world.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_a_non_finite_released_value_is_answered(
    engines: tuple[Engine, Engine], sql: str
) -> None:
    engine, neighbour_engine = engines
    assert not check_queries(engine, None, [sql])
    assert not check_queries(neighbour_engine, None, [sql])
