"""Scalar subqueries: where they are found, how a released value is written, and that the
outer query's plan does not depend on the value (``sql/scalars.py``, ``planning/scalars.py``).

The last property is what the privacy argument needs (the outer release is (ε₀, δ₀)-DP for
every value it may be given, with ε₀, δ₀ fixed before the data is read): the plan at any
released value — negative, huge, tiny, zero, NULL — equals the placeholder plan that was
reserved for, in cost, contribution bound, sensitivities, mechanisms and selection.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.planning.scalars import ComposedPlan, same_plan
from dpproxy.sql.parse import parse
from dpproxy.sql.scalars import constant, find_scalars, substitute

AVG = "(SELECT AVG(age) FROM adult)"
OUTER = [
    f"SELECT COUNT(*) FROM adult WHERE age > {AVG}",
    f"SELECT COUNT(*) FILTER (WHERE hours_per_week > {AVG}) FROM adult",
    f"SELECT sex, SUM(CASE WHEN age > {AVG} THEN 1 ELSE 0 END) FROM adult GROUP BY sex",
    f"SELECT education, AVG(hours_per_week) FROM adult WHERE {AVG} <= age GROUP BY education",
    f"SELECT COUNT(*) FROM adult WHERE age BETWEEN {AVG} AND 60 OR sex = 'Female'",
    f"SELECT MEDIAN(hours_per_week) FROM adult WHERE age = {AVG}",
]


def _texts(sql: str) -> list[str]:
    return [s.this.sql("postgres") for s in find_scalars(parse(sql))]


def test_found_where_a_constant_compares() -> None:
    assert _texts(OUTER[0]) == ["SELECT AVG(age) FROM adult"]
    assert len(_texts(OUTER[1])) == 1 and len(_texts(OUTER[2])) == 1
    derived = f"SELECT COUNT(*) FROM (SELECT age FROM adult WHERE age > {AVG}) AS t"
    assert _texts(derived) == ["SELECT AVG(age) FROM adult"]  # not the derived table itself
    between = "SELECT COUNT(*) FROM adult WHERE age BETWEEN (SELECT MIN(age) FROM adult) AND 5"
    assert _texts(between) == ["SELECT MIN(age) FROM adult"]


def test_semijoins_and_derived_tables_are_not_scalars() -> None:
    assert _texts("SELECT COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult)") == []
    assert _texts("SELECT COUNT(*) FROM adult WHERE EXISTS (SELECT 1 FROM adult)") == []
    assert _texts("SELECT COUNT(*) FROM (SELECT age FROM adult) AS t") == []
    assert _texts(f"SELECT SUM(age - {AVG}) FROM adult") == []  # refused, not substituted


def test_nested_scalars_are_listed_once() -> None:
    sql = f"SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult WHERE age > {AVG})"
    assert len(find_scalars(parse(sql))) == 1


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (38, "38"),
        (-3, "(-3)"),
        (38.58164675532078, "38.58164675532078"),
        (-0.5, "(-0.5)"),
        (1e-05, "1e-05"),
        (1.5e300, "1.5e+300"),
        (None, "NULL"),
        # post-processing overflowed (tests/attacks/test_non_finite_released_values.py)
        (math.nan, "NULL"),
        (math.inf, "NULL"),
        (-math.inf, "NULL"),
    ],
)
def test_constant(value: object, text: str) -> None:
    assert constant(value).sql("postgres") == text


@pytest.mark.parametrize("value", [True, "38", (1,)])
def test_constant_refuses_what_is_not_a_number(value: object) -> None:
    with pytest.raises(TypeError):
        constant(value)


def test_substitute_keeps_order_and_the_original() -> None:
    second = "(SELECT AVG(capital_gain) FROM adult)"
    sql = f"SELECT COUNT(*) FROM adult WHERE age > {AVG} AND {second} < 9"
    tree = parse(sql)
    out = substitute(tree, [constant(1), constant(2)]).sql("postgres")
    assert out == "SELECT COUNT(*) FROM adult WHERE age > 1 AND 2 < 9"
    assert len(find_scalars(tree)) == 2  # the tree itself is left alone


@pytest.fixture(scope="module")
def engine(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    e = Engine(demo_catalog, DuckDBBackend(demo_db))
    yield e
    e.close()


def _composed(engine: Engine, sql: str) -> ComposedPlan:
    prepared = engine.prepare(sql)
    assert isinstance(prepared.plan, ComposedPlan)
    return prepared.plan


VALUES = st.one_of(
    st.none(),
    st.integers(-(10**18), 10**18),
    st.floats(allow_nan=False, allow_infinity=False),
)


@pytest.mark.parametrize("sql", OUTER)
@settings(max_examples=40, deadline=None)
@given(value=VALUES)
def test_the_outer_plan_is_the_same_for_every_value(
    engine: Engine, sql: str, value: int | float | None
) -> None:
    composed = _composed(engine, sql)
    text = composed.outer_text([constant(value)])
    assert same_plan(composed.outer, engine.plan(text))  # type: ignore[arg-type]


def test_same_plan_sees_a_different_plan(engine: Engine) -> None:
    composed = _composed(engine, OUTER[0])
    other = engine.plan(
        "SELECT COUNT(*) FROM adult WHERE age > 0 AND sex = 'Male'", epsilon=Fraction(2)
    )
    assert not same_plan(composed.outer, other)  # type: ignore[arg-type]
    assert isinstance(constant(1), exp.Literal)
