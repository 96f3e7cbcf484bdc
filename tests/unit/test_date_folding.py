"""Constant date arithmetic is folded in Python before any data is read (``sql/dates.py``).

The folded values follow PostgreSQL's and DuckDB's month arithmetic (the day clamped to the
month's end, months before days); each case is checked against DuckDB's own arithmetic too
(PostgreSQL's: ``tests/integration/test_date_forms.py``, on column forms built from the same
Python functions). Results outside 0001-01-01 … 9999-12-31 are refused up front (22008);
what a date cannot take is refused naming what the analyst wrote.
"""

from __future__ import annotations

import datetime

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpproxy.errors import DPProxyError
from dpproxy.sql import dates
from dpproxy.sql.types import SqlType, type_of

TYPES = {"d": SqlType.DATE, "n": SqlType.NUMERIC}


def fold(sql: str) -> str:
    """The expression after typing (which folds constants in place), as DuckDB SQL."""
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    type_of(wrapped, TYPES)
    return wrapped.this.sql("duckdb")


def refusal(sql: str) -> DPProxyError:
    with pytest.raises(DPProxyError) as info:
        fold(sql)
    return info.value


@pytest.mark.parametrize(
    ("sql", "folded"),
    [
        # TPC-H's spellings
        ("DATE '1998-12-01' - INTERVAL '90' DAY", "1998-09-02"),
        ("DATE '1994-01-01' + INTERVAL '1' YEAR", "1995-01-01"),
        ("DATE '1993-10-01' + INTERVAL '3' MONTH", "1994-01-01"),
        ("DATE '1995-09-01' + INTERVAL '1' MONTH", "1995-10-01"),
        # PostgreSQL's spellings
        ("DATE '2024-01-01' + INTERVAL '3 months'", "2024-04-01"),
        ("DATE '2024-01-01' + interval '90' day", "2024-03-31"),
        ("DATE '2024-01-01' + INTERVAL '1 year 2 months'", "2025-03-01"),
        ("DATE '2024-01-01' - INTERVAL '2 weeks'", "2023-12-18"),
        ("DATE '2024-01-01' + INTERVAL '1' QUARTER", "2024-04-01"),
        ("INTERVAL '1' DAY + DATE '2024-01-01'", "2024-01-02"),
        ("'2024-01-01'::date + 1", "2024-01-02"),
        ("DATE '2024-01-01' - 1", "2023-12-31"),
        ("5 + DATE '2024-01-01'", "2024-01-06"),
        ("DATE '2024-03-01' - -1", "2024-03-02"),
        # month-end clamping
        ("DATE '2024-01-31' + INTERVAL '1' MONTH", "2024-02-29"),
        ("DATE '2023-01-31' + INTERVAL '1' MONTH", "2023-02-28"),
        ("DATE '2023-03-31' - INTERVAL '1' MONTH", "2023-02-28"),
        ("DATE '2024-02-29' + INTERVAL '1' YEAR", "2025-02-28"),
        ("DATE '2024-01-31' + INTERVAL '1 month 1 day'", "2024-03-01"),
        ("DATE '2024-05-31' - INTERVAL '1' QUARTER", "2024-02-29"),
        # leap years
        ("DATE '1900-02-28' + 1", "1900-03-01"),
        ("DATE '2000-02-28' + 1", "2000-02-29"),
        ("DATE '2100-01-29' + INTERVAL '1' MONTH", "2100-02-28"),
        # the ends of the range
        ("DATE '9999-12-30' + 1", "9999-12-31"),
        ("DATE '0001-01-02' - INTERVAL '1' DAY", "0001-01-01"),
        ("DATE '0001-02-28' + INTERVAL '9998 years'", "9999-02-28"),
        # nested, truncation
        ("(DATE '2024-01-31' + INTERVAL '1' MONTH) + INTERVAL '1' MONTH", "2024-03-29"),
        ("DATE_TRUNC('month', DATE '2024-02-29')", "2024-02-01"),
        ("DATE_TRUNC('quarter', DATE '2024-08-17')", "2024-07-01"),
        ("DATE_TRUNC('week', DATE '2024-08-17')", "2024-08-12"),
        ("DATE_TRUNC('year', DATE '2024-08-17' + INTERVAL '5' MONTH)", "2025-01-01"),
        ("DATE_TRUNC('day', DATE '2024-08-17')", "2024-08-17"),
    ],
)
def test_constant_date_arithmetic_is_folded(sql: str, folded: str) -> None:
    assert fold(sql) == f"CAST('{folded}' AS DATE)"


def test_folded_values_agree_with_duckdb() -> None:
    """The folded date is the one DuckDB computes (PostgreSQL: the integration test)."""
    con = duckdb.connect()
    for sql in (
        "DATE '2024-01-31' + INTERVAL '1' MONTH",
        "DATE '2023-03-31' - INTERVAL '1' MONTH",
        "DATE '2024-02-29' + INTERVAL '1' YEAR",
        "DATE '2024-01-31' + INTERVAL '1 month 1 day'",
        "DATE '1998-12-01' - INTERVAL '90' DAY",
        "DATE '2100-01-29' + INTERVAL '1' MONTH",
    ):
        duck = con.execute(
            f"SELECT CAST({sqlglot.transpile(sql, 'postgres', 'duckdb')[0]} AS DATE)"
        )
        (expected,) = duck.fetchone()  # type: ignore[misc]
        assert fold(sql) == f"CAST('{expected.isoformat()}' AS DATE)", sql


def test_date_difference_is_a_number() -> None:
    assert fold("DATE '1998-12-01' - DATE '1998-01-01'") == "334"
    assert fold("DATE '0001-01-01' - DATE '9999-12-31'") == "-3652058"
    wrapped = exp.Paren(this=sqlglot.parse_one("DATE '2024-03-01' - DATE '2024-02-01' > 28"))
    assert type_of(wrapped, TYPES) is SqlType.BOOLEAN


def test_current_date_is_today_in_utc() -> None:
    before = datetime.datetime.now(datetime.UTC).date()
    got = fold("CURRENT_DATE")
    after = datetime.datetime.now(datetime.UTC).date()
    assert got in (f"CAST('{before}' AS DATE)", f"CAST('{after}' AS DATE)")
    assert fold("CURRENT_DATE - CURRENT_DATE") == "0"


@pytest.mark.parametrize(
    "sql",
    [
        "DATE '9999-12-31' + 1",
        "DATE '0001-01-01' - INTERVAL '1' DAY",
        "DATE '9999-12-01' + INTERVAL '1' MONTH",
        "DATE '2024-01-01' + INTERVAL '8000' YEAR",
        "DATE '2024-01-01' + INTERVAL '100000000' DAY",
        "DATE '2024-01-01' + 99999999999999999999",
        "d + INTERVAL '10000' YEAR",
    ],
)
def test_out_of_range_is_refused_up_front(sql: str) -> None:
    e = refusal(sql)
    assert e.sqlstate == "22008", e


@pytest.mark.parametrize(
    ("sql", "sqlstate", "words"),
    [
        ("d + INTERVAL '1 hour'", "0A000", "INTERVAL '1 hour' on a date is not supported"),
        ("DATE '2024-01-01' + INTERVAL '1' HOUR", "0A000", "INTERVAL '1 hour' on a date"),
        ("d + INTERVAL '1.5 days'", "0A000", "INTERVAL '1.5 days' on a date"),
        ("DATE_TRUNC('hour', d)", "0A000", "DATE_TRUNC('hour', …) on a date"),
        ("DATE_TRUNC('decade', d)", "0A000", "DATE_TRUNC('decade', …)"),
        ("DATE_TRUNC('month', n)", "42883", "date_trunc("),
        ("d + 1.5", "0A000", "an integer constant number of days"),
        ("d + n", "0A000", "an integer constant number of days"),
        ("d * 2", "42883", "operator does not exist: date * integer"),
        ("1 - d", "42883", "operator does not exist: integer - date"),
        ("INTERVAL '1' DAY - d", "42883", "operator does not exist: interval - date"),
        ("d + '1 day'", "42883", "operator does not exist: date + unknown"),
        ("n > INTERVAL '1' DAY", "0A000", "supported only added to or subtracted from a date"),
        ("n + INTERVAL '1' DAY", "42883", "integer + interval"),
    ],
)
def test_refusals_name_what_was_written(sql: str, sqlstate: str, words: str) -> None:
    e = refusal(sql)
    assert e.sqlstate == sqlstate, e
    assert words in e.message, e.message
    assert "timestamp_trunc" not in e.message.lower()


def test_column_difference_becomes_date_diff() -> None:
    for sql in ("d - d", "d - DATE '2024-01-01'", "DATE '2024-01-01' - d"):
        wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
        assert type_of(wrapped, TYPES) is SqlType.NUMERIC
        assert isinstance(wrapped.this, exp.DateDiff)


def test_column_arithmetic_becomes_date_add() -> None:
    wrapped = exp.Paren(this=sqlglot.parse_one("d + INTERVAL '1 month 2 days'", read="postgres"))
    assert type_of(wrapped, TYPES) is SqlType.DATE
    days = wrapped.this
    assert isinstance(days, exp.DateAdd) and days.args["unit"].name == "DAY"
    assert isinstance(days.this, exp.DateAdd) and days.this.args["unit"].name == "MONTH"
    wrapped = exp.Paren(this=sqlglot.parse_one("d - 30", read="postgres"))
    assert type_of(wrapped, TYPES) is SqlType.DATE
    assert isinstance(wrapped.this, exp.DateAdd)


@st.composite
def shifts(draw: st.DrawFn) -> dates.Shift:
    months = draw(st.sampled_from((0, 1, -1, 12, -12, 119_987, -119_987, 3)))
    days = draw(st.sampled_from((0, 1, -1, 30, -30, 3_652_058, -3_652_058)))
    return dates.Shift(months, days)


@settings(max_examples=300, deadline=None)
@given(shift=shifts(), day=st.dates())
def test_input_range_is_exactly_where_the_shift_stays_in_range(
    shift: dates.Shift, day: datetime.date
) -> None:
    bounds = dates.input_range(shift)
    inside = bounds is not None and bounds[0] <= day <= bounds[1]
    assert inside == (dates.shift_date(day, shift) is not None)


@settings(max_examples=300, deadline=None)
@given(day=st.dates(), unit=st.sampled_from(dates.TRUNC_UNITS))
def test_truncation_is_a_date_not_after_the_input(day: datetime.date, unit: str) -> None:
    start = dates.truncate(day, unit)
    assert start <= day
    assert dates.truncate(start, unit) == start
