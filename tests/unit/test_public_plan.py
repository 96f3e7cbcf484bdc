"""Queries over public tables only (``planning/public.py``): the acceptance rule, the SQL the
planner prints, exact and free answers on DuckDB, the row cap, and clean database errors.

The refusals of the allowlist are fixtures (``tests/fixtures/reject/public.sql``, run by
``test_refusals.py`` through :meth:`Engine.run` over a recording backend). PostgreSQL, the CLI
and the wire are in ``tests/integration/test_public_tables.py``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlglot import exp

from dpproxy.accounting.ledger import Ledger
from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.engine import Engine
from dpproxy.errors import PublicQueryFailed, PublicResultTooLarge
from dpproxy.explain import explain_json, explain_text
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import ALLOWED, PublicPlan, reads_public_only
from dpproxy.sql.parse import parse
from dpproxy.values import Cost

BUDGET = Cost(Fraction(10), Fraction(1, 10**5))
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tpch"

PUBLIC = [
    "SELECT n_name FROM nation",
    "SELECT * FROM nation JOIN region ON n_regionkey = r_regionkey",
    "WITH r AS (SELECT * FROM region) SELECT n_name FROM nation, r WHERE n_regionkey = r_regionkey",
    "SELECT n_name FROM nation WHERE EXISTS (SELECT 1 FROM region WHERE r_regionkey = 1)",
    "SELECT n_name FROM nation UNION SELECT r_name FROM region",
    "SELECT COUNT(*) FROM public.nation",
]
# A private table anywhere — however deep — sends the query to the DP path.
HIDDEN_PRIVATE = [
    "SELECT COUNT(*) FROM customer",
    "SELECT n_name FROM nation WHERE n_nationkey IN (SELECT c_nationkey FROM customer)",
    "SELECT n_name FROM nation WHERE EXISTS (SELECT 1 FROM orders WHERE o_custkey = n_nationkey)",
    "WITH c AS (SELECT c_nationkey FROM customer) SELECT n_name FROM nation",
    "WITH c AS (SELECT * FROM region) SELECT * FROM c, (SELECT 1 FROM lineitem) AS l",
    "SELECT n_name FROM nation UNION SELECT c_name FROM customer",
    "SELECT (SELECT MAX(o_totalprice) FROM orders) FROM region",
    "SELECT r_name FROM region GROUP BY r_name HAVING COUNT(*) < (SELECT COUNT(*) FROM orders)",
    "SELECT * FROM nation JOIN customer ON n_nationkey = c_nationkey",
    # a CTE named like a private table still counts as the private table: the DP path decides
    "WITH customer AS (SELECT * FROM nation) SELECT * FROM customer",
    "SELECT * FROM public.CUSTOMER",
    "SELECT 1",  # reads no table
]


@pytest.fixture(scope="module")
def engine(tpch_db: Any) -> Iterator[Engine]:
    e = Engine(tpch_db.catalog(), DuckDBBackend(tpch_db.path), accountant=MemoryAccountant(BUDGET))
    yield e
    e.close()


@pytest.fixture(scope="module")
def duck(tpch_db: Any) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(tpch_db.path), read_only=True)
    yield con
    con.close()


@pytest.mark.parametrize("sql", PUBLIC)
def test_public_tables_only_take_the_public_path(sql: str, engine: Engine) -> None:
    assert reads_public_only(parse(sql), engine.catalog)
    plan = engine.plan(sql)
    assert isinstance(plan, PublicPlan) and plan.cost == Cost.zero()


@pytest.mark.parametrize("sql", HIDDEN_PRIVATE)
def test_a_private_table_anywhere_is_not_the_public_path(sql: str, engine: Engine) -> None:
    assert not reads_public_only(parse(sql), engine.catalog)
    assert engine.public_plan(sql) is None
    try:
        plan = engine.plan(sql)
    except Exception:  # the DP path refuses it: fine, as long as it did not answer it here
        return
    assert isinstance(plan, QueryPlan)


def test_the_sql_sent_is_the_planners_print(engine: Engine) -> None:
    """Table names as the catalog has them, * expanded to the declared columns, the row cap
    as LIMIT, no comment of the analyst's: never the original text."""
    prepared = engine.prepare("/* hello */ SELECT * FROM Nation n -- bye")
    assert prepared.sql == (
        'SELECT "n"."n_nationkey" AS "n_nationkey", "n"."n_name" AS "n_name", '
        '"n"."n_regionkey" AS "n_regionkey", "n"."n_comment" AS "n_comment" '
        'FROM "nation" AS "n" LIMIT 100001'
    )
    assert prepared.statements == (prepared.sql,)
    assert engine.prepare("SELECT n_name FROM nation LIMIT 3").sql.endswith("LIMIT 3")


def test_allowlist_has_no_table_function_or_side_effect() -> None:
    """What the allowlist lets through: no table function, reader, generator or volatile
    function (a guard against a careless addition)."""
    forbidden = (exp.UDTF, exp.Rand, exp.Anonymous, exp.Window, exp.Into, exp.Lock, exp.Lateral)
    for node_type in ALLOWED:
        assert not issubclass(node_type, forbidden), node_type
        assert "read" not in node_type.__name__.lower(), node_type


@pytest.mark.parametrize("name", ["q02", "q11", "q16"])
def test_tpch_public_queries_are_exact_and_free(
    name: str, engine: Engine, duck: duckdb.DuckDBPyConnection
) -> None:
    sql = (CORPUS / f"{name}.sql").read_text()
    answer = engine.run(sql, analyst="ana")
    assert answer.released.rows == tuple(tuple(r) for r in duck.execute(sql).fetchall())
    assert answer.cost == Cost.zero() and answer.remaining == BUDGET
    assert all(e == 0.0 for row in answer.released.errors for e in row)
    assert answer.released.rows  # scale 0.01 has rows for each of them


def test_answers_are_typed_as_described(engine: Engine) -> None:
    sql = (
        "SELECT n_nationkey, n_name, n_nationkey > 3 AS big, CAST('1995-03-15' AS DATE) AS d, "
        "AVG(n_regionkey), 7 / 2 AS i, NULL AS nothing FROM nation "
        "GROUP BY n_nationkey, n_name ORDER BY n_nationkey LIMIT 2"
    )
    described = engine.plan(sql)
    assert isinstance(described, PublicPlan)
    answer = engine.run(sql, analyst="ana")
    types = [c.type for c in answer.released.columns]
    assert types == ["integer", "text", "boolean", "date", "double", "integer", "text"]
    assert [c for c in described.columns] == [(c.name, c.type) for c in answer.released.columns]
    assert [c.name for c in answer.released.columns] == [
        "n_nationkey",
        "n_name",
        "big",
        "d",
        "avg",
        "i",
        "nothing",
    ]
    assert answer.released.rows[0] == (
        0,
        "ALGERIA",
        False,
        datetime.date(1995, 3, 15),
        0.0,
        3,
        None,
    )


def test_row_cap(tpch_db: Any) -> None:
    """More rows than the cap: refused (53400), never cut short; a LIMIT within it answers."""
    e = Engine(
        tpch_db.catalog(),
        DuckDBBackend(tpch_db.path),
        accountant=MemoryAccountant(BUDGET),
        public_max_rows=10,
    )
    try:
        with pytest.raises(PublicResultTooLarge) as info:
            e.run("SELECT n_name FROM nation", analyst="ana")
        assert info.value.sqlstate == "53400" and "more than 10 rows" in info.value.message
        assert "LIMIT" in (info.value.hint or "")
        assert len(e.run("SELECT n_name FROM nation LIMIT 10", analyst="ana").released.rows) == 10
        assert e.prepare("SELECT * FROM nation, part, partsupp").sql.endswith("LIMIT 11")
        assert e.remaining("ana") == BUDGET
    finally:
        e.close()


def test_a_database_error_is_clean(engine: Engine) -> None:
    """A failure on public data is PublicQueryFailed (58000) with the database's message as
    hint, no chained exception (no trace), and nothing charged."""
    with pytest.raises(PublicQueryFailed) as info:
        engine.run("SELECT CAST(n_name AS INTEGER) FROM nation", analyst="bob")
    err = info.value
    assert err.sqlstate == "58000"
    assert "ALGERIA" in (err.hint or "") and "nothing was charged" in (err.hint or "")
    assert err.__cause__ is None and err.__suppress_context__
    assert engine.remaining("bob") == BUDGET


def test_ledger_untouched(tpch_db: Any, tmp_path: Path) -> None:
    """No reservation, no charge, no ledger entry: the ledger's hash chain does not move."""
    ledger = Ledger(tmp_path / "ledger.sqlite", "tpch", BUDGET)
    e = Engine(tpch_db.catalog(), DuckDBBackend(tpch_db.path), accountant=ledger)
    try:
        e.remaining("ana")  # opens the account (a ledger entry of its own)
        before = (ledger.verify().head, len(ledger.entries()), ledger.status("ana"))
        for name in ("q02", "q11", "q16"):
            e.run((CORPUS / f"{name}.sql").read_text(), analyst="ana")
        e.run("SELECT r_name FROM region", analyst="ana")
        after = (ledger.verify().head, len(ledger.entries()), ledger.status("ana"))
        assert after == before
        assert ledger.releases("ana") == [] and ledger.spent("ana") == Cost.zero()
        assert not e.is_cached("SELECT r_name FROM region", analyst="ana")
    finally:
        e.close()


def test_explain_says_public_and_free(engine: Engine) -> None:
    prepared = engine.prepare("SELECT r_name FROM region")
    text = explain_text(prepared.plan, ";\n".join(prepared.statements))
    assert "public tables only: answered exactly, no privacy cost" in text
    assert "ε = 0, δ = 0" in text and 'FROM "region"' in text
    data = explain_json(prepared.plan, prepared.sql or "")
    assert '"mechanism": "public tables only: answered exactly, no privacy cost"' in data
