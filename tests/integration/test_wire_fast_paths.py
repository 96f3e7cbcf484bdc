"""The fast paths of ``dpproxy serve`` (issue 21) give what the slow ones give, over real
sockets and psycopg: a catalog statement answered again from the session's cached answer on
the extended protocol (``Session.execute``) and described from it (``Session.describe``),
the per-connection idle timer (``protocol.MessageReader``), and the constant messages; never
past a failed transaction block (25P02), and a refused DP statement charges nothing."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.test_server import Running, start_server, stop_server

CATALOG = (
    "SELECT 1",
    "SELECT version()",
    "SELECT typname, typlen FROM pg_type WHERE oid = 23",
    "SELECT current_database(), current_user",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    run = start_server(tmp_path_factory.mktemp("fast"))
    yield run
    stop_server(run)


def _answer(con: psycopg.Connection, sql: str, **kw: Any) -> tuple[list[Any], list[Any]]:
    cur = con.execute(sql, **kw)
    assert cur.description is not None
    return [(d.name, d.type_code) for d in cur.description], cur.fetchall()


@pytest.mark.parametrize("sql", CATALOG)
def test_repeated_catalog_statements_answer_the_same_on_every_protocol(
    server: Running, sql: str
) -> None:
    """First run computed (a fresh session caches nothing), later runs from the cache: the
    same columns and rows on the simple protocol, the extended one (text and binary results)
    and a named prepared statement (Describe of the statement, then Bind/Execute)."""
    with psycopg.connect(server.dsn(), autocommit=True, prepare_threshold=None) as con:
        first = _answer(con, sql, binary=True)
        for _ in range(3):
            assert _answer(con, sql, binary=True) == first
            assert _answer(con, sql, prepare=False) == first
            assert _answer(con, sql, prepare=True) == first
    with psycopg.connect(server.dsn(), autocommit=True, prepare_threshold=None) as con:
        assert _answer(con, sql, prepare=True) == first  # described before it is executed
        assert _answer(con, sql, prepare=False) == first


def test_a_failed_block_refuses_a_cached_catalog_statement(server: Running) -> None:
    with psycopg.connect(server.dsn(), autocommit=True, prepare_threshold=None) as con:
        for kw in ({"binary": True}, {"prepare": True}, {"prepare": False}):
            assert _answer(con, "SELECT 1", **kw)[1] == [(1,)]  # cached now
            con.execute("BEGIN")
            with pytest.raises(psycopg.errors.UndefinedColumn):
                con.execute("SELECT age FROM adult WHERE nope = 1")
            with pytest.raises(psycopg.errors.InFailedSqlTransaction):  # 25P02, not the cache
                con.execute("SELECT 1", **kw)
            con.execute("ROLLBACK")
            assert _answer(con, "SELECT 1", **kw)[1] == [(1,)]


def test_a_refused_dp_statement_charges_nothing_on_either_protocol(server: Running) -> None:
    sql = "SELECT age FROM adult WHERE age > 30"  # a row read: refused before any data
    with psycopg.connect(server.dsn(), autocommit=True, prepare_threshold=None) as con:
        before = con.execute("SHOW dpproxy.budget").fetchone()
        for kw in ({"prepare": False}, {"binary": True}, {"prepare": True}):
            for _ in range(2):  # the second time its route is known by its text
                with pytest.raises(psycopg.Error) as err:
                    con.execute(sql, **kw)
                assert err.value.sqlstate is not None and err.value.sqlstate.startswith("42")
        assert con.execute("SHOW dpproxy.budget").fetchone() == before
        n = con.execute("SELECT COUNT(*) FROM adult").fetchone()
        assert n is not None and n[0] > 30_000
        assert con.execute("SHOW dpproxy.budget").fetchone() != before  # a release charges


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _login(run: Running, user: str = "ana") -> socket.socket:
    """A raw connection through the startup, with trust authentication."""
    sock = socket.create_connection((run.host, run.port), timeout=30)
    params = b"user\0" + user.encode() + b"\0database\0dpproxy\0\0"
    sock.sendall(struct.pack("!ii", len(params) + 8, 196608) + params)
    _read_until(sock, b"Z")
    return sock


def _read_until(sock: socket.socket, last: bytes) -> list[tuple[bytes, bytes]]:
    """Messages up to and including the first one of type ``last``."""
    out: list[tuple[bytes, bytes]] = []
    buf = b""
    while True:
        while len(buf) >= 5:
            kind, length = buf[:1], struct.unpack("!i", buf[1:5])[0]
            if len(buf) < length + 1:
                break
            out.append((kind, buf[5 : length + 1]))
            buf = buf[length + 1 :]
            if kind == last:
                assert not buf
                return out
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {out!r}"
        buf += chunk


def test_constant_messages_and_ready_for_query_on_the_wire(tmp_path: Path) -> None:
    """ParseComplete, BindComplete, NoData, CloseComplete, EmptyQueryResponse and the three
    ReadyForQuery states, byte for byte, from a raw pipeline."""
    run = start_server(tmp_path, "--trust", users=False)
    try:
        sock = _login(run)
        pipeline = b"".join(
            [
                _message(b"P", b"s1\0BEGIN\0\0\0"),
                _message(b"B", b"\0s1\0\0\0\0\0\0\0"),
                _message(b"D", b"P\0"),
                _message(b"E", b"\0\0\0\0\0"),
                _message(b"C", b"Ss1\0"),
                _message(b"S", b""),
            ]
        )
        sock.sendall(pipeline)
        got = _read_until(sock, b"Z")
        assert [k for k, _ in got] == [b"1", b"2", b"n", b"C", b"3", b"Z"]
        assert all(body == b"" for k, body in got if k in (b"1", b"2", b"n", b"3"))
        assert got[-1] == (b"Z", b"T")  # in the block BEGIN opened
        sock.sendall(_message(b"Q", b"SELECT nope FROM nowhere\0"))
        assert _read_until(sock, b"Z")[-1] == (b"Z", b"E")
        sock.sendall(_message(b"Q", b"ROLLBACK\0"))
        assert _read_until(sock, b"Z")[-1] == (b"Z", b"I")
        sock.sendall(_message(b"Q", b"\0"))
        assert _read_until(sock, b"Z") == [(b"I", b""), (b"Z", b"I")]
        sock.sendall(_message(b"X", b""))
        sock.close()
    finally:
        stop_server(run)


def test_the_idle_timer_spares_a_busy_connection(tmp_path: Path) -> None:
    """A connection that sends a statement now and then, each within the idle timeout but
    together far longer, is never cut off (the one timer re-arms itself); one that stops
    sending is (57P05)."""
    run = start_server(tmp_path, "--idle-timeout", "1")
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as con:
            import time

            for _ in range(8):  # 8 x 0.4 s: over three timeouts in all
                assert con.execute("SELECT 1").fetchone() == (1,)
                time.sleep(0.4)
            time.sleep(2.5)
            with pytest.raises(psycopg.OperationalError):
                con.execute("SELECT 1")
    finally:
        err = stop_server(run)
    assert "Traceback" not in err


def _portal_rows(got: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [body for kind, body in got if kind == b"D"]


def test_a_portal_paged_by_execute_counts_the_rows_its_worker_sent(tmp_path: Path) -> None:
    """Execute(3) then Sync on a named portal: the worker writes 3 rows, PortalSuspended and
    ReadyForQuery itself; the next Execute(0) gets the other 7 rows from the released answer
    (no second run, one charge), then CommandComplete with their count."""
    run = start_server(tmp_path, "--trust", users=False)
    try:
        sock = _login(run)
        sql = b"SELECT sex, race, COUNT(*) FROM adult GROUP BY sex, race"
        sock.sendall(_message(b"Q", b"SHOW dpproxy.budget\0"))
        before = _read_until(sock, b"Z")
        sock.sendall(
            b"".join(
                [
                    _message(b"P", b"\0" + sql + b"\0\0\0"),
                    _message(b"B", b"p1\0\0\0\0\0\0\0\0"),
                    _message(b"E", b"p1\0" + struct.pack("!i", 3)),
                    _message(b"S", b""),
                ]
            )
        )
        first = _read_until(sock, b"Z")
        assert [k for k, _ in first if k != b"N"] == [b"1", b"2", b"D", b"D", b"D", b"s", b"Z"]
        sock.sendall(_message(b"E", b"p1\0" + struct.pack("!i", 0)) + _message(b"S", b""))
        rest = _read_until(sock, b"Z")
        assert len(_portal_rows(rest)) == 7
        assert (b"C", b"SELECT 7\0") in rest
        assert len(set(_portal_rows(first) + _portal_rows(rest))) == 10  # 2 sexes x 5 races
        sock.sendall(_message(b"Q", b"SHOW dpproxy.budget\0"))
        after = _read_until(sock, b"Z")
        assert before != after  # charged ...
        sock.sendall(_message(b"E", b"p1\0" + struct.pack("!i", 0)) + _message(b"S", b""))
        again = _read_until(sock, b"Z")  # ... once: the portal is spent, nothing runs again
        assert _portal_rows(again) == [] and (b"C", b"SELECT 0\0") in again
        sock.sendall(_message(b"Q", b"SHOW dpproxy.budget\0"))
        assert _read_until(sock, b"Z") == after
        sock.sendall(_message(b"X", b""))
        sock.close()
    finally:
        err = stop_server(run)
    releases = [json.loads(line) for line in err.splitlines() if '"event": "release"' in line]
    assert [r["direct"] for r in releases] == [True]  # the worker wrote the first page
