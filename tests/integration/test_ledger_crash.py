"""Budgets survive a crashed or stopped ``dpproxy serve``: nothing is ever refunded.

* ``kill -9`` during a storm of queries (three times, at a random moment while the ledger shows
  reservations in flight), restarting the server on the same ledger each time: the ledger
  verifies; every reservation open at the kill is now spent (spent after = spent + reserved
  before: nothing refunded, nothing lost); spent covers every answered query; ``SHOW
  dpproxy.budget`` is total − spent; new queries work.
* SIGTERM and a new server on the same ledger: the same remaining budget.
* A restarted server with the crashed one's pid (a container, where dpproxy is PID 1 each run)
  must still recover its reservations (the pid is reused; its start time is not).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from dpproxy.accounting.ledger import Ledger
from dpproxy.values import Cost
from tests.commands import dpproxy_command

# ------------------------------------------------------------------ servers


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int

    def dsn(self, user: str = "ana") -> str:
        return (
            f"host=127.0.0.1 port={self.port} user={user} dbname=dpproxy sslmode=disable "
            "connect_timeout=10"
        )


def start(ledger: Path, log: Path, *args: str) -> Server:
    """``dpproxy serve`` (trust auth, any free port, stderr to ``log``), once it listens."""
    cmd = [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", "--trust"]
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*cmd, "--ledger", str(ledger), *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env=dict(os.environ, DPPROXY_LOG_LEVEL="WARNING"),
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"dpproxy serving on \('127\.0\.0\.1', (\d+)\)", log.read_text())
        if m:
            return Server(proc, int(m.group(1)))
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise AssertionError("server did not start:\n" + log.read_text())


def stop(s: Server) -> int:
    if s.proc.poll() is None:
        s.proc.send_signal(signal.SIGTERM)
        try:
            s.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()
    return s.proc.returncode


def _budget(con: psycopg.Connection[Any]) -> str:
    row = con.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


# ------------------------------------------------------------------ the ledger, read raw


@dataclass(frozen=True)
class Raw:
    """What the file says, read with plain SQLite (opening a Ledger would run recovery)."""

    total: Cost
    spent: Cost
    reserved: Cost
    open_pids: tuple[int, ...]  # one per open reservation
    kinds: Counter[str]  # log entries by kind


def raw_state(path: Path, dataset: str, analyst: str) -> Raw:
    con = sqlite3.connect(path, timeout=60)
    try:
        row = con.execute(
            "SELECT total_eps, total_delta, spent_eps, spent_delta, reserved_eps, "
            "reserved_delta FROM accounts WHERE dataset = ? AND principal = ? AND kind = ?",
            (dataset, analyst, "analyst"),
        ).fetchone()
        pids = con.execute(
            "SELECT pid FROM reservations WHERE dataset = ? AND analyst = ?", (dataset, analyst)
        ).fetchall()
        kinds = con.execute(
            "SELECT kind FROM log WHERE dataset = ? AND principal = ?", (dataset, analyst)
        ).fetchall()
    finally:
        con.close()
    f = [F(x) for x in row]
    return Raw(
        Cost(f[0], f[1]),
        Cost(f[2], f[3]),
        Cost(f[4], f[5]),
        tuple(p for (p,) in pids),
        Counter(k for (k,) in kinds),
    )


def _open_reservations(path: Path, pid: int) -> int:
    con = sqlite3.connect(path, timeout=60)
    try:
        return int(
            con.execute("SELECT COUNT(*) FROM reservations WHERE pid = ?", (pid,)).fetchone()[0]
        )
    finally:
        con.close()


# ------------------------------------------------------------------ kill -9


SLOW_SCHEMA = """\
version: 1
dataset: slow
privacy:
  neighbouring: add_remove
  epsilon: 1
  delta: 1e-5
  budget: {epsilon: 10, delta: 1e-5}
tables:
  events:
    privacy_unit: uid
    max_rows_per_unit: 5
    columns:
      uid: {type: integer}
      amount: {type: float, lower: 0, upper: 1000}
"""


@pytest.fixture(scope="module")
def slow_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """2 M rows, 10 per unit (bound to 5): each query runs ~0.1 s, so a storm of clients
    always has reservations in flight (the DuckDB backend runs one statement at a time)."""
    tmp = tmp_path_factory.mktemp("slow")
    db = tmp / "slow.duckdb"
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "CREATE TABLE events AS SELECT (i // 10)::INTEGER AS uid, "
            "(hash(i) % 1000)::DOUBLE AS amount FROM range(2000000) t(i)"
        )
    finally:
        con.close()
    schema = tmp / "slow.yaml"
    schema.write_text(SLOW_SCHEMA, encoding="utf-8")
    return db, schema


CLIENTS = 8
ROUNDS = 3
TOTAL = Cost(F(1000), F(1, 1000))  # never the limit here
QUERY = "SELECT SUM(amount), COUNT(*) FROM events WHERE amount > {n}"  # costs ε = 1


class Storm:
    """CLIENTS threads asking distinct queries (no cache hits) until the server dies."""

    def __init__(self, server: Server, first: int) -> None:
        self.answered = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._next = first
        self.threads = [
            threading.Thread(target=self._client, args=(server,)) for _ in range(CLIENTS)
        ]
        for t in self.threads:
            t.start()

    def _query(self) -> str:
        with self._lock:
            self._next += 1
            return QUERY.format(n=self._next)

    def _client(self, server: Server) -> None:
        try:
            con = psycopg.connect(server.dsn(), autocommit=True)
        except psycopg.OperationalError:
            return  # killed before this client got in
        try:
            while True:
                try:
                    rows = con.execute(self._query()).fetchall()
                except psycopg.OperationalError:
                    return  # the server is gone
                except psycopg.Error as e:
                    with self._lock:
                        self.errors.append(f"{e.sqlstate}: {e}")
                    return
                with self._lock:
                    if len(rows) == 1:
                        self.answered += 1
                    else:
                        self.errors.append(f"unexpected rows {rows!r}")
        finally:
            con.close()

    def join(self) -> None:
        for t in self.threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in self.threads)


def test_kill_9_during_queries_refunds_nothing(tmp_path: Path, slow_db: tuple[Path, Path]) -> None:
    db, schema = slow_db
    ledger = tmp_path / "ledger.sqlite"
    led = Ledger(ledger, "slow", TOTAL)
    led.grant("ana", TOTAL)
    led.close()
    args = ("--database", str(db), "--schema", str(schema))
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    server = start(ledger, tmp_path / "serve-0.log", *args)
    answered = 0
    in_flight_at_kills = 0
    try:
        for round_ in range(ROUNDS):
            where = f"round {round_}, seed {seed}"
            storm = Storm(server, first=round_ * 10_000)
            # a random moment while queries are in flight: after a few answers, and once the
            # ledger shows reservations held by this server
            wanted = rng.randint(1, 4)
            deadline = time.monotonic() + 60
            while not (
                storm.answered >= wanted and _open_reservations(ledger, server.proc.pid) >= 1
            ):
                assert time.monotonic() < deadline, f"no queries in flight ({where})"
                assert not storm.errors, storm.errors
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.02))
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=60)
            storm.join()
            assert not storm.errors, storm.errors
            answered += storm.answered
            before = raw_state(ledger, "slow", "ana")
            assert set(before.open_pids) <= {server.proc.pid}, where
            in_flight_at_kills += len(before.open_pids)

            server = start(ledger, tmp_path / f"serve-{round_ + 1}.log", *args)  # recovers

            after = raw_state(ledger, "slow", "ana")
            assert after.open_pids == (), where  # the dead server's reservations are closed…
            assert after.reserved == Cost.zero(), where
            assert after.spent == before.spent + before.reserved, where  # …as spent
            assert after.kinds["expire"] - before.kinds["expire"] == len(before.open_pids)
            assert after.kinds["rollback"] == 0, where
            # every reservation ever made is charged: released or expired, never refunded
            assert after.spent.epsilon == after.kinds["reserve"], where
            assert after.kinds["reserve"] == after.kinds["release"] + after.kinds["expire"]
            assert after.spent.epsilon >= answered, where  # each answered query paid ε = 1
            with psycopg.connect(server.dsn(), autocommit=True) as con:
                assert _budget(con).startswith(f"remaining {TOTAL - after.spent} of "), where
        assert in_flight_at_kills >= 1, f"no kill caught a reservation in flight (seed {seed})"
        # the restarted server answers and charges as before
        with psycopg.connect(server.dsn(), autocommit=True) as con:
            assert len(con.execute(QUERY.format(n=-1)).fetchall()) == 1
            spent = raw_state(ledger, "slow", "ana").spent
            assert spent == after.spent + Cost(F(1))
            assert _budget(con).startswith(f"remaining {TOTAL - spent} of ")
    finally:
        code = stop(server)
    assert code == 0
    led = Ledger(ledger, "slow", TOTAL)
    try:
        v = led.verify()
        assert v.ok, v.problems
        assert led.remaining("ana") == TOTAL - spent
    finally:
        led.close()


# ------------------------------------------------------------------ a clean restart


def test_a_restart_keeps_the_budget(tmp_path: Path, demo_db: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = start(ledger, tmp_path / "first.log")
    try:
        with psycopg.connect(first.dsn(), autocommit=True) as con:
            con.execute("SET dpproxy.epsilon = 0.5")
            con.execute("SELECT COUNT(*) FROM adult WHERE age > 30").fetchall()
            con.execute("SELECT sex, AVG(age) FROM adult GROUP BY sex").fetchall()
            con.execute("RESET dpproxy.epsilon")
            con.execute("SELECT COUNT(*) FROM adult").fetchall()
            budget = _budget(con)
        assert budget.startswith("remaining ε=8, ")  # 10 − 0.5 − 0.5 − 1
    finally:
        code = stop(first)
    assert code == 0  # a clean shutdown: no query was in flight
    state = raw_state(ledger, "adult", "ana")
    assert state.open_pids == () and state.spent.epsilon == 2
    second = start(ledger, tmp_path / "second.log")
    try:
        with psycopg.connect(second.dsn(), autocommit=True) as con:
            assert _budget(con) == budget
    finally:
        stop(second)
    led = Ledger(ledger, "adult", Cost(F(10)))
    try:
        assert led.verify().ok
        assert led.spent("ana").epsilon == 2
    finally:
        led.close()


# ------------------------------------------------------------------ pid namespaces

_CRASHED_CONTAINER = """
import os, sys
from fractions import Fraction as F
from dpproxy.accounting.ledger import Ledger
from dpproxy.values import Cost
led = Ledger(sys.argv[1], "adult", Cost(F(10)))
if sys.argv[2] == "crash":
    led.reserve("ana", Cost(F(1)))
    os._exit(9)  # killed with a query in flight
led.close()
print(os.getpid())
"""


def _in_new_pid_namespace(*args: str) -> subprocess.CompletedProcess[str]:
    unshare = shutil.which("unshare")
    assert unshare is not None
    return subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-c", _CRASHED_CONTAINER,
         *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pid_namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        out = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
             "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "1"


@pytest.mark.skipif(not _pid_namespaces_work(), reason="needs unshare --pid (root)")
def test_a_restarted_container_recovers_its_crashed_reservations(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    crashed = _in_new_pid_namespace(str(ledger), "crash")
    assert crashed.returncode == 9, crashed.stderr
    restarted = _in_new_pid_namespace(str(ledger), "open")  # runs recovery, as PID 1 again
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.strip() == "1"
    state = raw_state(ledger, "adult", "ana")
    assert state.open_pids == ()
    assert state.spent == Cost(F(1)) and state.reserved == Cost.zero()
