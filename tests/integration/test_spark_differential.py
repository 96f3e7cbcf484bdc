"""Differential testing on Spark: the rewrite fixtures on Spark local (ANSI) and on DuckDB.

Both engines read the same tables: the fixtures' DuckDB files written to Parquet, which Spark
reads through ``?parquet_dir=`` and DuckDB copies into a file of its own without constraints
(Spark enforces none, so both see the same facts). Both use the portable row hash
(``rewrite/dialect.py``) and the same secret, noise off, so they must agree on the exact
aggregates of every fixture and on the rows each unit keeps after contribution bounding.
One Spark session serves the whole test session (``spark_master`` in ``tests/conftest.py``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.spark import SparkBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from tests.fixtures import Case, load_cases
from tests.integration.test_differential import _bounded_rows, _rows_equal, _sorted
from tests.noise import NoNoise
from tests.spark import duckdb_from_parquet, export_parquet, small_data

SECRET = 12345
ALL_CASES = load_cases("rewrite/*.sql")
# The cases whose measures apply LN, LOG10 or EXP to every row: Java's and DuckDB's C library's
# differ by one unit in the last place on some rows (neither promises correctly rounded
# results), so a fixed-point sum of them differs by about 1 in 10^19. These are compared within
# a relative 1e-9 (RELATIVE), every other value of every case exactly (as in
# test_differential: doubles within 1e-9, everything else equal).
ULP = {
    ("math", "base-10 logarithm and EXP in a measure"),
    ("released_math", "geometric mean, log of a sum and a base-2 log of a count"),
}
# In the rows units keep, the measure LN/LOG10/EXP computes is one of the columns compared.
ULP_BOUNDED = {("math", "base-10 logarithm and EXP in a measure")}
RELATIVE = 1e-9


def _close(a: Any, b: Any) -> bool:
    """Equal, or two numbers within ``RELATIVE`` of each other (integers included)."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=RELATIVE, abs_tol=RELATIVE)
    return _rows_equal([(a,)], [(b,)])


def _rows_close(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]) -> bool:
    return len(left) == len(right) and all(
        len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
        for a, b in zip(left, right, strict=True)
    )


def _key(case: Case) -> tuple[str, str]:
    return Path(case.file).stem, case.title


def _generated(cases: list[Case]) -> set[tuple[str, int]]:
    """The first case of every fixture file: it runs with Spark's code generation, as a
    production session does; the others run interpreted (``tests/spark.INTERPRETED_CONF``),
    which is faster on tables this small, so that the whole corpus fits in CI's time."""
    firsts = (next(c for c in cases if c.file == f) for f in {c.file for c in cases})
    return {(c.file, c.line) for c in firsts}


CASES = ALL_CASES
GENERATED = _generated(ALL_CASES)
# The rows units keep, for every case with contribution bounding.
BOUNDED_CASES = [c for c in ALL_CASES if "__bounded" in c.statements[1]]
BOUNDED = BOUNDED_CASES
GENERATED_BOUNDED = _generated(BOUNDED_CASES)
HUGE = Fraction(10**9), Fraction(1, 2)


Pairs = dict[str, tuple[Engine, Engine]]


@pytest.fixture(scope="module")
def engine_pairs(
    spark_master: str,
    tmp_path_factory: pytest.TempPathFactory,
    demo_db: Path,
    demo_catalog: Catalog,
    multi_db: Any,
    tpch_db: Any,
) -> Iterator[Pairs]:
    """Per schema: (DuckDB, Spark), both noiseless, with the portable hash."""
    from dpproxy.values import Cost

    root = tmp_path_factory.mktemp("spark-diff")
    sources = {
        "adult": (demo_db, demo_catalog),
        "visits_rows": (multi_db.path, multi_db.catalog("visits_rows")),
        "visits_groups": (multi_db.path, multi_db.catalog("visits_groups")),
        "tpch": (tpch_db.path, tpch_db.catalog()),
    }
    exported: dict[Path, tuple[Path, Path]] = {}
    pairs = _Pairs()

    def make(name: str) -> tuple[Engine, Engine]:
        database, catalog = sources[name]
        if database not in exported:
            parquet = export_parquet(database, root / f"{database.stem}-parquet")
            copy = duckdb_from_parquet(parquet, root / f"{database.stem}.duckdb")
            exported[database] = (parquet, copy)
        parquet, copy = exported[database]
        budget = Cost(*HUGE)
        duck = Engine(
            catalog,
            DuckDBBackend(copy, portable_hash=True),
            accountant=MemoryAccountant(budget),
            noise=NoNoise(),
        )
        backend = SparkBackend(f"{spark_master}?parquet_dir={parquet}", portable_hash=True)
        spark = Engine(
            catalog,
            small_data(backend),
            accountant=MemoryAccountant(budget),
            noise=NoNoise(),
        )
        return duck, spark

    pairs.make = make
    yield pairs
    for duck, spark in pairs.values():
        duck.close()
        spark.close()


class _Pairs(Pairs):
    """(DuckDB, Spark) engines per schema, made when a case first needs them."""

    make: Any

    def __missing__(self, name: str) -> tuple[Engine, Engine]:
        self[name] = pair = self.make(name)
        return pair


def _engines(case: Case, pairs: Pairs, generated: set[tuple[str, int]]) -> tuple[Engine, Engine]:
    with_codegen = (case.file, case.line) in generated
    duck, spark = pairs[case.get("schema") or ""]
    small_data(spark.backend, interpreted=not with_codegen)  # one session, either way
    conf = spark.backend._spark.conf
    assert (conf.get("spark.sql.codegen.wholeStage") == "true") == with_codegen
    assert conf.get("spark.sql.ansi.enabled") == "true"
    return duck, spark


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_fixture_gives_the_same_exact_aggregates_on_spark(case: Case, engine_pairs: Pairs) -> None:
    duck, spark = _engines(case, engine_pairs, GENERATED)
    eps = case.get("epsilon")
    epsilon = Fraction(eps) if eps else None
    sql = case.statements[0]
    d_prepared = duck.prepare(sql, epsilon=epsilon, secret=SECRET)
    s_prepared = spark.prepare(sql, epsilon=epsilon, secret=SECRET)
    assert len(d_prepared.statements) == len(s_prepared.statements) > 0
    for d_sql, s_sql in zip(d_prepared.statements, s_prepared.statements, strict=True):
        d_exact = duck.backend.execute(d_sql)
        s_exact = spark.backend.execute(s_sql)
        assert d_exact.columns == s_exact.columns
        same = _rows_close if _key(case) in ULP else _rows_equal
        assert same(_sorted(d_exact.rows), _sorted(s_exact.rows)), (
            f"exact results differ\nDuckDB: {_sorted(d_exact.rows)}\n"
            f"Spark: {_sorted(s_exact.rows)}\nSpark SQL: {s_sql}"
        )


def test_every_case_runs_and_the_readme_says_how_many() -> None:
    # Nothing is left out: every case of every rewrite fixture file, every bounded case.
    assert CASES == ALL_CASES and BOUNDED == BOUNDED_CASES
    assert len(BOUNDED_CASES) >= 8
    assert {f for f, _ in GENERATED} == {c.file for c in ALL_CASES}
    # Every case compared within RELATIVE is a case of the corpus whose SQL applies LN/LOG/EXP.
    for key, cases in ((ULP, ALL_CASES), (ULP_BOUNDED, BOUNDED_CASES)):
        named = [c for c in cases if _key(c) in key]
        assert len(named) == len(key)
        assert all(re.search(r"\b(LN|LOG|EXP)\(", c.statements[0]) for c in named)
    readme = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text(encoding="utf-8")
    readme = " ".join(readme.split())
    m = re.search(
        r"runs every case of every rewrite fixture file on Spark local.*?for every case with "
        r"contribution bounding.*?The first case of each file runs with Spark's code "
        r"generation, the others interpreted.*?(\d+) cases, whose measures apply Java's "
        r"`LN`/`LOG10`/`EXP`.*?are compared within a relative 10⁻⁹",
        readme,
    )
    assert m is not None, "docs/spark.md's sentence about this test changed"
    assert int(m.group(1)) == len(ULP)


@pytest.mark.parametrize("case", BOUNDED, ids=lambda c: c.id)
def test_units_keep_the_same_rows_on_spark(case: Case, engine_pairs: Pairs) -> None:
    duck, spark = _engines(case, engine_pairs, GENERATED_BOUNDED)
    eps = case.get("epsilon")
    epsilon = Fraction(eps) if eps else None
    d_sql = duck.prepare(case.statements[0], epsilon=epsilon, secret=SECRET).sql
    s_sql = spark.prepare(case.statements[0], epsilon=epsilon, secret=SECRET).sql
    assert d_sql is not None and s_sql is not None
    d_rows = _bounded_rows(duck, d_sql, "duckdb")
    s_rows = _bounded_rows(spark, s_sql, "spark")
    assert len(d_rows) == len(s_rows)
    if _key(case) in ULP_BOUNDED:  # the same rows, their LN/LOG10/EXP within RELATIVE
        assert _rows_close(_sorted(tuple(d_rows)), _sorted(tuple(s_rows)))
        return
    d_count = Counter(tuple(str(v) if isinstance(v, float) else v for v in r) for r in d_rows)
    s_count = Counter(tuple(str(v) if isinstance(v, float) else v for v in r) for r in s_rows)
    assert d_count == s_count
