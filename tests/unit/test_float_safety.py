"""rewrite/floats.py: row-level float arithmetic is made finite, or refused (0A000)."""

from __future__ import annotations

import pytest
import sqlglot

from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite.floats import LIMIT, Magnitudes, finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate

T = Table(
    "t",
    True,
    (Column("x", ColumnType.FLOAT), Column("i", ColumnType.INTEGER), Column("s", ColumnType.TEXT)),
    privacy_unit="i",
)


def _tamed(sql: str) -> str:
    tree = guard_row_expression(sqlglot.parse_one(sql, read="postgres"), T)
    return finite_arithmetic(tree, T).sql("duckdb")


def _exponent(sql: str) -> int:
    """The L the taming chose (from the ``1e<L>`` cap in the SQL)."""
    text = _tamed(sql)
    caps = {int(p.split()[0]) for p in text.split("> 1e")[1:] if p.split()[0].isdigit()}
    assert len(caps) == 1, text
    return caps.pop()


def test_integers_and_comparisons_are_left_alone() -> None:
    assert "1e" not in _tamed("i * i + 3")
    assert _tamed("x > 1e200") == "x > 1e200"  # a bare comparison involves no arithmetic
    assert "1e" not in _tamed("CAST(x AS INT) * 2")  # an integer cast bounds the value


@pytest.mark.parametrize(
    ("sql", "largest"),
    [("x * 2", 150), ("x * x", 150), ("x * x * x", 100), ("x / 3", 150), ("(x - 1) * x", 142)],
)
def test_the_chosen_exponent_is_the_largest_safe_one(sql: str, largest: int) -> None:
    chosen = _exponent(sql)
    assert chosen <= largest
    tree = guard_row_expression(sqlglot.parse_one(sql, read="postgres"), T)
    ok = Magnitudes(T, chosen)
    ok.span(tree)
    assert not ok.violations
    too_big = Magnitudes(T, chosen + 1)
    too_big.span(tree)
    assert too_big.violations or chosen == 150


def test_every_intermediate_result_is_within_the_limit() -> None:
    m = Magnitudes(T, 100)
    span = m.span(guard_row_expression(sqlglot.parse_one("x * x * x", read="postgres"), T))
    assert span is not None and span.hi <= LIMIT and span.lo >= -LIMIT


@pytest.mark.parametrize("sql", ["x * 1e300", "i * 1e290", "x / 1e-300", "1e200 * 1e200 * i"])
def test_arithmetic_that_no_taming_makes_finite_is_refused(sql: str) -> None:
    with pytest.raises(UnsupportedQuery) as err:
        _tamed(sql)
    assert err.value.sqlstate == "0A000"


def test_a_sum_with_bounds_near_the_double_range_is_refused() -> None:
    catalog = parse_catalog(
        """\
version: 1
dataset: big
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1e-5, budget: {epsilon: 10, delta: 1e-3}}
tables:
  t:
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      id: {type: integer}
      x: {type: float, lower: -1e260, upper: 1e260}
      y: {type: float, lower: -1e200, upper: 1e200}
"""
    )
    for sql, refused in (("SELECT SUM(x) FROM t", True), ("SELECT SUM(y) FROM t", False)):
        plan = plan_query(validate(parse(sql), catalog, sql), catalog.policy)
        if refused:
            with pytest.raises(UnsupportedQuery):
                rewrite(plan, 1, "postgres")
        else:
            assert "SUM(" in rewrite(plan, 1, "postgres")
