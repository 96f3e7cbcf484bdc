"""Single flight, the answer cache and crash recovery of the budget ledger
(``accounting/ledger.py``): one computation of an answer across the threads and processes
sharing the file, the answers kept, and the reservations of processes that are gone (spent,
never refunded).

:class:`LedgerFlights` is a mixin of :class:`~dpproxy.accounting.ledger.Ledger`; what it uses of
the ledger is the protocol :class:`_Flying`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from dpproxy.accounting.ledger_store import ReleaseRecord, process_alive, process_started
from dpproxy.accounting.memory import Reservation
from dpproxy.errors import QueryCanceled
from dpproxy.values import Cost


class _Flying(Protocol):
    """What :class:`LedgerFlights`' methods use of the :class:`Ledger` they are part of."""

    dataset: str
    cache_scope: str
    _host: str
    _flights: dict[str, tuple[str, threading.Event]]
    _flights_lock: threading.Lock
    _abandoned: set[str]

    def reserve(
        self, analyst: str, cost: Cost, record: ReleaseRecord | None = None
    ) -> Reservation: ...

    def _con(self) -> sqlite3.Connection: ...

    def _write(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]: ...

    def _reserve(
        self, con: sqlite3.Connection, analyst: str, cost: Cost, record: ReleaseRecord | None
    ) -> str: ...

    def _reserved(
        self,
        analyst: str,
        cost: Cost,
        token: str,
        record: ReleaseRecord | None,
        key: str | None,
    ) -> Reservation: ...

    def _expire(self, con: sqlite3.Connection, token: str) -> None: ...

    def _try_claim(
        self, analyst: str, cost: Cost, key: str, record: ReleaseRecord | None
    ) -> Reservation | str | None: ...

    def _flight(self, con: sqlite3.Connection, key: str, *, repair: bool) -> str | bool: ...


class LedgerFlights:
    """Single flight, the answer cache and crash recovery of :class:`Ledger` (module docstring)."""

    # ------------------------------------------------------------------ single flight

    def claim(
        self: _Flying,
        analyst: str,
        cost: Cost,
        key: str,
        record: ReleaseRecord | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Reservation | str:
        """Single flight for the answer ``key``, across the threads and processes sharing
        this file: the answer kept for it (a ``str``, at no cost); else, while another
        reservation computes it, wait for that one; else a reservation that holds ``key``
        (a ``flights`` row written with it, in one transaction) until it is committed or
        rolled back.

        Waiting is free. A flight that ends without an answer (a failure, charged to its own
        analyst) lets the first waiter to look reserve and run the query itself. A flight
        whose process is gone (same host, as in :meth:`recover`), or whose end this process
        could not record, is taken over: its reservation becomes spent, never refunded. A
        holder on another host cannot be told dead and is waited for. Waiters in this
        process wake when the flight lands; others poll the file (at most every 50 ms).
        ``cancelled`` is polled while waiting (``QueryCanceled``, nothing charged)."""
        if self.cache_scope == "off":
            return self.reserve(analyst, cost, record)
        pause = 0.001
        while True:
            with self._flights_lock:
                here = self._flights.get(key)
            if here is not None:
                here[1].wait(0.05)  # a thread of this process computes it
            else:
                got = self._try_claim(analyst, cost, key, record)
                if got is not None:
                    return got
                time.sleep(pause)  # another process computes it
                pause = min(2 * pause, 0.05)
            if cancelled is not None and cancelled():
                raise QueryCanceled("canceling statement due to user request")

    def _try_claim(
        self: _Flying, analyst: str, cost: Cost, key: str, record: ReleaseRecord | None
    ) -> Reservation | str | None:
        """One look: the answer; ``None`` while a live flight computes it; else a reservation
        holding ``key``. Looks without the write lock first."""
        state = self._flight(self._con(), key, repair=False)
        if state is not False:
            return state if isinstance(state, str) else None
        with self._write(durable=False) as con:
            state = self._flight(con, key, repair=True)
            if state is not False:
                return state if isinstance(state, str) else None
            token = self._reserve(con, analyst, cost, record)
            con.execute("INSERT INTO flights VALUES (?, ?, ?)", (key, self.dataset, token))
        with self._flights_lock:
            self._flights[key] = (token, threading.Event())
        return self._reserved(analyst, cost, token, record, key)

    def _flight(self: _Flying, con: sqlite3.Connection, key: str, *, repair: bool) -> str | bool:
        """The answer kept for ``key``; else whether a live flight computes it. ``repair``
        (in a write transaction): a dead or abandoned flight is removed, its reservation
        expired (spent)."""
        row = con.execute("SELECT payload FROM cache WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return str(row[0])
        row = con.execute(
            "SELECT f.token, r.host, r.pid, r.started FROM flights f "
            "LEFT JOIN reservations r ON r.token = f.token WHERE f.key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return False
        token, host, pid, started = row
        if host is not None and token not in self._abandoned:
            me = (os.getpid(), process_started(os.getpid()))
            if host != self._host or (pid, started) == me or process_alive(pid, started):
                return True
        if repair:
            if host is not None:
                self._expire(con, token)
            con.execute("DELETE FROM flights WHERE key = ?", (key,))
        return False

    @contextmanager
    def _landing(self: _Flying, r: Reservation) -> Iterator[None]:
        """Around the end of ``r`` (commit or rollback): waiters in this process wake; if the
        end cannot be recorded (a full or read-only ledger), its flight is abandoned."""
        try:
            yield
        except BaseException:
            self._abandoned.add(r.token)
            raise
        finally:
            if r.key is not None:
                with self._flights_lock:
                    here = self._flights.get(r.key)
                    if here is not None and here[0] == r.token:
                        del self._flights[r.key]
                        here[1].set()

    # ------------------------------------------------------------------ the answer cache

    def cache_key(self: _Flying, analyst: str, normalised: str) -> str:
        scope = analyst if self.cache_scope == "analyst" else "*"
        return hashlib.sha256(json.dumps([self.dataset, scope, normalised]).encode()).hexdigest()

    def cached(self: _Flying, key: str) -> str | None:
        if self.cache_scope == "off":
            return None
        row = self._con().execute("SELECT payload FROM cache WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # ------------------------------------------------------------------ crash recovery

    def recover(self: _Flying) -> int:
        """Reservations whose process is gone (same host, no such pid) become spent."""
        expired = 0
        with self._write() as con:
            rows = con.execute(
                "SELECT token, pid, started FROM reservations WHERE dataset = ? AND host = ?",
                (self.dataset, self._host),
            ).fetchall()
            me = (os.getpid(), process_started(os.getpid()))
            for token, pid, started in rows:
                if (pid, started) == me or process_alive(pid, started):
                    continue
                self._expire(con, token)
                expired += 1
            con.execute(
                "DELETE FROM flights WHERE dataset = ? AND token NOT IN "
                "(SELECT token FROM reservations)",
                (self.dataset,),
            )
        return expired
