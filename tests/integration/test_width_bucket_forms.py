"""``WIDTH_BUCKET(x, lo, hi, n)`` as dpproxy prints it (``sql/buckets.py``,
``rewrite/domains.py``): on DuckDB (which has no such function) and PostgreSQL it gives the
same value on every row, PostgreSQL 15's own ``width_bucket`` on every number, and never fails.

The table ``wb(i, x)`` holds, on both engines, the edges of every bucket of every case and the
doubles next to them, random values, the largest and smallest doubles, ±inf, NaN and NULL.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.floats import finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.sql.buckets import postgres_bucket
from dpproxy.sql.totality import check_allowed
from dpproxy.sql.types import SqlType, type_of
from tests.both_engines import doubles_table, duckdb_and_postgres

pytestmark = pytest.mark.postgres

WB = Table(
    "wb", True, (Column("i", ColumnType.INTEGER), Column("x", ColumnType.FLOAT, nullable=True))
)
TYPES = {"i": SqlType.NUMERIC, "x": SqlType.NUMERIC}

#: (lo, hi, n) as written in SQL
CASES = [
    ("17", "90", "8"),
    ("0", "1", "3"),
    ("-3.3", "7.7", "7"),
    ("99", "1", "10"),  # reversed
    ("0.1", "0.3", "1000"),
    ("-1e300", "1e300", "5"),
    ("1e-200", "2e-200", "3"),
    ("5", "-5", "1"),
]


def _values() -> list[float]:
    out = [0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324, math.inf, -math.inf, math.nan]
    rnd = random.Random(18)
    for lo_text, hi_text, n_text in CASES:
        lo, hi, n = float(lo_text), float(hi_text), int(n_text)
        for k in range(0, n + 1, max(1, n // 50)):
            edge = lo + k * (hi - lo) / n
            out += [edge, math.nextafter(edge, math.inf), math.nextafter(edge, -math.inf)]
        out += [rnd.uniform(min(lo, hi), max(lo, hi)) for _ in range(20)]
    return out


VALUES = _values()


@pytest.fixture(scope="module")
def engines(pg_session_dsn: str) -> Iterator[tuple[Any, Any]]:
    with duckdb_and_postgres(pg_session_dsn, doubles_table("wb", VALUES)) as both:
        yield both


def _guarded(sql: str) -> exp.Expression:
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    check_allowed(wrapped)
    assert type_of(wrapped, TYPES) is SqlType.NUMERIC
    return finite_arithmetic(guard_row_expression(wrapped.this, WB), WB)


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(c))
def test_width_bucket_is_postgresqls_on_both_engines(
    engines: tuple[Any, Any], case: tuple[str, str, str]
) -> None:
    duck, pg = engines
    lo, hi, n = case
    expr = _guarded(f"WIDTH_BUCKET(x, {lo}, {hi}, {n})")
    assert "WIDTH_BUCKET" not in expr.sql("duckdb").upper()
    select = exp.select(exp.column("i"), exp.alias_(expr, "v")).from_("wb")
    d = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    p = dict(pg.execute(to_postgres(select.copy(), TYPES).sql(dialect="postgres")).fetchall())
    own = dict(
        pg.execute(
            f"SELECT i, width_bucket(x, {lo}, {hi}, {n}) FROM wb WHERE x <> 'NaN'"
        ).fetchall()
    )
    assert d == p
    for i, v in enumerate(VALUES):
        if math.isnan(v):  # PostgreSQL refuses NaN; dpproxy sorts it above every number
            assert d[i] == (int(n) + 1 if float(lo) < float(hi) else 0)
            continue
        assert d[i] == own[i] == postgres_bucket(v, float(lo), float(hi), int(n)), (case, v)
    assert d[len(VALUES)] is None and p[len(VALUES)] is None


def test_width_bucket_of_an_integer_expression(engines: tuple[Any, Any]) -> None:
    duck, pg = engines
    expr = _guarded("WIDTH_BUCKET(i * 3 - 40, 17, 90, 8)")
    select = exp.select(exp.column("i"), exp.alias_(expr, "v")).from_("wb")
    d = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    own = dict(pg.execute("SELECT i, width_bucket(i * 3 - 40, 17, 90, 8) FROM wb").fetchall())
    assert d == own
