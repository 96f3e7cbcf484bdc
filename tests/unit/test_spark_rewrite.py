"""The Spark dialect of the rewrite, printed for every rewrite fixture (no Spark needed).

``tests/integration/test_spark_differential.py`` runs a representative subset on Spark local;
this checks the whole corpus's printed Spark SQL for the constructs ``rewrite/spark.py`` must
have replaced, and that sqlglot reads it back as Spark SQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import sqlglot

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.planning.plan import QueryPlan
from dpproxy.rewrite.context import RewriteContext
from dpproxy.rewrite.pipeline import DIALECTS, rewrite, truncation_sql
from dpproxy.rewrite.stats import stat_statements
from dpproxy.values import Cost
from tests.fixtures import Case, load_cases
from tests.noise import NoNoise

SECRET = 12345
CASES = load_cases("rewrite/*.sql")
# DuckDB's own functions, or sqlglot's spellings Spark lacks or computes differently.
FOREIGN = ("QUANTILE_CONT", "QUANTILE_DISC", "PERCENTILE_APPROX", "REGEXP_I_LIKE", "HASH(")


@pytest.fixture(scope="module")
def engines(
    demo_db: Path, demo_catalog: Catalog, multi_db: Any, tpch_db: Any
) -> Iterator[dict[str, Engine]]:
    sources = {
        "adult": (demo_db, demo_catalog),
        "visits_rows": (multi_db.path, multi_db.catalog("visits_rows")),
        "visits_groups": (multi_db.path, multi_db.catalog("visits_groups")),
        "tpch": (tpch_db.path, tpch_db.catalog()),
    }
    out = {
        name: Engine(
            catalog,
            DuckDBBackend(path),
            accountant=MemoryAccountant(Cost(Fraction(10**9), Fraction(1, 2))),
            noise=NoNoise(),
        )
        for name, (path, catalog) in sources.items()
    }
    yield out
    for e in out.values():
        e.close()


def _spark_statements(plan: QueryPlan, portable: bool, secret: int = SECRET) -> list[str]:
    out = []
    if plan.primitives:
        out.append(rewrite(plan, secret, "spark", portable_hash=portable))
    ctx = RewriteContext(plan, secret, "spark", portable)
    out += [s for _, s in stat_statements(ctx)]
    if plan.truncation is not None and plan.truncation.grid:
        out.append(truncation_sql(plan, "spark"))
    return out


def test_spark_is_a_dialect_of_the_rewrite() -> None:
    assert "spark" in DIALECTS


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_fixture_prints_as_spark_sql(case: Case, engines: dict[str, Engine]) -> None:
    engine = engines[case.get("schema") or ""]
    eps = case.get("epsilon")
    prepared = engine.prepare(case.statements[0], epsilon=Fraction(eps) if eps else None)
    plan = prepared.plan
    if not isinstance(plan, QueryPlan):
        pytest.skip(f"{type(plan).__name__}: its parts are planned when it runs")
    for portable in (False, True):
        for text in _spark_statements(plan, portable):
            upper = text.upper()
            assert not [f for f in FOREIGN if f in upper], text
            sqlglot.parse_one(text, read="spark")  # Spark SQL sqlglot can read back
            if "__bounded" in text and not portable:
                # Keyed: the first argument of every xxhash64 is derived from the secret.
                keys = re.findall(r"XXHASH64\((\d+)", upper)
                assert keys and len(keys) == upper.count("XXHASH64(")
                assert "RAND(" not in upper
    bounded = [t for t in _spark_statements(plan, False) if "__bounded" in t]
    other = [t for t in _spark_statements(plan, False, SECRET + 1) if "__bounded" in t]
    for a, b in zip(bounded, other, strict=True):  # another secret, other keys
        assert re.findall(r"xxhash64\((\d+)", a, re.I) != re.findall(r"xxhash64\((\d+)", b, re.I)
