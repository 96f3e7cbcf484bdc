"""CTEs named like the table they read, and WITH before a UNION: answered as SQL reads them.

``WITH adult AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM adult`` counts the
people over 30 on PostgreSQL, DuckDB and Spark: a CTE does not see itself, so the ``adult`` in
its body is the table. dpproxy's validator read it as the CTE again and refused the query
("subqueries are nested too deeply", 0A000); the same held for a CTE named like one its
earlier CTEs read, and a relation released first (a grouped CTE named like its table) was
refused for reading the private table around it. Worse, a WITH before a UNION was dropped
from the branches: ``WITH adult AS (… WHERE age > 30) SELECT COUNT(*) FROM adult UNION ALL
…`` counted everybody (a wrong answer, silently). Now (``sql/ctes.unshadow_ctes``,
``union._branches``) each is answered exactly as the query written without the shadowing, on
DuckDB and PostgreSQL, with the noise off; a WITH inside a UNION that redefines a CTE of the
WITH around it is refused (0A000) rather than guessed."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest
from sqlglot import exp, parse_one

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.demo import demo_database_path, demo_schema_path, load_demo_postgres
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.sql.ctes import cte_named, unshadow_ctes
from dpproxy.values import Cost
from tests import pg
from tests.noise import NoNoise

# (the query with a CTE named like a relation it hides, the same query written without)
SAME = {
    "own_table": (
        "WITH adult AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM adult",
        "SELECT COUNT(*) FROM adult WHERE age > 30",
    ),
    "earlier_cte_reads_it": (
        "WITH a AS (SELECT * FROM adult), adult AS (SELECT * FROM a WHERE age > 30) "
        "SELECT sex, AVG(adult.hours_per_week) FROM adult GROUP BY sex",
        "SELECT sex, AVG(hours_per_week) FROM adult WHERE age > 30 GROUP BY sex",
    ),
    "quoted_and_aliased": (
        'WITH "adult" AS (SELECT * FROM "adult" WHERE age > 30) '
        'SELECT COUNT(*) FROM "adult" AS x WHERE x.age < 50',
        "SELECT COUNT(*) FROM adult WHERE age > 30 AND age < 50",
    ),
    "nested_with": (
        "SELECT COUNT(*) FROM (WITH adult AS (SELECT * FROM adult WHERE age > 30) "
        "SELECT * FROM adult) t",
        "SELECT COUNT(*) FROM adult WHERE age > 30",
    ),
    "scalar_subquery": (
        "WITH adult AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM adult "
        "WHERE hours_per_week > (SELECT AVG(hours_per_week) FROM adult)",
        "WITH o AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM o "
        "WHERE hours_per_week > (SELECT AVG(hours_per_week) FROM o)",
    ),
    "released_relation": (
        "WITH adult AS (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) "
        "SELECT AVG(n) FROM adult",
        "SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) t",
    ),
    "union_shadowing": (
        "WITH adult AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM adult "
        "UNION ALL SELECT COUNT(*) FROM adult WHERE sex = 'Male'",
        "SELECT COUNT(*) FROM adult WHERE age > 30 UNION ALL "
        "SELECT COUNT(*) FROM adult WHERE age > 30 AND sex = 'Male'",
    ),
    "union_with": (
        "WITH o AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM o "
        "UNION ALL SELECT COUNT(*) FROM adult",
        "SELECT COUNT(*) FROM adult WHERE age > 30 UNION ALL SELECT COUNT(*) FROM adult",
    ),
    "union_nested_with": (
        "WITH o AS (SELECT * FROM adult WHERE age > 30) "
        "(WITH p AS (SELECT * FROM o WHERE age < 50) SELECT COUNT(*) FROM p) "
        "UNION ALL SELECT COUNT(*) FROM o",
        "SELECT COUNT(*) FROM adult WHERE age > 30 AND age < 50 UNION ALL "
        "SELECT COUNT(*) FROM adult WHERE age > 30",
    ),
}
HUGE = Cost(Fraction(10**6), Fraction(1, 2))


def _engine(backend: Any) -> Engine:
    catalog = load_catalog(demo_schema_path())
    accountant = MemoryAccountant(HUGE, cache="off")
    return Engine(catalog, backend, accountant=accountant, noise=NoNoise())


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    if request.param == "duckdb":
        made = _engine(DuckDBBackend(demo_database_path()))
        yield made
        made.close()
        return
    server = request.getfixturevalue("pg_server")
    with pg.temporary_database(server.admin_dsn) as dsn:
        load_demo_postgres(dsn)
        made = _engine(PostgresBackend(dsn))
        yield made
        made.close()


def answer(engine: Engine, sql: str) -> Any:
    try:
        return engine.run(sql, analyst="ana").released.rows
    except DPProxyError as e:
        return (e.sqlstate, e.message)


@pytest.mark.parametrize("name", SAME)
def test_a_shadowing_cte_is_answered_as_sql_reads_it(engine: Engine, name: str) -> None:
    shadowing, plain = SAME[name]
    expected = answer(engine, plain)
    assert isinstance(expected, tuple) and expected and isinstance(expected[0], tuple), expected
    assert answer(engine, shadowing) == expected


def test_a_with_inside_a_union_redefining_an_outer_cte_is_refused(engine: Engine) -> None:
    sql = (
        "WITH o AS (SELECT * FROM adult) (WITH o AS (SELECT * FROM adult WHERE age > 30) "
        "SELECT COUNT(*) FROM o) UNION ALL SELECT COUNT(*) FROM o"
    )
    before = engine.remaining("ana")
    state, message = answer(engine, sql)
    assert state == "0A000" and message.startswith("a WITH inside a UNION that defines a CTE")
    assert engine.remaining("ana") == before


def test_names_resolve_by_sql_scoping() -> None:
    tree = parse_one(
        "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) "
        "SELECT * FROM b JOIN (WITH b AS (SELECT 1) SELECT * FROM b) s ON TRUE"
    )
    refs = [(t.name, cte_named(t)) for t in tree.find_all(exp.Table)]
    by_name = [(name, cte.alias_or_name if cte else None) for name, cte in refs]
    # a's body: the table b (b is defined after a); b's body: the CTE a; the main query's b:
    # the CTE b; the nested query's b: its own CTE b
    assert sorted(by_name, key=str) == sorted(
        [("b", None), ("a", "a"), ("b", "b"), ("b", "b")], key=str
    )
    renamed = unshadow_ctes(tree, ["b"]).sql()
    assert renamed.startswith("WITH a AS (SELECT * FROM b), b_1 AS (SELECT * FROM a)")
