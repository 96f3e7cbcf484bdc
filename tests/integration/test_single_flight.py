"""Identical concurrent queries release once (single flight, ``Accountant.claim``).

* 64 threads through one embedded Engine (in-memory accountant, and a ledger file) ask the same
  query at the same moment: one reservation, one release, one distinct answer; the other 63
  get that answer at no cost.
* 64 psycopg connections to one ``dpproxy serve``, and 2 × 32 to two servers sharing a ledger
  file: the ledger logs one reservation and one release, every client gets the same rows.
* The flight fails (its client cancels it): it is charged to its own analyst only; a waiter
  that cancels is not charged; one of the others runs the query again (charged once) and the
  rest get its answer free.
* The holder's process is killed: another process takes its flight over (the dead reservation
  becomes spent, never refunded) instead of waiting for ever; a live holder is waited for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from fractions import Fraction as F
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import psycopg
import pytest

from dpproxy.accounting.ledger import Ledger
from dpproxy.accounting.memory import Accountant, MemoryAccountant
from dpproxy.backends import CancelToken
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import QueryCanceled
from dpproxy.values import Cost
from tests.demo_engines import demo_engine
from tests.integration.test_ledger_concurrency import launch, ready, stop
from tests.integration.test_server import BIG_SCHEMA

N = 64
QUERY = "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex ORDER BY sex"
DEFAULT = Cost(F(10), F(1, 10**5))  # the demo schema's budget
ONE = Cost(F(1))  # what QUERY costs at the demo's default ε (pure DP: δ = 0)

T = TypeVar("T")


def race(n: int, call: Callable[[int], T]) -> list[T | BaseException]:
    """``call(i)`` in ``n`` threads released at once; each one's result or exception."""
    barrier = threading.Barrier(n)
    out: list[T | BaseException] = [RuntimeError("did not finish")] * n

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=120)
            out[i] = call(i)
        except BaseException as e:
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return out


def _accountant(kind: str, tmp: Path) -> Accountant:
    if kind == "memory":
        return MemoryAccountant(DEFAULT)
    return Ledger(tmp / "ledger.sqlite", "adult", DEFAULT)


# ------------------------------------------------------------------ embedded


@pytest.mark.parametrize("kind", ["memory", "ledger"])
def test_64_threads_through_one_engine_release_once(
    kind: str, tmp_path: Path, demo_db: Path, demo_catalog: Catalog
) -> None:
    accountant = _accountant(kind, tmp_path)
    engine = Engine(demo_catalog, DuckDBBackend(demo_db), accountant=accountant)
    try:
        answers = race(N, lambda _: engine.run(QUERY, analyst="ana"))
        errors = [a for a in answers if isinstance(a, BaseException)]
        assert not errors, errors[:3]
        ok = [a for a in answers if not isinstance(a, BaseException)]
        assert [a.cost for a in ok].count(ONE) == 1
        assert [a.cost for a in ok].count(Cost.zero()) == N - 1
        assert sum(a.cached for a in ok) == N - 1
        assert len({tuple(a.released.rows) for a in ok}) == 1  # one release, one answer
        assert accountant.spent("ana") == ONE
        assert len(accountant.releases("ana")) == 1
        assert accountant.status("ana").reserved == Cost.zero()
        if isinstance(accountant, Ledger):
            assert accountant.verify().ok
    finally:
        engine.close()
        if isinstance(accountant, Ledger):
            accountant.close()


# ------------------------------------------------------------------ servers


def _rows(conns: list[psycopg.Connection[Any]]) -> list[Any]:
    try:
        return race(len(conns), lambda i: conns[i].execute(QUERY).fetchall())
    finally:
        for c in conns:
            c.close()


def _charged_once(ledger: Path) -> None:
    led = Ledger(ledger, "adult", DEFAULT)
    try:
        kinds = [e.kind for e in led.entries("ana")]
        assert kinds.count("reserve") == 1 and kinds.count("release") == 1, kinds
        assert led.spent("ana") == ONE
        assert led.verify().ok
    finally:
        led.close()


def test_64_connections_to_one_server_release_once(tmp_path: Path, demo_db: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    server = ready(launch(ledger, tmp_path / "serve.log"), tmp_path / "serve.log")
    try:
        conns = [psycopg.connect(server.dsn("ana"), autocommit=True) for _ in range(N)]
        rows = _rows(conns)
    finally:
        stop(server)
    errors = [r for r in rows if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    assert len({repr(r) for r in rows}) == 1
    _charged_once(ledger)


def test_two_servers_on_one_ledger_release_once(tmp_path: Path, demo_db: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger, "adult", DEFAULT).close()
    procs = [launch(ledger, tmp_path / f"{name}.log") for name in "ab"]
    servers = []
    try:
        servers = [ready(p, tmp_path / f"{name}.log") for name, p in zip("ab", procs, strict=True)]
        conns = [psycopg.connect(servers[i % 2].dsn("ana"), autocommit=True) for i in range(N)]
        rows = _rows(conns)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
    errors = [r for r in rows if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    assert len({repr(r) for r in rows}) == 1
    _charged_once(ledger)


# ------------------------------------------------------------------ a flight that fails

SLOW = "SELECT SUM(amount), COUNT(*) FROM events"


@pytest.fixture(scope="module")
def slow_catalog(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Catalog]:
    return slow_database(tmp_path_factory.mktemp("slow"))


def slow_database(tmp: Path) -> tuple[Path, Catalog]:
    """100,000 rows, 10 per unit, for ``SLOW``; the tests hold its flight with ``GatedDuckDB``."""
    db = tmp / "big.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE events AS SELECT (i // 10)::INTEGER AS uid, "
        "(hash(i) % 1000)::DOUBLE AS amount FROM range(100000) t(i)"
    )
    con.close()
    schema = tmp / "big.yaml"
    schema.write_text(BIG_SCHEMA, encoding="utf-8")
    return db, load_catalog(schema)


class GatedDuckDB(DuckDBBackend):
    """The real DuckDB backend, whose queries run and then wait at a gate until the test opens
    it, or until they are cancelled (then they raise QueryCanceled, as a cancel arriving while
    the database works does): a flight that has read the data is held for exactly as long as
    the test needs, however fast the machine (a slow query alone raced the test's checks)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()

    def execute(self, sql: str, cancel: CancelToken | None = None) -> Any:
        result = super().execute(sql, cancel)
        if cancel is not None:
            cancel.on_cancel(self.gate.set)
        try:
            if not self.gate.wait(timeout=300):
                raise AssertionError("the test never opened the gate")
        finally:
            if cancel is not None:
                cancel.on_cancel(None)
        if cancel is not None and cancel.cancelled:
            raise QueryCanceled("canceling statement due to user request")
        return result


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["memory", "ledger"])
def test_a_failed_flight_is_charged_to_itself_only_and_one_waiter_retries(
    kind: str, tmp_path: Path, slow_catalog: tuple[Path, Catalog]
) -> None:
    db, catalog = slow_catalog
    accountant = _accountant(kind, tmp_path)
    backend = GatedDuckDB(db)
    engine = Engine(catalog, backend, accountant=accountant)
    cost = engine.plan(SLOW).cost
    results: dict[str, Any] = {}

    def run(name: str, cancel: CancelToken | None = None) -> None:
        try:
            results[name] = engine.run(SLOW, analyst="ana", cancel=cancel)
        except BaseException as e:
            results[name] = e

    holder_token, quitter_token = CancelToken(), CancelToken()
    holder = threading.Thread(target=run, args=("holder", holder_token))
    holder.start()
    try:
        _wait_for(lambda: accountant.status("ana").reserved == cost, "the holder's reservation")
        waiters = [threading.Thread(target=run, args=(f"w{i}",)) for i in range(3)]
        waiters.append(threading.Thread(target=run, args=("quitter", quitter_token)))
        for t in waiters:
            t.start()
        time.sleep(0.2)  # all four wait for the flight
        quitter_token.cancel()  # a waiter gives up: nothing charged
        waiters[-1].join(timeout=10)
        assert isinstance(results.get("quitter"), QueryCanceled), results.get("quitter")
        assert holder.is_alive() and not backend.gate.is_set()  # held at the gate
        assert accountant.spent("ana") == Cost.zero()
        holder_token.cancel()  # the flight fails (and opens the gate): charged to the holder
        holder.join(timeout=120)
        for t in waiters:
            t.join(timeout=300)
    finally:
        holder_token.cancel()
        backend.gate.set()
        holder.join(timeout=120)
    assert isinstance(results["holder"], QueryCanceled), results["holder"]
    answers = [results[f"w{i}"] for i in range(3)]
    assert not [a for a in answers if isinstance(a, BaseException)], answers
    assert sorted(a.cost == cost for a in answers) == [False, False, True]  # one retried
    assert len({tuple(a.released.rows) for a in answers}) == 1
    assert accountant.spent("ana") == cost + cost  # the failed flight and the retry
    assert accountant.status("ana").reserved == Cost.zero()
    engine.close()
    if isinstance(accountant, Ledger):
        assert accountant.verify().ok
        accountant.close()


# ------------------------------------------------------------------ a holder that dies

HOLD = """
import sys, time
from fractions import Fraction as F
from dpproxy.accounting.ledger import Ledger
from dpproxy.values import Cost
led = Ledger(sys.argv[1], "adult", Cost(F(10)))
r = led.claim("ana", Cost(F(1)), "the-key")
print("held" if not isinstance(r, str) else "cached", flush=True)
time.sleep(600)
"""


def test_a_dead_holder_is_taken_over_and_a_live_one_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    led = Ledger(path, "adult", Cost(F(10)))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(QueryCanceled):  # a live holder in another process is waited for
            led.claim(
                "ana", Cost(F(1)), "the-key", cancelled=lambda: time.monotonic() > started + 0.5
            )
        assert led.spent("ana") == Cost.zero()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        got = led.claim("ana", Cost(F(1)), "the-key")  # the dead holder's flight is taken over
        assert not isinstance(got, str)
        kinds = [e.kind for e in led.entries("ana")]
        assert kinds == ["open", "reserve", "expire", "reserve"], kinds
        assert led.spent("ana") == Cost(F(1))  # the dead one's reservation: spent, not refunded
        led.commit(got, ("the-key", "the answer"))
        assert led.claim("ana", Cost(F(1)), "the-key") == "the answer"
        assert led.spent("ana") == Cost(F(2))
        assert led.verify().ok
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        led.close()


@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_a_query_cancelled_before_it_starts_is_not_run(
    kind: str, request: pytest.FixtureRequest, demo_db: Path, demo_catalog: Catalog
) -> None:
    """A cancel that arrives before the backend starts the query is not lost (an interrupt sent
    to an idle connection is dropped by both engines): the query is not run, nothing is
    charged, and the backend runs the next query normally."""
    with demo_engine(kind, request, demo_db, demo_catalog, DEFAULT) as engine:
        token = CancelToken()
        token.cancel()
        with pytest.raises(QueryCanceled):
            engine.backend.execute("SELECT COUNT(*) FROM adult", token)
        with pytest.raises(QueryCanceled):
            engine.run(QUERY, analyst="ana", cancel=token)
        assert engine.accountant.spent("ana") == Cost.zero()
        assert engine.backend.execute("SELECT 1").rows == ((1,),)
