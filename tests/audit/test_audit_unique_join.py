"""Audit of a COUNT over a join on a unit that is the PRIMARY KEY of both tables, released
*without* contribution bounding (issue 21, ``unit_unique`` in ``sql/joinrel.py``).

The plan comes from :meth:`dpproxy.engine.Engine.prepare` over real DuckDB files; its rewritten
SQL (no bounding CTE) runs on D (300 people, each with one account) and on D' (D plus one person
with an account: the joined COUNT moves by 1, the whole sensitivity); each draw is the
production release of that exact result (``release/noise.apply_noise`` with OpenDP noise, then
``release/postprocess``), and the audit bounds ε with confidence 1 − 10⁻⁷
(``tests/audit/harness.py``) against the (ε, δ) the plan charges.

The audit has teeth: the same query planned from a catalog that claims ``account``'s key when
the table has none (D' adds a person with three accounts, a move of 3 at the scale of a move of
1) is caught.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.release.exact import ExactResult
from dpproxy.release.noise import apply_noise
from dpproxy.release.postprocess import postprocess
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
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

SCHEMA = """\
version: 1
dataset: unique_join_audit
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  person:
    privacy_unit: pid
    columns:
      pid: {type: integer}
      age: {type: integer, lower: 0, upper: 100}
  account:
    privacy_unit: pid
    columns:
      pid: {type: integer}
      balance: {type: float, lower: 0, upper: 100}
"""
SQL = "SELECT COUNT(*) FROM person JOIN account ON person.pid = account.pid"
SECRET = 0x21
PEOPLE = 300


def _database(path: Path, keyed: bool, accounts_of_new: int) -> Path:
    key = " PRIMARY KEY" if keyed else ""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE person(pid INTEGER PRIMARY KEY, age INTEGER)")
        con.execute(f"CREATE TABLE account(pid INTEGER{key}, balance DOUBLE)")
        con.execute(f"INSERT INTO person SELECT i, i % 90 FROM range({PEOPLE}) r(i)")
        con.execute(f"INSERT INTO account SELECT i, i % 100 FROM range({PEOPLE}) r(i)")
        if accounts_of_new:
            con.execute("INSERT INTO person VALUES (9000, 50)")
            for _ in range(accounts_of_new):
                con.execute("INSERT INTO account VALUES (9000, 10)")
    return path


def _exact(path: Path, sql: str) -> ExactResult:
    backend = DuckDBBackend(path)
    try:
        return backend.execute(sql)
    finally:
        backend.close()


def _release(plan: QueryPlan, exact: ExactResult) -> float:
    released = postprocess(plan, apply_noise(plan, exact, NOISE))
    (row,) = released.rows
    return float(row[0])


def _pair(name: str, plan: QueryPlan, sql: str, d: Path, d2: Path) -> Neighbours:
    e1, e2 = _exact(d, sql), _exact(d2, sql)
    return Neighbours(
        name,
        repeat(lambda: _release(plan, e1)),
        repeat(lambda: _release(plan, e2)),
        float(plan.cost.epsilon),
        float(plan.cost.delta),
    )


@functools.cache
def unique_join_audit(tmp: Path) -> Audit:
    d = _database(tmp / "d.duckdb", keyed=True, accounts_of_new=0)
    d2 = _database(tmp / "d2.duckdb", keyed=True, accounts_of_new=1)
    engine = Engine(parse_catalog(SCHEMA), DuckDBBackend(d))
    try:
        prepared = engine.prepare(SQL, secret=SECRET)
    finally:
        engine.close()
    assert not prepared.plan.needs_bounding and prepared.sql is not None
    assert "__bounded" not in prepared.sql
    pair = _pair("COUNT over a join on a unique unit", prepared.plan, prepared.sql, d, d2)
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_unique_join_count_within_claim(tmp_path_factory: pytest.TempPathFactory) -> None:
    audit = unique_join_audit(tmp_path_factory.mktemp("unique_join_audit"))
    assert_within_claim(audit)
    assert_has_power(audit, 0.3)


def test_a_false_uniqueness_claim_is_caught(tmp_path: Path) -> None:
    d = _database(tmp_path / "d.duckdb", keyed=False, accounts_of_new=0)
    d2 = _database(tmp_path / "d2.duckdb", keyed=False, accounts_of_new=3)
    engine = Engine(parse_catalog(SCHEMA), DuckDBBackend(d))
    try:
        honest: Catalog = engine.catalog
    finally:
        engine.close()
    lying = replace(honest, tables=tuple(replace(t, unit_is_unique=True) for t in honest.tables))
    plan = plan_query(validate(parse(SQL), lying, SQL), lying.policy)
    assert not plan.needs_bounding
    pair = _pair("COUNT planned on a false key", plan, rewrite(plan, SECRET, "duckdb"), d, d2)
    audit = run_audit(pair, pilot=2_000, main=15_000, candidates=tails)
    assert audit.bound.epsilon > audit.pair.epsilon, f"not caught: {audit}"
