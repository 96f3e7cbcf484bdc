"""``sql/factor.py``: a conjunct common to every OR branch moved out of the OR is exact in SQL's
three-valued logic, checked by evaluating both forms on DuckDB for every assignment of TRUE,
FALSE and NULL to the conditions (and the join builder then sees the equality: TPC-H Q19)."""

from __future__ import annotations

import itertools

import duckdb
import pytest
from sqlglot import exp

from dpproxy.sql.factor import factor_or

VALUES = ("TRUE", "FALSE", "NULL")
FORMS = (
    "(a AND b) OR (a AND c)",
    "(a AND b AND d) OR (c AND a) OR (a AND d AND c)",
    "a OR (a AND b)",  # a branch left empty becomes TRUE
    "(a AND b) OR (a AND b)",
    "d AND ((a AND b) OR (a AND c))",  # an OR among other conjuncts
    "(a AND b) OR c",  # nothing common: unchanged
)


@pytest.mark.parametrize("form", FORMS)
def test_factoring_is_exact_in_three_valued_logic(form: str) -> None:
    factored = factor_or(exp.maybe_parse(form)).sql("duckdb")
    con = duckdb.connect()
    try:
        for values in itertools.product(VALUES, repeat=4):
            env = dict(zip("abcd", values, strict=True))
            row = ", ".join(f"CAST({v} AS BOOLEAN) AS {k}" for k, v in env.items())
            query = f"SELECT ({form}) IS NOT DISTINCT FROM ({factored}) FROM (SELECT {row})"
            assert con.execute(query).fetchone() == (True,), (form, factored, env)
    finally:
        con.close()


def test_the_common_conjunct_is_taken_out() -> None:
    out = factor_or(exp.maybe_parse("(p = l AND x > 1) OR (p = l AND x < 0) OR (x = 5 AND p = l)"))
    assert out.sql() == "p = l AND (x > 1 OR x < 0 OR x = 5)"
    assert factor_or(exp.maybe_parse("(a AND b) OR c")).sql() == "(a AND b) OR c"
