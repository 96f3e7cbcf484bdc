"""Attack: reach private or undeclared data through the exact, free path for public tables.

A query over public tables only is answered exactly and charged nothing
(``dpproxy/planning/public.py``), so it is the most tempting way in: a private table hidden in
a subquery, a CTE name used outside its WITH so that it names a real table, a table of the
database the schema does not declare, an undeclared column of a public table, a system
column, a file reader or catalog function. The database here is TPC-H with a table ``secret``
and a column ``nation.n_secret`` the schema does not declare. Each attempt must be refused, or
go to the DP path (which charges and noises); no statement that reaches the database may name
``secret``, ``n_secret`` or a private table, unless the DP path planned it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends import CancelToken
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.planning.public import PublicPlan
from dpproxy.release.noise import ExactResult
from dpproxy.values import Cost

BUDGET = Cost(Fraction(10), Fraction(1, 10**5))
PRIVATE = ("customer", "orders", "lineitem")

ATTEMPTS = [
    "SELECT * FROM secret",
    "SELECT s FROM nation, secret",
    "SELECT n_name FROM nation WHERE n_nationkey IN (SELECT s FROM secret)",
    "SELECT * FROM (WITH secret AS (SELECT n_name FROM nation) SELECT * FROM secret) x, secret",
    "WITH t AS (SELECT 1 AS one FROM region) SELECT * FROM t, (SELECT * FROM secret) s",
    "SELECT n_name FROM nation UNION SELECT CAST(s AS TEXT) FROM secret",
    "SELECT n_secret FROM nation",
    "SELECT nation.n_secret FROM nation",
    "SELECT n_name FROM nation ORDER BY n_secret",
    "SELECT n_name FROM nation n ORDER BY n",
    "SELECT n FROM nation n",
    "SELECT COUNT(*) FROM nation WHERE n_secret > 0",
    "SELECT ctid FROM nation",
    "SELECT rowid FROM nation",
    "SELECT * FROM main.secret",
    "SELECT * FROM information_schema.tables, region",
    "SELECT * FROM duckdb_tables(), region",
    "SELECT * FROM region, read_csv('/etc/passwd')",
    "SELECT * FROM region, read_parquet('s3://bucket/x.parquet')",
    "SELECT * FROM region, query_table('secret')",
    "SELECT current_setting('threads') FROM region",
    "SELECT getenv('HOME') FROM region",
    "SELECT r_name FROM region LIMIT (SELECT COUNT(*) FROM secret)",
    "SELECT * FROM region; SELECT * FROM secret",
    "COPY (SELECT * FROM region) TO '/tmp/out.csv'",
    "CREATE TABLE stolen AS SELECT * FROM region",
    "SELECT * INTO stolen FROM region",
    "SELECT n_name FROM nation WHERE EXISTS (SELECT 1 FROM customer WHERE c_nationkey = 1)",
    "WITH customer AS (SELECT * FROM nation) SELECT COUNT(*) FROM customer",
    "SELECT (SELECT MAX(o_totalprice) FROM orders) AS m FROM region",
]


class Recording(DuckDBBackend):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.executed: list[str] = []

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self.executed.append(sql)
        return super().execute(sql, cancel)


@pytest.fixture(scope="module")
def attacked(tpch_db: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path = tmp_path_factory.mktemp("escape") / "tpch.duckdb"
    shutil.copy(tpch_db.path, path)
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE secret AS SELECT 42 AS s")
    con.execute("ALTER TABLE nation ADD COLUMN n_secret INTEGER DEFAULT 7")
    con.close()
    engine = Engine(tpch_db.catalog(), Recording(path), accountant=MemoryAccountant(BUDGET))
    yield engine
    engine.close()


@pytest.mark.parametrize("sql", ATTEMPTS)
def test_no_escape_through_the_public_path(sql: str, attacked: Engine) -> None:
    backend = attacked.backend
    assert isinstance(backend, Recording)
    backend.executed.clear()
    try:
        public = attacked.public_plan(sql)
    except DPProxyError:
        public = None  # refused by the public path: fine
    else:
        if public is not None:  # accepted: it may read public tables and declared columns only
            assert _clean(public.sql), public.sql
    try:
        answer = attacked.run(sql, analyst="mallory")
    except DPProxyError:
        pass
    else:
        # answered: exactly (public path), or with noise and a charge (DP path)
        assert isinstance(answer.plan, PublicPlan) or answer.cost != Cost.zero()
    for statement in backend.executed:
        if isinstance(public, PublicPlan) or attacked.remaining("mallory") == BUDGET:
            assert _clean(statement), statement


def test_star_expands_to_the_declared_columns(attacked: Engine) -> None:
    answer = attacked.run("SELECT * FROM nation", analyst="ana")
    assert [c.name for c in answer.released.columns] == [
        "n_nationkey",
        "n_name",
        "n_regionkey",
        "n_comment",
    ]
    assert answer.cost == Cost.zero()


def _clean(statement: str) -> bool:
    low = statement.lower()
    return "secret" not in low and not any(f'"{t}"' in low or f" {t} " in low for t in PRIVATE)
