"""UNION ALL and UNION of DP aggregate SELECTs (``dpproxy/union.py``): with noise off the
released rows are the plain SQL's, on DuckDB and PostgreSQL; the cost is the sum of the
branches'; a refusal reads nothing and charges nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends import CancelToken
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.cli import main
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.explain_command import ExplainStatement, explain_rows
from dpproxy.planning.plan import QueryPlan
from dpproxy.release.exact import ExactResult
from dpproxy.tpch import load_tpch_postgres
from dpproxy.values import Cost
from tests.corpus.exact import exact_rows, matches
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))
HINT = "/*+ dpproxy max_rows=1000 */ "
GROUPED = (
    "SELECT 'segment' AS kind, c_mktsegment AS value, COUNT(*) AS n FROM customer "
    "GROUP BY c_mktsegment UNION ALL SELECT 'priority', o_orderpriority, COUNT(*) FROM orders "
    "GROUP BY o_orderpriority"
)
CASES = {
    "grouped": GROUPED,
    "three": "SELECT COUNT(*) AS n FROM orders WHERE o_orderstatus = 'F' UNION ALL "
    "SELECT COUNT(*) FROM orders WHERE o_orderstatus = 'O' UNION ALL "
    "SELECT COUNT(*) FROM customer",
    "with_public": "SELECT n_name AS name, 1 AS n FROM nation WHERE n_nationkey = 3 UNION ALL "
    "SELECT 'customers', COUNT(*) FROM customer",
}
REFUSED = {
    "intersect": GROUPED.replace("UNION ALL", "INTERSECT"),
    "except": GROUPED.replace("UNION ALL", "EXCEPT"),
    "columns": "SELECT COUNT(*) FROM orders UNION ALL SELECT c_mktsegment, COUNT(*) FROM "
    "customer GROUP BY c_mktsegment",
    "types": "SELECT COUNT(*) FROM orders UNION ALL SELECT AVG(c_acctbal) FROM customer",
    "second_branch": "SELECT COUNT(*) FROM orders UNION ALL SELECT o_comment FROM orders",
    "order_expr": "SELECT COUNT(*) AS n FROM orders UNION ALL SELECT COUNT(*) FROM customer "
    "ORDER BY n + 1",
    "mixed": "SELECT COUNT(*) FROM orders UNION SELECT COUNT(*) FROM customer UNION ALL "
    "SELECT COUNT(*) FROM lineitem",
}


class Recording(DuckDBBackend):
    """The real DuckDB backend, recording every statement it runs."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.executed: list[str] = []

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self.executed.append(sql)
        return super().execute(sql, cancel)


def _engine(backend: Any, catalog: Any) -> Engine:
    return Engine(catalog, backend, accountant=MemoryAccountant(HUGE, cache="off"), noise=NoNoise())


@pytest.fixture(scope="module")
def tpch(tpch_db: Any) -> Iterator[Engine]:
    engine = _engine(Recording(tpch_db.path), tpch_db.catalog())
    yield engine
    engine.close()


def _same(got: Any, exact: list[tuple[Any, ...]]) -> bool:
    rows = [tuple(r) for r in got]
    return len(rows) == len(exact) and all(matches(r, exact) for r in rows)


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_the_plain_sql_and_costs_the_sum(name: str, tpch: Engine, tpch_db: Any) -> None:
    sql = HINT + CASES[name]
    union = tpch._union(sql, None, None, None, None)
    assert union is not None
    dp = [p for p in union.plans if isinstance(p, QueryPlan)]
    before = tpch.remaining(name)
    answer = tpch.run(sql, analyst=name)
    assert _same(answer.released.rows, exact_rows(tpch_db.path, CASES[name]))
    assert answer.cost == union.cost == sum((p.cost for p in dp), Cost.zero())
    assert answer.cost.epsilon == len(dp) * dp[0].cost.epsilon > 0
    assert before - tpch.remaining(name) == answer.cost


def test_union_drops_equal_released_rows_nulls_included(tpch: Engine) -> None:
    count = "SELECT NULL AS x, COUNT(*) AS n FROM orders WHERE o_orderkey < 0"
    rows = tpch.run(f"{count} UNION {count} UNION {count}", analyst="u").released.rows
    assert rows == ((None, 0),)
    rows = tpch.run(f"{count} UNION ALL {count}", analyst="u").released.rows
    assert rows == ((None, 0), (None, 0))


def test_describe_names_the_first_branchs_columns(tpch: Engine) -> None:
    from dpproxy.release.public import columns_of

    cols = columns_of(tpch.plan(HINT + GROUPED))
    assert [(c.name, c.type) for c in cols] == [
        ("kind", "text"),
        ("value", "text"),
        ("n", "integer"),
    ]
    answer = tpch.run(HINT + GROUPED, analyst="describe")
    assert answer.released.columns == cols


def test_order_by_and_limit_apply_to_the_released_rows(tpch: Engine, tpch_db: Any) -> None:
    three = CASES["three"]
    exact = sorted(exact_rows(tpch_db.path, three), reverse=True)
    before = tpch.remaining("ordered")
    answer = tpch.run(f"{HINT}{three} ORDER BY n DESC LIMIT 2", analyst="ordered")
    assert [r[0] for r in answer.released.rows] == [r[0] for r in exact[:2]]
    assert before - tpch.remaining("ordered") == answer.cost  # all three branches: the sum
    assert answer.cost == tpch._union(HINT + three, None, None, None, None).cost  # type: ignore[union-attr]
    rows = tpch.run(f"{HINT}{GROUPED} ORDER BY 1, value OFFSET 1", analyst="ordered")
    keys = [r[:2] for r in rows.released.rows]
    assert keys == sorted(keys) and len(keys) == len(exact_rows(tpch_db.path, GROUPED)) - 1


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refusal_reads_nothing_and_charges_nothing(name: str, tpch: Engine) -> None:
    backend = tpch.backend
    assert isinstance(backend, Recording)
    before = tpch.remaining("refused")
    backend.executed.clear()
    with pytest.raises(DPProxyError) as e:
        tpch.run(HINT + REFUSED[name], analyst="refused")
    assert e.value.sqlstate.startswith(("0A", "42"))
    assert not any("orders" in s or "customer" in s for s in backend.executed)
    assert tpch.remaining("refused") == before
    if name in ("intersect", "except"):
        assert name.upper() in e.value.message


def test_postgres_gives_the_same_answers(pg_dsn: str, tpch_db: Any, tpch: Engine) -> None:
    load_tpch_postgres(tpch_db.path, pg_dsn)
    pg = _engine(PostgresBackend(pg_dsn), tpch_db.catalog())
    try:
        for name, sql in sorted(CASES.items()):
            a = tpch.run(HINT + sql, analyst="d").released.rows
            b = pg.run(HINT + sql, analyst="p").released.rows
            assert _same(a, [tuple(r) for r in b]), (name, a, b)
    finally:
        pg.close()


def test_explain_of_a_union_names_each_branch_and_the_sum(tpch: Engine, tpch_db: Any) -> None:
    """The CLI (in-process), the EXPLAIN statement and its JSON: a heading naming the UNION
    ALL, each branch explained as a query of its own, the summed cost; nothing read, nothing
    charged."""
    backend = tpch.backend
    assert isinstance(backend, Recording)
    backend.executed.clear()
    before = tpch.remaining("explainer")
    sql = HINT + GROUPED + " ORDER BY n DESC LIMIT 3"
    branch = tpch.prepare(HINT + "SELECT COUNT(*) AS n FROM customer")
    assert isinstance(branch.plan, QueryPlan)
    total = 2 * branch.plan.cost.epsilon  # each branch costs the requested ε
    result = CliRunner().invoke(
        main, ["explain", "--database", str(tpch_db.path), "--schema", str(tpch_db.schema), sql]
    )
    assert result.exit_code == 0, result.output
    rows = explain_rows(tpch, ExplainStatement(sql, json=False), analyst="explainer")
    statement = "\n".join(r for (r,) in rows)
    for text in (result.output, statement):
        assert "UNION ALL of 2 branches, each released as a query of its own" in text
        assert f"ε = {float(total):.6g}" in text and "the sum of the 2 branches below" in text
        assert "sequential composition" in text
        assert (
            "--- branch 1 of the UNION ALL: /*+ dpproxy max_rows=1000 */ SELECT 'segment'" in text
        )
        assert (
            "--- branch 2 of the UNION ALL: /*+ dpproxy max_rows=1000 */ SELECT 'priority'" in text
        )
        assert "ORDER BY, LIMIT applied by dpproxy to the released rows" in text
        assert text.count("rewritten SQL") == 2  # each branch's plan, as if sent alone
    [(doc,)] = explain_rows(tpch, ExplainStatement(sql, json=True), analyst="explainer")
    data = json.loads(doc)
    assert data["union"] == "UNION ALL" and len(data["branches"]) == 2
    assert data["cost"]["epsilon"] == pytest.approx(float(total))
    assert [b["cost"]["epsilon"] for b in data["branches"]] == [
        pytest.approx(float(branch.plan.cost.epsilon))
    ] * 2
    assert "applied by dpproxy to the released rows" in data["how"]
    distinct = explain_rows(
        tpch, ExplainStatement(GROUPED.replace("UNION ALL", "UNION"), json=False), analyst="x"
    )
    assert any("duplicates of released rows dropped by dpproxy" in r for (r,) in distinct)
    assert backend.executed == []  # nothing read
    assert tpch.remaining("explainer") == before  # nothing charged


def test_a_union_is_cached_as_one_release(tpch_db: Any) -> None:
    accountant = MemoryAccountant(HUGE)  # cache on
    engine = Engine(tpch_db.catalog(), DuckDBBackend(tpch_db.path), accountant=accountant)
    try:
        assert not engine.is_cached(HINT + GROUPED, analyst="c")
        first = engine.run(HINT + GROUPED, analyst="c")
        assert engine.is_cached(HINT + GROUPED, analyst="c")
        again = engine.run(HINT + GROUPED, analyst="c")
        assert again.cached and again.cost == Cost.zero()
        assert again.released.rows == first.released.rows  # the same noisy release
    finally:
        engine.close()


def test_a_public_branch_over_the_cap_reads_no_private_row_and_charges_nothing(
    tpch_db: Any,
) -> None:
    """The public branches run before the reservation: one that fails (here more rows than
    the engine's public cap) is refused with its own SQLSTATE, no private table read."""
    backend = Recording(tpch_db.path)
    engine = Engine(
        tpch_db.catalog(),
        backend,
        accountant=MemoryAccountant(HUGE, cache="off"),
        noise=NoNoise(),
        public_max_rows=3,
    )
    sql = "SELECT COUNT(*) AS n FROM customer UNION ALL SELECT n_nationkey FROM nation"
    try:
        before = engine.remaining("capped")
        with pytest.raises(DPProxyError) as e:
            engine.run(HINT + sql, analyst="capped")
        assert e.value.sqlstate == "53400"
        assert not any("customer" in s or "orders" in s for s in backend.executed)
        assert engine.remaining("capped") == before
    finally:
        engine.close()
