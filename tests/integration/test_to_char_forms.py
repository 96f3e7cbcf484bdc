"""``TO_CHAR(d, template)`` of a date as dpproxy prints it (``sql/tochar.py``): on DuckDB and
PostgreSQL the same text on every row, PostgreSQL's own ``to_char`` on every date of
0001-01-01 … 9999-12-31, NULL beyond (BC dates, years past 9999, ±infinity), never an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.errors import UndefinedFunction
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.sql.totality import check_allowed
from dpproxy.sql.types import SqlType, type_of
from tests.both_engines import duckdb_and_postgres

pytestmark = pytest.mark.postgres

TD = Table(
    "td", True, (Column("i", ColumnType.INTEGER), Column("d", ColumnType.DATE, nullable=True))
)
TYPES = {"i": SqlType.NUMERIC, "d": SqlType.DATE}
INSIDE = ["0001-01-01", "0009-02-03", "0999-12-31", "1995-03-05", "2024-02-29", "9999-12-31"]
OUTSIDE = ["0044-03-15 BC", "10000-01-01", "infinity", "-infinity"]
TEMPLATES = ["YYYY", "YYYY-MM", "YYYY-MM-DD", "yyyy/mm", "DD.MM.YYYY", "YYYYMMDD", "MM", "DD MM"]


def _table_sql(dialect: str) -> list[str]:
    def literal(text: str) -> str:
        if dialect == "duckdb" and text.endswith(" BC"):
            text = text.replace(" BC", " (BC)")
        return f"CAST('{text}' AS DATE)"

    rows = [f"({i}, {literal(v)})" for i, v in enumerate(INSIDE + OUTSIDE)]
    rows.append(f"({len(INSIDE) + len(OUTSIDE)}, NULL)")
    return [
        "DROP TABLE IF EXISTS td",
        "CREATE TABLE td (i INTEGER, d DATE)",
        "INSERT INTO td VALUES " + ", ".join(rows),
    ]


@pytest.fixture(scope="module")
def engines(pg_session_dsn: str) -> Iterator[tuple[Any, Any]]:
    with duckdb_and_postgres(pg_session_dsn, _table_sql) as both:
        yield both


def _guarded(sql: str) -> exp.Expression:
    wrapped = exp.Paren(this=sqlglot.parse_one(sql, read="postgres"))
    check_allowed(wrapped)
    assert type_of(wrapped, TYPES) is SqlType.TEXT
    return guard_row_expression(wrapped.this, TD)


@pytest.mark.parametrize("template", TEMPLATES)
def test_to_char_is_postgresqls_on_both_engines(engines: tuple[Any, Any], template: str) -> None:
    duck, pg = engines
    expr = _guarded(f"TO_CHAR(d, '{template}')")
    select = exp.select(exp.column("i"), exp.alias_(expr, "v")).from_("td")
    d = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    p = dict(pg.execute(to_postgres(select.copy(), TYPES).sql(dialect="postgres")).fetchall())
    own = dict(pg.execute(f"SELECT i, to_char(d, '{template}') FROM td").fetchall())
    assert d == p
    for i in range(len(INSIDE)):
        assert d[i] == own[i], (template, INSIDE[i], d[i], own[i])
    for i in range(len(INSIDE), len(INSIDE) + len(OUTSIDE) + 1):
        assert d[i] is None


@pytest.mark.parametrize("template", ["Mon YYYY", "YYYY-IW", "FMMM", "HH24", "YYYY%MM", "Q"])
def test_other_templates_are_refused(template: str) -> None:
    with pytest.raises(UndefinedFunction) as refused:
        _guarded(f"TO_CHAR(d, '{template}')")
    assert "DATE_TRUNC" in (refused.value.hint or "")
