"""``dpproxy serve`` on uvloop (used when installed, the ``fast`` extra) and on asyncio's own
loop (``DPPROXY_EVENT_LOOP=asyncio``): the same answers, errors and session rules on both.

Also the simple-query replay (``Session._replay``): a repeated catalog query is answered from
its encoded messages, but never past a failed transaction block (25P02 as before).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None


def _serve(tmp: Path, loop: str) -> tuple[subprocess.Popen[str], Path, int]:
    log = tmp / f"serve-{loop}.log"
    env = {k: v for k, v in os.environ.items() if k != "DPPROXY_EVENT_LOOP"}
    if loop == "asyncio":
        env["DPPROXY_EVENT_LOOP"] = "asyncio"
    env.update(DPPROXY_LOG_LEVEL="INFO", XDG_DATA_HOME=str(tmp / "data"))
    cmd = [sys.executable, "-m", "dpproxy", "serve", "--trust", "--listen", "127.0.0.1:0"]
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*cmd, "--ledger", "memory"], stdout=subprocess.DEVNULL, stderr=err, text=True, env=env
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"dpproxy serving on \('127\.0\.0\.1', (\d+)\)", log.read_text())
        if m:
            return proc, log, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("serve did not start:\n" + log.read_text())


@pytest.fixture(params=["default", "asyncio"])
def served(
    request: pytest.FixtureRequest, tmp_path: Path, demo_db: Path
) -> Iterator[tuple[str, int, Path]]:
    loop = request.param
    if loop == "default" and not HAVE_UVLOOP:
        if os.environ.get("CI") == "true":
            pytest.fail("uvloop (in the test extra) is not installed")
        pytest.skip("uvloop is not installed (pip install 'dpproxy[fast]')")
    proc, log, port = _serve(tmp_path, loop)
    try:
        yield loop, port, log
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def _listen_record(log: Path) -> dict[str, str]:
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "listen":
            return record
    raise AssertionError("no listen line:\n" + log.read_text())


def test_serve_runs_on_the_chosen_loop(served: tuple[str, int, Path]) -> None:
    loop, port, log = served
    assert _listen_record(log)["loop"] == ("uvloop" if loop == "default" else "asyncio")
    dsn = f"postgresql://ana@127.0.0.1:{port}/dpproxy"
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as con:
        for _ in range(3):  # the second and third come from the replayed messages
            assert con.execute("SELECT 1", prepare=False).fetchone() == (1,)
        assert con.execute("SELECT 1", binary=True).fetchone() == (1,)  # extended protocol
        n = con.execute("SELECT COUNT(*) FROM adult", prepare=False).fetchone()
        assert n is not None and 30_000 < n[0] < 35_000  # noisy, near the 32,561 rows
        with pytest.raises(psycopg.errors.UndefinedColumn):  # a row read is refused ...
            con.execute("SELECT age FROM adult WHERE nope = 1", prepare=False)
        assert con.execute("SELECT 1", prepare=False).fetchone() == (1,)  # ... session goes on
        with con.pipeline():  # pipelined messages arrive together; answered in order
            curs = [con.execute("SELECT %s::int", (i,)) for i in range(20)]
        assert [c.fetchone() for c in curs] == [(i,) for i in range(20)]


def test_replayed_answers_respect_the_session(served: tuple[str, int, Path]) -> None:
    _, port, _ = served
    dsn = f"postgresql://ana@127.0.0.1:{port}/dpproxy"
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as con:
        for _ in range(2):
            assert con.execute("SELECT 1", prepare=False).fetchone() == (1,)
        con.execute("BEGIN", prepare=False)
        assert con.execute("SELECT 1", prepare=False).fetchone() == (1,)
        with pytest.raises(psycopg.errors.UndefinedColumn):
            con.execute("SELECT age FROM adult WHERE nope = 1", prepare=False)
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):  # not replayed: 25P02
            con.execute("SELECT 1", prepare=False)
        con.execute("ROLLBACK", prepare=False)
        assert con.execute("SELECT 1", prepare=False).fetchone() == (1,)
        assert con.execute("SELECT 1; SELECT 2", prepare=False).fetchone() == (1,)
        con.execute("DISCARD ALL", prepare=False)  # drops the cached catalog answers
        assert con.execute("SELECT 1", prepare=False).fetchone() == (1,)
