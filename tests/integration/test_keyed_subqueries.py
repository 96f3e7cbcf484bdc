"""Correlated scalar subqueries keyed on a public table, released first per key
(``planning/keyed.py``, ``sql/correlated.py``).

TPC-H Q20 (keyed on partsupp's (ps_partkey, ps_suppkey), its outer query then over public
tables only) and Q17 (keyed on part's p_partkey, its outer query a DP sum), with the noise off,
equal the plain SQL on DuckDB and PostgreSQL; the cost is the sum of the parts, charged once; a
key domain over the cap is refused (53400) having read public tables only and charging nothing;
an empty key domain gives the exact answer at no cost; explain shows every part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends import CancelToken
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.explain import explain_json, explain_text
from dpproxy.planning import keyed
from dpproxy.planning.keyed import KeyedPart
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.scalars import ComposedPlan, same_outer
from dpproxy.release.exact import ExactResult
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.corpus.exact import exact_rows, matches
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
EPS = Fraction(1000)
HINT = "/*+ dpproxy max_rows=1000 */ "  # never binds at scale 0.01
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tpch"
Q17 = (CORPUS / "q17.sql").read_text(encoding="utf-8").strip().rstrip(";")
Q20 = (CORPUS / "q20.sql").read_text(encoding="utf-8").strip().rstrip(";")
# Q17 for a brand and container that have parts at scale 0.01 (3 keys)
Q17_KEYS = Q17.replace("Brand#23", "Brand#13").replace("MED BOX", "SM PKG")
CASES = {
    "q20": Q20,
    "q17_keys": Q17_KEYS,
    # COUNT over a key with no rows is 0, not NULL; the outer query is then public
    "count_keyed": "SELECT p_partkey, p_size FROM part WHERE p_brand = 'Brand#13' AND "
    "p_size > (SELECT COUNT(*) FROM lineitem WHERE l_partkey = p_partkey) ORDER BY p_partkey",
    # qualified columns, an alias, AVG with a filter of its own, a grouped DP outer query
    "aliased_grouped": "SELECT p.p_container, COUNT(*) AS n FROM lineitem l JOIN part p ON "
    "p.p_partkey = l.l_partkey WHERE p.p_brand = 'Brand#13' AND p.p_size < 30 AND "
    "l.l_quantity > (SELECT AVG(l2.l_quantity) FROM lineitem l2 WHERE l2.l_partkey = "
    "p.p_partkey AND l2.l_discount < 0.05) GROUP BY p.p_container",
}


class Recording(DuckDBBackend):
    """The real DuckDB backend, recording every statement it runs."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.executed: list[str] = []

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self.executed.append(sql)
        return super().execute(sql, cancel)


def _engine(backend: Any, catalog: Any, **kw: Any) -> Engine:
    return Engine(
        catalog, backend, accountant=MemoryAccountant(HUGE, cache="off"), noise=NoNoise(), **kw
    )


@pytest.fixture(scope="module")
def tpch(tpch_db: Any) -> Iterator[Engine]:
    engine = _engine(Recording(tpch_db.path), tpch_db.catalog())
    yield engine
    engine.close()


def _private(sql: str) -> bool:
    return any(t in sql.lower() for t in ('"lineitem"', '"orders"', '"customer"', "lineitem"))


def _same_rows(got: Any, exact: list[tuple[Any, ...]]) -> bool:
    """The same rows, but for groups of a public domain no row has (released as 0)."""
    rows = [tuple(r) for r in got if not (len(r) == 2 and isinstance(r[0], str) and r[1] == 0)]
    return all(matches(r, exact) for r in rows) and all(
        matches(e, rows) for e in exact if not (isinstance(e[0], str) and e[-1] == 0)
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_the_plain_sql_and_costs_the_sum(name: str, tpch: Engine, tpch_db: Any) -> None:
    sql = HINT + CASES[name]
    composed = tpch.prepare(sql, epsilon=EPS).plan
    assert isinstance(composed, ComposedPlan)
    keyed = [p for p in composed.scalars if isinstance(p, KeyedPart)]
    assert len(keyed) == 1 and keyed[0].keys and isinstance(keyed[0].plan, QueryPlan)
    assert keyed[0].plan.selection is None  # a public domain: no partition selection
    before = tpch.remaining(name)
    answer = tpch.run(sql, analyst=name, epsilon=EPS)
    assert _same_rows(answer.released.rows, exact_rows(tpch_db.path, CASES[name]))
    assert answer.cost == composed.cost == keyed[0].plan.cost + composed.outer.cost
    assert before - tpch.remaining(name) == answer.cost  # charged once, the sum
    public_outer = isinstance(composed.outer, PublicPlan)
    assert public_outer == (name in ("q20", "count_keyed"))
    assert answer.cost.epsilon == (EPS if public_outer else 2 * EPS)


def test_q20_has_its_64_keys_and_a_public_outer_query(tpch: Engine) -> None:
    composed = tpch.prepare(Q20).plan
    assert isinstance(composed, ComposedPlan) and isinstance(composed.outer, PublicPlan)
    (part,) = composed.scalars
    assert isinstance(part, KeyedPart) and len(part.keys) == 64
    assert "ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')" in (
        part.corr.domain_sql
    )


def test_nothing_private_is_read_before_everything_is_planned(tpch: Engine) -> None:
    backend = tpch.backend
    assert isinstance(backend, Recording)
    backend.executed.clear()
    tpch.prepare(HINT + Q17_KEYS, epsilon=Fraction(7))  # plans every part: public reads only
    assert backend.executed and not any(_private(s) for s in backend.executed)
    backend.executed.clear()
    tpch.run(HINT + Q17_KEYS, analyst="order", epsilon=Fraction(7))  # planned: cached
    assert backend.executed and all(_private(s) for s in backend.executed)


def test_an_empty_key_domain_is_exact_and_free(tpch: Engine, tpch_db: Any) -> None:
    """Q17 at scale 0.01: no part is Brand#23 in a MED BOX, so no row can qualify."""
    answer = tpch.run(Q17, analyst="empty")
    assert isinstance(answer.plan, PublicPlan) and answer.cost == Cost.zero()
    assert [tuple(r) for r in answer.released.rows] == exact_rows(tpch_db.path, Q17) == [(None,)]
    # nested (not the whole query): the subquery is NULL, nothing is released, nothing charged
    nested = Q20.replace("forest%", "no such part%")
    assert isinstance(tpch.prepare(nested).plan, PublicPlan)
    answer = tpch.run(nested, analyst="empty")
    assert answer.released.rows == () and answer.cost == Cost.zero()
    assert exact_rows(tpch_db.path, nested) == []


def test_an_empty_domain_beside_a_released_scalar_is_not_a_shortcut(
    tpch: Engine, tpch_db: Any
) -> None:
    """With a DP scalar part too, the query is released as parts (the scalar first, the outer
    query with NULL for the empty keyed part), not answered exactly."""
    sql = Q17.replace("sum(l_extendedprice) / 7.0", "count(*)") + (
        " AND l_quantity > (SELECT AVG(l_quantity) FROM lineitem)"
    )
    composed = tpch.prepare(HINT + sql, epsilon=EPS).plan
    assert isinstance(composed, ComposedPlan) and composed.empty is None
    assert len(composed.parts) == 1 and composed.cost.epsilon == 2 * EPS
    answer = tpch.run(HINT + sql, analyst="mixed", epsilon=EPS)
    assert answer.cost == composed.cost
    assert [tuple(r) for r in answer.released.rows] == exact_rows(tpch_db.path, sql) == [(0,)]


def test_a_domain_over_the_cap_is_refused_and_free(tpch_db: Any) -> None:
    backend = Recording(tpch_db.path)
    engine = _engine(backend, tpch_db.catalog(), public_max_rows=50)  # Q20 has 64 keys
    try:
        backend.executed.clear()
        with pytest.raises(DPProxyError) as info:
            engine.run(Q20, analyst="cap")
        assert info.value.sqlstate == "53400"
        assert "more than 50 keys" in info.value.message
        assert engine.accountant.spent("cap") == Cost.zero()
        assert backend.executed and not any(_private(s) for s in backend.executed)
    finally:
        engine.close()


def test_the_key_cap_binds_below_the_public_row_cap(
    tpch_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key domain has its own cap (planning/public.MAX_KEYS, each key a noisy value), below
    the row cap of a public answer: with room for 100,000 public rows, 60 keys allowed refuse
    Q20's 64 keys, and nothing is charged."""
    monkeypatch.setattr(keyed, "MAX_KEYS", 60)
    engine = _engine(Recording(tpch_db.path), tpch_db.catalog())
    try:
        assert engine.public_max_rows == 100_000
        with pytest.raises(DPProxyError) as info:
            engine.run(Q20, analyst="keycap")
        assert info.value.sqlstate == "53400" and "more than 60 keys" in info.value.message
        assert engine.accountant.spent("keycap") == Cost.zero()
    finally:
        engine.close()


def test_the_outer_plan_is_the_same_for_any_released_values(tpch: Engine) -> None:
    """The released values stand in comparisons only: any of them (NULL, huge, negative,
    tiny) gives the placeholder plan, and the rewritten SQL runs."""
    composed = tpch.prepare(HINT + Q17_KEYS).plan
    assert isinstance(composed, ComposedPlan)
    (part,) = composed.scalars
    assert isinstance(part, KeyedPart)
    for value in (1.7e308, -1.7e308, 1e-300, -4.9e-324, 0, 10**20, None, 12.5):
        rows = [(g, value, 1) for g in part.groups] + [(-5, 1.0, 1), (None, 2.0, 3)]
        assert value is None or "THEN" in part.value(rows).sql()  # every key has its value
        text = composed.outer_text([part.value(rows)])
        plan = tpch.plan(text)
        assert isinstance(plan, QueryPlan) and same_outer(composed, plan)
        tpch.run(text, analyst="extremes")
    # a key whose count rounds to 0 has no value (NULL, as SQL's AVG over no rows)
    assert "THEN" not in part.value([(g, 3.0, 0.4) for g in part.groups]).sql()


def test_explain_shows_every_part(tpch: Engine) -> None:
    prepared = tpch.prepare(Q20, epsilon=Fraction(1))
    plan = prepared.plan
    assert isinstance(plan, ComposedPlan)
    text = explain_text(plan, "")
    assert "correlated on ps_partkey, ps_suppkey" in text
    assert "for each of the 64 keys of the public domain SELECT DISTINCT" in text
    assert "public domain: 64 groups, every one released" in text
    assert "cost:         ε = 1, δ = 0 (the sum of the 2 parts below)" in text
    data = json.loads(explain_json(plan, ""))
    assert data["correlated"][0]["keys"] == 64 and data["cost"]["epsilon"] == 1
    assert len(data["scalar_subqueries"]) == 1
    # The text shows the first keys of each long IN list and counts the rest (the key domains
    # hold up to 10,000 values); the rewritten SQL and the JSON keep them all.
    assert "l_partkey * 99 + l_suppkey IN (501, 526, 551, 576, 30101, 30129, … 58 more)" in text
    part = data["scalar_subqueries"][0]["query"]
    assert "… " not in part and part.count(",") > 64


def test_postgres_gives_the_same_answers(pg_dsn: str, tpch_db: Any, tpch: Engine) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    pg = _engine(PostgresBackend(pg_dsn), tpch_db.catalog())
    try:
        for name, sql in sorted(CASES.items()):
            a = tpch.run(HINT + sql, analyst="d", epsilon=EPS).released.rows
            b = pg.run(HINT + sql, analyst="p", epsilon=EPS).released.rows
            assert len(a) == len(b) and _same_rows(a, [tuple(r) for r in b]), (name, a, b)
        a = tpch.run(Q17, analyst="d").released.rows
        assert pg.run(Q17, analyst="p").released.rows == a
    finally:
        pg.close()


MANY_KEYS = (
    "SELECT ps_partkey, ps_suppkey FROM partsupp WHERE ps_partkey <= 1250 AND ps_availqty > "
    "(SELECT 0.5 * SUM(l_quantity) FROM lineitem WHERE l_partkey = ps_partkey AND "
    "l_suppkey = ps_suppkey) ORDER BY ps_partkey, ps_suppkey"
)


def test_five_thousand_keys_are_one_grouped_release_without_a_case(
    tpch: Engine, tpch_db: Any
) -> None:
    """5,000 (part, supplier) keys: the keyed release groups by the keys' code over IN lists
    and the public outer query reads the released values as a VALUES relation (no CASE with
    a branch per key in either), and the answer is the plain SQL's."""
    composed = tpch.prepare(HINT + MANY_KEYS, epsilon=EPS).plan
    assert isinstance(composed, ComposedPlan) and isinstance(composed.outer, PublicPlan)
    (part,) = composed.scalars
    assert isinstance(part, KeyedPart) and len(part.keys) == 5000
    assert isinstance(part.plan, QueryPlan) and part.plan.selection is None
    (group,) = part.plan.query.keys
    assert group.domain is not None and len(group.domain) == 5000  # every key released
    rewritten = tpch.prepare(part.sql, epsilon=EPS).sql or ""
    assert "CASE WHEN l_partkey" not in rewritten and rewritten.count("WHEN") < 50
    # the public outer query looks the released values up in a VALUES relation, no CASE
    assert "CASE" not in composed.outer_sql.upper() and "(VALUES (" in composed.outer_sql
    answer = tpch.run(HINT + MANY_KEYS, analyst="many", epsilon=EPS)
    assert _same_rows(answer.released.rows, exact_rows(tpch_db.path, MANY_KEYS))
    assert answer.cost == composed.cost == part.plan.cost
