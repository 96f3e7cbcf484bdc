"""Post-processing is total: the select list, HAVING and ORDER BY are evaluated on released
values after the query is charged, so an operation without a value is NULL, never an error."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
from sqlglot import exp

from dpproxy.release.evaluation import evaluate


def _ev(sql: str, **env: Any) -> Any:
    return evaluate(exp.maybe_parse(sql, dialect="postgres"), env)


@pytest.mark.parametrize(
    ("sql", "value", "expected"),
    [
        ("CAST(__key_0 AS INTEGER)", "Male", None),  # raised TypeError after charging
        ("CAST(__key_0 AS INTEGER)", " 12 ", 12),
        ("CAST(__key_0 AS INTEGER)", "2.5", 3),  # as numeric → integer: half away from 0
        ("CAST(__key_0 AS INTEGER)", "1e10", None),  # out of integer's range
        ("CAST(__key_0 AS BIGINT)", "1e10", 10**10),
        ("CAST(__key_0 AS SMALLINT)", 40000, None),
        ("CAST(__key_0 AS INTEGER)", 2.5, 2),  # a double rounds half to even
        ("CAST(__key_0 AS INTEGER)", math.inf, None),
        ("CAST(__key_0 AS INTEGER)", math.nan, None),
        ("CAST(__key_0 AS DOUBLE PRECISION)", "-Infinity", -math.inf),
        ("CAST(__key_0 AS DOUBLE PRECISION)", "x1", None),
        ("CAST(__key_0 AS BOOLEAN)", "yes", True),
        ("CAST(__key_0 AS BOOLEAN)", "maybe", None),
        ("CAST(__key_0 AS DATE)", "2024-02-29", datetime.date(2024, 2, 29)),
        ("CAST(__key_0 AS DATE)", "2023-02-29", None),
        ("CAST(__key_0 AS TEXT)", True, "true"),
        ("CAST(__key_0 AS TEXT)", datetime.date(2024, 1, 2), "2024-01-02"),
        ("FLOOR(__key_0)", math.inf, math.inf),
        ("ROUND(__key_0)", -math.inf, -math.inf),
        ("ROUND(__key_0, 2)", 1.005, 1.0),
        ("__key_0 % 2", math.inf, None),
        ("__key_0 * __key_0", 10**10, 10**20 * 1.0),  # beyond 64 bits: a double
        ("__key_0 / 3", 10**400, math.inf),
        ("__key_0 IS TRUE", True, True),
        ("__key_0 IS TRUE", None, False),
        ("__key_0 IS FALSE", False, True),
        ("__key_0 IS NULL", None, True),
        ("__key_0 IS NOT NULL", None, False),  # sqlglot: Is(negate=True)
        ("__key_0 IS NOT NULL", 3.5, True),
        ("__key_0 IS NOT TRUE", None, True),
        ("__key_0 IS NOT FALSE", False, False),
    ],
)
def test_evaluation_is_total(sql: str, value: Any, expected: Any) -> None:
    got = _ev(sql, __key_0=value)
    assert got == expected and type(got) is type(expected)


def test_huge_integers_become_doubles_and_overflow_to_infinity() -> None:
    assert _ev("__key_0 * __key_0 * __key_0", __key_0=10**150) == math.inf
    assert _ev("-__key_0 * __key_0 * __key_0", __key_0=10**150) == -math.inf
