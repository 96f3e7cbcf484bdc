"""The worker's own write of a DP reply (``server/direct.py``) over real connections: simple
queries, parameters in text and binary, prepared statements, pipelines (only the Execute right
before a Sync takes it), transaction blocks (ReadyForQuery says ``T``) and several statements
in one string; the release log says which replies the worker wrote, and over TLS none."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.integration.test_server import start_server, stop_server


def _releases(log: str) -> list[dict[str, object]]:
    out = []
    for line in log.splitlines():
        if '"event": "release"' in line:
            out.append(json.loads(line))
    return out


def _count(c: psycopg.Connection, sql: str, params: tuple[object, ...] | None = None) -> int:
    row = c.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


def _status(c: psycopg.Connection) -> psycopg.pq.TransactionStatus:
    return c.info.transaction_status


def test_replies_the_worker_writes(tmp_path: Path, demo_db: Path) -> None:
    run = start_server(tmp_path)
    queries = 0
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as c:
            assert _count(c, "SELECT COUNT(*) FROM adult") > 30_000  # simple protocol
            sql = "SELECT COUNT(*) FROM adult WHERE age >= %s AND sex = %s"
            assert 0 < _count(c, sql, (40, "Female")) < 30_000  # Parse/Bind/Describe/Execute/Sync
            row = c.execute(sql, (40, "Female"), binary=True).fetchone()  # binary results
            assert row is not None and 0 < row[0] < 30_000
            assert _count(c, "SELECT COUNT(*) FROM adult", None) > 30_000
            c.execute("SELECT COUNT(*) FROM adult", prepare=True).fetchall()  # named statement
            c.execute("SELECT COUNT(*) FROM adult", prepare=True).fetchall()
            rows = c.execute("SELECT sex, AVG(age) FROM adult GROUP BY sex ORDER BY sex").fetchall()
            assert [r[0] for r in rows] == ["Female", "Male"] and 30 < rows[0][1] < 45
            queries += 7
            with c.pipeline():  # Execute, Execute, Execute, Sync
                cursors = [
                    c.execute("SELECT COUNT(*) FROM adult WHERE age >= %s", (a,))
                    for a in (20, 50, 80)
                ]
            counts = [int(cur.fetchone()[0]) for cur in cursors]  # type: ignore[index]
            assert counts[0] > counts[1] > counts[2]
            queries += 3
            c.execute("SELECT COUNT(*) FROM adult; SELECT COUNT(*) FROM adult")  # two statements
            queries += 2
        with psycopg.connect(run.dsn()) as c:  # a transaction block: ReadyForQuery says T
            assert _count(c, "SELECT COUNT(*) FROM adult") > 30_000
            assert _status(c) == psycopg.pq.TransactionStatus.INTRANS
            assert _count(c, "SELECT COUNT(*) FROM adult WHERE age > %s", (30,)) > 10_000
            assert _status(c) == psycopg.pq.TransactionStatus.INTRANS
            c.rollback()
            assert _status(c) == psycopg.pq.TransactionStatus.IDLE
            queries += 2
    finally:
        log = stop_server(run)
    releases = _releases(log)
    assert len(releases) == queries
    direct = [r["direct"] for r in releases]
    # the two statements of one string, and the pipeline's first two Executes, go by the loop
    assert direct.count(False) == 4 and direct.count(True) == queries - 4
    assert all(float(str(r["ms"])) > 0 for r in releases)


def test_over_tls_the_loop_writes_every_reply(tmp_path: Path, demo_db: Path) -> None:
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.fail(f"openssl could not make a test certificate: {made.stderr}")
    run = start_server(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        dsn = run.dsn().replace("sslmode=disable", "sslmode=require")
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.pgconn.ssl_in_use
            assert _count(c, "SELECT COUNT(*) FROM adult") > 30_000
            assert _count(c, "SELECT COUNT(*) FROM adult WHERE age >= %s", (40,)) > 10_000
    finally:
        log = stop_server(run)
    assert [r["direct"] for r in _releases(log)] == [False, False]
