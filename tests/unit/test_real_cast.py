"""``CAST(... AS REAL)`` as the rewrite writes it (``dpproxy/rewrite/real.py``): one tree for every
backend, its one cast to REAL recognised as in range only in that tree, and the range analyses
bounding it (the engines' results: ``tests/integration/test_real_cast_differential.py``)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.rewrite.clamps import clamp_values
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.floats import Magnitudes, finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.rewrite.ranges import row_range
from dpproxy.rewrite.real import (
    REAL_MAX,
    in_range_real,
    real_rounding,
    real_span,
    real_value,
    round_to_real,
    rounded_operand,
)
from dpproxy.rewrite.spark import to_spark
from dpproxy.sql.types import SqlType

T = Table(
    "t",
    True,
    (
        Column("uid", ColumnType.INTEGER),
        Column("fu", ColumnType.FLOAT),
        Column("fb", ColumnType.FLOAT, Fraction(0), Fraction(1, 10)),
        Column("s", ColumnType.TEXT),
    ),
    privacy_unit="uid",
)
TYPES = {"uid": SqlType.NUMERIC, "fu": SqlType.NUMERIC, "fb": SqlType.NUMERIC, "s": SqlType.TEXT}


def guarded(sql: str) -> exp.Expression:
    parsed: exp.Expression = exp.maybe_parse(sql, dialect="postgres")
    return guard_row_expression(parsed, T)


def select(e: exp.Expression) -> exp.Select:
    return exp.select(exp.alias_(e, "v")).from_("t")


@pytest.mark.parametrize(
    ("x", "rounded"),
    [
        (16777217.0, 16777216.0),
        (16777219.0, 16777220.0),
        (0.1, 0.10000000149011612),
        (2.0**-150, 0.0),
        (math.nextafter(2.0**-150, 1), 2.0**-149),
        (REAL_MAX, REAL_MAX),
        (math.nextafter(REAL_MAX, math.inf), REAL_MAX),  # NULL in SQL: any bound holds
        (-1e308, -REAL_MAX),
        (math.inf, math.inf),
    ],
)
def test_round_to_real(x: float, rounded: float) -> None:
    assert round_to_real(x) == rounded


def test_every_real_cast_is_the_one_rounding() -> None:
    for sql in ("CAST(fu AS REAL)", "CAST(fu AS FLOAT4)", "fu::real", "CAST(uid AS REAL)"):
        g = guarded(sql)
        operand = rounded_operand(g)
        assert operand is not None, sql
        assert g == real_rounding(operand)
        assert "REAL" in g.sql("duckdb")
    assert rounded_operand(guarded("CAST(fu AS DOUBLE PRECISION)")) is None
    assert rounded_operand(guarded("CAST(fu AS FLOAT)")) is None  # FLOAT is DOUBLE PRECISION


def test_a_real_cast_of_a_real_is_the_same_tree() -> None:
    assert guarded("CAST(CAST(fu AS REAL) AS REAL)") == guarded("CAST(fu AS REAL)")


@pytest.mark.parametrize("sql", ["CAST(fu AS REAL)", "CAST(uid AS REAL) * 2", "fu::real + 1"])
def test_guarding_a_rounding_again_changes_nothing(sql: str) -> None:
    once = guarded(sql)
    assert guard_row_expression(once, T) == once


def _in_range_cast(tree: exp.Expression) -> exp.TryCast:
    casts = [c for c in tree.find_all(exp.TryCast) if c.to.this is exp.DataType.Type.FLOAT]
    assert len(casts) == 1
    return casts[0]


def test_only_the_rounding_trees_cast_counts_as_in_range() -> None:
    g = guarded("CAST(fu AS REAL)")
    assert in_range_real(_in_range_cast(g))
    for old, new in (
        ("7.006492321624085e-46", "1e-300"),  # the wrong lower bound
        ("3.4028234663852886e+38", "1e300"),  # the wrong upper bound
    ):
        text = g.sql("duckdb").replace(old, new)
        assert not in_range_real(_in_range_cast(exp.maybe_parse(text, dialect="duckdb")))
    # a condition on another value than the one cast
    text = g.sql("duckdb").replace("ABS(CAST(fu AS DOUBLE)) <= 3", "ABS(CAST(uid AS DOUBLE)) <= 3")
    assert not in_range_real(_in_range_cast(exp.maybe_parse(text, dialect="duckdb")))
    bare: exp.Expression = exp.maybe_parse("TRY_CAST(fu AS REAL)", dialect="duckdb")
    assert isinstance(bare, exp.TryCast) and not in_range_real(bare)


def test_postgres_casts_to_real_only_within_its_range() -> None:
    pg = to_postgres(select(guarded("CAST(fu AS REAL)")), TYPES).sql("postgres")
    assert pg.count("AS REAL)") == 1
    assert "WHEN ABS(CAST(fu AS DOUBLE PRECISION)) <= 3.4028234663852886e+38 THEN CAST(" in pg
    # a TRY_CAST to REAL that is not the rounding's is written as the whole rounding there
    bare: exp.Expression = exp.maybe_parse("TRY_CAST(fu AS REAL)", dialect="duckdb")
    pg = to_postgres(select(bare), TYPES).sql("postgres")
    assert pg.count("AS REAL)") == 1 and "TRY_CAST" not in pg
    assert "<= 7.006492321624085e-46 THEN 0.0" in pg


def test_spark_casts_to_float_only_within_its_range() -> None:
    spark = to_spark(select(guarded("CAST(fu AS REAL)")), TYPES).sql("spark")
    assert spark.count("AS FLOAT)") == 1 and "TRY_CAST" not in spark
    assert "<= 3.4028234663852886e+38 THEN CAST(CAST(fu AS DOUBLE) AS FLOAT)" in spark


def test_a_real_has_a_fixed_span_and_nothing_inside_it_is_tamed() -> None:
    m = Magnitudes(T, 150)
    assert m.span(guarded("CAST(fu AS REAL)")) == real_span()
    hi, lo = real_span()
    assert hi == pytest.approx(math.log10(REAL_MAX)) and lo == pytest.approx(-149 * math.log10(2))
    tamed = finite_arithmetic(guarded("CAST(fu AS REAL) * 2"), T)
    assert rounded_operand(tamed.this) is not None  # the REAL untouched: nothing to tame
    # six REALs multiply within 10^±300 (2^-149 to the sixth is 10^-269), seven may not
    finite_arithmetic(guarded(" * ".join(["CAST(fu AS REAL)"] * 6)), T)
    with pytest.raises(UnsupportedQuery):
        finite_arithmetic(guarded(" * ".join(["CAST(fu AS REAL)"] * 7)), T)


def test_the_range_of_a_clamped_column_cast_to_real_is_rounded() -> None:
    """fb is clamped to [0, 0.1]; as a REAL 0.1 is 0.10000000149011612, above the clamp."""
    tree = guard_row_expression(clamp_values(exp.maybe_parse("CAST(fb AS REAL)"), T), T)
    assert row_range(tree, T) == (0.0, round_to_real(0.1))
    assert round_to_real(0.1) > 0.1


def test_real_value_is_the_rounding_on_one_value() -> None:
    """What ``release/evaluation.py`` applies to a released value cast to REAL."""
    assert real_value(16777217.0) == 16777216.0
    assert real_value(4e38) is None and real_value(-1e308) is None
    assert real_value(1e-46) == 0.0 and real_value(None) is None
    assert real_value(math.inf) == math.inf and math.isnan(real_value(math.nan) or 0.0)
