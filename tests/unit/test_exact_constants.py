"""Arithmetic on number constants alone is exact, as PostgreSQL's numeric (``sql/exact.py``).

TPC-H Q6 writes ``l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01``; computed in DOUBLE the upper
end is 0.06999999999999999 and every row with a discount of 0.07 is lost.
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dpproxy.sql.types import SqlType, type_of


def typed(sql: str) -> str:
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    type_of(wrapped, {"x": SqlType.NUMERIC})
    return wrapped.this.sql("postgres")


@pytest.mark.parametrize(
    ("sql", "folded"),
    [
        ("0.06 + 0.01", "0.07"),
        ("0.06 - 0.01", "0.05"),
        ("0.1 * 3", "0.3"),
        ("-0.5 * 3", "-1.5"),
        ("1 - 2", "-1"),
        ("0.06 + 0.01 + 0.02", "0.09"),
        ("(0.06 - 0.01) * 100", "5"),
        ("2147483647 + 1", "2147483648"),
        ("x BETWEEN 0.06 - 0.01 AND 0.06 + 0.01", "x BETWEEN 0.05 AND 0.07"),
    ],
)
def test_constant_arithmetic_is_exact(sql: str, folded: str) -> None:
    assert typed(sql) == folded


@pytest.mark.parametrize(
    "sql",
    [
        "7 / 2",  # a quotient need not be a finite decimal: left to DOUBLE division
        "7 % 2",
        "x + 0.01",
        "9223372036854775807 + 1000000000",  # beyond 10^15: DOUBLE as before
        "1e300 * 10",
    ],
)
def test_other_arithmetic_is_left_alone(sql: str) -> None:
    assert typed(sql) == sqlglot.parse_one(sql, read="postgres").sql("postgres")
