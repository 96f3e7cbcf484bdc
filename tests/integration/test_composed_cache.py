"""``Engine.is_cached`` for a query planned in parts whose outer query is public once the parts
are released (``composed.py``): the release is DP, cached as one, and reported cached."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.engine import Engine
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.scalars import ComposedPlan
from dpproxy.values import Cost
from tests.noise import NoNoise

COUNT_KEYED = (
    "/*+ dpproxy max_rows=1000 */ SELECT p_partkey, p_size FROM part WHERE p_brand = "
    "'Brand#13' AND p_size > (SELECT COUNT(*) FROM lineitem WHERE l_partkey = p_partkey) "
    "ORDER BY p_partkey"
)


def test_a_composed_query_with_a_public_outer_query_is_reported_cached(tpch_db: Any) -> None:
    accountant = MemoryAccountant(Cost(Fraction(10**6), Fraction(1, 2)))  # cache on
    engine = Engine(
        tpch_db.catalog(), DuckDBBackend(tpch_db.path), accountant=accountant, noise=NoNoise()
    )
    try:
        composed = engine.prepare(COUNT_KEYED).plan
        assert isinstance(composed, ComposedPlan) and isinstance(composed.outer, PublicPlan)
        assert not engine.is_cached(COUNT_KEYED, analyst="a")
        first = engine.run(COUNT_KEYED, analyst="a")
        assert first.cost.epsilon > 0
        assert engine.is_cached(COUNT_KEYED, analyst="a")
        again = engine.run(COUNT_KEYED, analyst="a")
        assert again.cached and again.cost == Cost.zero()
        assert again.released.rows == first.released.rows
        assert not engine.is_cached(COUNT_KEYED, analyst="b")  # per analyst
    finally:
        engine.close()
