"""Audit of one count shared by the COUNTs of columns the database declares NOT NULL
(``planning/builder.PrimitiveBuilder._count``).

``SELECT COUNT(a), COUNT(b) FROM t`` over a DuckDB file whose a and b are NOT NULL is planned
(:meth:`dpproxy.engine.Engine.prepare`) as one ``COUNT(*)`` primitive at the query's whole ε:
both outputs are the same noisy value, one release read twice. Each draw is the production
release of the exact result (``release/noise.apply_noise`` with OpenDP noise, then
``release/postprocess``) on D (300 units, one row each) and D' (one more unit: the count moves
by 1, its whole sensitivity), and the audited output is the mean of the two columns: were they
two draws at that scale, the mean would carry twice the claim. The audit bounds ε with
confidence 1 − 10⁻⁷ (``tests/audit/harness.py``) against the ε the plan charges.

The audit has teeth: the same plan with the two columns taken from two independent draws (a
release drawn once per output, as a sharing that forgot to share the noise would) is caught.
Over 12 runs of each (2026-11-28), that variant's bound was 1.27 ± 0.03 (lowest 1.20: nine
standard deviations above the claim of 1) and the shared count's 0.90 ± 0.01.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.planning.plan import QueryPlan
from dpproxy.release.exact import ExactResult
from dpproxy.release.noise import apply_noise
from dpproxy.release.postprocess import postprocess
from tests.audit.harness import (
    NOISE,
    Audit,
    Neighbours,
    assert_has_power,
    assert_within_claim,
    repeat,
    run_audit,
    tails,
)
from tests.audit.test_audit_unique_join import _exact

SCHEMA = """\
version: 1
dataset: shared_count_audit
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  t:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
      a: {type: float, lower: 0, upper: 100}
      b: {type: integer, lower: 0, upper: 50}
"""
SQL = "SELECT COUNT(a), COUNT(b) FROM t"
SECRET = 0x5C
UNITS = 300


def _database(path: Path, units: int) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (uid BIGINT PRIMARY KEY, a DOUBLE NOT NULL, b INT NOT NULL)")
        con.execute(f"INSERT INTO t SELECT i, i % 100, i % 50 FROM range({units}) r(i)")
    return path


def _columns(plan: QueryPlan, exact: ExactResult) -> tuple[float, float]:
    (row,) = postprocess(plan, apply_noise(plan, exact, NOISE)).rows
    return float(row[0]), float(row[1])  # type: ignore[arg-type]


def _shared(plan: QueryPlan, exact: ExactResult) -> float:
    a, b = _columns(plan, exact)
    assert a == b  # one release, read twice
    return (a + b) / 2


def _twice(plan: QueryPlan, exact: ExactResult) -> float:
    """The broken variant: each output from a draw of its own at the shared scale."""
    return (_columns(plan, exact)[0] + _columns(plan, exact)[1]) / 2


def _prepared(tmp: Path) -> tuple[QueryPlan, ExactResult, ExactResult]:
    d = _database(tmp / "d.duckdb", UNITS)
    d2 = _database(tmp / "d2.duckdb", UNITS + 1)
    engine = Engine(parse_catalog(SCHEMA), DuckDBBackend(d))
    try:
        prepared = engine.prepare(SQL, secret=SECRET)
    finally:
        engine.close()
    plan = prepared.plan
    assert [p.kind for p in plan.primitives] == [PrimitiveKind.COUNT]
    assert plan.primitives[0].measure is None and plan.cost.epsilon == 1
    assert prepared.sql is not None
    return plan, _exact(d, prepared.sql), _exact(d2, prepared.sql)


def _audit(name: str, release: Callable[[QueryPlan, ExactResult], float], tmp: Path) -> Audit:
    """``release`` of the plan on D and on D', bounded against the ε the plan charges."""
    plan, e1, e2 = _prepared(tmp)
    pair = Neighbours(
        name,
        repeat(lambda: release(plan, e1)),
        repeat(lambda: release(plan, e2)),
        float(plan.cost.epsilon),
        float(plan.cost.delta),
    )
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


@functools.cache
def shared_count_audit(tmp: Path) -> Audit:
    return _audit("one COUNT(*) for COUNT(a), COUNT(b)", _shared, tmp)


def test_shared_count_within_claim(tmp_path_factory: pytest.TempPathFactory) -> None:
    audit = shared_count_audit(tmp_path_factory.mktemp("shared_count_audit"))
    assert_within_claim(audit)
    assert_has_power(audit, 0.3)


def test_a_count_drawn_once_per_output_is_caught(tmp_path: Path) -> None:
    audit = _audit("COUNT(a), COUNT(b) drawn twice", _twice, tmp_path)
    assert audit.bound.epsilon > audit.pair.epsilon, f"not caught: {audit}"
