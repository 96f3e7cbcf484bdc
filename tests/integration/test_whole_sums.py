"""Whole-number sums in BIGINT arithmetic (``rewrite/wholesum.py``), on DuckDB and PostgreSQL.

For every integer type a schema ``integer`` column may have in either database (signed and
unsigned, 8 to 128 bits, DECIMAL of scale 0), with the type's extreme values, NULL, values
outside the bounds and on them, and for a plain, a centred (integer and half-integer centre),
a squared and a clamped sum: each row's term from :func:`whole_row` and :func:`whole_summand`
is the exact term the module docstring defines (the clamped value, centred, squared, times
2^k, clamped onto the grid), the double path of ``rewrite/fixed.py`` gives the same term on
the same values, and no statement raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

import duckdb
import psycopg
import pytest
from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.planning.plan import Primitive
from dpproxy.rewrite.clamps import clamp_values
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.fixed import grid, summand
from dpproxy.rewrite.wholesum import whole_measures, whole_row, whole_summand, whole_term
from dpproxy.values import Interval

LO, HI = -7, 120
TABLE = Table("vals", True, (Column("x", ColumnType.INTEGER, Fraction(LO), Fraction(HI)),))
X = exp.column("x")


def _sum(
    values: tuple[Fraction, Fraction], centre: Fraction = Fraction(0), *, squared: bool = False
) -> Primitive:
    return Primitive("p", PrimitiveKind.SUM, X, Interval(*values), centre, squared=squared)


PRIMITIVES = {
    "plain": _sum((Fraction(LO), Fraction(HI))),
    "centred": _sum((Fraction(LO - 56), Fraction(HI - 56)), Fraction(56)),
    "halves": _sum((Fraction(2 * LO - 113, 2), Fraction(2 * HI - 113, 2)), Fraction(113, 2)),
    "squared": _sum((Fraction(0), Fraction(64**2)), Fraction(56), squared=True),
    "squared halves": _sum((Fraction(0), Fraction(127**2, 4)), Fraction(113, 2), squared=True),
    "narrower": _sum((Fraction(-3), Fraction(100))),  # the grid clamps again, in integers
    "narrower centred": _sum((Fraction(-10), Fraction(30)), Fraction(-5, 4)),
}
DUCK_TYPES = {
    "TINYINT": (-128, 127),
    "SMALLINT": (-32768, 32767),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127) + 1, 2**127 - 1),
    "UTINYINT": (0, 255),
    "UBIGINT": (0, 2**64 - 1),
    "DECIMAL(38,0)": (-(10**38) + 1, 10**38 - 1),
    "DECIMAL(4,0)": (-9999, 9999),
}
PG_TYPES = {
    "smallint": (-32768, 32767),
    "integer": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
    "numeric(38,0)": (-(10**38) + 1, 10**38 - 1),
    "numeric(4,0)": (-9999, 9999),
}


def _values(low: int, high: int) -> list[int | None]:
    inside = [LO - 1, LO, LO + 1, -1, 0, 1, 55, 56, 57, 99, 100, 101, HI - 1, HI, HI + 1]
    return [None, low, high, low + 1, high - 1, *[v for v in inside if low <= v <= high]]


def _model(p: Primitive, v: int | None) -> int | None:
    """The term of rewrite/fixed.py's docstring, exactly: clamp, centre, square, scale, clamp."""
    if v is None:
        return None
    g = grid(p, TABLE)
    s = Fraction(min(max(v, LO), HI)) - p.center
    if p.squared:
        s = s * s
    scaled = s * 2**g.bits
    assert scaled.denominator == 1  # a natural grid: nothing is rounded
    return min(max(int(scaled), g.low), g.high)


def _terms(p: Primitive, double: bool) -> exp.Select:
    if double:
        row = clamp_values(X, TABLE)
        term = summand(p, "m", TABLE)
    else:
        row = whole_row(X, exp.Cast(this=X.copy(), to=exp.DataType.build("DOUBLE")), TABLE)
        assert row is not None
        term = whole_summand(p, "m", TABLE)
    inner = exp.select(exp.column("i"), exp.alias_(row, "m")).from_("vals")
    outer = exp.select(exp.column("i"), exp.alias_(term, "q"))
    return outer.from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("r"))))


def test_every_primitive_takes_the_integer_path() -> None:
    for name, p in PRIMITIVES.items():
        t = whole_term(p, TABLE)
        assert t is not None, name
        assert t.clamped == name.startswith("narrower"), name
    assert whole_measures(PRIMITIVES.values(), TABLE) == {X}
    # A grid that rounds (a centre that is not dyadic) keeps the DOUBLE path, and so does
    # every other primitive on the same measure.
    third = _sum((Fraction(LO) - Fraction(1, 3), Fraction(HI) - Fraction(1, 3)), Fraction(1, 3))
    assert whole_term(third, TABLE) is None
    assert whole_measures([PRIMITIVES["plain"], third], TABLE) == set()
    count = Primitive("c", PrimitiveKind.COUNT, X)
    assert whole_measures([count], TABLE) == set()
    assert whole_measures([count, PRIMITIVES["plain"]], TABLE) == {X}
    # A bound past 2^62 (the BIGINT arithmetic's margin) keeps the DOUBLE path.
    wide = Table("vals", True, (Column("x", ColumnType.INTEGER, Fraction(0), Fraction(2**63)),))
    assert whole_term(_sum((Fraction(0), Fraction(2**63))), wide) is None


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    yield con
    con.close()


@pytest.mark.parametrize("sql_type", list(DUCK_TYPES))
def test_duckdb_terms_are_exact(sql_type: str, duck: duckdb.DuckDBPyConnection) -> None:
    values = _values(*DUCK_TYPES[sql_type])
    duck.execute("DROP TABLE IF EXISTS vals")
    duck.execute(f"CREATE TABLE vals (i INTEGER, x {sql_type})")
    duck.executemany("INSERT INTO vals VALUES (?, ?)", [(i, v) for i, v in enumerate(values)])
    for name, p in PRIMITIVES.items():
        want = {i: _model(p, v) for i, v in enumerate(values)}
        whole = dict(duck.execute(_terms(p, double=False).sql(dialect="duckdb")).fetchall())
        double = dict(duck.execute(_terms(p, double=True).sql(dialect="duckdb")).fetchall())
        assert whole == want, (sql_type, name)
        assert double == want, (sql_type, name)
        summed = duck.execute(
            exp.select(exp.Sum(this=exp.column("q")))
            .from_(exp.Subquery(this=_terms(p, double=False), alias="t"))
            .sql(dialect="duckdb")
        ).fetchone()
        assert summed is not None
        assert summed[0] == sum(q for q in want.values() if q is not None)


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    con = psycopg.connect(pg_dsn, autocommit=True)
    yield con
    con.close()


@pytest.mark.parametrize("sql_type", list(PG_TYPES))
def test_postgres_terms_are_exact(sql_type: str, pg: psycopg.Connection[Any]) -> None:
    values = _values(*PG_TYPES[sql_type])
    pg.execute("DROP TABLE IF EXISTS vals")
    pg.execute(f"CREATE TABLE vals (i integer, x {sql_type})")
    with pg.cursor().copy("COPY vals FROM STDIN") as copy:
        for row in enumerate(values):
            copy.write_row(row)
    for name, p in PRIMITIVES.items():
        want = {i: _model(p, v) for i, v in enumerate(values)}
        for double in (False, True):
            sql = to_postgres(_terms(p, double=double), {}).sql(dialect="postgres")
            got = {i: None if q is None else int(q) for i, q in pg.execute(sql).fetchall()}
            assert got == want, (sql_type, name, double)


def test_a_distinct_sum_counts_the_same_terms() -> None:
    p = replace(PRIMITIVES["halves"], kind=PrimitiveKind.DISTINCT, distinct=True)
    assert whole_measures([p], TABLE) == {X}
