"""Aggregate CTEs and derived tables grouped by a public-domain key, released first and then
read as public rows (``planning/relations.py``).

TPC-H Q15 (revenue per ``l_suppkey``, its domain read from ``supplier`` through
``s_suppkey = supplier_no``, then the supplier with the largest) and Adult queries over
occupation groups (the schema's domain), with the noise off, equal the plain SQL on DuckDB and
PostgreSQL; the cost is the sum of the releases, charged once; only public tables are read before
everything is planned; a key domain over the cap is refused at no cost; explain shows each part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.model import Catalog
from dpproxy.demo import load_demo_postgres
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.explain import explain_json, explain_text
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.relations import RelationPart
from dpproxy.planning.scalars import ComposedPlan
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.corpus.exact import exact_rows, matches
from tests.integration.test_keyed_subqueries import Recording
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
EPS = Fraction(1000)
HINT = "/*+ dpproxy max_rows=1000 */ "
Q15 = (Path(__file__).resolve().parents[1] / "corpus" / "tpch" / "q15.sql").read_text(
    encoding="utf-8"
)
ADULT = {
    "avg_group_size": "SELECT AVG(n) AS avg_group_size FROM "
    "(SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation) t",
    "above_average": "WITH by_occ AS (SELECT occupation, AVG(hours_per_week) AS hours FROM adult "
    "GROUP BY occupation) SELECT occupation, hours FROM by_occ "
    "WHERE hours > (SELECT AVG(hours) FROM by_occ)",
    "two_keys": "SELECT sex, MAX(n) AS largest FROM (SELECT sex, race, COUNT(*) AS n, "
    "SUM(capital_gain) AS gain FROM adult GROUP BY sex, race) g WHERE gain > 0 GROUP BY sex",
    "ordinal_and_alias": "SELECT COUNT(*) AS busy FROM (SELECT income_class AS k, "
    "AVG(hours_per_week) AS h FROM adult GROUP BY 1) x WHERE h > 40",
}


def _engine(backend: Any, catalog: Catalog) -> Engine:
    return Engine(catalog, backend, accountant=MemoryAccountant(HUGE, cache="off"), noise=NoNoise())


@pytest.fixture(scope="module")
def tpch(tpch_db: Any) -> Iterator[Engine]:
    engine = _engine(Recording(tpch_db.path), tpch_db.catalog())
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def adult(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    engine = _engine(Recording(demo_db), demo_catalog)
    yield engine
    engine.close()


def _same(got: Any, exact: list[tuple[Any, ...]]) -> bool:
    rows = [tuple(r) for r in got]
    return len(rows) == len(exact) and all(matches(r, exact) for r in rows)


def _check(engine: Engine, sql: str, path: Path, parts: int) -> None:
    composed = engine.prepare(sql, epsilon=EPS).plan
    assert isinstance(composed, ComposedPlan) and isinstance(composed.outer, PublicPlan)
    released = [p for p in composed.scalars if isinstance(p, RelationPart)]
    assert len(released) == parts and all(p.plan.selection is None for p in released)
    before = engine.remaining("r")
    answer = engine.run(sql, analyst="r", epsilon=EPS)
    assert _same(answer.released.rows, exact_rows(path, sql)), answer.released.rows
    assert answer.cost == composed.cost == sum((p.plan.cost for p in released), Cost.zero())
    assert answer.cost.epsilon == parts * EPS
    assert before - engine.remaining("r") == answer.cost


def test_q15_equals_the_plain_sql(tpch: Engine, tpch_db: Any) -> None:
    _check(tpch, HINT + Q15, tpch_db.path, 1)
    composed = tpch.prepare(Q15).plan
    assert isinstance(composed, ComposedPlan)
    (part,) = composed.scalars
    assert isinstance(part, RelationPart) and len(part.keys) == 100  # the suppliers
    assert part.domains == (
        "l_suppkey: SELECT DISTINCT s_suppkey FROM supplier WHERE NOT s_suppkey IS NULL",
    )


@pytest.mark.parametrize("name", sorted(ADULT))
def test_adult_queries_equal_the_plain_sql(name: str, adult: Engine, demo_db: Path) -> None:
    _check(adult, ADULT[name], demo_db, 1)


def test_nothing_private_is_read_before_everything_is_planned(tpch: Engine) -> None:
    backend = tpch.backend
    assert isinstance(backend, Recording)
    backend.executed.clear()
    tpch.prepare(HINT + Q15, epsilon=Fraction(3))
    assert backend.executed and not any("lineitem" in s for s in backend.executed)


def test_a_domain_over_the_cap_is_refused_and_free(adult: Engine) -> None:
    backend = adult.backend
    assert isinstance(backend, Recording)
    backend.executed.clear()
    sql = (
        "SELECT COUNT(*) FROM (SELECT native_country, occupation, education, COUNT(*) AS n "
        "FROM adult GROUP BY native_country, occupation, education) t WHERE n > 3"
    )
    with pytest.raises(DPProxyError) as info:
        adult.run(sql, analyst="cap")
    assert info.value.sqlstate == "53400" and "keys (at most 10,000)" in info.value.message
    assert adult.accountant.spent("cap") == Cost.zero() and backend.executed == []


def test_refusals_name_the_obstacle(tpch: Engine, adult: Engine) -> None:
    with pytest.raises(DPProxyError, match="groups by o_clerk, which has no public domain"):
        tpch.run(
            "SELECT MAX(n) FROM (SELECT o_clerk, COUNT(*) AS n FROM orders GROUP BY o_clerk) t",
            analyst="x",
        )
    with pytest.raises(DPProxyError, match="reads the private table adult too"):
        adult.run(
            "WITH t AS (SELECT sex, AVG(age) AS a FROM adult GROUP BY sex) "
            "SELECT COUNT(*) FROM adult JOIN t ON adult.sex = t.sex WHERE age > a",
            analyst="x",
        )
    assert tpch.accountant.spent("x") == adult.accountant.spent("x") == Cost.zero()


def test_explain_shows_every_part(tpch: Engine) -> None:
    plan = tpch.prepare(Q15, epsilon=Fraction(1)).plan
    assert isinstance(plan, ComposedPlan) and isinstance(plan.parts[0].plan, QueryPlan)
    text = explain_text(plan, "")
    assert "the aggregate relation revenue, released first with noise for each of the 100" in text
    assert "public domain: 100 groups, every one released" in text
    data = json.loads(explain_json(plan, ""))
    assert data["relations"] == [
        {"name": "revenue", "keys": 100, "domains": list(plan.scalars[0].domains)}  # type: ignore[union-attr]
    ]


def test_postgres_gives_the_same_answers(
    pg_dsn: str, tpch_db: Any, tpch: Engine, adult: Engine, demo_catalog: Catalog
) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    load_demo_postgres(pg_dsn)
    pg_tpch = _engine(PostgresBackend(pg_dsn), tpch_db.catalog())
    pg_adult = _engine(PostgresBackend(pg_dsn), demo_catalog)
    try:
        cases = [(pg_tpch, tpch, HINT + Q15)] + [(pg_adult, adult, s) for s in ADULT.values()]
        for pg, duck, sql in cases:
            a = sorted(duck.run(sql, analyst="d", epsilon=EPS).released.rows, key=str)
            b = sorted(pg.run(sql, analyst="p", epsilon=EPS).released.rows, key=str)
            assert a and _same(a, [tuple(r) for r in b]), (sql, a, b)
    finally:
        pg_tpch.close()
        pg_adult.close()
