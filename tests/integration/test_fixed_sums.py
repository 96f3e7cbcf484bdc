"""Exact sums on a fixed-point grid (``rewrite/fixed.py``), on DuckDB and PostgreSQL.

* The problem: a floating-point SUM of clamped doubles — the rewrite's shape before the grid —
  moves by more than Δ when one row goes, and depends on the order of the rows (Casacuberta et
  al., CCS 2022). Shown on both engines with a value of 2^52 (Δ) and 1000 values just above ½:
  after 2^52 each of them rounds the running sum up by 1, before it they add up to about 500.
* The fix: the same data through the proxy, noise off. The integer total is exactly the
  model's Σ ⌊x·2^k + ½⌋, the same in both orders and on both engines, and removing the big row
  moves the sum by exactly 2^52 = Δ. Random doubles on [0, 1] (k = 52), past two of DuckDB's
  row groups (so summed in parallel), give the model's total in either order, and the released
  sum is within n·2^-53 of the exact real sum.
* Integer sums are exact integer sums, also past 2^53 where a DOUBLE sum rounds.
* Every term of the summand SQL is the model's on awkward doubles (NaN, ±inf, −0, subnormals,
  1e±300, the ends of the interval) for grids with k > 0, k = 0, k = 1000 and k < 0 — where
  PostgreSQL would raise on an underflowing product if it were computed — on both engines.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from sqlglot import exp

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.engine import Engine
from dpproxy.planning.plan import Primitive
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.fixed import Grid, grid, summand, unscale
from dpproxy.rewrite.nodes import number
from dpproxy.values import Cost, Interval
from tests.noise import NoNoise
from tests.raw_sql import run_raw

HUGE = Cost(Fraction(10**9), Fraction(1, 2))
BIG = 2**52
SMALL = 0.5 + 2.0**-20  # rounds a running sum of at least 2^52 up by 1
M = 1000
WIDE = 2**40 - 1  # an odd integer: DOUBLE partial sums past 2^53 round it
SCHEMA = f"""
version: 1
dataset: sums
privacy: {{epsilon: 1, delta: "1e-6"}}
tables:
  big:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {{type: integer}}
      x: {{type: float, lower: 0, upper: {BIG}}}
  unit:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {{type: integer}}
      x: {{type: float, nullable: true, lower: 0, upper: 1}}
  ints:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {{type: integer}}
      n: {{type: integer, lower: 0, upper: {WIDE}}}
"""
DDL = {
    "big": "CREATE TABLE big (uid BIGINT PRIMARY KEY, x DOUBLE PRECISION)",
    "unit": "CREATE TABLE unit (uid BIGINT PRIMARY KEY, x DOUBLE PRECISION)",
    "ints": "CREATE TABLE ints (uid BIGINT PRIMARY KEY, n BIGINT)",
}
OLD_BIG = f"SELECT SUM(CASE WHEN x < 0 THEN 0 WHEN x > {BIG} THEN {BIG} ELSE x END) FROM big"
OLD_INTS = (
    "SELECT SUM(CASE WHEN CAST(n AS DOUBLE) < 0 THEN 0 WHEN CAST(n AS DOUBLE) > "
    f"{WIDE} THEN {WIDE} ELSE CAST(n AS DOUBLE) END) FROM ints"
)

Rows = list[tuple[Any, ...]]


def _big_rows(big_first: bool, with_big: bool = True) -> Rows:
    small = [(i, SMALL) for i in range(1, M + 1)]
    big = [(0, float(BIG))] if with_big else []
    return big + small if big_first else small + big


def _unit_rows() -> Rows:
    rng = random.Random(20221107)
    values: list[float | None] = [rng.random() for _ in range(260_000)]
    values += [-0.25, 1.5, 0.0, 1.0, -0.0, 5e-324, 2.0**-60, None, 1 - 2.0**-53, 0.5]
    return list(enumerate(values))


def _int_rows() -> Rows:
    return [(i, WIDE) for i in range(2**14 + 5)] + [(-1, WIDE + 7), (-2, -3)]


DATA: dict[str, Rows] = {}


def _data(name: str) -> Rows:
    if name not in DATA:
        DATA[name] = {"unit": _unit_rows, "ints": _int_rows}[name]()
    return DATA[name]


class Engines:
    """Noise-free engines over the same rows on DuckDB (a file per data set) and PostgreSQL."""

    def __init__(self, tmp: Path, dsn: str) -> None:
        self.tmp, self.dsn = tmp, dsn
        self.catalog = parse_catalog(SCHEMA)
        self.opened: list[Engine] = []

    def _engine(self, backend: Any) -> Engine:
        engine = Engine(self.catalog, backend, accountant=MemoryAccountant(HUGE), noise=NoNoise())
        self.opened.append(engine)
        return engine

    def duckdb(self, tables: dict[str, Rows], label: str) -> Engine:
        path = self.tmp / f"{label}.duckdb"
        with duckdb.connect(str(path)) as con:
            for ddl in DDL.values():
                con.execute(ddl)
            for name, rows in tables.items():
                csv = self.tmp / f"{label}_{name}.csv"
                csv.write_text("".join(f"{u},{'' if v is None else repr(v)}\n" for u, v in rows))
                con.execute(f"COPY {name} FROM '{csv}' (HEADER false)")
        return self._engine(DuckDBBackend(path))

    def postgres(self, tables: dict[str, Rows]) -> Engine:
        """Replaces the rows of the given tables (in this order: the heap keeps it)."""
        with psycopg.connect(self.dsn, autocommit=True) as con:
            for ddl in DDL.values():
                con.execute(ddl.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
            for name, rows in tables.items():
                con.execute(f"TRUNCATE {name}")
                with con.cursor().copy(f"COPY {name} FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
        return self._engine(PostgresBackend(self.dsn))

    def close(self) -> None:
        for e in self.opened:
            e.close()


@pytest.fixture
def engines(tmp_path: Path, pg_dsn: str) -> Iterator[Engines]:
    made = Engines(tmp_path, pg_dsn)
    yield made
    made.close()


def _raw(engine: Engine, sql: str) -> Any:
    """The query's single SUM primitive as the database returns it (one group)."""
    prepared = engine.prepare(sql, secret=1)
    assert prepared.sql is not None
    (row,) = engine.backend.execute(prepared.sql).rows
    return row[-1]


def _released(engine: Engine, sql: str) -> Any:
    (row,) = engine.run(sql, analyst="a").released.rows
    return row[0]


def _plain(engine: Engine, sql: str) -> float:
    (row,) = run_raw(engine, sql).rows
    return float(row[0])


# ------------------------------------------------------------------------------ the problem


def test_a_float_sum_moves_by_more_than_delta_and_with_the_order(engines: Engines) -> None:
    duck = {
        "first": engines.duckdb({"big": _big_rows(True)}, "first"),
        "last": engines.duckdb({"big": _big_rows(False)}, "last"),
        "without": engines.duckdb({"big": _big_rows(True, with_big=False)}, "without"),
    }
    delta = duck["first"].prepare("SELECT SUM(x) FROM big").plan.releases[0].sensitivity.l1
    assert delta == BIG
    sums = {order: _plain(e, OLD_BIG) for order, e in duck.items()}
    pg = {order: _plain(engines.postgres({"big": _big_rows(order == "first", order != "without")}),
                        OLD_BIG) for order in ("first", "last", "without")}
    for got in (sums, pg):
        assert got["first"] == BIG + M  # each small value rounds the running sum up by 1
        assert got["last"] == BIG + 500  # they add up to 500.000954 first, then round once
        assert Fraction(got["first"]) - Fraction(got["without"]) > delta  # one row, > Δ


# ------------------------------------------------------------------------------ the fix


def test_the_grid_sum_is_exact_order_independent_and_within_delta(engines: Engines) -> None:
    sql = "SELECT SUM(x) FROM big"
    duck = {
        "first": engines.duckdb({"big": _big_rows(True)}, "first"),
        "last": engines.duckdb({"big": _big_rows(False)}, "last"),
        "without": engines.duckdb({"big": _big_rows(True, with_big=False)}, "without"),
    }
    g = _grid_of(duck["first"], sql)
    assert g == Grid(0, 0, BIG)  # [0, 2^52]: the integers
    model = BIG + M * round(SMALL)  # each value's term: SMALL is above ½, so 1
    for order, engine in duck.items():
        want = model - (BIG if order == "without" else 0)
        assert _raw(engine, sql) == want
        assert _released(engine, sql) == want
    for order in ("first", "last", "without"):
        pg = engines.postgres({"big": _big_rows(order == "first", order != "without")})
        want = model - (BIG if order == "without" else 0)
        assert _raw(pg, sql) == want
        assert _released(pg, sql) == want
    # Removing the unit of 2^52 moves the released sum by exactly Δ.
    assert _released(duck["first"], sql) - _released(duck["without"], sql) == BIG


def _grid_of(engine: Engine, sql: str) -> Grid:
    plan = engine.prepare(sql).plan
    [p] = [p for p in plan.primitives if p.kind is PrimitiveKind.SUM]
    return grid(p, plan.query.table)


def test_random_doubles_sum_to_the_model_on_both_engines_in_either_order(
    engines: Engines,
) -> None:
    sql = "SELECT SUM(x) FROM unit"
    rows = _data("unit")
    forward = engines.duckdb({"unit": rows}, "forward")
    backward = engines.duckdb({"unit": rows[::-1]}, "backward")
    g = _grid_of(forward, sql)
    assert g == Grid(52, 0, 2**52)  # [0, 1]: 52 fraction bits
    values = [min(max(v, 0.0), 1.0) for _, v in rows if v is not None]
    model = sum(round(v * 2.0**52) for v in values)  # the engines' cast: nearest, ties even
    assert _raw(forward, sql) == _raw(backward, sql) == model
    pg = engines.postgres({"unit": rows})
    assert _raw(pg, sql) == model
    pg = engines.postgres({"unit": rows[::-1]})
    assert _raw(pg, sql) == model
    released = _released(forward, sql)
    assert released == float(unscale(model, 52))
    exact = sum((Fraction(v) for v in values), Fraction(0))
    assert abs(Fraction(released) - exact) <= len(values) * Fraction(1, 2**53) + Fraction(
        math.ulp(released)
    )


def test_integer_sums_are_exact_past_two_to_the_53(engines: Engines) -> None:
    sql = "SELECT SUM(n) FROM ints"
    rows = _data("ints")
    exact = sum(min(max(n, 0), WIDE) for _, n in rows)
    assert exact > 2**53
    duck = engines.duckdb({"ints": rows}, "ints")
    pg = engines.postgres({"ints": rows})
    assert _grid_of(duck, sql).bits == 0
    assert _plain(duck, OLD_INTS) != exact  # the DOUBLE sum rounds
    for engine in (duck, pg):
        assert _raw(engine, sql) == exact
        # AVG's centred sum (centre 2^39 − ½: the grid of halves) is exact too.
        avg = engine.prepare("SELECT AVG(n) FROM ints", secret=1)
        assert avg.sql is not None
        count, centred = engine.backend.execute(avg.sql).rows[0]
        centre = Fraction(WIDE, 2)
        assert centred == 2 * (exact - count * centre)


# -------------------------------------------------------------------- each term, exactly

TABLE = Table(
    "t",
    True,
    (
        Column("f", ColumnType.FLOAT, Fraction(0), Fraction(1)),
        Column("n", ColumnType.INTEGER, Fraction(0), Fraction(100)),
    ),
)
F = exp.Mul(this=exp.column("f"), expression=exp.Literal.number(1))  # no exact range: clamped
N = exp.Add(this=exp.column("n"), expression=exp.Literal.number(0))
AWKWARD: list[float | None] = [
    0.0, -0.0, 1.0, -1.0, 0.1, 0.3, -0.3, 0.5, 1 / 3, 0.7, 1e-5, 5e-324, 2.0**-1074 * 3,
    1e-300, -1e-300, 1e-150, 1e150, 1e190, -1e190, 1e200, 1e250, 1e300, -1e300,
    1.7976931348623157e308, -1.7976931348623157e308, math.inf, -math.inf, math.nan, None,
    17.0, 42.5, 99.0, 100.0, 100.5, 101.0, 2.0**52, 2.0**53 + 2, 4.4e15,
    # On the unit grid 2^-52: y = ½ and 2½ (ties) and y just below ½, where the two roundings
    # of rewrite/fixed.py differ (FLOOR(y + 0.5) gives 1, 3 and 1; the nearest 0, 2 and 0).
    2.0**-53, 5 * 2.0**-53, 0.49999999999999994 * 2.0**-52,
]
PRIMITIVES = {
    "unit": Primitive("p", PrimitiveKind.SUM, F, Interval(Fraction(0), Fraction(1))),
    "centred": Primitive("p", PrimitiveKind.SUM, F, Interval(Fraction(-3, 10), Fraction(3, 10)),
                         Fraction(2, 5)),
    "squared": Primitive("p", PrimitiveKind.SUM, F, Interval(Fraction(0), Fraction(9, 100)),
                         Fraction(2, 5), squared=True),
    "integers": Primitive("p", PrimitiveKind.SUM, N, Interval(Fraction(-50), Fraction(50)),
                          Fraction(50)),
    "halves": Primitive("p", PrimitiveKind.SUM, N, Interval(Fraction(-101, 2), Fraction(101, 2)),
                        Fraction(99, 2)),
    "tiny": Primitive("p", PrimitiveKind.SUM, F, Interval(Fraction(0), Fraction(10) ** -300)),
    "huge": Primitive("p", PrimitiveKind.SUM, F, Interval(-Fraction(10) ** 200, Fraction(10)
                                                          ** 200)),
    "point": Primitive("p", PrimitiveKind.SUM, F, Interval(Fraction(1, 10), Fraction(1, 10))),
}


def _model(p: Primitive, g: Grid, v: float | None, nearest: bool = True) -> int | None:
    """The term the docstring of rewrite/fixed.py defines, in IEEE doubles as the engines:
    y rounded to nearest, ties to even (Python's ``round`` of a float is exactly that);
    ``nearest=False``: the earlier ``FLOOR(y + 0.5)``, which the next test tells apart."""
    if v is None:
        return None
    s = v - float(p.center) if p.center else v
    if p.squared:
        s = s * s
    if math.isnan(s) or s > g.point(g.high):
        return g.high
    if s < g.point(g.low):
        return g.low
    if g.bits < 0 and abs(s) < 2.0 ** (-g.bits - 2):
        return 0
    y = s * 2.0**g.bits
    return round(y) if nearest else math.floor(y + 0.5)


def test_the_grids_chosen() -> None:
    bits = {name: grid(p, TABLE) for name, p in PRIMITIVES.items()}
    assert bits["unit"] == Grid(52, 0, 2**52)
    assert bits["centred"].bits == 53 and bits["squared"].bits == 55
    assert bits["integers"] == Grid(0, -50, 50)  # an integer measure: no rounding
    assert bits["halves"] == Grid(1, -101, 101)  # centre 49.5: halves
    assert bits["tiny"].bits == 1000
    assert bits["huge"].bits == 52 - 665
    assert bits["point"].low == bits["point"].high < Fraction(1, 10) * 2**bits["point"].bits


@pytest.fixture
def awkward(pg_dsn: str) -> Iterator[tuple[duckdb.DuckDBPyConnection, psycopg.Connection[Any]]]:
    rows = list(enumerate(AWKWARD))
    duck = duckdb.connect()
    duck.execute("CREATE TABLE vals (i INTEGER, v DOUBLE)")
    duck.executemany("INSERT INTO vals VALUES (?, ?)", rows)
    pg = psycopg.connect(pg_dsn, autocommit=True)
    pg.execute("CREATE TABLE vals (i INTEGER, v DOUBLE PRECISION)")
    with pg.cursor().copy("COPY vals FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    yield duck, pg
    duck.close()
    pg.close()


@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_every_term_is_the_models_on_both_engines(
    name: str, awkward: tuple[duckdb.DuckDBPyConnection, psycopg.Connection[Any]]
) -> None:
    """Every term on both engines is the model's, rounded to nearest, ties to even: the check
    that DuckDB's and PostgreSQL's ``CAST(double AS BIGINT)`` round so, which
    ``rewrite/fixed.summand`` relies on (Spark's ``RINT`` form: test_spark_differential)."""
    duck, pg = awkward
    p = PRIMITIVES[name]
    g = grid(p, TABLE)
    select = exp.select(exp.column("i"), exp.alias_(summand(p, "v", TABLE), "q")).from_("vals")
    # A measure's value lies in its interval up to rounding, and a SUM's bounds are at most
    # 1e250 (rewrite/aggregate.py, SUM_LIMIT): a finite square never overflows. Raw 1e300 would.
    kept = [
        (i, v) for i, v in enumerate(AWKWARD)
        if not p.squared or v is None or not math.isfinite(v) or abs(v) < 1e150
    ]
    select = select.where(exp.In(this=exp.column("i"), expressions=[
        exp.Literal.number(i) for i, _ in kept]))
    want = {i: _model(p, g, v) for i, v in kept}
    got_duck = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    got_pg = dict(pg.execute(to_postgres(select.copy(), {}).sql(dialect="postgres")).fetchall())
    assert got_duck == want
    assert got_pg == want
    assert all(q is None or g.low <= q <= g.high for q in want.values())


@pytest.mark.parametrize("name", ["centred", "squared", "halves"])
def test_a_measure_written_centred_gives_the_same_terms(
    name: str, awkward: tuple[duckdb.DuckDBPyConnection, psycopg.Connection[Any]]
) -> None:
    """``summand(..., centred=True)`` over a column that holds v − c already, computed in the
    rows (``fixed.centred_measures``), gives every term the model gives for v, on both
    engines: the same double subtraction, done once per row."""
    duck, pg = awkward
    p = PRIMITIVES[name]
    g = grid(p, TABLE)
    rows = exp.select(
        exp.column("i"), exp.alias_(exp.Sub(this=exp.column("v"), expression=number(p.center)), "c")
    ).from_("vals")
    kept = [  # as above: a finite square of a value in range never overflows
        (i, v) for i, v in enumerate(AWKWARD)
        if not p.squared or v is None or not math.isfinite(v) or abs(v) < 1e150
    ]
    rows = rows.where(exp.In(this=exp.column("i"), expressions=[
        exp.Literal.number(i) for i, _ in kept]))
    select = exp.select(
        exp.column("i"), exp.alias_(summand(p, "c", TABLE, centred=True), "q")
    ).from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier("r"))))
    want = {i: _model(p, g, v) for i, v in kept}
    got_duck = dict(duck.execute(select.sql(dialect="duckdb")).fetchall())
    got_pg = dict(pg.execute(to_postgres(select.copy(), {}).sql(dialect="postgres")).fetchall())
    assert got_duck == want
    assert got_pg == want


def test_the_two_roundings_differ_on_the_awkward_values() -> None:
    """The test above has power against the earlier rounding: on the unit grid the ties and
    the value just below ½ are rounded differently by ``FLOOR(y + 0.5)``."""
    p = PRIMITIVES["unit"]
    g = grid(p, TABLE)
    differ = [v for v in AWKWARD if _model(p, g, v) != _model(p, g, v, nearest=False)]
    assert differ == [2.0**-53, 5 * 2.0**-53, 0.49999999999999994 * 2.0**-52]


def test_unscale_is_exact() -> None:
    assert unscale(3, 1) == Fraction(3, 2)
    assert unscale(3, -2) == 12
    assert unscale(None, 5) == 0
    assert unscale(2**120 + 1, 60) == Fraction(2**120 + 1, 2**60)

