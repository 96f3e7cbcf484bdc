"""Named attack: a public outer query whose failing part runs only where a keyed value says.

A correlated subquery keyed on a public table is released first, per key, and when the rest
of the query reads public tables only it runs exactly, the released values a VALUES lookup
(``planning/keyed.py``, TPC-H Q20). The public path let that outer query hold anything a
query over public tables may: ``CASE WHEN ps_availqty > (SELECT 0.5 * SUM(l_quantity) FROM
lineitem WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey) THEN CAST(ps_comment AS
INTEGER) ELSE 0 END > 0`` casts a comment to an integer, and fails, exactly for the rows
whose released value is below their ``ps_availqty``: XX000, charged, or an answer, decided by
the released values (with ``<`` instead, on TPC-H at scale 0.01, it was answered). It is now
held to the total subset of ``planning/released.py`` (as the query around an aggregate
relation), checked before any read: refused (0A000), nothing charged; Q20's outer query
(IN, LIKE with a literal pattern, equalities, ORDER BY) is inside that subset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.engine import Engine
from dpproxy.errors import UnsupportedQuery
from tests.noise import NoNoise
from tests.totality import check_query

K = (
    "(SELECT 0.5 * SUM(l_quantity) FROM lineitem "
    "WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey)"
)
REFUSED = (
    f"SELECT COUNT(*) FROM partsupp WHERE ps_partkey < 50 AND CASE WHEN ps_availqty > {K} "
    "THEN CAST(ps_comment AS INTEGER) ELSE 0 END > 0",
    f"SELECT COUNT(*) FROM partsupp WHERE ps_partkey < 50 AND CASE WHEN ps_availqty > {K} "
    "THEN 1 / (ps_availqty - ps_availqty) ELSE 0 END > 0",
    f"SELECT SUM(ps_availqty * 2) FROM partsupp WHERE ps_partkey < 50 AND ps_availqty > {K}",
)
ANSWERED = (
    f"SELECT COUNT(*) FROM partsupp WHERE ps_partkey < 50 AND ps_availqty > {K}",
    f"SELECT MAX(ps_comment) FROM partsupp WHERE ps_partkey < 50 AND ps_comment LIKE '%a%' "
    f"AND ps_availqty > {K}",
)


@pytest.fixture(scope="module")
def engine(tpch_db: Any) -> Iterator[Engine]:
    e = Engine(tpch_db.catalog(), DuckDBBackend(tpch_db.path), noise=NoNoise())
    yield e
    e.close()


@pytest.mark.parametrize("sql", REFUSED)
def test_what_could_fail_beside_a_keyed_value_is_refused(engine: Engine, sql: str) -> None:
    with pytest.raises(UnsupportedQuery):
        engine.prepare(sql)
    assert not check_query(engine, sql).violations


@pytest.mark.parametrize("sql", ANSWERED)
def test_the_total_subset_is_answered(engine: Engine, sql: str) -> None:
    engine.prepare(sql)
    assert not check_query(engine, sql).violations
