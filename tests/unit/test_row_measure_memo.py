"""``rewrite/rows.row_measure`` is memoised on the measure's exact tree (``sql/treekey.py``)
and the table: a hit is the tree a fresh computation builds, handed out as a copy."""

from __future__ import annotations

from typing import Any

import pytest
from sqlglot import exp

from dpproxy.errors import DPProxyError
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite import pipeline, rows
from dpproxy.rewrite.context import RewriteContext
from dpproxy.sql.parse import parse
from dpproxy.sql.treekey import tree_key
from dpproxy.sql.validate import validate

MEASURES = (
    "SUM(capital_gain - capital_loss)",
    "AVG(hours_per_week * 52)",
    "COUNT(*) FILTER (WHERE income_class = '>50K')",
    "COUNT(*) FILTER (WHERE income_class = '>50k')",
    "SUM(CASE WHEN sex = 'Female' THEN 1 ELSE 0 END)",
    "SUM(CASE WHEN sex = 'Female' THEN 1.0 ELSE 0 END)",
    "AVG(age / NULLIF(hours_per_week, 0))",
    "SUM(SQRT(capital_gain))",
    "AVG(LN(age + 1))",
    "SUM(ROUND(age * 1.5, 1))",
    "SUM(age % 7)",
    "AVG(LENGTH(occupation))",
    "SUM(capital_gain * 1e200)",
    "SUM(capital_gain * 1e300 * 1e300)",
    "AVG(age)",
    "VARIANCE(age)",
)


def _clear() -> None:
    rows._ROW_MEASURES.clear()
    rows._GUARDED_KEYS.clear()
    rows._GUARDED_FILTERS.clear()


def _rewritten(catalog: Any, sql: str) -> str:
    plan = plan_query(validate(parse(sql), catalog, sql), catalog.policy)
    return pipeline.rewrite(plan, 12345, "duckdb")


def _outcome(catalog: Any, sql: str) -> str:
    try:
        return _rewritten(catalog, sql)
    except DPProxyError as e:
        return f"{type(e).__name__} {e.sqlstate} {e.message}"


@pytest.mark.parametrize("measure", MEASURES)
def test_a_memoised_measure_is_the_fresh_one(demo_catalog: Any, measure: str) -> None:
    sql = f"SELECT {measure} FROM adult"
    _clear()
    fresh = _outcome(demo_catalog, sql)
    assert _outcome(demo_catalog, sql) == fresh  # from the memo (or refused again)
    grouped = f"SELECT sex, {measure} FROM adult WHERE age > 30 GROUP BY sex"
    from_memo = _outcome(demo_catalog, grouped)
    _clear()
    assert _outcome(demo_catalog, grouped) == from_memo


def test_a_hit_is_a_copy(demo_catalog: Any) -> None:
    sql = "SELECT SUM(capital_gain - capital_loss) FROM adult"
    plan = plan_query(validate(parse(sql), demo_catalog, sql), demo_catalog.policy)
    ctx = RewriteContext(plan, 1)
    measure = plan.primitives[0].measure
    assert measure is not None
    trees = [rows.row_measure(measure, ctx) for _ in range(4)]  # seen, kept, hit, hit
    text = trees[0].sql()
    for tree in trees[1:3]:  # what a caller may do with its tree
        tree.replace(exp.Literal.number(0))
        for node in list(tree.walk()):
            node.set("this", None)
    assert trees[3].sql() == text and rows.row_measure(measure, ctx).sql() == text
    assert len({id(t) for t in trees}) == 4


def test_the_key_is_exact() -> None:
    def key(sql: str) -> object:
        return tree_key(exp.maybe_parse(sql))

    assert key("x = 'A'") != key("x = 'a'")
    assert key("X + 1") != key("x + 1")
    assert key('"x" + 1') != key("x + 1")
    assert key("x + 1") != key("x + 1.0")
    assert key("x + 1") != key("1 + x")
    assert key("CAST(x AS INT)") != key("CAST(x AS BIGINT)")
    assert key("x + 1 /* c */") != key("x + 1")
    assert key("x + 1") == key("x  +  1")


SHAPES = (
    "SELECT FLOOR(age / 10) AS decade, COUNT(*) FROM adult GROUP BY FLOOR(age / 10)",
    "SELECT sex, race, AVG(hours_per_week) FROM adult GROUP BY sex, race",
    "SELECT COUNT(*) FROM adult WHERE age * 1.5 > 40 AND sex = 'Female'",
    "SELECT COUNT(*) FROM adult WHERE age * 1e300 * 1e300 > 40",
    "SELECT COUNT(*) FROM adult WHERE capital_gain / NULLIF(age - 17, 0) > 2",
    "SELECT education, COUNT(*) FROM adult WHERE education IN ('Bachelors', 'bachelors') "
    "GROUP BY education",
    "SELECT occupation, COUNT(*) FROM adult WHERE EXISTS (SELECT 1) GROUP BY occupation",
)


@pytest.mark.parametrize("sql", SHAPES)
def test_memoised_keys_and_filters_are_the_fresh_ones(demo_catalog: Any, sql: str) -> None:
    _clear()
    fresh = _outcome(demo_catalog, sql)
    assert _outcome(demo_catalog, sql) == fresh
    assert _outcome(demo_catalog, sql) == fresh
