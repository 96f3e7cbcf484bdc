"""``Engine.prepare(sql, secret=s)`` is a pure function of ``sql`` and ``s`` for a query planned
in parts too: each UNION branch and each part of a composed query is rewritten with ``s``.

Before 2026-11-29 the branches and parts were prepared with fresh random secrets, so the
statements EXPLAIN and the totality property compare (``tests/totality.py``: prepare on a
database and on its neighbour must agree) differed from call to call in their hash seeds; the
property could not be run on such queries at all. ``run`` is unchanged: it draws a fresh
secret for every statement it executes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dpproxy.engine import Engine
from tests.totality import DuckDBWorld

ROWS = (
    (1, 5, 7, None, 2.5, None, "X", "a", True, None),
    (2, -3, 1, 4, 0.0, 1.0, "y", None, None, None),
)

QUERIES = {
    "union": "SELECT SUM(si) FROM t UNION ALL SELECT SUM(si) FROM t WHERE flag",
    "scalar subquery": "SELECT COUNT(*) FROM t WHERE si > (SELECT AVG(si) FROM t)",
    "released relation": "SELECT SUM(v) FROM (SELECT cat AS k, SUM(si) AS v FROM t GROUP BY 1) x",
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    world = DuckDBWorld(Path(tmp_path_factory.mktemp("secret")))
    try:
        yield world.engines("rows", False, ROWS, ROWS)[0]  # at most 3 rows a unit: hashed
    finally:
        world.close()


@pytest.mark.parametrize("sql", QUERIES.values(), ids=QUERIES.keys())
def test_the_same_secret_gives_the_same_statements(engine: Engine, sql: str) -> None:
    first = engine.prepare(sql, secret=12345).statements
    assert len(first) >= 2  # parts or branches, then the outer query's
    assert any("HASH(12345" in s for s in first)  # the bounding of a part uses the secret
    assert engine.prepare(sql, secret=12345).statements == first


@pytest.mark.parametrize("sql", QUERIES.values(), ids=QUERIES.keys())
def test_another_secret_gives_other_seeds(engine: Engine, sql: str) -> None:
    one = engine.prepare(sql, secret=12345).statements
    other = engine.prepare(sql, secret=54321).statements
    assert one != other
    assert [s.replace("54321", "12345") for s in other] == list(one)
