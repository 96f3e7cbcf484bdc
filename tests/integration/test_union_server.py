"""UNION ALL over the wire (``dpproxy serve``, psycopg 3): Describe gives the first branch's
column names and PostgreSQL types before anything runs or is spent; Execute gives the rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.integration.test_server import Running, start_server, stop_server

UNION = (
    "SELECT 'male' AS grp, COUNT(*) AS n FROM adult WHERE sex = 'Male' UNION ALL "
    "SELECT 'female', COUNT(*) FROM adult WHERE sex = 'Female'"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    run = start_server(tmp_path_factory.mktemp("serve_union"))
    yield run
    stop_server(run)


def _budget(con: psycopg.Connection) -> str:
    row = con.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


def test_describe_then_execute_a_union(server: Running) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        before = _budget(con)
        con.pgconn.prepare(b"u", UNION.encode())
        desc = con.pgconn.describe_prepared(b"u")
        assert desc.nfields == 2
        assert [desc.fname(i) for i in range(2)] == [b"grp", b"n"]
        assert desc.ftype(0) == 25 and desc.ftype(1) == 20  # text, int8
        assert _budget(con) == before  # Describe spends nothing
        cur = con.execute(UNION)
        assert [d.name for d in cur.description or []] == ["grp", "n"]
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["male", "female"] and all(r[1] > 0 for r in rows)
        assert _budget(con) != before
