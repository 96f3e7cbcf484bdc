"""One count for columns that hold no NULL (``planning/planner._PrimitiveBuilder._count``).

``COUNT(x)`` of a column the schema says holds no NULL is ``COUNT(*)`` over the same rows, and
so is the count an AVG, VAR or STDDEV of it divides by: one primitive, computed and released
once with the sum of the shares. A nullable column, an expression, a join's, a per-unit
relation's or a union's column keeps its own ``COUNT(x)``. With the noise off, the answers
are the raw query's (the counts are the same number).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.values import Cost
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: shared
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  t:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: float, lower: 0, upper: 100}
      b: {type: integer, lower: 0, upper: 50}
      n: {type: float, nullable: true, lower: 0, upper: 10}
"""
HUGE = Cost(Fraction(10**9), Fraction(1, 2))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    path = Path(tmp_path_factory.mktemp("shared")) / "t.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (uid BIGINT PRIMARY KEY, a DOUBLE, b BIGINT, n DOUBLE)")
        con.execute(
            "INSERT INTO t SELECT i, (i * 37) % 101, (i * 11) % 51, "
            "CASE WHEN i % 3 = 0 THEN NULL ELSE i % 10 END FROM range(500) r(i)"
        )
    return Engine(parse_catalog(SCHEMA), DuckDBBackend(path), accountant=MemoryAccountant(HUGE))


def _counts(engine: Engine, sql: str) -> list[object]:
    plan = engine.prepare(sql).plan
    return [p.measure for p in plan.primitives if p.kind is PrimitiveKind.COUNT]


def test_the_counts_of_columns_without_null_are_one_count_star(engine: Engine) -> None:
    assert _counts(engine, "SELECT VARIANCE(a), STDDEV(b) FROM t") == [None]
    assert _counts(engine, "SELECT COUNT(*), COUNT(a), AVG(b) FROM t") == [None]
    assert _counts(engine, "SELECT COUNT(a), COUNT(b) FROM t WHERE b > 3") == [None]
    prepared = engine.prepare("SELECT VARIANCE(a), STDDEV(b) FROM t")
    assert prepared.sql is not None and prepared.sql.count("COUNT(") == 1
    assert "COUNT(*)" in prepared.sql


def test_a_nullable_column_or_an_expression_keeps_its_own_count(engine: Engine) -> None:
    counts = _counts(engine, "SELECT COUNT(n), COUNT(*), VARIANCE(n) FROM t")
    assert len(counts) == 2 and None in counts  # COUNT(n) (shared by the VAR) and COUNT(*)
    assert any(c is not None and c.sql() == "n" for c in counts)
    counts = _counts(engine, "SELECT AVG(a + 1), COUNT(*) FROM t")
    assert None in counts and len(counts) <= 2


def test_the_shared_count_is_released_once_with_the_sum_of_the_shares(engine: Engine) -> None:
    """Five primitives of a variance of each of two columns, each at ε/5 where six each had
    ε/6; the query's cost is unchanged."""
    plan = engine.prepare("SELECT VARIANCE(a), STDDEV(b) FROM t").plan
    assert len(plan.primitives) == 5
    shares = [r.cost.epsilon for r in plan.releases]
    assert sum(shares) == plan.cost.epsilon == Fraction(1)
    assert shares == [Fraction(1, 5)] * 5


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT VARIANCE(a), STDDEV(b) FROM t",
        "SELECT COUNT(*), COUNT(a), AVG(b) FROM t WHERE b > 3",
        "SELECT b % 5 AS g, COUNT(a), VAR_SAMP(a) FROM t GROUP BY b % 5",
    ],
)
def test_with_the_noise_off_the_answers_are_the_raw_query_s(
    tmp_path: Path, engine: Engine, sql: str
) -> None:
    quiet = Engine(
        engine.catalog, engine.backend, accountant=MemoryAccountant(HUGE), noise=NoNoise()
    )
    released = sorted(quiet.run(sql, analyst="a").released.rows, key=repr)
    path = engine.backend.path  # type: ignore[attr-defined]
    with duckdb.connect(str(path), read_only=True) as con:
        raw = sorted(con.execute(sql).fetchall(), key=repr)
    assert len(released) == len(raw)
    for got, want in zip(released, raw, strict=True):
        for g, w in zip(got, want, strict=True):
            assert math.isclose(float(g), float(w), rel_tol=1e-9, abs_tol=1e-9), (got, want)
