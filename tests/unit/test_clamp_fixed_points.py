"""The clamp CASEs of ``rewrite/clamps.clamp_values`` are fixed points of the guards and of
``rewrite/precedence.parenthesise``, so ``guard_row_expression`` may skip them (``guarded``):
the guarded SQL is the same as when every node is walked."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import duckdb
import pytest
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.clamps import clamp_values
from dpproxy.rewrite.guard import guard_row_expression

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


_LARGE_X = re.compile(r"CAST\(x AS DOUBLE\) > 1e\d+ AND")
_LARGE_Y = re.compile(r"CAST\(y AS DOUBLE\) > 1e\d+ AND")


@pytest.mark.parametrize("measure", FLOAT_SAFETY)
def test_only_a_leaf_clamped_on_both_sides_gets_the_short_taming(
    measure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``x`` is bounded on both sides: every taming of it (in its clamp's ELSE, copies of
    the clamp included) leaves out the branches for large magnitudes. ``y`` is bounded below
    only: tamed in full wherever it is tamed at all."""
    from dpproxy.rewrite import floats

    short = _float_safe(measure, True)
    monkeypatch.setattr(floats, "_clamped_within", lambda leaf, L: False)
    full = _float_safe(measure, True)
    assert not _LARGE_X.search(short)
    assert len(_LARGE_Y.findall(short)) == len(_LARGE_Y.findall(full))
    tamed_x = full.count("ABS(CAST(x AS DOUBLE)) < 1e-")
    assert len(_LARGE_X.findall(full)) == tamed_x
    assert short.count("ABS(CAST(x AS DOUBLE)) < 1e-") == tamed_x


_VALUES = (None, 0.0, -0.0, 5e-324, -5e-324, 1e-200, 1.0, -2.5, 7.25, 8.0, 1e300, -1e300)
_SPECIAL = ("'nan'", "'inf'", "'-inf'")


@pytest.mark.parametrize("measure", FLOAT_SAFETY)
def test_the_short_taming_gives_every_row_the_same_value(
    measure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run on DuckDB, the expression with the short tamings and the one with the full tamings
    give every row the same double (NaN as NaN, the sign of a zero included), for x and y each
    NULL, ±0, the smallest subnormals, tiny, in and out of x's bounds, near the double range,
    NaN and ±inf."""
    from dpproxy.rewrite import floats

    told = _float_safe(measure, True)
    monkeypatch.setattr(floats, "_clamped_within", lambda leaf, L: False)
    untold = _float_safe(measure, True)
    if told.startswith("0A000"):
        assert told == untold
        return
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE t (i INTEGER, j INTEGER, x DOUBLE, y DOUBLE, k INTEGER, s TEXT)")
        floats = [repr(v) if v is not None else "NULL" for v in _VALUES]
        floats += [f"CAST({v} AS DOUBLE)" for v in _SPECIAL]
        rows = [
            f"({i}, {j}, {x}, {y}, {k}, 'a')"
            for i, j, k in ((3, 7, -2), (-10, 0, 7), (0, 1000, 0))
            for x in floats
            for y in floats
        ]
        con.execute("INSERT INTO t VALUES " + ", ".join(rows))
        got = con.execute(f"SELECT ({told}), ({untold}) FROM t").fetchall()
    finally:
        con.close()
    assert len(got) == 3 * len(floats) ** 2
    for a, b in got:
        if isinstance(a, float) and isinstance(b, float):
            same = (math.isnan(a) and math.isnan(b)) or (
                a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
            )
        else:
            same = type(a) is type(b) and a == b
        assert same, (a, b)
