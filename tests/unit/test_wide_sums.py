"""A SUM whose bounds reach past ±10²⁵⁰ is refused with 0A000 before any data is read and
nothing is charged, whichever path plans it (a plain query, a UNION ALL branch, ``explain``).

Planning works out each release's drawn law (``release/noise.drawn_laws``), whose SUM guard
has no double for such bounds; it used to raise XX000 there before the rewrite's own refusal
(``rewrite/aggregate.refuse_wide_sum``) was reached: the refusal's SQLSTATE depended on which
check ran first. The engine now refuses these sums first (``engine_plans._plan_chosen``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.values import Cost
from tests.noise import NoNoise

WIDE = (
    "SELECT SUM(CASE WHEN age > 30 THEN 2147483647 ELSE 1e308 END) FROM adult",
    "SELECT SUM(CASE WHEN TRUE THEN 2147483647 ELSE 1e308 END) FROM adult",
    "SELECT COUNT(*) FROM adult WHERE TRUE UNION ALL "
    "SELECT SUM(CASE WHEN TRUE THEN 2147483647 ELSE 1e308 END) FROM adult WHERE TRUE",
    "SELECT sex, SUM(CASE WHEN age > 30 THEN 1e300 ELSE 0 END) FROM adult GROUP BY sex",
)


@pytest.fixture(scope="module")
def engine(demo_db: Any, demo_catalog: Any) -> Any:
    made = Engine(demo_catalog, DuckDBBackend(demo_db),
                  accountant=MemoryAccountant(Cost(Fraction(100))), noise=NoNoise())  # fmt: skip
    yield made
    made.close()


@pytest.mark.parametrize("sql", WIDE)
def test_a_sum_past_the_double_range_is_0A000_and_charges_nothing(engine: Engine, sql: str) -> None:
    before = engine.accountant.remaining("analyst")
    for step in (engine.prepare, lambda s: engine.run(s, analyst="analyst")):
        with pytest.raises(DPProxyError) as refused:
            step(sql)
        assert refused.value.sqlstate == "0A000", refused.value
        assert "too wide for double precision" in str(refused.value)
    assert engine.accountant.remaining("analyst") == before


def test_a_sum_within_the_limit_is_still_answered(engine: Engine) -> None:
    answer = engine.run("SELECT SUM(CASE WHEN age > 30 THEN 1e200 ELSE 0 END) FROM adult",
                        analyst="analyst")  # fmt: skip
    assert answer.cost.epsilon > 0  # answered and charged
