"""The order statistics of PTR and smooth sensitivity without ranking every row
(``rewrite/stats._bucketed_window``, DuckDB, no groups): the very rows of the plain window.

On random data sets — ties, NULLs, one repeated value, values on and past the bounds (the
statement reads them clamped), fractional and negative bounds, fewer rows than the window,
no rows — and quantiles from 0 to 1, the bucketed statement returns exactly the
``(n, rank, value)`` rows of ``ROW_NUMBER() OVER (ORDER BY v)`` with ``COUNT(*) OVER ()``
(``_window`` as PostgreSQL still runs it), on one DuckDB table.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import duckdb
import pytest
from sqlglot import exp

from dpproxy.catalog.model import Neighbouring
from dpproxy.planning.plan import Method, StatPlan
from dpproxy.rewrite.clamps import clamp
from dpproxy.rewrite.pipeline import with_ctes
from dpproxy.rewrite.stats import _bucketed_window, _window
from dpproxy.sql.scope import AggKind
from dpproxy.values import Interval

BOUNDS = [
    (Fraction(0), Fraction(100)),
    (Fraction(-7, 3), Fraction(11, 10)),
    (Fraction(-500000), Fraction(0)),
    (Fraction(1), Fraction(1) + Fraction(1, 10**9)),
]
QS = [Fraction(0), Fraction(1, 100), Fraction(1, 4), Fraction(1, 2), Fraction(9, 10), Fraction(1)]


def _stat(lo: Fraction, hi: Fraction, q: Fraction, window: int) -> StatPlan:
    return StatPlan(
        Method.PTR,
        "s",
        AggKind.PERCENTILE_CONT,
        exp.column("x"),
        None,
        Interval(lo, hi),
        Fraction(1),
        Fraction(0),
        1,
        1,
        Neighbouring.ADD_REMOVE,
        False,
        q=q,
        window=window,
    )


def _data(rng: random.Random, lo: Fraction, hi: Fraction) -> list[float | None]:
    n = rng.choice([0, 1, 2, 5, 40, 300, 3000])
    a, b = float(lo), float(hi)
    kind = rng.choice(["uniform", "ties", "same", "past"])
    out: list[float | None] = []
    for _ in range(n):
        if rng.random() < 0.05:
            out.append(None)
        elif kind == "uniform":
            out.append(rng.uniform(a, b))
        elif kind == "ties":
            out.append(rng.choice([a, b, (a + b) / 2, a + (b - a) / 3]))
        elif kind == "same":
            out.append((a + b) / 2)
        else:
            out.append(rng.uniform(a - (b - a), b + (b - a)))
    return out


def _rows(con: duckdb.DuckDBPyConnection, query: exp.Select, ctes: list[Any]) -> list[Any]:
    sql = with_ctes(query, ctes).sql(dialect="duckdb")
    return sorted((int(n), int(r), float(v)) for n, r, v in con.execute(sql).fetchall())


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


@pytest.mark.parametrize("seed", range(12))
def test_the_bucketed_window_returns_the_plain_windows_rows(
    seed: int, con: duckdb.DuckDBPyConnection
) -> None:
    rng = random.Random(seed)
    for lo, hi in BOUNDS:
        values = _data(rng, lo, hi)
        con.execute("CREATE OR REPLACE TABLE vals (x DOUBLE)")
        if values:
            con.executemany("INSERT INTO vals VALUES (?)", [(v,) for v in values])
        clamped = clamp(lambda: exp.column("x"), lo, hi)
        rows = exp.select(exp.alias_(clamped, "__v")).from_("vals")
        for q in QS:
            stat = _stat(lo, hi, q, rng.choice([0, 3, 50]))
            plain = _rows(con, _window(stat, "__rows", []), [("__rows", rows.copy())])
            query, more = _bucketed_window(stat, "__rows")
            bucketed = _rows(con, query, [("__rows", rows.copy()), *more])
            assert bucketed == plain, (seed, lo, hi, q)
            n = sum(v is not None for v in values)
            assert all(c == n for c, _, _ in plain)
