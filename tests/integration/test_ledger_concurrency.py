"""One ledger file, many writers: threads, processes and real ``dpproxy serve`` processes.

* 40 workers (4 processes started with *spawn* × 10 threads, each with a ``Ledger`` of its own)
  reserve and commit at the same moment against a budget that pays for exactly 7 of them: 7
  succeed, 33 get ZD001, and the account ends with spent == total exactly.
* Two servers on the same ledger file, 30 psycopg clients split across them, each asking a
  *different* query (the answer cache cannot serve it) as the same analyst, whose budget pays for
  exactly K: K answers, ZD001 for the rest, spent == K·ε.
* The answer cache lives in the file: the same query through server A, then server B, then a
  restarted server answers with identical rows and charges once.
* Opening a brand-new ledger file while another connection writes to it waits for it.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dpproxy.accounting.ledger import Ledger
from dpproxy.errors import BudgetExhausted
from dpproxy.values import Cost
from tests.commands import dpproxy_command

DATASET = "adult"  # the demo's dataset
DEFAULT = Cost(F(10), F(1, 10**5))  # the demo schema's budget (only for accounts opened here)

# ------------------------------------------------------------------ processes × threads

PROCESSES, THREADS = 4, 10
AFFORDABLE = 7
COST = Cost(F(1, 3), F(1, 10**6))


def _race_in_process(path: str, barrier: Any, results: Any) -> None:
    """One spawned process: THREADS threads, each with its own Ledger, reserve + commit once."""
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        led = Ledger(path, DATASET, DEFAULT)
        try:
            barrier.wait(timeout=120)
            try:
                r = led.reserve("ana", COST)
            except BudgetExhausted as e:
                outcome = e.sqlstate
            else:
                led.commit(r)
                outcome = "ok"
        except Exception as e:  # reported to the parent, which fails the test
            outcome = repr(e)
        finally:
            led.close()
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(outcomes)


def test_processes_and_threads_race_for_the_last_budget(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    total = Cost(AFFORDABLE * COST.epsilon, AFFORDABLE * COST.delta)
    led = Ledger(path, DATASET, DEFAULT)
    led.grant("ana", total)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES * THREADS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_race_in_process, args=(str(path), barrier, results))
        for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    try:
        outcomes = [o for _ in procs for o in results.get(timeout=120)]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    assert sorted(set(outcomes)) == ["ZD001", "ok"], outcomes
    assert outcomes.count("ok") == AFFORDABLE
    assert outcomes.count("ZD001") == PROCESSES * THREADS - AFFORDABLE
    try:
        acct = led.account("ana")
        assert acct is not None
        assert acct.spent == total and acct.reserved == Cost.zero()
        assert led.remaining("ana") == Cost.zero()
        kinds = [e.kind for e in led.entries("ana")]
        assert kinds.count("reserve") == kinds.count("release") == AFFORDABLE
        v = led.verify()
        assert v.ok, v.problems
    finally:
        led.close()


def test_opening_a_new_ledger_waits_for_a_concurrent_writer(tmp_path: Path) -> None:
    """Another process is in the middle of a write transaction on a file that is not in WAL
    mode yet (as when two processes create the same ledger at once): Ledger() must wait for it
    (busy_timeout), not fail."""
    path = tmp_path / "new.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE unrelated (x)")
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, other.execute, ("COMMIT",))
    release.start()
    try:
        led = Ledger(path, DATASET, DEFAULT, busy_timeout=30)
        try:
            assert led.verify().ok
        finally:
            led.close()
    finally:
        release.join()
        other.close()


# ------------------------------------------------------------------ real servers

K = 12  # queries the racing analyst can afford at the default ε = 1
CLIENTS = 30


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    log: Path

    def dsn(self, user: str) -> str:
        return (
            f"host=127.0.0.1 port={self.port} user={user} dbname=dpproxy sslmode=disable "
            "connect_timeout=10"
        )


def launch(ledger: Path, log: Path, *args: str) -> subprocess.Popen[str]:
    """``dpproxy serve`` on the demo, trust auth, any free port, stderr to ``log``."""
    cmd = [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", "--trust"]
    with log.open("w") as err:
        return subprocess.Popen(
            [*cmd, "--ledger", str(ledger), *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env=dict(os.environ, DPPROXY_LOG_LEVEL="WARNING"),
        )


def ready(proc: subprocess.Popen[str], log: Path) -> Server:
    """Wait for the server's "serving on" line (polling its log file)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"dpproxy serving on \('127\.0\.0\.1', (\d+)\)", log.read_text())
        if m:
            return Server(proc, int(m.group(1)), log)
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise AssertionError("server did not start:\n" + log.read_text())


def start(ledger: Path, log: Path, *args: str) -> Server:
    return ready(launch(ledger, log, *args), log)


def stop(s: Server) -> None:
    if s.proc.poll() is None:
        s.proc.send_signal(signal.SIGTERM)
        try:
            s.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()


@dataclass
class Pair:
    ledger: Path
    a: Server
    b: Server
    tmp: Path


@pytest.fixture
def pair(tmp_path: Path, demo_db: Path) -> Iterator[Pair]:
    """Two servers on one ledger file, started after the racing analyst's budget was granted."""
    ledger = tmp_path / "ledger.sqlite"
    led = Ledger(ledger, DATASET, DEFAULT)
    led.grant("racer", Cost(F(K)))
    led.close()
    procs = [launch(ledger, tmp_path / f"{name}.log") for name in "ab"]  # both at once
    servers: list[Server] = []
    try:
        for name, p in zip("ab", procs, strict=True):
            servers.append(ready(p, tmp_path / f"{name}.log"))
        yield Pair(ledger, servers[0], servers[1], tmp_path)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_two_servers_race_for_one_analysts_budget(pair: Pair) -> None:
    conns = [
        psycopg.connect((pair.a if i % 2 else pair.b).dsn("racer"), autocommit=True)
        for i in range(CLIENTS)
    ]
    barrier = threading.Barrier(CLIENTS)
    outcomes: list[str] = [""] * CLIENTS

    def client(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            rows = conns[i].execute(f"SELECT COUNT(*) FROM adult WHERE age > {i}").fetchall()
            outcomes[i] = "ok" if len(rows) == 1 else f"rows {rows!r}"
        except psycopg.Error as e:
            outcomes[i] = e.sqlstate or repr(e)
        except Exception as e:
            outcomes[i] = repr(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        for c in conns:
            c.close()
    assert sorted(set(outcomes)) == ["ZD001", "ok"], outcomes
    assert outcomes.count("ok") == K and outcomes.count("ZD001") == CLIENTS - K
    led = Ledger(pair.ledger, DATASET, DEFAULT)
    try:
        acct = led.account("racer")
        assert acct is not None
        assert acct.spent == Cost(F(K)) and acct.reserved == Cost.zero()
        released = [e for e in led.entries("racer") if e.kind == "release"]
        answered = {
            f"SELECT COUNT(*) FROM adult WHERE age > {i}"
            for i, o in enumerate(outcomes)
            if o == "ok"
        }
        assert {e.body["query"] for e in released} == answered
        v = led.verify()
        assert v.ok, v.problems
    finally:
        led.close()


def _budget(con: psycopg.Connection[Any]) -> str:
    row = con.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


def test_the_answer_cache_is_shared_by_processes_and_survives_a_restart(pair: Pair) -> None:
    query = "SELECT sex, AVG(hours_per_week), COUNT(*) FROM adult GROUP BY sex ORDER BY sex"
    with psycopg.connect(pair.a.dsn("cacher"), autocommit=True) as a:
        first = a.execute(query).fetchall()
        after_first = _budget(a)
    with psycopg.connect(pair.b.dsn("cacher"), autocommit=True) as b:
        assert _budget(b) == after_first
        assert b.execute(query).fetchall() == first  # the very same noisy values
        assert _budget(b) == after_first  # at no cost
    stop(pair.a)  # no process that answered it is left: the cache is in the file
    stop(pair.b)
    restarted = start(pair.ledger, pair.tmp / "restarted.log")
    try:
        with psycopg.connect(restarted.dsn("cacher"), autocommit=True) as c:
            assert c.execute(query).fetchall() == first
            assert _budget(c) == after_first
    finally:
        stop(restarted)
    led = Ledger(pair.ledger, DATASET, DEFAULT)
    try:
        assert led.spent("cacher") == Cost(F(1))  # charged once, for the first answer
        assert [e.kind for e in led.entries("cacher")] == ["open", "reserve", "release"]
        assert led.verify().ok
    finally:
        led.close()
