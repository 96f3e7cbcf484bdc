"""``sql/qualify.py``: every catalog table named with its schema on PostgreSQL, CTE names
left alone, DuckDB's SQL unchanged (the end-to-end tests: tests/integration/
test_pg_search_path.py)."""

from __future__ import annotations

import sqlglot

from dpproxy.catalog.load import parse_catalog
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite.pipeline import rewrite, truncation_sql
from dpproxy.sql.parse import parse
from dpproxy.sql.qualify import qualify_tables
from dpproxy.sql.validate import validate

SCHEMAS = {"w": "My Schema", "v": 'we"ird'}


def _q(sql: str) -> str:
    return qualify_tables(sqlglot.parse_one(sql, read="postgres"), SCHEMAS).sql("postgres")


def test_tables_get_their_schema_quoted() -> None:
    assert _q("SELECT a FROM w JOIN v ON w.k = v.k") == (
        'SELECT a FROM "My Schema".w JOIN "we""ird".v ON w.k = v.k'
    )
    assert _q("SELECT a FROM public.w AS x") == 'SELECT a FROM "My Schema".w AS x'
    assert _q("SELECT a FROM other") == "SELECT a FROM other"  # not a catalog table


def test_cte_names_are_left_alone() -> None:
    assert _q("WITH w AS (SELECT 1 AS a) SELECT a FROM w") == (
        "WITH w AS (SELECT 1 AS a) SELECT a FROM w"
    )
    # inside its own (not recursive) body, and before it, a CTE's name is the table's
    assert _q("WITH w AS (SELECT a FROM w) SELECT a FROM w") == (
        'WITH w AS (SELECT a FROM "My Schema".w) SELECT a FROM w'
    )
    assert _q("WITH x AS (SELECT a FROM w), w AS (SELECT a FROM x) SELECT a FROM w") == (
        'WITH x AS (SELECT a FROM "My Schema".w), w AS (SELECT a FROM x) SELECT a FROM w'
    )
    # a subquery's own WITH hides the name inside it only
    assert _q("SELECT a FROM w, (WITH w AS (SELECT 1 AS a) SELECT a FROM w) AS s") == (
        'SELECT a FROM "My Schema".w, (WITH w AS (SELECT 1 AS a) SELECT a FROM w) AS s'
    )


SCHEMA = """
version: 1
dataset: q
privacy: {epsilon: 1, delta: "1e-6"}
tables:
  w:
    privacy_unit: uid
    columns:
      uid: {type: integer}
      a: {type: float, lower: 0, upper: 100}
"""


def test_the_rewrite_qualifies_for_postgres_only() -> None:
    catalog = parse_catalog(SCHEMA)
    sql = "SELECT SUM(a) FROM w WHERE uid IN (SELECT uid FROM w WHERE a > 1)"
    plan = plan_query(validate(parse(sql), catalog, sql), catalog.policy)
    duck = rewrite(plan, 7, "duckdb")
    assert rewrite(plan, 7, "duckdb", schemas=SCHEMAS) == duck
    assert '"My Schema"' not in duck
    pg = rewrite(plan, 7, "postgres", schemas=SCHEMAS)
    assert pg.replace('"My Schema".w', "w") == rewrite(plan, 7, "postgres")
    assert " w " not in pg.replace('"My Schema".w', "")  # every reference qualified
    if plan.truncation is not None:
        assert '"My Schema".w' in truncation_sql(plan, "postgres", SCHEMAS)
