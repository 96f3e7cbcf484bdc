"""One count for columns the database declares NOT NULL (``planning/builder.PrimitiveBuilder
._count``, ``planning/derived.declared_not_null``).

``COUNT(x)`` of a column the database declares NOT NULL (``Column.not_null``, read by the
backend from DuckDB's ``DESCRIBE``) is ``COUNT(*)`` over the same rows, and so is the count an
AVG, VAR or STDDEV of it divides by: one primitive, computed and released once with the sum of
the shares. A column the schema alone says holds no NULL (a promise the database does not
enforce: a view, or a table without the constraint) keeps its own ``COUNT(x)``, since a NULL
there would make a COUNT(*) in its place divide by rows the column does not have; so does a
nullable column or an expression. With the noise off, the answers are the raw query's.
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

COLUMNS = """
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: float, lower: 0, upper: 100}
      b: {type: integer, lower: 0, upper: 50}
      n: {type: float, nullable: true, lower: 0, upper: 10}
"""
SCHEMA = f"""
version: 1
dataset: shared
privacy: {{epsilon: 1, delta: "1e-6"}}
tables:
  t:{COLUMNS}
  u:{COLUMNS}
  v:{COLUMNS}
"""
HUGE = Cost(Fraction(10**9), Fraction(1, 2))
ROWS = (
    "SELECT i, (i * 37) % 101, (i * 11) % 51, "
    "CASE WHEN i % 3 = 0 THEN NULL ELSE i % 10 END FROM range(500) r(i)"
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """``t`` declares a and b NOT NULL; ``u`` has the same rows without the constraint (the
    schema's promise only); ``v`` is a view over ``t`` (a view's columns never are)."""
    path = Path(tmp_path_factory.mktemp("shared")) / "t.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE t (uid BIGINT PRIMARY KEY, a DOUBLE NOT NULL, b BIGINT NOT NULL, "
            "n DOUBLE)"
        )
        con.execute(f"INSERT INTO t {ROWS}")
        con.execute("CREATE TABLE u (uid BIGINT PRIMARY KEY, a DOUBLE, b BIGINT, n DOUBLE)")
        con.execute(f"INSERT INTO u {ROWS}")
        con.execute("CREATE VIEW v AS SELECT * FROM t")
    return Engine(parse_catalog(SCHEMA), DuckDBBackend(path), accountant=MemoryAccountant(HUGE))


def _counts(engine: Engine, sql: str) -> list[object]:
    plan = engine.prepare(sql).plan
    return [p.measure for p in plan.primitives if p.kind is PrimitiveKind.COUNT]


def test_the_backend_marks_the_columns_the_database_declares_not_null(engine: Engine) -> None:
    marked = {
        t.name: sorted(c.name for c in t.columns if c.not_null) for t in engine.catalog.tables
    }
    assert marked == {"t": ["a", "b", "uid"], "u": ["uid"], "v": []}


def test_the_counts_of_not_null_columns_are_one_count_star(engine: Engine) -> None:
    assert _counts(engine, "SELECT VARIANCE(a), STDDEV(b) FROM t") == [None]
    assert _counts(engine, "SELECT COUNT(*), COUNT(a), AVG(b) FROM t") == [None]
    assert _counts(engine, "SELECT COUNT(a), COUNT(b) FROM t WHERE b > 3") == [None]
    prepared = engine.prepare("SELECT VARIANCE(a), STDDEV(b) FROM t")
    assert prepared.sql is not None and prepared.sql.count("COUNT(") == 1
    assert "COUNT(*)" in prepared.sql


@pytest.mark.parametrize("table", ["u", "v"])
def test_a_promise_the_database_does_not_enforce_keeps_each_count(
    engine: Engine, table: str
) -> None:
    """The same columns, said to hold no NULL only by the schema: two counts and four sums."""
    counts = _counts(engine, f"SELECT VARIANCE(a), STDDEV(b) FROM {table}")
    assert sorted(c.sql() for c in counts) == ["a", "b"]  # type: ignore[attr-defined]
    plan = engine.prepare(f"SELECT VARIANCE(a), STDDEV(b) FROM {table}").plan
    assert len(plan.primitives) == 6


def test_a_nullable_column_or_an_expression_keeps_its_own_count(engine: Engine) -> None:
    counts = _counts(engine, "SELECT COUNT(n), COUNT(*), VARIANCE(n) FROM t")
    assert len(counts) == 2 and None in counts  # COUNT(n) (shared by the VAR) and COUNT(*)
    assert any(c is not None and c.sql() == "n" for c in counts)  # type: ignore[attr-defined]
    counts = _counts(engine, "SELECT AVG(a + 1), COUNT(*) FROM t")
    assert None in counts and len(counts) <= 2


def test_the_shared_count_is_one_release_and_the_cost_is_unchanged(engine: Engine) -> None:
    """Five primitives of a variance of each of two columns, each at ε/5 where six each had
    ε/6; the query's cost is unchanged."""
    plan = engine.prepare("SELECT VARIANCE(a), STDDEV(b) FROM t").plan
    assert len(plan.primitives) == 5
    shares = [r.cost.epsilon for r in plan.releases]
    assert sum(shares) == plan.cost.epsilon == Fraction(1)
    assert shares == [Fraction(1, 5)] * 5
    (count,) = [r for r in plan.releases if r.primitive.kind is PrimitiveKind.COUNT]
    assert count.mechanism.scale == 5  # type: ignore[attr-defined]  # sensitivity 1 at ε/5


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT VARIANCE(a), STDDEV(b) FROM t",
        "SELECT COUNT(*), COUNT(a), AVG(b) FROM t WHERE b > 3",
        "SELECT b % 5 AS g, COUNT(a), VAR_SAMP(a) FROM t GROUP BY b % 5",
        "SELECT COUNT(n), AVG(n), COUNT(a) FROM t",
    ],
)
def test_with_the_noise_off_the_answers_are_the_raw_query_s(engine: Engine, sql: str) -> None:
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
