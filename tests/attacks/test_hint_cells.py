"""Named attack: a plan hint asking for more chunks or cells than a release can hold.

``/*+ dpproxy mechanism=saa saa_chunks=1000000000000 */ SELECT MEDIAN(age) FROM adult`` and
``mechanism=exponential bins=1000000000000`` were accepted (a count hint could reach 10^12):
the database ran the query, then building the list of chunks or cells in the proxy raised
``MemoryError``: XX000, **charged**, for an answer never released. At ``bins=10000000`` the
release took 171 s of CPU and 3 GB before it answered: one analyst could stall a server.
Found by a known-bad case of the totality families (``STATISTICS`` in
``tests/property/test_totality_families.py``, 2026-11-29).

Now ``saa_chunks`` and ``bins`` are at most 100,000 (100 times their defaults), refused with
22023 while the hint is parsed, before the data and the budget are touched
(``planning/hints.LARGEST_CELLS``).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.values import Cost
from tests.attacks.test_crash_families import refusal

BUDGET = Cost(Fraction(10**6), Fraction(1, 10))
NOTHING = Cost(Fraction(0), Fraction(0))

TOO_MANY = (
    "SELECT /*+ dpproxy mechanism=saa saa_chunks=1000000000000 */ MEDIAN(age) FROM adult",
    "SELECT /*+ dpproxy mechanism=exponential bins=1000000000000 */ MEDIAN(age) FROM adult",
    "SELECT /*+ dpproxy mechanism=saa saa_chunks=100001 */ MEDIAN(age) FROM adult",
    "SELECT /*+ dpproxy mechanism=exponential bins=100001 */ MEDIAN(fnlwgt) FROM adult",
)
AT_THE_LIMIT = (
    "SELECT /*+ dpproxy mechanism=saa saa_chunks=100000 */ MEDIAN(age) FROM adult",
    "SELECT /*+ dpproxy mechanism=exponential bins=100000 */ MEDIAN(fnlwgt) FROM adult",
)


@pytest.fixture(scope="module")
def engine(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    e = Engine(demo_catalog, DuckDBBackend(demo_db), accountant=MemoryAccountant(BUDGET))
    try:
        yield e
    finally:
        e.close()


@pytest.mark.parametrize("sql", TOO_MANY)
def test_too_many_chunks_or_cells_are_refused_before_the_charge(engine: Engine, sql: str) -> None:
    state, spent = refusal(engine, sql)
    assert (state, spent) == ("22023", NOTHING)


@pytest.mark.parametrize("sql", AT_THE_LIMIT)
def test_the_limit_itself_is_answered(engine: Engine, sql: str) -> None:
    state, spent = refusal(engine, sql)
    assert state is None
    assert spent.epsilon > 0
