"""Two shortcuts of the rewrite (rewrite/pipeline.py) that must change speed, never answers,
and the clipping of counts to a table's declared public row bound (release/postprocess.py).

* A public domain applied to the groups after aggregating, when nothing is bounded, instead of
  to every row: the same groups and values, and the row filter stays wherever bounding runs.
* The clamp of a sum's terms onto their fixed-point grid (rewrite/fixed.py) dropped when
  ``measure - centre`` cannot leave the grid's interval: checked here against IEEE subtraction
  on every double near the ends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.engine import Engine
from dpproxy.errors import SchemaError
from dpproxy.planning.plan import Primitive
from dpproxy.rewrite.context import RewriteContext
from dpproxy.rewrite.fixed import computed_range, grid
from dpproxy.rewrite.pipeline import build
from dpproxy.values import Cost, Interval
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**9), Fraction(1, 2))
SCHEMA = """
version: 1
dataset: shortcuts
privacy: {{epsilon: 1, delta: "1e-6"}}
tables:
  t:
    privacy_unit: pid
    max_rows_per_unit: {rows}
    columns:
      pid: {{type: integer}}
      k: {{type: text, domain: ["a", "b", "z"]}}
      age: {{type: integer, lower: 0, upper: 100}}
      frac: {{type: float, lower: 0.1, upper: 0.7}}
      big: {{type: integer, lower: 0, upper: 18014398509481984}}
"""
ROWS = [
    (1, "a", 30, 0.2, 5),
    (2, "a", 40, 0.3, 6),
    (3, "b", 50, 0.5, 7),
    (4, "c", 60, 0.6, 8),
    (5, None, 70, 0.4, 9),
    (6, "b", 101, 0.9, 10),
    (7, "a", 20, 0.1, 1),
    (8, "a", 21, 0.1, 1),
    (9, "b", 22, 0.1, 1),
    (10, "c", 23, 0.1, 1),
    (11, "a", 24, 0.1, 1),
]
# The same rows with 7..11 merged into one unit of five rows: that one must be bounded.
MERGED = [(min(r[0], 7), *r[1:]) for r in ROWS]


def _engine(tmp_path: Path, rows: int) -> Engine:
    """rows = 1: ``pid`` is a primary key (no bounding); otherwise pid 7 owns five rows."""
    db = tmp_path / f"t{rows}.duckdb"
    con = duckdb.connect(str(db))
    key = " PRIMARY KEY" if rows == 1 else ""
    con.execute(f"CREATE TABLE t (pid BIGINT{key}, k VARCHAR, age BIGINT, frac DOUBLE, big BIGINT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", ROWS if rows == 1 else MERGED)
    con.close()
    catalog = parse_catalog(SCHEMA.format(rows=rows))
    return Engine(catalog, DuckDBBackend(db), accountant=MemoryAccountant(HUGE), noise=NoNoise())


def _released(engine: Engine, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in engine.run(sql, analyst="a").released.rows]


def test_the_domain_is_applied_to_groups_only_when_nothing_is_bounded(tmp_path: Path) -> None:
    sql = "SELECT k, COUNT(*) AS n, SUM(age) AS s FROM t GROUP BY k"
    engine = _engine(tmp_path, 1)  # a primary key: no bounding
    text = engine.prepare(sql).sql
    assert text is not None
    # A text key: no domain filter in the SQL at all; the release reads the domain's groups.
    assert "__domain" not in text and "IN ('a'" not in text
    # 'c' and NULL are outside the domain; 'z' is in it with no rows (zero-filled); age 101
    # is clamped to 100.
    assert sorted(_released(engine, sql)) == [("a", 5, 135), ("b", 3, 172), ("z", 0, 0)]

    # A nullable key: NULL is one more group of the domain, released like the others.
    nullable = Engine(
        parse_catalog(
            SCHEMA.format(rows=1).replace(
                'k: {type: text, domain: ["a", "b", "z"]}',
                'k: {type: text, domain: ["a", "b", "z"], nullable: true}',
            )
        ),
        DuckDBBackend(tmp_path / "t1.duckdb"),
        accountant=MemoryAccountant(HUGE),
        noise=NoNoise(),
    )
    assert "IS NULL" not in (nullable.prepare(sql).sql or "")
    got = _released(nullable, sql)
    assert sorted(got, key=lambda r: (r[0] is not None, r[0] or "")) == [
        (None, 1, 70),
        ("a", 5, 135),
        ("b", 3, 172),
        ("z", 0, 0),
    ]

    bounded = _engine(tmp_path, 2)  # pid 7 has five rows: bounding runs on in-domain rows
    text = bounded.prepare(sql).sql
    assert text is not None
    assert "__domain" not in text and "IN ('a', 'b', 'z')" in text
    got = {r[0]: r[1] for r in _released(bounded, sql)}
    # pid 7 keeps 2 of its 4 in-domain rows (which ones depends on the keyed hash).
    assert got["z"] == 0 and got["a"] + got["b"] == 2 + 2 + 2


def test_the_centred_clamp_goes_only_where_it_cannot_bind(tmp_path: Path) -> None:
    engine = _engine(tmp_path, 1)

    def summed(sql: str) -> str:
        """The aggregates over ``__rows`` as built (before rewrite/inline.py writes the rows
        in place, which would bring the rows' own clamps into the same SELECT)."""
        plan = engine.prepare(sql).plan
        assert plan is not None
        tree = build(RewriteContext(plan, 0))
        tree.set("with_", None)
        return tree.sql(dialect="duckdb")

    assert "CASE" not in summed("SELECT AVG(age) FROM t")  # exact integers: no second clamp
    assert "CASE" not in summed("SELECT VAR_SAMP(age) FROM t")
    assert "CASE" not in summed("SELECT AVG(CASE WHEN k = 'a' THEN 1 ELSE 0 END) FROM t")
    assert "CASE" in summed("SELECT AVG(frac) FROM t")  # 0.1 and 0.7 are not doubles
    assert "CASE" in summed("SELECT AVG(big) FROM t")  # past 2^53
    assert "CASE" in summed("SELECT AVG(age / 3) FROM t")  # rounded arithmetic
    # Same answers as the plain SQL over the clamped values (noise off).
    assert _released(engine, "SELECT AVG(age) FROM t")[0][0] == pytest.approx(
        (30 + 40 + 50 + 60 + 70 + 100 + 20 + 21 + 22 + 23 + 24) / 11
    )


FLOATS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(a=FLOATS, b=FLOATS, squared=st.booleans())
def test_a_dropped_clamp_is_never_needed(a: float, b: float, squared: bool) -> None:
    """Whenever the shortcut applies, IEEE ``v - centre`` (squared) stays inside the grid's
    interval — hence the planned one — for the ends of the range, the doubles next to them
    and points in between, and its grid integer ⌊(v − c)·2^k + ½⌋ inside [Q_lo, Q_hi]."""
    lo, hi = sorted((a, b))
    table = Table("t", True, (Column("x", ColumnType.FLOAT, Fraction(lo), Fraction(hi)),))
    centre = (Fraction(lo) + Fraction(hi)) / 2
    half = (Fraction(hi) - Fraction(lo)) / 2
    values = Interval(Fraction(0), half * half) if squared else Interval(-half, half)
    p = Primitive("p", PrimitiveKind.SUM, exp.column("x"), values, centre, squared)
    g, span = grid(p, table), computed_range(p, table)
    low, high = g.point(g.low), g.point(g.high)
    if g.bits < 0 or span is None or not low <= span[0] <= span[1] <= high:
        return
    c = float(centre)
    inside = [lo, hi, math.nextafter(lo, hi), math.nextafter(hi, lo), (lo + hi) / 2]
    inside += [lo + (hi - lo) * i / 7 for i in range(8)]
    for v in inside:
        v = min(max(v, lo), hi)
        d = v - c
        got = d * d if squared else d
        assert values.lo is not None and values.hi is not None
        assert low <= Fraction(got) <= high, (v, c, got, g)
        assert values.lo <= Fraction(got) <= values.hi, (v, c, got, values)
        assert g.low <= math.floor(got * 2.0**g.bits + 0.5) <= g.high, (v, c, got, g)


class _Shift(NoNoise):
    """Adds ``by`` to every value: a stand-in for a large noise draw."""

    def __init__(self, by: float) -> None:
        super().__init__()
        self.by = by

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        return [v + self.by for v in super().laplace(values, scale, integer=integer)]


@pytest.mark.parametrize(("by", "count"), [(7.0, 11), (-50.0, 0), (-3.0, 8)])
def test_counts_are_clipped_to_a_declared_public_row_bound(
    tmp_path: Path, by: float, count: int
) -> None:
    """public_max_rows: 11 (the table's true size): a noisy 18 comes out as 11, a noisy −39
    as 0, and a noisy 8 as it is; a table without the key keeps 18."""
    db = tmp_path / "c.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE t (pid BIGINT PRIMARY KEY, k VARCHAR, age BIGINT, frac DOUBLE, big BIGINT)"
    )
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", ROWS)
    con.close()
    text = SCHEMA.format(rows=1).replace(
        "max_rows_per_unit: 1", "max_rows_per_unit: 1\n    public_max_rows: 11"
    )
    engine = Engine(
        parse_catalog(text), DuckDBBackend(db), accountant=MemoryAccountant(HUGE), noise=_Shift(by)
    )
    assert _released(engine, "SELECT COUNT(*) FROM t") == [(count,)]
    grouped = dict(_released(engine, "SELECT k, COUNT(*) FROM t GROUP BY k"))
    assert all(0 <= n <= 11 for n in grouped.values())
    plain = Engine(
        parse_catalog(SCHEMA.format(rows=1)),
        DuckDBBackend(db),
        accountant=MemoryAccountant(HUGE),
        noise=_Shift(by),
    )
    assert _released(plain, "SELECT COUNT(*) FROM t") == [(max(0, 11 + int(by)),)]


def test_public_rows_above_the_public_bound_is_refused() -> None:
    text = SCHEMA.format(rows=1).replace(
        "max_rows_per_unit: 1", "max_rows_per_unit: 1\n    public_rows: 12\n    public_max_rows: 11"
    )
    with pytest.raises(SchemaError, match="public_max_rows"):
        parse_catalog(text)


def test_a_date_key_keeps_the_row_filter(tmp_path: Path) -> None:
    """A date domain is written as text: in a VALUES list it would be text, not a date, so the
    domain stays a per-row filter (where the engines coerce it) and the query runs. The quoted
    ISO dates of the schema are dates (they used to stay strings and match no group: every
    released count was a zero-filled 0)."""
    db = tmp_path / "d.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t (pid BIGINT PRIMARY KEY, d DATE)")
    con.execute(
        "INSERT INTO t VALUES (1, DATE '2020-01-01'), (2, DATE '2020-01-02'), "
        "(3, DATE '2020-01-02'), (4, DATE '2021-05-05')"
    )
    con.close()
    text = """
version: 1
dataset: dates
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  t:
    privacy_unit: pid
    max_rows_per_unit: 1
    columns:
      pid: {type: integer}
      d: {type: date, domain: ["2020-01-01", "2020-01-02"]}
"""
    engine = Engine(
        parse_catalog(text), DuckDBBackend(db), accountant=MemoryAccountant(HUGE), noise=NoNoise()
    )
    sql = "SELECT d, COUNT(*) FROM t GROUP BY d"
    assert "__domain" not in (engine.prepare(sql).sql or "")
    got = sorted((str(r[0]), r[1]) for r in _released(engine, sql))
    assert got == [("2020-01-01", 1), ("2020-01-02", 2)]
