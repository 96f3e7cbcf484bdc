"""Date functions on date columns: the printed forms give the same values on DuckDB and
PostgreSQL, the values Python computes, and cannot fail on any date either engine stores.

A table ``dd(i, d)`` holds, on both engines, ordinary dates (month ends, leap days, the
Gregorian switch of 1582), the limits of the common range 0001-01-01 and 9999-12-31, each
engine's own minimum and maximum date (PostgreSQL: 4713-01-01 BC … 5874897-12-31; DuckDB:
5877642-06-25 BC … 5881580-07-10), ±infinity and NULL. Each expression is typed and guarded
as the rewrite does it (``type_of`` then ``guard_row_expression``), printed for each engine,
and run over every row: no error, and inside 0001…9999 the value of
:mod:`dpproxy.sql.dates`'s Python twin; outside it NULL on both engines.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Iterator
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.sql import dates
from dpproxy.sql.types import SqlType, type_of
from tests.both_engines import duckdb_and_postgres

pytestmark = pytest.mark.postgres

DD = Table(
    "dd", True, (Column("i", ColumnType.INTEGER), Column("d", ColumnType.DATE, nullable=True))
)

TYPES = {"i": SqlType.NUMERIC, "d": SqlType.DATE}

_rng = random.Random(18)
ORDINARY = [
    datetime.date(2024, 1, 31),
    datetime.date(2024, 2, 29),
    datetime.date(2023, 2, 28),
    datetime.date(2023, 3, 31),
    datetime.date(2000, 2, 29),
    datetime.date(1900, 3, 1),
    datetime.date(1582, 10, 4),
    datetime.date(1582, 10, 15),
    datetime.date(1, 1, 1),
    datetime.date(1, 1, 7),
    datetime.date(1, 2, 28),
    datetime.date(9999, 12, 31),
    datetime.date(9999, 12, 1),
    datetime.date(9999, 11, 30),
    datetime.date(1998, 12, 1),
    datetime.date(1970, 1, 1),
    datetime.date(1992, 1, 1),
    datetime.date(1995, 6, 17),
] + [datetime.date.fromordinal(_rng.randint(1, 3_652_059)) for _ in range(60)]
# Dates outside Python's range, as each engine writes them (both: the BC dates PostgreSQL
# stores; DuckDB alone: its own extremes beyond PostgreSQL's).
BOTH_EXTREME = ("infinity", "-infinity", "5874897-12-31", "10000-01-01", "12345-06-30")
PG_EXTREME = ("4713-01-01 BC", "4713-12-31 BC", "0001-12-31 BC")
DUCK_EXTREME = (
    "4713-01-01 (BC)",
    "4713-12-31 (BC)",
    "0001-12-31 (BC)",
    "5877642-06-25 (BC)",
    "5881580-07-10",
)

EXPRESSIONS = [
    "DATE_TRUNC('day', d)",
    "DATE_TRUNC('week', d)",
    "DATE_TRUNC('month', d)",
    "DATE_TRUNC('quarter', d)",
    "DATE_TRUNC('year', d)",
    "d + 30",
    "d - 30",
    "30 + d",
    "d + INTERVAL '1' MONTH",
    "d - INTERVAL '1 month'",
    "d + INTERVAL '3 months'",
    "d + INTERVAL '1' YEAR",
    "d - INTERVAL '1' QUARTER",
    "d + INTERVAL '1 month 1 day'",
    "d - INTERVAL '2 weeks'",
    "d + INTERVAL '9998 years'",
    "DATE_TRUNC('month', d) + INTERVAL '1' MONTH - 1",
]


def _python(sql: str, day: datetime.date) -> datetime.date | None:
    """What the expression means on a date of 0001…9999 (None: NULL)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    return _eval(tree, day)


def _eval(node: exp.Expression, day: datetime.date) -> Any:
    if isinstance(node, exp.Column):
        return day
    if isinstance(node, exp.Literal):
        return int(node.name)
    if isinstance(node, exp.TimestampTrunc):
        return dates.truncate(_eval(node.this, day), node.args["unit"].name.lower())
    if isinstance(node, exp.Add | exp.Sub):
        sign = -1 if isinstance(node, exp.Sub) else 1
        a, b = node.this, node.expression
        if isinstance(a, exp.Literal | exp.Interval):
            a, b = b, a
        base = _eval(a, day)
        if base is None:
            return None
        if isinstance(b, exp.Interval):
            shift = dates.interval_shift(b).times(sign)
        else:
            shift = dates.Shift(0, sign * int(b.name))
        return dates.shift_date(base, shift)
    raise AssertionError(node)


def _table_sql(dialect: str) -> list[str]:
    values = [f"({i}, DATE '{d.isoformat()}')" for i, d in enumerate(ORDINARY)]
    extreme = BOTH_EXTREME + (PG_EXTREME if dialect == "postgres" else DUCK_EXTREME)
    values += [f"({1000 + i}, DATE '{d}')" for i, d in enumerate(extreme)]
    values.append("(2000, NULL)")
    return [
        "DROP TABLE IF EXISTS dd",
        "CREATE TABLE dd (i INTEGER, d DATE)",
        "INSERT INTO dd VALUES " + ", ".join(values),
    ]


@pytest.fixture(scope="module")
def engines(pg_session_dsn: str) -> Iterator[tuple[Any, Any]]:
    with duckdb_and_postgres(pg_session_dsn, _table_sql) as both:
        yield both


def _guarded(sql: str) -> exp.Expression:
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    assert type_of(wrapped, TYPES) is SqlType.DATE
    return guard_row_expression(wrapped.this, DD)


def _run(
    engines: tuple[Any, Any], expr: exp.Expression, *, ordinary: bool
) -> tuple[dict[int, Any], dict[int, Any]]:
    """The values on the ordinary rows, or whether each row's value is NULL (so that every
    row is evaluated: the drivers cannot load dates beyond year 9999)."""
    duck, pg = engines
    value = expr if ordinary else exp.Is(this=exp.Paren(this=expr), expression=exp.Null())
    select = exp.select(exp.column("i"), exp.alias_(value, "v")).from_("dd")
    if ordinary:
        select = select.where("i < 1000")
    d = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    pg_tree = to_postgres(select.copy(), TYPES)
    p = dict(pg.execute(pg_tree.sql(dialect="postgres")).fetchall())  # type: ignore[arg-type]
    return d, p


@pytest.mark.parametrize("sql", EXPRESSIONS)
def test_date_forms_agree_and_never_fail(engines: tuple[Any, Any], sql: str) -> None:
    expr = _guarded(sql)
    printed = expr.sql("postgres").upper()
    assert "DATE_TRUNC" not in printed and "TIMESTAMP" not in printed
    d, p = _run(engines, expr, ordinary=True)
    for i, day in enumerate(ORDINARY):
        want = _python(sql, day)
        assert d[i] == want, (sql, day, d[i], want)
        assert p[i] == want, (sql, day, p[i], want)
    d, p = _run(engines, expr, ordinary=False)  # raises if either engine fails on any row
    day_trunc = sql == "DATE_TRUNC('day', d)"  # d itself: the extremes come back unchanged
    for i in range(1000, 1000 + max(len(PG_EXTREME), len(DUCK_EXTREME)) + len(BOTH_EXTREME)):
        for got in (d.get(i), p.get(i)):
            assert got in (None, not day_trunc), (sql, i)
    assert d[2000] is True and p[2000] is True


@pytest.mark.parametrize(
    "sql", ["d - DATE '2000-01-01'", "DATE '1970-01-01' - d", "d - (d - 30)", "(d - d) * 2"]
)
def test_date_differences_agree_and_never_fail(engines: tuple[Any, Any], sql: str) -> None:
    """Days between dates: the Python value inside 0001…9999, NULL beyond, on both engines."""
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    assert type_of(wrapped, TYPES) is SqlType.NUMERIC
    expr = guard_row_expression(wrapped.this, DD)
    d, p = _run(engines, expr, ordinary=True)
    for i, day in enumerate(ORDINARY):
        base = {"d - DATE '2000-01-01'": day.toordinal() - datetime.date(2000, 1, 1).toordinal()}
        want = base.get(sql)
        if sql == "DATE '1970-01-01' - d":
            want = datetime.date(1970, 1, 1).toordinal() - day.toordinal()
        elif sql == "d - (d - 30)":
            want = 30 if day.toordinal() > 30 else None
        elif sql == "(d - d) * 2":
            want = 0
        assert (d[i] is None and want is None) or float(d[i]) == want, (sql, day, d[i], want)
        assert (p[i] is None and want is None) or float(p[i]) == want, (sql, day, p[i], want)
    d, p = _run(engines, expr, ordinary=False)  # no error on any row, NULL beyond 0001…9999
    for i in d:
        if i >= 1000:
            assert d[i] is True and p.get(i, True) is True, (sql, i)


def test_extract_and_date_part_agree(engines: tuple[Any, Any]) -> None:
    """Every EXTRACT field of a date (DATE_PART is the same node): equal on both engines in
    0001…9999, NULL beyond it on both (where they differ: BC years, ±infinity)."""
    from dpproxy.sql.types import _DATE_FIELDS

    for field in sorted(_DATE_FIELDS):
        expr = guard_row_expression(
            sqlglot.parse_one(f"DATE_PART('{field}', d)", read="postgres"), DD
        )
        select = exp.select(exp.column("i"), exp.alias_(expr, "v")).from_("dd").where("i < 1000")
        duck, pg = engines
        d = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
        p = dict(pg.execute(select.sql(dialect="postgres")).fetchall())  # type: ignore[arg-type]
        assert {k: float(v) for k, v in d.items()} == {k: float(v) for k, v in p.items()}, field
        d, p = _run(engines, expr, ordinary=False)
        for i in d:
            if i >= 1000:
                assert d[i] is True and p.get(i, True) is True, (field, i)
