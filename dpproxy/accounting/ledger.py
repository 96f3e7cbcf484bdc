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

This module holds the accountant (:class:`Ledger`: connections, accounts, reserving and
committing); ``accounting/ledger_flight.py`` single flight, the answer cache and crash
recovery; ``accounting/ledger_store.py`` the tables, records and hash chain;
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpproxy.accounting.composition import tightest
from dpproxy.accounting.ledger_admin import LedgerAdmin
from dpproxy.accounting.ledger_flight import LedgerFlights
from dpproxy.accounting.ledger_store import (
    DDL,
    GENESIS,
    Account,
    LedgerConnection,
    LogEntry,
    ReleaseRecord,
    Verification,
    body_cost,
    cost_body,
    entry_hash,
    frac_of,
    process_started,
    storage_error,
    text_of,
)
from dpproxy.accounting.memory import BudgetStatus, Reservation, Spending
from dpproxy.errors import (
    BudgetExhausted,
    DPProxyError,
    InternalError,
    InvalidParameter,
    LedgerLocked,
)
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


class Ledger(LedgerFlights, LedgerAdmin):
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

    # ------------------------------------------------------------------ connections

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            try:
                con = sqlite3.connect(
                    self.path,
                    timeout=self._busy,
                    isolation_level=None,
                    check_same_thread=True,
                    factory=LedgerConnection,
                )
            except sqlite3.Error as e:
                raise storage_error(e) from e
            try:
                # Switching a new file to WAL needs the write lock and does not wait for it
                # on its own: retry while it is locked, until the busy timeout (two processes
                # creating one ledger). Any other failure (read-only) is final at once.
                deadline = time.monotonic() + self._busy
                while True:
                    try:
                        con.execute("PRAGMA journal_mode = WAL")
                        break
                    except LedgerLocked:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.01)
                con.execute("PRAGMA synchronous = FULL")
                con.execute(f"PRAGMA busy_timeout = {int(self._busy * 1000)}")
            except BaseException:
                con.close()
                raise
            self._local.con = con
        return con

    @contextmanager
    def _write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction, holding SQLite's write lock from its first statement. Any
        failure, the COMMIT's included (a full disk), rolls it back: the lock is never kept
        (SQLite may already have rolled back on its own).

        ``durable=False`` is for reservations only (:meth:`reserve`, :meth:`claim`): the
        transaction commits at ``synchronous = NORMAL``, without an fsync of its own. In WAL
        mode it is then atomic, isolated and visible at once to every connection and process
        (so concurrent reservations still cannot overspend), and it survives a crash of the
        process (the WAL is written before COMMIT returns), but a power loss or a crash of
        the operating system before the next durable transaction may undo it. That loses no
        spending: no answer leaves before its reservation is turned into spent budget by
        :meth:`commit`, a durable transaction, and the fsync of the WAL that ends it makes
        every earlier transaction durable too (the WAL is one append-only file, recovered
        only as a prefix). A reservation undone so held no answer that was released. What
        it saves is one fsync per query: a query costs one (its commit) instead of two."""
        con = self._con()
        if not durable:
            con.execute("PRAGMA synchronous = NORMAL")
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    with contextlib.suppress(DPProxyError):
                        con.execute("ROLLBACK")
                raise
        finally:
            if not durable:
                self._full(con)

    def _full(self, con: sqlite3.Connection) -> None:
        """Back to ``synchronous = FULL`` after a reservation; a connection that cannot be
        set back is closed and forgotten, so no later transaction commits on it undurably
        (the next :meth:`_con` opens one at FULL)."""
        try:
            con.execute("PRAGMA synchronous = FULL")
        except BaseException:
            if getattr(self._local, "con", None) is con:
                self._local.con = None
            with contextlib.suppress(Exception):
                con.close()
            raise

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

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

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

    # ------------------------------------------------------------------ accounts

    def _account(self, con: sqlite3.Connection, principal: str, kind: str) -> Account | None:
        row = con.execute(
            "SELECT total_eps, total_delta, spent_eps, spent_delta, spent_rho, reserved_eps, "
            "reserved_delta, reserved_rho, period_seconds, period_start FROM accounts "
            "WHERE dataset = ? AND principal = ? AND kind = ?",
            (self.dataset, principal, kind),
        ).fetchone()
        if row is None:
            return None
        return Account(
            principal,
            kind,
            Cost(frac_of(row[0]), frac_of(row[1])),
            Cost(frac_of(row[2]), frac_of(row[3]), frac_of(row[4])),
            Cost(frac_of(row[5]), frac_of(row[6]), frac_of(row[7])),
            row[8],
            row[9],
        )

    def _store(self, con: sqlite3.Connection, a: Account) -> None:
        con.execute(
            "INSERT OR REPLACE INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.dataset,
                a.principal,
                a.kind,
                text_of(a.total.epsilon),
                text_of(a.total.delta),
                text_of(a.spent.epsilon),
                text_of(a.spent.delta),
                text_of(a.spent.rho),
                text_of(a.reserved.epsilon),
                text_of(a.reserved.delta),
                text_of(a.reserved.rho),
                a.period_seconds,
                a.period_start,
            ),
        )

    def _open_account(self, con: sqlite3.Connection, analyst: str) -> Account:
        """The analyst's account, opened with the schema's default budget on first use."""
        a = self._account(con, analyst, "analyst")
        if a is None:
            a = Account(
                analyst,
                "analyst",
                self.default_budget,
                Cost.zero(),
                Cost.zero(),
                None,
                float(self._clock()),
            )
            body = {"kind": "analyst", "period_start": repr(a.period_start), **cost_body(a.total)}
            self._append(con, "open", analyst, body)
            self._store(con, a)
        return self._renewed(con, a)

    def _renewed(self, con: sqlite3.Connection, a: Account) -> Account:
        """Start a new period (spent back to zero) if the account's period has run out."""
        if not a.period_seconds:
            return a
        now = float(self._clock())
        periods = int((now - a.period_start) // a.period_seconds)
        if periods <= 0:
            return a
        start = a.period_start + periods * a.period_seconds
        self._append(con, "renew", a.principal, {"kind": a.kind, "period_start": repr(start)})
        a = Account(a.principal, a.kind, a.total, Cost.zero(), a.reserved, a.period_seconds, start)
        self._store(con, a)
        return a

    def _groups(self, con: sqlite3.Connection, analyst: str) -> list[str]:
        rows = con.execute(
            "SELECT grp FROM members WHERE dataset = ? AND analyst = ? ORDER BY grp",
            (self.dataset, analyst),
        ).fetchall()
        return [r[0] for r in rows]

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

    def remaining(self, analyst: str) -> Cost:
        """What the analyst can still spend: their own account's and every group's remaining,
        whichever is smaller. Read without the write lock unless an account must be opened or
        renewed first."""
        con = self._con()
        accounts = [self._account(con, analyst, "analyst")]
        accounts += [self._account(con, g, "group") for g in self._groups(con, analyst)]
        now = float(self._clock())
        if accounts[0] is None or any(
            a is not None and a.period_seconds and now - a.period_start >= a.period_seconds
            for a in accounts
        ):
            with self._write() as wcon:
                accounts = [self._open_account(wcon, analyst)]
                for g in self._groups(wcon, analyst):
                    ga = self._account(wcon, g, "group")
                    accounts.append(None if ga is None else self._renewed(wcon, ga))
        remaining: Cost | None = None
        for a in accounts:
            if a is None:
                continue
            r = a.remaining
            remaining = (
                r
                if remaining is None
                else Cost(min(remaining.epsilon, r.epsilon), min(remaining.delta, r.delta))
            )
        assert remaining is not None
        return remaining

    def spent(self, analyst: str) -> Cost:
        with self._write() as con:
            return self._open_account(con, analyst).spent

    def status(self, analyst: str) -> BudgetStatus:
        """The analyst's own account (groups aside) and the tightest (ε, δ) of its spending
        in the current period."""
        with self._write() as con:
            a = self._open_account(con, analyst)
        costs = [s.cost for s in self._period_releases(analyst)]
        return BudgetStatus(a.total, a.spent, a.reserved, tightest(costs))

    def releases(self, analyst: str) -> list[Spending]:
        """Every release (and expired reservation) charged to the analyst, oldest first."""
        out = []
        for e in self.entries(analyst):
            if e.kind in ("release", "expire"):
                failed = e.body.get("failed")
                out.append(
                    Spending(
                        e.seq,
                        e.time,
                        "failed" if failed is not None else e.kind,
                        str(e.body.get("query", "")),
                        str(e.body.get("plan", "")),
                        str(e.body.get("mechanism", "")),
                        body_cost(e.body),
                        None if failed is None else str(failed),
                    )
                )
        return out

    def _period_releases(self, analyst: str) -> list[Spending]:
        since = 0
        for e in self.entries(analyst):
            if e.kind in ("reset", "renew") and e.body.get("kind") == "analyst":
                since = e.seq
        return [s for s in self.releases(analyst) if s.seq > since]
