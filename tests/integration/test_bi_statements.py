"""The exact statements of BI tools and drivers, replayed over the wire against ``dpproxy
serve`` and PostgreSQL 15, whose answers must agree (issue "BI tools work unchanged").

* Apache Superset's SQL Lab: ``SELECT pg_backend_pid()`` before every query (the pid of
  BackendKeyData) and ``SELECT pg_cancel_backend(pid)`` from another connection;
* pgAdmin 4's first statement after login (four statements in one simple Query);
* psqlODBC in cursor mode (``UseDeclareFetch=1``): cursors declared, rolled back unread and
  declared again under the same name, WITH HOLD across COMMIT, ``pg_cursors``, and
  ``DEALLOCATE "name"`` of its ``Protocol=7.4`` statements;
* asyncpg's array parameters (``$1::oid[]``, ``int[]``, binary) and ``set_type_codec``.

Each statement is sent as its own simple Query (libpq ``PQsendQuery``), and every result is
compared: the status or SQLSTATE, the column names and the rows (where a DP query released
them, only how many).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq

from dpproxy.demo import load_demo_postgres
from tests import pg
from tests.commands import dpproxy_command
from tests.integration.test_server import PASSWORD, Running, start_server, stop_server

pytestmark = pytest.mark.postgres

DP_QUERY = "SELECT sex, COUNT(*) FROM adult GROUP BY sex"  # two groups, thousands of rows each
OTHER_USER = "bob"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("serve-bi")
    run = start_server(tmp)
    try:
        subprocess.run(  # the users file is read at every login
            [*dpproxy_command(), "user", "--users", str(run.users), "add", OTHER_USER,
             "--password-stdin"],
            input=PASSWORD + "\n",
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        yield run
    finally:
        stop_server(run)


@pytest.fixture(scope="module")
def real_dsn(pg_server: pg.Server) -> Iterator[str]:
    """A PostgreSQL 15 database holding the Adult demo table."""
    with pg.temporary_database(pg_server.admin_dsn) as dsn:
        load_demo_postgres(dsn)
        yield dsn


def dsns(server: Running, real_dsn: str) -> dict[str, str]:
    return {"dpproxy": server.dsn(), "postgres": real_dsn}


def simple(conn: psycopg.Connection[Any], sql: str, *, dp: bool = False) -> list[tuple[Any, ...]]:
    """Every result of one simple Query: (status or SQLSTATE, column names, rows); for a DP
    answer (``dp``) the number of rows instead of the rows."""
    pgconn = conn.pgconn
    pgconn.send_query(sql.encode())
    out: list[tuple[Any, ...]] = []
    while (res := pgconn.get_result()) is not None:
        if res.status == pq.ExecStatus.FATAL_ERROR:
            state = res.error_field(pq.DiagnosticField.SQLSTATE)
            out.append((state.decode() if state else "?", (), ()))
            continue
        names = tuple(res.fname(i).decode() for i in range(res.nfields))
        rows = tuple(
            tuple(
                None if res.get_value(r, i) is None else res.get_value(r, i).decode()
                for i in range(res.nfields)
            )
            for r in range(res.ntuples)
        )
        status = (res.command_status or b"").decode()
        out.append((status, names, len(rows) if dp else rows))
    return out


def replay(dsn: str, script: list[tuple[str, bool]]) -> list[list[tuple[Any, ...]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [simple(conn, sql, dp=dp) for sql, dp in script]


# ---------------------------------------------------------------------- Apache Superset


def test_superset_pid_and_cancel(server: Running, real_dsn: str) -> None:
    answers = {}
    for kind, dsn in dsns(server, real_dsn).items():
        with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
            [(status, names, rows)] = simple(a, "SELECT pg_backend_pid()")
            assert rows == ((str(a.info.backend_pid),),), kind  # BackendKeyData's pid
            answers[kind] = [
                (status, names),
                simple(b, f"SELECT pg_cancel_backend({a.info.backend_pid})"),
                simple(b, "SELECT pg_cancel_backend(2147480000)"),  # no such backend
                simple(a, "SELECT 1"),  # an idle session is not disturbed
                simple(a, "SELECT pg_cancel_backend(pg_backend_pid())"),  # 57014: itself
                simple(a, "SELECT 2"),
            ]
    assert answers["dpproxy"] == answers["postgres"]
    assert answers["dpproxy"][1] == [("SELECT 1", ("pg_cancel_backend",), (("t",),))]
    assert answers["dpproxy"][2] == [("SELECT 1", ("pg_cancel_backend",), (("f",),))]
    assert answers["dpproxy"][4] == [("57014", (), ())]


LONG_CATALOG_QUERY = (  # minutes on either server: time enough to be stopped
    "SELECT count(*) FROM pg_catalog.pg_attribute a, pg_catalog.pg_attribute b, "
    "pg_catalog.pg_attribute c, pg_catalog.pg_attribute d"
)


def test_superset_stops_a_running_query(server: Running, real_dsn: str) -> None:
    """SQL Lab's "stop": pg_cancel_backend(pid) from a second connection cancels the query
    running on the first (57014), which then works again."""
    answers = {}
    for kind, dsn in dsns(server, real_dsn).items():
        with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
            a.pgconn.send_query(LONG_CATALOG_QUERY.encode())
            time.sleep(0.5)  # the query is running
            cancel = f"SELECT pg_cancel_backend({a.info.backend_pid})"
            stopped = simple(b, cancel)
            deadline, again = time.monotonic() + 60, time.monotonic() + 2
            results = []
            while time.monotonic() < deadline:
                a.pgconn.consume_input()
                if not a.pgconn.is_busy():
                    break
                if time.monotonic() > again:  # a loaded machine: it had not started yet
                    simple(b, cancel)
                    again = time.monotonic() + 2
                time.sleep(0.05)
            assert not a.pgconn.is_busy(), f"{kind}: the query was not stopped"
            while (res := a.pgconn.get_result()) is not None:
                state = res.error_field(pq.DiagnosticField.SQLSTATE)
                results.append(state.decode() if state else res.status.name)
            answers[kind] = [stopped, results, simple(a, "SELECT 1")]
    assert answers["dpproxy"] == answers["postgres"]
    assert answers["dpproxy"][1] == ["57014"]


def test_cancel_backend_of_another_user_is_refused(server: Running) -> None:
    with (
        psycopg.connect(server.dsn(), autocommit=True) as ana,
        psycopg.connect(server.dsn(user=OTHER_USER), autocommit=True) as bob,
    ):
        got = simple(bob, f"SELECT pg_cancel_backend({ana.info.backend_pid})")
        assert got == [("42501", (), ())]  # as PostgreSQL 15 without pg_signal_backend
        assert simple(ana, "SELECT 1") == [("SELECT 1", ("?column?",), (("1",),))]


# ---------------------------------------------------------------------------- pgAdmin 4

PGADMIN_LOGIN = (
    "SET DateStyle=ISO; SET client_min_messages=notice; SELECT set_config('bytea_output','hex',"
    "false) FROM pg_show_all_settings() WHERE name = 'bytea_output'; SET client_encoding='utf-8';"
)


def test_pgadmin_login(server: Running, real_dsn: str) -> None:
    script = [(PGADMIN_LOGIN, False), ("SHOW bytea_output", False), ("SHOW client_encoding", False)]
    got = {kind: replay(dsn, script) for kind, dsn in dsns(server, real_dsn).items()}
    assert got["dpproxy"] == got["postgres"]
    assert got["dpproxy"][0][2] == ("SELECT 1", ("set_config",), (("hex",),))


# -------------------------------------------------------------------- psqlODBC's cursors


def test_cursor_declared_again_after_rollback(server: Running, real_dsn: str) -> None:
    """psqlODBC (UseDeclareFetch=1) reuses SQL_CUR names: a cursor rolled back unread is
    gone, so the next DECLARE of that name works (was 42P05 on every later query)."""
    cur = '"SQL_CUR0x1f2e3d"'
    script = [
        ("BEGIN", False),
        (f"DECLARE {cur} CURSOR FOR {DP_QUERY}", False),
        ("ROLLBACK", False),
        ("BEGIN", False),
        (f"DECLARE {cur} CURSOR FOR {DP_QUERY}", False),
        (f"DECLARE {cur} CURSOR FOR {DP_QUERY}", False),  # 42P03 duplicate_cursor
        ("ROLLBACK", False),
        ("BEGIN", False),
        (f"DECLARE {cur} CURSOR FOR {DP_QUERY}", False),
        (f"FETCH 100 IN {cur}", True),
        (f"CLOSE {cur}", False),
        ("COMMIT", False),
        (f"DECLARE c0 CURSOR FOR {DP_QUERY}", False),  # 25P01 outside a transaction block
        ("SELECT count(*) FROM pg_cursors", False),
    ]
    got = {kind: replay(dsn, script) for kind, dsn in dsns(server, real_dsn).items()}
    assert got["dpproxy"] == got["postgres"]
    assert got["dpproxy"][5] == [("42P03", (), ())]
    assert got["dpproxy"][9] == [("FETCH 2", ("sex", "count"), 2)]
    assert got["dpproxy"][12] == [("25P01", (), ())]


def test_cursors_at_transaction_end(server: Running, real_dsn: str) -> None:
    listing = (
        "SELECT name, statement, is_holdable, is_binary FROM pg_catalog.pg_cursors ORDER BY name"
    )
    script = [
        ("BEGIN", False),
        (f"DECLARE plain CURSOR FOR {DP_QUERY}", False),
        (f'DECLARE "Held" CURSOR WITH HOLD FOR {DP_QUERY}', False),
        (f"DECLARE bin BINARY CURSOR FOR {DP_QUERY}", False),
        (listing, False),
        ("COMMIT", False),  # closes plain and bin; "Held" stays
        (listing, False),
        ('FETCH ALL FROM "Held"', True),
        ("FETCH 1 FROM plain", False),  # 34000
        ("CLOSE held", False),  # 34000: unquoted names fold to lower case
        ('CLOSE "Held"', False),
        ("BEGIN", False),
        (f"DECLARE h2 CURSOR WITH HOLD FOR {DP_QUERY}", False),
        ("ROLLBACK", False),  # closes what the transaction declared, held or not
        (listing, False),
        ("FETCH h2", False),  # 34000
    ]
    got = {kind: replay(dsn, script) for kind, dsn in dsns(server, real_dsn).items()}
    assert got["dpproxy"] == got["postgres"]
    assert [row[0] for row in got["dpproxy"][4][0][2]] == ["Held", "bin", "plain"]
    assert [row[0] for row in got["dpproxy"][6][0][2]] == ["Held"]
    assert got["dpproxy"][8] == [("34000", (), ())]


def test_deallocate_reads_an_identifier(server: Running, real_dsn: str) -> None:
    """psqlODBC with Protocol=7.4-0 frees its statements with DEALLOCATE "_PLAN0x...": the
    quotes are not part of the name (else the statement stayed, and 42P05 came later)."""
    answers = {}
    for kind, dsn in dsns(server, real_dsn).items():
        with psycopg.connect(dsn, autocommit=True) as conn:
            got = []
            for _ in range(2):
                res = conn.pgconn.prepare(b"_PLAN0x5a5a", b"SELECT 1")
                got.append(res.status == pq.ExecStatus.COMMAND_OK)
                got.append(simple(conn, 'DEALLOCATE "_PLAN0x5a5a"'))
            got.append(simple(conn, 'DEALLOCATE "_PLAN0x5a5a"'))  # 26000: gone
            conn.pgconn.prepare(b"Mixed", b"SELECT 1")
            got.append(simple(conn, "DEALLOCATE Mixed"))  # 26000: looks up "mixed"
            got.append(simple(conn, 'DEALLOCATE PREPARE "Mixed"'))
            answers[kind] = got
    assert answers["dpproxy"] == answers["postgres"]
    assert answers["dpproxy"][:2] == [True, [("DEALLOCATE", (), ())]]
    assert answers["dpproxy"][4:6] == [[("26000", (), ())], [("26000", (), ())]]


# ------------------------------------------------------------------------------- asyncpg


async def _asyncpg_answers(host: str, port: int, user: str, password: str, db: str) -> list[Any]:
    import asyncpg

    con = await asyncpg.connect(
        host=host, port=port, user=user, password=password, database=db, ssl=False
    )
    try:
        out: list[Any] = []
        rows = await con.fetch(
            "SELECT t.oid::int AS oid, t.typname FROM pg_catalog.pg_type t "
            "WHERE t.oid = ANY($1::oid[]) ORDER BY 1",
            [23, 25, 1043],
        )
        out.append([tuple(r) for r in rows])
        rows = await con.fetch(
            "SELECT t.typname FROM pg_catalog.pg_type t WHERE t.oid::int = ANY($1::int[]) "
            "ORDER BY 1",
            [16, 20, None],
        )
        out.append([tuple(r) for r in rows])
        await con.set_type_codec("json", encoder=str, decoder=str, schema="pg_catalog")
        out.append(await con.fetchval("SELECT '{\"a\": 1}'::json"))
        return out
    finally:
        await con.close()


def test_asyncpg_array_parameters_and_type_codec(server: Running, real_dsn: str) -> None:
    info = psycopg.conninfo.conninfo_to_dict(real_dsn)
    real = asyncio.run(
        _asyncpg_answers(
            str(info.get("host", "127.0.0.1")),
            int(info.get("port", 5432)),
            str(info.get("user", "postgres")),
            str(info.get("password", "")),
            str(info["dbname"]),
        )
    )
    got = asyncio.run(_asyncpg_answers(server.host, server.port, "ana", PASSWORD, "dpproxy"))
    assert got == real
    assert got[0] == [(23, "int4"), (25, "text"), (1043, "varchar")]


# -------------------------------------------------------------------- transaction blocks


def test_commit_of_a_failed_transaction_rolls_back(server: Running, real_dsn: str) -> None:
    """COMMIT (or END) in a transaction block that failed answers ROLLBACK, as PostgreSQL
    does: drivers and BI tools read the tag to learn that nothing was kept."""
    script = [
        ("BEGIN", False),
        ("SELECT COUNT(no_such_column) FROM adult", False),  # 42703: the block fails
        ("SELECT COUNT(*) FROM adult", False),  # 25P02 until its end
        ("COMMIT", False),
        ("BEGIN", False),
        ("SELECT COUNT(no_such_column) FROM adult", False),
        ("END", False),
        ("BEGIN", False),
        ("COMMIT", False),
    ]
    got = {kind: replay(dsn, script) for kind, dsn in dsns(server, real_dsn).items()}
    assert got["dpproxy"] == got["postgres"]
    assert got["dpproxy"][3] == [("ROLLBACK", (), ())]
    assert got["dpproxy"][6] == [("ROLLBACK", (), ())]
    assert got["dpproxy"][8] == [("COMMIT", (), ())]


def test_set_and_reset_report_the_setting(server: Running, real_dsn: str) -> None:
    """SET and RESET of a reported setting send ParameterStatus, as PostgreSQL does: drivers
    (psycopg's ``info.parameter_status``, pgJDBC, psqlODBC) and BI tools track them."""
    steps = [
        ("SET application_name = 'dpx-report'", "application_name"),
        ("SET TIME ZONE 'Europe/Paris'", "TimeZone"),
        ("SET DateStyle = 'ISO, DMY'", "DateStyle"),
        ("RESET application_name", "application_name"),
    ]
    got: dict[str, list[str | None]] = {}
    for kind, dsn in dsns(server, real_dsn).items():
        with psycopg.connect(dsn, autocommit=True) as conn:
            seen = []
            for sql, name in steps:
                conn.execute(sql)
                seen.append(conn.info.parameter_status(name))
            got[kind] = seen
    assert got["dpproxy"] == got["postgres"]
    assert got["dpproxy"][:3] == ["dpx-report", "Europe/Paris", "ISO, DMY"]
