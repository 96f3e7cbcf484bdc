"""Column lists on CTEs and derived tables: answered as SQL reads them.

``WITH t(hours_per_week, age) AS (SELECT age, hours_per_week FROM adult) SELECT AVG(age)
FROM t`` averages the hours worked on PostgreSQL and DuckDB: a column list renames the
outputs by position. dpproxy ignored the list and read the names of the select list, so it
averaged the ages (a wrong answer, silently), and ``WITH t(x) AS (SELECT age …)`` was refused
as an unknown column. Now (``sql/fromclause._subquery_scope``) the list renames the outputs of a
row-wise CTE or subquery; two outputs left with one name are ambiguous (42702), as on
PostgreSQL. A column list on a table (``FROM adult AS t(a, b)``), which was ignored too, is
refused (0A000) rather than guessed.

Found by the same probe: ``SUM((sex = 'Male')::int)`` was refused for unbounded while
``SUM(CAST(sex = 'Male' AS INT))`` was answered (the parentheses hid the predicate from
``analysis/bounds``); ``SELECT (SELECT COUNT(*) FROM adult WHERE sex = 'Male')`` was refused
with ``column "sex" does not exist`` (a column of the subquery taken for one of the FROM-less
outer query); ``SELECT upper(sex) … GROUP BY sex`` said ``function upper() is not
supported``, though it is on rows; and ``GROUP BY workclass IS NULL`` released a third group,
NULL, zero-filled, which no row can have (``IS NULL`` is never NULL).

And for an aggregate subquery released first (``planning/relations``): its LIMIT and OFFSET
were dropped (``WITH g AS (… GROUP BY race ORDER BY n DESC LIMIT 2) SELECT * FROM g``
released all five races, silently), now refused (0A000); and its ``GROUP BY race`` took the
output ``sex AS race`` before the column race, where PostgreSQL takes the column (and refuses
the query, sex not being grouped): now read as PostgreSQL reads it. A scalar subquery with
OFFSET, LIMIT 0 or HAVING (which may leave it no row, NULL) failed on the database as XX000,
charged; now refused up front (``sql/scalars.check_scalar``), free. Its outputs without AS
(``SELECT * FROM (SELECT sex, COUNT(*) FROM adult GROUP BY sex) t``, as BI tools wrap a
question) were nameless and refused ("the type of * cannot be determined"); they now get
PostgreSQL's names (count, avg), and a column list shorter than the outputs renames the first
ones instead of being refused."""

from __future__ import annotations

from typing import Any

import pytest

from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.integration.test_shadowing_ctes import engine  # noqa: F401 (the demo on both engines)

# (the query with a column list, the same query written without it)
SAME = {
    "cte_swapped": (
        "WITH t(hours_per_week, age) AS (SELECT age, hours_per_week FROM adult) "
        "SELECT AVG(age), AVG(hours_per_week) FROM t",
        "SELECT AVG(hours_per_week), AVG(age) FROM adult",
    ),
    "cte_group_and_where": (
        "WITH t(race, sex) AS (SELECT sex, race FROM adult) "
        "SELECT race, COUNT(*) FROM t WHERE sex <> 'White' GROUP BY race",
        "SELECT sex, COUNT(*) FROM adult WHERE race <> 'White' GROUP BY sex",
    ),
    "cte_new_name": (
        "WITH t(x) AS (SELECT age FROM adult) SELECT AVG(x) FROM t",
        "SELECT AVG(age) FROM adult",
    ),
    "derived_swapped": (
        "SELECT race, AVG(age) FROM (SELECT sex, hours_per_week, age FROM adult) "
        "AS t(race, age, a) GROUP BY race",
        "SELECT sex, AVG(hours_per_week) FROM adult GROUP BY sex",
    ),
    "scalar_subquery_of_cte": (
        "WITH t(age, hours_per_week) AS (SELECT hours_per_week, age FROM adult) "
        "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM t)",
        "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(hours_per_week) FROM adult)",
    ),
    "released_group_by_output_name": (
        "SELECT band, n FROM (SELECT sex AS band, COUNT(*) AS n FROM adult GROUP BY band) t",
        "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
    ),
    "released_unnamed_outputs": (
        "SELECT * FROM (SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex) t",
        "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex",
    ),
    "released_shorter_list": (
        "WITH g(r) AS (SELECT race, COUNT(*) AS n FROM adult GROUP BY race) SELECT r, n FROM g",
        "SELECT race, COUNT(*) FROM adult GROUP BY race",
    ),
    "parenthesised_cast": (
        "SELECT SUM((sex = 'Male')::int), AVG((income_class = '>50K')::int) FROM adult",
        "SELECT SUM(CAST(sex = 'Male' AS INT)), AVG(CAST(income_class = '>50K' AS INT)) FROM adult",
    ),
}
# (query, SQLSTATE, the start of the message)
REFUSED = {
    "two_outputs_one_name": (
        "SELECT COUNT(*) FROM (SELECT sex, race FROM adult) AS t(race) WHERE race = 'White'",
        "42702",
        'column reference "race" is ambiguous',
    ),
    "table_column_list": (
        "SELECT COUNT(*) FROM adult AS t(p, a) WHERE a > 40",
        "0A000",
        "a column list on a table",
    ),
    "too_many_names": (
        "SELECT COUNT(*) FROM (SELECT age FROM adult) AS t(a, b)",
        "0A000",
        'table "t" has 1 columns available but 2 columns specified',
    ),
    "scalar_subquery_without_from": (
        "SELECT (SELECT COUNT(*) FROM adult WHERE sex = 'Male')",
        "0A000",
        "a query must read a table (FROM is missing)",
    ),
    "released_with_limit": (
        "WITH g AS (SELECT race, COUNT(*) AS n FROM adult GROUP BY race ORDER BY n DESC "
        "LIMIT 2) SELECT * FROM g",
        "0A000",
        "the aggregate subquery g may not have LIMIT",
    ),
    "released_with_offset": (
        "SELECT AVG(n) FROM (SELECT race, COUNT(*) AS n FROM adult GROUP BY race OFFSET 1) t",
        "0A000",
        "the aggregate subquery t may not have OFFSET",
    ),
    "released_group_by_a_column_not_its_output": (
        "SELECT race, n FROM (SELECT sex AS race, COUNT(*) AS n FROM adult GROUP BY race) t",
        "0A000",
        "the aggregate subquery t may output its group keys and aggregates only",
    ),
    "scalar_subquery_offset": (
        "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult OFFSET 1)",
        "0A000",
        "OFFSET in a scalar subquery is not supported",
    ),
    "scalar_subquery_limit_0": (
        "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult LIMIT 0)",
        "0A000",
        "LIMIT in a scalar subquery is not supported",
    ),
    "scalar_subquery_having": (
        "SELECT COUNT(*) FROM adult WHERE age > "
        "(SELECT AVG(age) FROM adult HAVING COUNT(*) > 100000)",
        "0A000",
        "HAVING in a scalar subquery is not supported",
    ),
    "row_function_over_a_key": (
        "SELECT upper(sex) AS s, COUNT(*) FROM adult GROUP BY sex",
        "42883",
        "function upper() is not supported over a GROUP BY key",
    ),
}


def answer(on: Engine, sql: str) -> Any:
    try:
        return sorted(on.run(sql, analyst="ana").released.rows)
    except DPProxyError as e:
        return (e.sqlstate, e.message)


@pytest.mark.parametrize("name", SAME)
def test_a_column_list_renames_by_position(
    engine: Engine,  # noqa: F811 (the imported fixture)
    name: str,
) -> None:
    listed, plain = SAME[name]
    expected = answer(engine, plain)
    assert isinstance(expected, list) and expected, expected
    assert answer(engine, listed) == expected


@pytest.mark.parametrize("name", REFUSED)
def test_refused_with_the_reason(
    engine: Engine,  # noqa: F811 (the imported fixture)
    name: str,
) -> None:
    sql, state, start = REFUSED[name]
    before = engine.remaining("ana")
    got = answer(engine, sql)
    assert isinstance(got, tuple) and got[0] == state and got[1].startswith(start), got
    assert engine.remaining("ana") == before


@pytest.mark.parametrize(
    "key", ["workclass IS NULL", "workclass IS DISTINCT FROM 'Private'", "NOT (workclass IS NULL)"]
)
def test_a_never_null_truth_value_has_two_groups(
    engine: Engine,  # noqa: F811 (the imported fixture)
    key: str,
) -> None:
    rows = answer(engine, f"SELECT {key} AS k, COUNT(*) FROM adult GROUP BY 1")
    assert [r[0] for r in rows] == [False, True], rows
    assert sum(r[1] for r in rows) == 32561
