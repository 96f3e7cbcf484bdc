"""The clamp CASEs of ``rewrite/guard.clamp_values`` are fixed points of the guards and of
``rewrite/precedence.parenthesise``, so ``guard_row_expression`` may skip them (``guarded``):
the guarded SQL is the same as when every node is walked."""

from __future__ import annotations

from fractions import Fraction

import pytest
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.guard import clamp_values, guard_row_expression

TABLE = Table(
    "t",
    True,
    (
        Column("i", ColumnType.INTEGER, Fraction(-10), Fraction(10)),
        Column("j", ColumnType.INTEGER, Fraction(0), Fraction(1000)),
        Column("x", ColumnType.FLOAT, Fraction(-5, 2), Fraction(29, 4)),
        Column("y", ColumnType.FLOAT, Fraction(1, 3), None),
        Column("k", ColumnType.INTEGER, None, Fraction(7)),
        Column("s", ColumnType.TEXT),
    ),
)
MEASURES = (
    "i",
    "i - j",
    "i * x + y",
    "-i",
    "-(i + j) * 2",
    "i / j",
    "i / (j - 1)",
    "x % 3",
    "i % j",
    "ROUND(x, 1)",
    "ROUND(ROUND(i * x, 2) + j, 1)",
    "CASE WHEN i > 0 THEN x ELSE -y END",
    "CASE WHEN s = 'a' THEN i - k END",
    "COALESCE(i, j) - k",
    "GREATEST(i, x, -y) * LEAST(j, k)",
    "SQRT(j) + LN(j + 1) - EXP(i)",
    "POWER(x, 2) - i * i",
    "ABS(i - x) / NULLIF(k, 0)",
    "CAST(i AS DOUBLE) * x",
    "(i > 0) = (x < 1)",
    "i BETWEEN x AND y",
    "s || CAST(i AS TEXT)",
)


@pytest.mark.parametrize("measure", MEASURES)
def test_skipping_the_clamps_guards_the_same(measure: str) -> None:
    node = exp.maybe_parse(measure, dialect="postgres")
    walked = guard_row_expression(clamp_values(node, TABLE), TABLE)  # every node walked
    made: set[int] = set()
    clamped = clamp_values(node, TABLE, made=made)
    skipped = guard_row_expression(clamped, TABLE, copy=False, guarded=made)
    assert skipped.sql() == walked.sql()
    assert repr(skipped) == repr(walked)


def _built() -> list[exp.Expression]:
    """Trees as the rewrite builds them, without the parser's parentheses: here the
    parentheses come from ``parenthesise`` only."""
    i, j, x = exp.column("i"), exp.column("j"), exp.column("x")
    two = exp.Literal.number(2)
    return [
        exp.Mul(this=exp.Sub(this=i.copy(), expression=j.copy()), expression=two.copy()),
        exp.Neg(this=exp.Add(this=i.copy(), expression=x.copy())),
        exp.Sub(this=i.copy(), expression=exp.Sub(this=j.copy(), expression=x.copy())),
        exp.EQ(this=i.copy(), expression=exp.LT(this=j.copy(), expression=x.copy())),
        exp.Div(this=exp.Mul(this=i.copy(), expression=x.copy()), expression=exp.Neg(this=j)),
    ]


@pytest.mark.parametrize("index", range(len(_built())))
def test_built_trees_get_the_same_parentheses(index: int) -> None:
    node = _built()[index]
    walked = guard_row_expression(clamp_values(node, TABLE), TABLE)
    made: set[int] = set()
    clamped = clamp_values(node, TABLE, made=made)
    skipped = guard_row_expression(clamped, TABLE, copy=False, guarded=made)
    assert skipped.sql() == walked.sql()


FLOAT_SAFETY = (
    *MEASURES,
    "x * 1e200",
    "i * 1e300 * 1e300",
    "x * x * x * y",
    "(i + 1e-300) * 1e-300",
    "CASE WHEN x > 0 THEN x * 1e250 ELSE i END",
    "y / NULLIF(x, 0) * 1e100",
)


def _float_safe(measure: str, with_clamps: bool) -> str:
    from dpproxy.errors import DPProxyError
    from dpproxy.rewrite.floats import finite_arithmetic

    node = exp.maybe_parse(measure, dialect="postgres")
    made: set[int] = set()
    cases: list[exp.Expression] = []
    clamped = clamp_values(node, TABLE, made=made, cases=cases)
    guarded = guard_row_expression(clamped, TABLE, copy=False, guarded=made)
    try:
        return finite_arithmetic(guarded, TABLE, cases if with_clamps else ()).sql()
    except DPProxyError as e:
        return f"{e.sqlstate} {e.message}"


@pytest.mark.parametrize("measure", FLOAT_SAFETY)
def test_float_safety_knowing_the_clamps_is_the_same(measure: str) -> None:
    """``finite_arithmetic`` told the clamp CASEs (not walked into for an INTEGER column, their
    conditions not spanned) tames the same leaves at the same L, or refuses alike."""
    assert _float_safe(measure, True) == _float_safe(measure, False)
