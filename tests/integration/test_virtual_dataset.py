"""A BI tool's virtual dataset over a single-number query: ``SELECT x FROM (SELECT COUNT(*) AS
x FROM adult) AS virtual_table LIMIT 1000`` (Superset wraps a dataset's SQL so) is answered as
the subquery itself (``sql/lift.py``), with the outer query's names and LIMIT; before, it was
refused (42803: "aggregate functions are not allowed in a subquery", though the outer query
has none). Equal to the subquery's own answer with the noise off, on DuckDB and PostgreSQL;
what the outer query does beyond picking columns is planned, or refused, as before."""

from __future__ import annotations

import pytest

from dpproxy.engine import Engine
from tests.integration.test_shadowing_ctes import answer, engine  # noqa: F401 (the fixture)

INNER = "SELECT COUNT(*) AS n, AVG(age) AS a FROM adult WHERE sex = 'Female'"
SAME = {  # (the wrapped query, the query it is)
    "superset": (
        f"SELECT n FROM ({INNER}) AS virtual_table LIMIT 1000",
        "SELECT COUNT(*) AS n FROM adult WHERE sex = 'Female'",
    ),
    "star": (f"SELECT * FROM ({INNER}) AS t", INNER),
    "qualified_star_renamed": (
        f"SELECT t.a AS mean_age, t.* FROM ({INNER}) t ORDER BY 1",
        "SELECT AVG(age) AS mean_age, COUNT(*) AS n, AVG(age) AS a FROM adult "
        "WHERE sex = 'Female'",
    ),
    "limit_zero": (
        f"SELECT a FROM ({INNER}) t LIMIT 0",
        "SELECT AVG(age) AS a FROM adult WHERE sex = 'Female' LIMIT 0",
    ),
}


@pytest.mark.parametrize("name", SAME)
def test_a_wrapped_single_row_aggregate_is_the_aggregate(
    engine: Engine,  # noqa: F811 (the imported fixture)
    name: str,
) -> None:
    wrapped, plain = SAME[name]
    expected = answer(engine, plain)
    assert isinstance(expected, tuple) and all(isinstance(r, tuple) for r in expected), expected
    released = engine.run(wrapped, analyst="ana").released
    assert released.rows == expected
    names = [c.name for c in engine.run(plain, analyst="ana").released.columns]
    assert [c.name for c in released.columns] == names


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT n + 1 FROM ({INNER}) t",  # an expression over the released value
        f"SELECT n FROM ({INNER}) t WHERE n > 5",
        f"SELECT missing FROM ({INNER}) t",
    ],
)
def test_anything_more_is_planned_as_before(
    engine: Engine,  # noqa: F811 (the imported fixture)
    sql: str,
) -> None:
    """Not lifted: each is answered or refused by the planner as it was (here: refused,
    nothing charged)."""
    before = engine.remaining("ana")
    outcome = answer(engine, sql)
    assert isinstance(outcome[0], str), outcome  # a SQLSTATE
    assert engine.remaining("ana") == before
