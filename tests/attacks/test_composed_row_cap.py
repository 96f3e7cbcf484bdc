"""Named attack: the row cap of a public outer query around released parts, hit after the charge.

An answer over public tables and released rows is capped (``public_max_rows``; an answer with
more rows is refused with 53400, never cut short). Around an aggregate relation, how many rows
the outer query returns depends on the released rows — which keys' noisy counts survive — so
the cap was checked only once the parts were released and charged: ``SELECT cat, n FROM
(SELECT cat, COUNT(*) AS n FROM t GROUP BY cat) d`` with ``public_max_rows: 1`` was charged
and refused (XX000) on a database where both keys survive, answered on its neighbour where
one does: the analyst paid for nothing, and the outcome depended on the data through the
noise only, but an unreleased answer was charged. Now ``composed.check_outer_rows`` bounds the
rows before the budget is reserved (``planning/rowbound.py``: every key kept, each public
table with its rows, counted first) and refuses (53400, nothing charged) when the bound is over
the cap, on every database alike; a LIMIT within the cap, or a cap above the bound, answers.
On DuckDB and PostgreSQL, each on a database and its neighbour without unit 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from tests.attacks.test_composed_charge_for_nothing import DDL, NEIGHBOUR, PUBLIC, ROWS, SCHEMA
from tests.noise import NoNoise

D = "(SELECT cat, COUNT(*) AS n FROM t GROUP BY cat) d"  # 2 keys: a, b
KEYED = "(SELECT SUM(x) FROM t WHERE t.k = p.k)"  # keys: p's 3 values of k
# (query, the cap, the outcome on every database: None answered, or the SQLSTATE)
CASES = (
    (f"SELECT cat, n FROM {D}", 1, "53400"),  # both keys may survive
    (f"SELECT cat, n FROM {D}", 2, None),
    (f"SELECT cat, n FROM {D} ORDER BY cat LIMIT 1", 1, None),
    (f"SELECT d.cat, p.name FROM {D} CROSS JOIN p", 5, "53400"),  # up to 2 × 3 rows
    (f"SELECT d.cat, p.name FROM {D} CROSS JOIN p", 6, None),
    (f"SELECT d.cat, p.name FROM {D} CROSS JOIN p ORDER BY 1, 2 LIMIT 5", 5, None),
    (f"SELECT COUNT(*) FROM {D} CROSS JOIN p", 1, None),  # one row whatever survives
    (f"WITH e AS (SELECT cat FROM {D}) SELECT e.cat FROM e, e AS f", 3, "53400"),
    (f"SELECT name FROM p WHERE y > {KEYED}", 3, None),  # keyed: p's rows at most
)


def _duckdb(path: Path, rows: tuple[tuple[Any, ...], ...], cap: int) -> Engine:
    i, f, s = DDL["duckdb"]
    if not path.exists():
        con = duckdb.connect(str(path))
        con.execute(f"CREATE TABLE t(uid {i}, k {i}, x {f}, cat {s})")
        con.execute(f"CREATE TABLE p(k {i}, name {s}, y {f})")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [list(r) for r in rows])
        con.executemany("INSERT INTO p VALUES (?, ?, ?)", [list(r) for r in PUBLIC])
        con.close()
    backend = DuckDBBackend(path)
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise(), public_max_rows=cap)


def _postgres(dsn: str, schema: str, rows: tuple[tuple[Any, ...], ...], cap: int) -> Engine:
    import psycopg
    from psycopg.conninfo import make_conninfo

    i, f, s = DDL["postgres"]
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        con.execute(f"CREATE SCHEMA {schema}")
        con.execute(f"CREATE TABLE {schema}.t(uid {i}, k {i}, x {f}, cat {s})")
        con.execute(f"CREATE TABLE {schema}.p(k {i}, name {s}, y {f})")
        with con.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.t VALUES (%s, %s, %s, %s)", rows)
            cur.executemany(f"INSERT INTO {schema}.p VALUES (%s, %s, %s)", PUBLIC)
    backend = PostgresBackend(make_conninfo(dsn, options=f"-c search_path={schema}"))
    return Engine(parse_catalog(SCHEMA), backend, noise=NoNoise(), public_max_rows=cap)


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def databases(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A maker of the engine over the database and over its neighbour, at a given cap."""
    if request.param == "duckdb":
        tmp = tmp_path_factory.mktemp("rowcap")
        return lambda cap: (
            _duckdb(tmp / "d.duckdb", ROWS, cap),
            _duckdb(tmp / "nb.duckdb", NEIGHBOUR, cap),
        )
    dsn = request.getfixturevalue("pg_session_dsn")
    return lambda cap: (
        _postgres(dsn, "rcd", ROWS, cap),
        _postgres(dsn, "rcnb", NEIGHBOUR, cap),
    )


def outcome(engine: Engine, sql: str) -> tuple[str | None, bool, int]:
    """The SQLSTATE of the refusal (None: answered), whether it charged, the rows."""
    before = engine.remaining("mallory")
    rows = -1
    try:
        rows = len(engine.run(sql, analyst="mallory").released.rows)
        state = None
    except DPProxyError as e:
        state = e.sqlstate
    return state, engine.remaining("mallory") != before, rows


@pytest.mark.parametrize(("sql", "cap", "expected"), CASES)
def test_the_row_cap_is_proved_before_the_charge(
    databases: Any, sql: str, cap: int, expected: str | None
) -> None:
    engines: tuple[Engine, Engine] = databases(cap)
    try:
        for engine in engines:
            state, charged, rows = outcome(engine, sql)
            assert (state, charged) == (expected, expected is None), (engine.backend.dialect, sql)
            assert expected is not None or 0 <= rows <= cap
    finally:
        for engine in engines:
            engine.close()


def test_the_refusal_names_the_bound_and_the_fix(databases: Any) -> None:
    engine, neighbour = databases(1)
    try:
        with pytest.raises(DPProxyError) as refused:
            engine.run(f"SELECT cat, n FROM {D}", analyst="mallory")
        assert "up to 2 rows" in refused.value.message
        assert refused.value.hint is not None and "LIMIT 1" in refused.value.hint
    finally:
        engine.close()
        neighbour.close()
