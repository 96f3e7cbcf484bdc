"""Named attack: the order of released private groups must not depend on suppressed groups.

A database returns GROUP BY rows in an order that can depend on every group it saw, including
groups that partition selection then suppresses. dpproxy releases private-key groups sorted by
their values, so the order is a function of the released keys alone.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.release.noise import ExactResult, apply_noise
from tests.noise import NoNoise


def test_released_order_ignores_the_database_order(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = Engine(demo_catalog, DuckDBBackend(demo_db), noise=NoNoise())
    try:
        plan = engine.prepare(
            "SELECT lower(workclass) AS w, COUNT(*) FROM adult GROUP BY 1", delta=Fraction(1, 10**6)
        ).plan
    finally:
        engine.close()
    assert plan.selection is not None
    columns = ("__key_0", *(p.name for p in plan.primitives))
    rows = [
        ("private", 22000, 22000),
        ("self-emp", 3000, 3000),
        (None, 1800, 1800),
        ("state-gov", 1300, 1300),
    ]
    orders = [rows, list(reversed(rows)), rows[2:] + rows[:2]]
    released = [
        [g.key for g in apply_noise(plan, ExactResult(columns, tuple(r)), NoNoise())]
        for r in orders
    ]
    assert released[0] == released[1] == released[2]
    assert released[0] == [(None,), ("private",), ("self-emp",), ("state-gov",)]
