"""Folded CASE measures (``rewrite/wholesum.py``, opt-in): a CASE of integer literals whose
SUMs all have one term x·2^j − a is written with its literals mapped to that term, and the
sums add the column itself (its square for VAR).

On DuckDB and PostgreSQL, over NULLs and every branch of the CASE: every row's folded term is
the unfolded term (and the exact model's), COUNT of the row value is unchanged, and nothing
raises. The fold is refused when the SUMs on the measure differ (a plain SUM next to an AVG),
for AVG(DISTINCT), and for a column; without ``folds`` the SQL is what it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

import duckdb
import psycopg
import pytest
import sqlglot
from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.planning.plan import Primitive
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.fixed import grid
from dpproxy.rewrite.wholesum import WholeTerm, whole_measures, whole_row, whole_summand
from dpproxy.values import Interval

TABLE = Table("vals", True, (Column("x", ColumnType.INTEGER, Fraction(-10), Fraction(100)),))
VALUES = [None, -1000, -10, -1, 0, 1, 7, 49, 50, 51, 99, 100, 101, 10**6]
# name → (WHEN branches (operator, value, result), ELSE result)
BRANCHES: dict[str, tuple[list[tuple[str, int, int | None]], int]] = {
    "rate": ([(">", 50, 1), ("<", 0, None)], 0),
    "odd": ([(">", 50, 7), ("<", 0, -4), ("=", 7, None)], 3),
    "even": ([(">", 50, 6), ("<", 0, -2)], 0),
}


def _text(name: str) -> str:
    whens, default = BRANCHES[name]
    parts = [f"WHEN x {op} {v} THEN {'NULL' if r is None else r}" for op, v, r in whens]
    return f"CASE {' '.join(parts)} ELSE {default} END"


def _range(name: str) -> tuple[Fraction, Fraction]:
    whens, default = BRANCHES[name]
    results = [r for _, _, r in whens if r is not None] + [default]
    return Fraction(min(results)), Fraction(max(results))


def _case(name: str) -> exp.Expression:
    return sqlglot.parse_one(_text(name))


def _prims(name: str, var: bool = True) -> list[Primitive]:
    """An AVG's (or VAR's) primitives on the CASE, centred at the middle of its range."""
    m = _case(name)
    lo, hi = _range(name)
    c = (lo + hi) / 2
    out = [
        Primitive("n", PrimitiveKind.COUNT, m),
        Primitive("s", PrimitiveKind.SUM, m, Interval(lo - c, hi - c), c),
    ]
    if var:
        top = max((lo - c) ** 2, (hi - c) ** 2)
        out.append(
            Primitive("q", PrimitiveKind.SUM, m, Interval(Fraction(0), top), c, squared=True)
        )
    return out


def _python(name: str, x: int | None) -> int | None:
    """The CASE's value in Python (a comparison with NULL holds for no branch: ELSE)."""
    whens, default = BRANCHES[name]
    if x is not None:
        for op, v, r in whens:
            if {">": x > v, "<": x < v, "=": x == v}[op]:
                return r
    return default


def _model(p: Primitive, v: int | None) -> int | None:
    if v is None:
        return None
    g = grid(p, TABLE)
    s = Fraction(v) - p.center
    s = s * s if p.squared else s
    scaled = s * 2**g.bits
    assert scaled.denominator == 1
    return min(max(int(scaled), g.low), g.high)


def _select(prims: list[Primitive], fold: bool) -> tuple[exp.Select, dict[str, str]]:
    """SELECT i, COUNT-able row value and every SUM's term per row: folded or not."""
    terms: dict[int, WholeTerm | None] = {}
    folds: dict[exp.Expression, tuple[int, int]] = {}
    m = prims[0].measure
    assert m is not None
    whole = whole_measures(prims, TABLE, terms, folds if fold else None)
    assert whole == {m}
    if fold:
        assert m in folds
    double = exp.Cast(this=m.copy(), to=exp.DataType.build("DOUBLE"))
    row = whole_row(m, double, TABLE, folds.get(m))
    assert row is not None
    inner = exp.select(exp.column("i"), exp.alias_(row, "m")).from_("vals")
    outer = exp.select(exp.column("i"), exp.alias_(exp.column("m"), "n"))
    names = {}
    for p in prims:
        if p.kind is PrimitiveKind.SUM:
            known = terms[id(p)]
            assert known is not None and known.folded == fold
            outer = outer.select(exp.alias_(whole_summand(p, "m", TABLE, known), p.name))
            names[p.name] = p.name
    sub = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("r")))
    return outer.from_(sub), names


def _check(rows: list[tuple[Any, ...]], name: str, prims: list[Primitive], values: list) -> None:
    sums = [p for p in prims if p.kind is PrimitiveKind.SUM]
    by_i = {r[0]: r[1:] for r in rows}
    for i, x in enumerate(values):
        v = _python(name, x)
        n, *qs = by_i[i]
        assert (n is None) == (v is None), (name, x)
        for p, q in zip(sums, qs, strict=True):
            assert (None if q is None else int(q)) == _model(p, v), (name, p.name, x)


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute("CREATE TABLE vals (i INTEGER, x BIGINT)")
    con.executemany("INSERT INTO vals VALUES (?, ?)", list(enumerate(VALUES)))
    yield con
    con.close()


@pytest.mark.parametrize("name", list(BRANCHES))
def test_duckdb_folded_terms_are_the_terms(name: str, duck: duckdb.DuckDBPyConnection) -> None:
    for var in (False, True):
        prims = _prims(name, var)
        for fold in (True, False):
            sql, _ = _select(prims, fold)
            _check(duck.execute(sql.sql(dialect="duckdb")).fetchall(), name, prims, VALUES)


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    con = psycopg.connect(pg_dsn, autocommit=True)
    con.execute("CREATE TABLE vals (i integer, x bigint)")
    with con.cursor().copy("COPY vals FROM STDIN") as copy:
        for row in enumerate(VALUES):
            copy.write_row(row)
    yield con
    con.close()


@pytest.mark.parametrize("name", list(BRANCHES))
def test_postgres_folded_terms_are_the_terms(name: str, pg: psycopg.Connection[Any]) -> None:
    for fold in (True, False):
        prims = _prims(name)
        sql, _ = _select(prims, fold)
        rows = pg.execute(to_postgres(sql, {}).sql(dialect="postgres")).fetchall()
        _check(rows, name, prims, VALUES)


def test_the_folded_sql() -> None:
    sql, _ = _select(_prims("rate"), fold=True)
    text = sql.sql(dialect="duckdb")
    assert "THEN 1 WHEN x < 0 THEN NULL ELSE -1 END AS BIGINT) AS m" in text
    assert "CAST(m AS BIGINT) AS s, CAST(m * m AS BIGINT) AS q" in text
    sql, _ = _select(_prims("odd"), fold=True)  # literals v -> 2v - 3
    assert "THEN 11 WHEN x < 0 THEN -11 WHEN x = 7 THEN NULL ELSE 3 END" in sql.sql()


def test_no_fold_where_it_does_not_apply() -> None:
    m = _case("rate")
    avg = _prims("rate", var=False)
    plain = Primitive("t", PrimitiveKind.SUM, m, Interval(Fraction(0), Fraction(1)))
    for prims in (
        [*avg, plain],  # two different terms on one measure
        [replace(avg[1], kind=PrimitiveKind.DISTINCT, distinct=True), avg[1]],  # AVG(DISTINCT)
        [plain],  # the term is x itself: nothing to fold
    ):
        terms: dict[int, WholeTerm | None] = {}
        folds: dict[exp.Expression, tuple[int, int]] = {}
        assert whole_measures(prims, TABLE, terms, folds) == {m}
        assert folds == {}
        assert not any(t is not None and t.folded for t in terms.values())
    x = exp.column("x")
    col = Primitive("s", PrimitiveKind.SUM, x, Interval(Fraction(-60), Fraction(50)), Fraction(50))
    folds = {}
    assert whole_measures([col], TABLE, {}, folds) == {x} and folds == {}


def test_without_folds_the_sql_is_unchanged() -> None:
    prims = _prims("odd")
    m = prims[0].measure
    assert m is not None
    double = exp.Cast(this=m.copy(), to=exp.DataType.build("DOUBLE"))
    before = whole_row(m, double, TABLE)
    assert before is not None
    assert before.sql() == f"CAST({_text('odd')} AS BIGINT)"
    terms: dict[int, WholeTerm | None] = {}
    whole_measures(prims, TABLE, terms)
    assert whole_summand(prims[1], "m", TABLE, terms[id(prims[1])]).sql() == (
        "CAST(m * 2 - 3 AS BIGINT)"
    )
