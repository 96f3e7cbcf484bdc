"""Named attack: a plan hint too large for a float crashed the planner (XX000).

``/*+ dpproxy mechanism=ptr ptr_bound=1e400 */ SELECT MEDIAN(si) FROM t``,
``saa_lower=-1e308 saa_upper=1e308`` and ``saa_chunks=1e400`` reached ``float()`` of an
exact bound or error while planning (``planning/methods.py``): OverflowError, an internal
error (nothing charged, and nothing depends on the data, but a crash is not a refusal). A
hint is now within ±1e100 and a count hint at most 10^12, or refused (22023) while parsing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dpproxy.engine import Engine
from dpproxy.errors import InvalidParameter
from tests.totality import DuckDBWorld, check_query

QUERIES = (
    "/*+ dpproxy mechanism=ptr ptr_bound=1e400 */ SELECT MEDIAN(si) FROM t",
    "/*+ dpproxy mechanism=saa saa_lower=-1e308 saa_upper=1e308 */ SELECT CORR(fb, si) FROM t",
    "/*+ dpproxy mechanism=saa saa_chunks=1e400 saa_lower=0 saa_upper=1 */ "
    "SELECT CORR(fb, si) FROM t",
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    world = DuckDBWorld(Path(tmp_path_factory.mktemp("hints")))
    yield world.engines("rows", False, (), ())[0]
    world.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_a_huge_hint_is_refused_while_parsing(engine: Engine, sql: str) -> None:
    with pytest.raises(InvalidParameter):
        engine.prepare(sql)
    assert not check_query(engine, sql).violations
