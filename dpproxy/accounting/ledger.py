"""A durable privacy-budget ledger in SQLite: budgets that survive restarts and concurrency.

One file (WAL mode) is shared by any number of threads and processes — every ``dpproxy serve``
and ``dpproxy query --ledger`` that points at it. Per dataset it holds:

* ``accounts``: per principal (an analyst, or a group of analysts) the total granted, the spent
  and the reserved budget (ε, δ and the zCDP ρ of Gaussian releases), and an optional renewal
  period;
* ``members``: which analysts belong to which groups (a query is charged to the analyst *and*
  to every group of theirs, and must fit in all of them);
* ``reservations``: budget held for queries that have not finished;
* ``log``: an append-only, hash-chained record of everything that changed an account — grants,
  resets, renewals, reservations, releases (analyst, normalised query, plan, mechanism, cost,
  time; for an attempt charged without an answer, ``failed``: the SQLSTATE its analyst got),
  rollbacks and reservations expired after a crash;
* ``cache``: released answers, so an identical query is answered again at no cost with the very
  same noisy values (re-asking can never average the noise away).

Invariants (``tests/property/test_ledger_state_machine.py``): a reservation is granted only if
``spent + reserved + cost ≤ total`` for the analyst and each of their groups, so spending never
exceeds a total (a steward may *lower* a total below what was already used: then nothing more
can be spent); nothing spent is ever lost; an account row never changes without a log entry
written in the same transaction. Reserving takes SQLite's write lock
(``BEGIN IMMEDIATE``) before reading the balance, so concurrent reservations from any number of
processes serialise and can never overspend. A reservation left by a crashed process counts as
spent: it stays *reserved* until :meth:`Ledger.recover` (run when a ledger is opened) finds its
process gone — same host, and no process with that pid and start time — and turns it into
*spent*; it is never refunded. (A reservation from a host whose name changed, such as a
recreated container, stays reserved: never refunded, never spendable.) Reservations are
written without an fsync of their own (``Ledger._write``): a power loss before the query's
commit may undo one, never a charge, since no answer leaves before its durable commit.
``dpproxy budget verify`` replays the log and recomputes the hash chain, so an edited, inserted
or deleted entry — or an account row edited behind the log's back — is detected.

Amounts are exact fractions stored as text (``"3/2"``); nothing is rounded.

This module holds the accountant (:class:`Ledger`: opening the file, the log, reserving and
committing); ``accounting/ledger_connection.py`` its connections and write transactions;
``accounting/ledger_account.py`` the accounts and what an analyst has left and has spent;
``accounting/ledger_flight.py`` single flight, the answer cache and crash recovery;
``accounting/ledger_store.py`` the tables, records and hash chain;
``accounting/ledger_admin.py`` administration and ``budget verify``'s replay.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from dpproxy.accounting.ledger_account import LedgerAccounts
from dpproxy.accounting.ledger_admin import LedgerAdmin
from dpproxy.accounting.ledger_connection import LedgerConnections
from dpproxy.accounting.ledger_flight import LedgerFlights
from dpproxy.accounting.ledger_store import (
    DDL,
    GENESIS,
    Account,
    LogEntry,
    ReleaseRecord,
    Verification,
    cost_body,
    entry_hash,
    frac_of,
    process_started,
    storage_error,
    text_of,
)
from dpproxy.accounting.memory import Reservation
from dpproxy.errors import BudgetExhausted, DPProxyError, InternalError, InvalidParameter
from dpproxy.values import Cost

# The ledger's API, with the records of accounting/ledger_store.py it takes and returns.
__all__ = [
    "LEDGER_ENV",
    "MEMORY",
    "SCHEMA_VERSION",
    "Account",
    "Ledger",
    "LogEntry",
    "ReleaseRecord",
    "Verification",
    "default_ledger_path",
    "ledger_setting",
]

SCHEMA_VERSION = 1
MEMORY = "memory"  # instead of a path: budgets kept in the process only (MemoryAccountant)
LEDGER_ENV = "DPPROXY_LEDGER"


def ledger_setting(explicit: str | None, *, durable: bool) -> str:
    """Which ledger to use: ``explicit`` (a path or ``memory``), else ``$DPPROXY_LEDGER``, else
    the default file when ``durable`` (``dpproxy serve``) or ``memory`` (one-off commands)."""
    if explicit:
        return explicit
    env = os.environ.get(LEDGER_ENV)
    if env:
        return env
    return str(default_ledger_path()) if durable else MEMORY


def default_ledger_path() -> Path:
    """``$DPPROXY_LEDGER``, else ``$XDG_DATA_HOME/dpproxy/ledger.sqlite`` (~/.local/share)."""
    env = os.environ.get(LEDGER_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dpproxy" / "ledger.sqlite"


class Ledger(LedgerConnections, LedgerAccounts, LedgerFlights, LedgerAdmin):
    """The durable accountant (see the module docstring); thread-safe, multi-process safe."""

    def __init__(
        self,
        path: str | Path,
        dataset: str,
        default_budget: Cost,
        *,
        cache: str = "analyst",
        busy_timeout: float = 60.0,
        clock: Any = time.time,
    ) -> None:
        if cache not in ("analyst", "shared", "off"):
            raise InvalidParameter(f"unknown cache scope {cache!r}", hint="analyst, shared or off")
        self.path = Path(path)
        self.dataset = dataset
        self.default_budget = default_budget
        self.cache_scope = cache
        self._busy = busy_timeout
        self._clock = clock
        self._local = threading.local()
        self._host = socket.gethostname()
        self._records: dict[str, ReleaseRecord] = {}
        self._records_lock = threading.Lock()
        # Single flight (claim): the keys this process computes, each with its token and an
        # event set when it lands; tokens whose end could not be recorded (abandoned).
        self._flights: dict[str, tuple[str, threading.Event]] = {}
        self._flights_lock = threading.Lock()
        self._abandoned: set[str] = set()
        try:
            self._open()
        except (DPProxyError, OSError) as e:
            raise storage_error(e, self.path) from None

    def _open(self) -> None:
        """Create the file with mode 0600 (SQLite gives its -wal and -shm files the same) in
        a directory made with mode 0700, then the tables; recover."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        con0 = self._con()
        con0.executescript(DDL)
        row = con0.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        if row is None:
            con0.execute("INSERT OR IGNORE INTO meta VALUES ('version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise InvalidParameter(
                f"ledger {self.path} has format {row[0]}, this dpproxy reads {SCHEMA_VERSION}"
            )
        self.recover()

    def probe(self) -> None:
        """Write to the ledger once, or raise LedgerUnavailable naming the file (``dpproxy
        serve`` at start). Opening writes nothing when there is nothing to recover, so a
        read-only ledger can still be shown and verified."""
        try:
            with self._write() as con:
                con.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('version', ?)", (str(SCHEMA_VERSION),)
                )
        except DPProxyError as e:
            raise storage_error(e, self.path) from None

    # ------------------------------------------------------------------ the log

    def _append(
        self, con: sqlite3.Connection, kind: str, principal: str, body: dict[str, Any]
    ) -> int:
        last = con.execute("SELECT seq, hash FROM log ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        t = float(self._clock())
        text = json.dumps(body, sort_keys=True, ensure_ascii=False)
        h = entry_hash(prev, seq, t, kind, self.dataset, principal, text)
        con.execute(
            "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, t, kind, self.dataset, principal, text, prev, h),
        )
        return seq

    # ------------------------------------------------------------------ Accountant

    def reserve(self, analyst: str, cost: Cost, record: ReleaseRecord | None = None) -> Reservation:
        """Hold ``cost`` for ``analyst`` (and every group of theirs), or raise ZD001."""
        with self._write(durable=False) as con:
            token = self._reserve(con, analyst, cost, record)
        return self._reserved(analyst, cost, token, record, None)

    def _reserve(
        self, con: sqlite3.Connection, analyst: str, cost: Cost, record: ReleaseRecord | None
    ) -> str:
        """Reserve in the transaction ``con``; the token."""
        accounts = [self._open_account(con, analyst)]
        for g in self._groups(con, analyst):
            ga = self._account(con, g, "group")
            if ga is not None:
                accounts.append(self._renewed(con, ga))
        for a in accounts:
            if not a.total.covers(a.spent + a.reserved + cost):
                who = "" if a.kind == "analyst" else f" (group {a.principal!r})"
                raise BudgetExhausted(
                    f"privacy budget exhausted for analyst {analyst!r}{who}: the query "
                    f"costs {cost}, {a.remaining} remains",
                    hint="ask for a smaller epsilon (and delta), or ask the data steward "
                    "for more budget (dpproxy budget grant)",
                )
        token = secrets.token_hex(16)
        groups = [a.principal for a in accounts[1:]]
        for a in accounts:
            self._store(
                con,
                Account(
                    a.principal,
                    a.kind,
                    a.total,
                    a.spent,
                    a.reserved + cost,
                    a.period_seconds,
                    a.period_start,
                ),
            )
        con.execute(
            "INSERT INTO reservations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token,
                self.dataset,
                analyst,
                json.dumps(groups),
                text_of(cost.epsilon),
                text_of(cost.delta),
                text_of(cost.rho),
                self._host,
                os.getpid(),
                process_started(os.getpid()),
                float(self._clock()),
            ),
        )
        body: dict[str, Any] = {"token": token, "groups": groups, **cost_body(cost)}
        if record is not None:
            body.update(query=record.query, plan=record.plan, mechanism=record.mechanism)
        self._append(con, "reserve", analyst, body)
        return token

    def _reserved(
        self,
        analyst: str,
        cost: Cost,
        token: str,
        record: ReleaseRecord | None,
        key: str | None,
    ) -> Reservation:
        if record is not None:
            with self._records_lock:
                self._records[token] = record
        return Reservation(analyst, cost, token, key)

    def _close(self, con: sqlite3.Connection, token: str) -> tuple[str, list[str], Cost]:
        row = con.execute(
            "SELECT analyst, groups, eps, delta, rho FROM reservations WHERE token = ? "
            "AND dataset = ?",
            (token, self.dataset),
        ).fetchone()
        if row is None:
            raise InternalError("unknown or already closed budget reservation")
        con.execute("DELETE FROM reservations WHERE token = ?", (token,))
        con.execute("DELETE FROM flights WHERE token = ?", (token,))
        return row[0], json.loads(row[1]), Cost(frac_of(row[2]), frac_of(row[3]), frac_of(row[4]))

    def _expire(self, con: sqlite3.Connection, token: str) -> None:
        """A reservation whose process is gone becomes spent (never refunded)."""
        analyst, groups, cost = self._close(con, token)
        self._move(con, analyst, groups, cost, spend=True)
        self._append(con, "expire", analyst, {"token": token, "groups": groups, **cost_body(cost)})

    def _move(
        self, con: sqlite3.Connection, analyst: str, groups: list[str], cost: Cost, spend: bool
    ) -> None:
        for principal, kind in [(analyst, "analyst"), *((g, "group") for g in groups)]:
            a = self._account(con, principal, kind)
            if a is None:
                continue  # a group removed while the query ran: nothing to charge
            spent = a.spent + cost if spend else a.spent
            self._store(
                con,
                Account(
                    a.principal,
                    a.kind,
                    a.total,
                    spent,
                    a.reserved - cost,
                    a.period_seconds,
                    a.period_start,
                ),
            )

    def commit(
        self,
        r: Reservation,
        cache: tuple[str, str] | None = None,
        more: tuple[tuple[str, str], ...] = (),
        *,
        failed: str | None = None,
    ) -> None:
        """Turn a reservation into spent budget and log the release; ``cache`` (the answer)
        and ``more`` (other released values, such as a drawn bound on rows per unit) are
        (key, payload) pairs to keep in the same transaction. ``failed``: the attempt is
        charged but released no answer (the SQLSTATE its analyst got, kept in the entry)."""
        with self._records_lock:
            record = self._records.pop(r.token, None)
        with self._landing(r), self._write() as con:
            analyst, groups, cost = self._close(con, r.token)
            self._move(con, analyst, groups, cost, spend=True)
            body: dict[str, Any] = {"token": r.token, "groups": groups, **cost_body(cost)}
            if record is not None:
                body.update(query=record.query, plan=record.plan, mechanism=record.mechanism)
            if failed is not None:
                body["failed"] = failed
            if cache is not None:  # the released answer's key: the steward console shows it
                body["answer"] = cache[0]
            self._append(con, "release", analyst, body)
            if self.cache_scope != "off":
                for key, payload in ((cache,) if cache is not None else ()) + more:
                    con.execute(
                        "INSERT OR IGNORE INTO cache VALUES (?, ?, ?, ?, ?)",
                        (key, self.dataset, analyst, payload, float(self._clock())),
                    )

    def rollback(self, r: Reservation) -> None:
        """Only for failures that provably happened before the database saw the query."""
        with self._records_lock:
            self._records.pop(r.token, None)
        with self._landing(r), self._write() as con:
            analyst, groups, cost = self._close(con, r.token)
            self._move(con, analyst, groups, cost, spend=False)
            self._append(con, "rollback", analyst, {"token": r.token, **cost_body(cost)})
