"""Window functions over released rows (``release/windows.py``) against PostgreSQL 15 and
DuckDB computing the same windows over the same rows.

Random small tables of "released rows" (a partition column with NULLs, values with ties and
NULLs, a unique id) are stored in both databases; every window of :data:`WINDOWS` is computed
by dpproxy on the rows as environments and by each database as SQL, and must agree row by row
(numbers to 1e-12 relative). PostgreSQL is the reference semantics (NULL order, peers, default
frames); the DuckDB query spells NULLS FIRST/LAST out, since its default differs.
"""

from __future__ import annotations

import math
import random
from decimal import Decimal
from typing import Any

import duckdb
import psycopg
import pytest
import sqlglot
from sqlglot import exp

from dpproxy.release.evaluation import evaluate
from dpproxy.release.windows import compute_windows
from dpproxy.sql.types import SqlType
from dpproxy.sql.windows import WindowItem, build_window

WINDOWS = [
    "ROW_NUMBER() OVER (ORDER BY i)",
    "ROW_NUMBER() OVER (PARTITION BY p ORDER BY i DESC)",
    "RANK() OVER (ORDER BY v)",
    "RANK() OVER (PARTITION BY p ORDER BY v DESC)",
    "RANK() OVER (ORDER BY v NULLS FIRST)",
    "DENSE_RANK() OVER (ORDER BY v DESC NULLS LAST)",
    "DENSE_RANK() OVER (PARTITION BY p ORDER BY v, w DESC)",
    "PERCENT_RANK() OVER (ORDER BY v)",
    "PERCENT_RANK() OVER (PARTITION BY p ORDER BY w)",
    "CUME_DIST() OVER (ORDER BY v DESC)",
    "CUME_DIST() OVER (PARTITION BY p ORDER BY v)",
    "SUM(v) OVER ()",
    "SUM(v) OVER (PARTITION BY p)",
    "SUM(v) OVER (ORDER BY w)",
    "SUM(v) OVER (PARTITION BY p ORDER BY w DESC)",
    "AVG(v) OVER (PARTITION BY p)",
    "AVG(w) OVER (ORDER BY v)",
    "COUNT(*) OVER (PARTITION BY p)",
    "COUNT(v) OVER (ORDER BY w)",
    "COUNT(*) OVER (ORDER BY v)",
    "MIN(v) OVER (PARTITION BY p)",
    "MAX(w) OVER (ORDER BY v DESC)",
    "MIN(v) OVER (PARTITION BY p ORDER BY i)",
    "LAG(v) OVER (ORDER BY i)",
    "LAG(v, 2, -1) OVER (PARTITION BY p ORDER BY i)",
    "LEAD(w) OVER (ORDER BY i DESC)",
    "LEAD(v, 3) OVER (PARTITION BY p ORDER BY i)",
    "SUM(v * 2 + w) OVER (PARTITION BY p)",
    # NTILE numbers rows, not peer groups: ordered by the unique i so the order is the same
    "NTILE(3) OVER (ORDER BY i)",
    "NTILE(4) OVER (PARTITION BY p ORDER BY i DESC)",
    "NTILE(20) OVER (ORDER BY i)",
    "NTILE(1) OVER (PARTITION BY p ORDER BY v, i)",
    "NTILE(5) OVER (PARTITION BY p ORDER BY w DESC NULLS LAST, i)",
]


def _rows(seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    n = rnd.randint(1, 14)
    return [
        {
            "i": i,
            "p": rnd.choice(["a", "b", None]),
            "v": rnd.choice([None, 0, 1, 2, 2, 3, -4]),
            "w": rnd.choice([None, 0.5, 1.5, 1.5, -2.25]),
        }
        for i in range(n)
    ]


def _window(text: str) -> WindowItem:
    node = sqlglot.parse_one(f"SELECT {text} FROM t", read="postgres").find(exp.Window)
    assert node is not None
    windows: list[WindowItem] = []
    build_window(node, lambda e: e.copy(), lambda _e: SqlType.NUMERIC, windows)
    return windows[0]


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)


def _duckdb_sql(text: str) -> str:
    """The window in DuckDB, with PostgreSQL's NULL order written out."""
    tree = sqlglot.parse_one(f"SELECT i, {text} FROM t ORDER BY i", read="postgres")
    for ordered in tree.find_all(exp.Ordered):
        desc = bool(ordered.args.get("desc"))
        first = ordered.args.get("nulls_first")
        ordered.set("nulls_first", desc if first is None else bool(first))
    return tree.sql("duckdb")


@pytest.fixture(scope="module")
def pg(pg_session_dsn: str) -> Any:
    con = psycopg.connect(pg_session_dsn, autocommit=True)
    yield con
    con.close()


@pytest.mark.parametrize("seed", range(12))
def test_windows_agree_with_postgres_and_duckdb(seed: int, pg: Any) -> None:
    rows = _rows(seed)
    duck = duckdb.connect()
    duck.execute("CREATE TABLE t (i INTEGER, p VARCHAR, v INTEGER, w DOUBLE)")
    duck.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [tuple(r.values()) for r in rows])
    table = f"win_{seed}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    pg.execute(f"CREATE TABLE {table} (i INTEGER, p TEXT, v INTEGER, w DOUBLE PRECISION)")
    with pg.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} VALUES (%s, %s, %s, %s)", [tuple(r.values()) for r in rows]
        )
    for text in WINDOWS:
        envs = [dict(r) for r in rows]
        compute_windows([_window(text)], envs, evaluate)
        ours = [env["__win_0"] for env in envs]
        want_pg = [r[1] for r in pg.execute(f"SELECT i, {text} FROM {table} ORDER BY i").fetchall()]
        want_duck = [r[1] for r in duck.execute(_duckdb_sql(text)).fetchall()]
        for got, a, b in zip(ours, want_pg, want_duck, strict=True):
            a = float(a) if isinstance(a, Decimal) else a
            assert _same(got, a), (text, rows, ours, want_pg)
            assert _same(got, b), (text, rows, ours, want_duck)
    duck.close()
