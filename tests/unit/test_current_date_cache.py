"""``CURRENT_DATE`` is folded into today's date when a query is planned (``sql/dates.py``), so a
query naming it is cached — plan and released answer — for the day it was planned on only
(``sql/parse.py``'s ``dated``): yesterday's answer is not today's answer."""

from __future__ import annotations

import datetime
from fractions import Fraction
from pathlib import Path

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.sql.parse import dated, normalised_text
from dpproxy.values import Cost

SQL = "SELECT COUNT(*) FROM adult WHERE CURRENT_DATE > DATE '2000-01-01' AND age > 40"


def test_only_current_date_queries_are_marked_with_the_day() -> None:
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    assert dated("SELECT COUNT(*) FROM adult") == "SELECT COUNT(*) FROM adult"
    assert dated(SQL) == f"/* current_date {today} */ {SQL}"
    assert dated(dated(SQL)) == dated(SQL)
    assert normalised_text(dated(SQL)).startswith(f"/* current_date {today} */ SELECT")


def test_an_answer_of_another_day_is_not_reused(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = Engine(
        demo_catalog, DuckDBBackend(demo_db), accountant=MemoryAccountant(Cost(Fraction(10)))
    )
    try:
        first = engine.run(SQL, analyst="ana")
        assert first.cost == Cost(Fraction(1)) and not first.cached
        again = engine.run(SQL, analyst="ana")  # the same day: from the cache, free
        assert again.cached and again.cost == Cost.zero()
        yesterday = f"/* current_date 2000-01-01 */ {SQL}"  # as planned on another day
        assert not engine.is_cached(yesterday, analyst="ana")
        other = engine.run(yesterday, analyst="ana")
        assert not other.cached and other.cost == Cost(Fraction(1))
    finally:
        engine.close()
