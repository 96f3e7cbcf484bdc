"""Math functions (SQRT, CBRT, LN, LOG with or without a base, EXP, SIGN, POWER with an
integer or fractional exponent) on a float column: the printed forms give the same values on
DuckDB and PostgreSQL, the values Python computes, and cannot fail on any double either engine
stores.

A table ``mm(i, x)`` holds, on both engines, ±0, ±1, the largest and smallest doubles
(±1.7976931348623157e308, ±5e-324), the edges of EXP's range on PostgreSQL (709.78: overflow;
-745.1: underflow) and of dpproxy's (±345), ±inf, NaN and NULL. Each expression is typed and
guarded as the rewrite does it (``type_of``, ``guard_row_expression``, ``finite_arithmetic``),
printed for each engine and run over every row: no error, the two engines agree, and a single
function gives Python's value inside its domain and NULL outside.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.floats import finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.sql.totality import check_allowed
from dpproxy.sql.types import EXP_LIMIT, SqlType, type_of
from tests.both_engines import doubles_table, duckdb_and_postgres

pytestmark = pytest.mark.postgres

MM = Table(
    "mm", True, (Column("i", ColumnType.INTEGER), Column("x", ColumnType.FLOAT, nullable=True))
)

TYPES = {"i": SqlType.NUMERIC, "x": SqlType.NUMERIC}

VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 10.0, 1000.0, 1e-300, 5e-324, -5e-324]
VALUES += [1.7976931348623157e308, -1.7976931348623157e308, 1e308, -1e308]
VALUES += [709.0, 709.79, 710.0, -745.0, -745.2, -1000.0, 345.0, 345.5, -345.0, -346.0]
VALUES += [1 + 2**-52, 1 - 2**-53, math.inf, -math.inf, math.nan]
VALUES += [1e74, -1e75, 1e-75, -1e-74, 1e49, -1e50, 220.0, -221.0, 0.0046, 0.0045]


def _nan(v: float) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _sign(v: float) -> float:
    return 0.0 if v == 0 or math.isnan(v) else math.copysign(1.0, v)


#: single functions: (SQL, Python value inside the domain, domain)
SINGLE = {
    "SQRT(x)": (math.sqrt, lambda v: _nan(v) or v >= 0),
    "LN(x)": (math.log, lambda v: _nan(v) or v > 0),
    "LOG(x)": (math.log10, lambda v: _nan(v) or v > 0),
    "EXP(x)": (math.exp, lambda v: -EXP_LIMIT <= v <= EXP_LIMIT),
    "SIGN(x)": (_sign, lambda v: True),
    "POWER(x, 2)": (lambda v: v**2, lambda v: v == 0 or 1.000001e-75 <= abs(v) <= 9.99999e74),
    "x ^ 3": (lambda v: v**3, lambda v: v == 0 or 1.000001e-50 <= abs(v) <= 9.99999e49),
    "POWER(x, 64)": (lambda v: v**64, lambda v: v == 0 or 4.531588169e-03 <= abs(v) <= 220.67),
    "CBRT(x)": (math.cbrt, lambda v: True),
    "LOG(2, x)": (math.log2, lambda v: _nan(v) or v > 0),
    "LOG(0.5, x)": (lambda v: math.log(v) / math.log(0.5), lambda v: _nan(v) or v > 0),
    "POWER(x, 0.5)": (lambda v: v**0.5, lambda v: v == 0 or 1.000001e-300 <= v <= 9.99999e299),
    "x ^ -1.5": (lambda v: v**-1.5, lambda v: 1.000001e-100 <= v <= 9.99999e99),
    "POWER(x, 2.5)": (lambda v: v**2.5, lambda v: v == 0 or 1.000001e-60 <= v <= 9.99999e59),
}
COMPOUND = [
    "SQRT(x) * 2",
    "SQRT(x - 1) + LN(x)",
    "LN(x) * LOG(x) - 1",
    "EXP(x) - 1",
    "EXP(x / 2) * 1e100",
    "SIGN(x) * PI()",
    "MOD(x, 3)",
    "SQRT(ABS(x)) / LN(x)",
    "EXP(LN(x))",
    "ROUND(SQRT(x), 2)",
    "ROUND(x, -2)",
    "ROUND(x * 3, -5) - x",
    "POWER(x, 2) * 3 + POWER(x, 1)",
    "POWER(SQRT(x), 2) - x",
    "CBRT(x) * CBRT(x) - x",
    "LOG(10, x) - LOG(x)",
    "POWER(x, 0.5) * POWER(x, -0.5)",
    "EXP(LOG(1.5, x)) + CBRT(-x)",
]


@pytest.fixture(scope="module")
def engines(pg_session_dsn: str) -> Iterator[tuple[Any, Any]]:
    with duckdb_and_postgres(pg_session_dsn, doubles_table("mm", VALUES)) as both:
        yield both


def _guarded(sql: str) -> exp.Expression:
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    check_allowed(wrapped)
    assert type_of(wrapped, TYPES) is SqlType.NUMERIC
    return finite_arithmetic(guard_row_expression(wrapped.this, MM), MM)


def _run(engines: tuple[Any, Any], expr: exp.Expression) -> tuple[dict[int, Any], dict[int, Any]]:
    duck, pg = engines
    select = exp.select(exp.column("i"), exp.alias_(expr, "v")).from_("mm")
    d = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    pg_tree = to_postgres(select.copy(), TYPES)
    p = dict(pg.execute(pg_tree.sql(dialect="postgres")).fetchall())  # type: ignore[arg-type]
    return d, p


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-14, abs_tol=0.0)


@pytest.mark.parametrize("sql", list(SINGLE))
def test_math_functions_agree_and_never_fail(engines: tuple[Any, Any], sql: str) -> None:
    f, domain = SINGLE[sql]
    d, p = _run(engines, _guarded(sql))  # raises if either engine fails on any row
    for i, v in enumerate(VALUES):
        want = f(v) if domain(v) else None
        assert _same(d[i], want), (sql, v, d[i], want)
        assert _same(p[i], want), (sql, v, p[i], want)
    assert d[len(VALUES)] is None and p[len(VALUES)] is None


@pytest.mark.parametrize("sql", COMPOUND)
def test_math_expressions_agree_and_never_fail(engines: tuple[Any, Any], sql: str) -> None:
    d, p = _run(engines, _guarded(sql))
    for i in range(len(VALUES) + 1):
        assert _same(d[i], p[i]), (sql, VALUES[i] if i < len(VALUES) else None, d[i], p[i])


def test_pi_is_the_same_double() -> None:
    duck = duckdb.connect()
    assert duck.execute("SELECT PI()").fetchone() == (math.pi,)
