"""The connections and write transactions of the budget ledger (``accounting/ledger.py``): one
SQLite connection per thread, in WAL mode and at ``synchronous = FULL``, and the write
transaction that holds SQLite's write lock from its first statement (at ``NORMAL``, without an
fsync of its own, for a reservation).

:class:`LedgerConnections` is a mixin of :class:`~dpproxy.accounting.ledger.Ledger`; what it uses
of the ledger is the protocol :class:`_Connected`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from dpproxy.accounting.ledger_store import LedgerConnection, storage_error
from dpproxy.errors import DPProxyError, LedgerLocked


class _Connected(Protocol):
    """What :class:`LedgerConnections`' methods use of the :class:`Ledger` they are part of."""

    path: Path
    _busy: float
    _local: threading.local

    def _con(self) -> sqlite3.Connection: ...

    def _write(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]: ...

    def _full(self, con: sqlite3.Connection) -> None: ...


class LedgerConnections:
    """The connections and write transactions of :class:`Ledger` (module docstring)."""

    # ------------------------------------------------------------------ connections

    def _con(self: _Connected) -> sqlite3.Connection:
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
    def _write(self: _Connected, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
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

    def _full(self: _Connected, con: sqlite3.Connection) -> None:
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

    def close(self: _Connected) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
