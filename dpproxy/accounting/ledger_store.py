"""The storage of the budget ledger (``accounting/ledger.py``): its tables, the exact amounts
as text, the SQLSTATE a storage failure becomes, the records it returns (accounts, log entries,
a verification), the hash chain of the log, and whether the process that made a reservation
is still running.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpproxy.errors import (
    DPProxyError,
    InvalidParameter,
    LedgerFull,
    LedgerLocked,
    LedgerReadOnly,
    LedgerUnavailable,
)
from dpproxy.values import Cost

GENESIS = "0" * 64  # the link of the first log entry

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (
    dataset TEXT NOT NULL, principal TEXT NOT NULL, kind TEXT NOT NULL,
    total_eps TEXT NOT NULL, total_delta TEXT NOT NULL,
    spent_eps TEXT NOT NULL, spent_delta TEXT NOT NULL, spent_rho TEXT NOT NULL,
    reserved_eps TEXT NOT NULL, reserved_delta TEXT NOT NULL, reserved_rho TEXT NOT NULL,
    period_seconds INTEGER, period_start REAL NOT NULL,
    PRIMARY KEY (dataset, principal, kind));
CREATE TABLE IF NOT EXISTS members (
    dataset TEXT NOT NULL, grp TEXT NOT NULL, analyst TEXT NOT NULL,
    PRIMARY KEY (dataset, grp, analyst));
CREATE TABLE IF NOT EXISTS reservations (
    token TEXT PRIMARY KEY, dataset TEXT NOT NULL, analyst TEXT NOT NULL,
    groups TEXT NOT NULL, eps TEXT NOT NULL, delta TEXT NOT NULL, rho TEXT NOT NULL,
    host TEXT NOT NULL, pid INTEGER NOT NULL, started TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS log (
    seq INTEGER PRIMARY KEY, time REAL NOT NULL, kind TEXT NOT NULL, dataset TEXT NOT NULL,
    principal TEXT NOT NULL, body TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY, dataset TEXT NOT NULL, analyst TEXT NOT NULL,
    payload TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS flights (
    key TEXT PRIMARY KEY, dataset TEXT NOT NULL, token TEXT NOT NULL);
"""


def frac_of(text: str) -> Fraction:
    return Fraction(text)


def text_of(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


# SQLite's primary result codes (https://sqlite.org/rescode.html) behind a LedgerUnavailable.
_SQLITE_CODES: dict[int, type[LedgerUnavailable]] = {
    3: LedgerReadOnly,  # SQLITE_PERM
    5: LedgerLocked,  # SQLITE_BUSY (after the busy timeout)
    6: LedgerLocked,  # SQLITE_LOCKED
    8: LedgerReadOnly,  # SQLITE_READONLY (a read-only file, directory or file system)
    13: LedgerFull,  # SQLITE_FULL (no space left, or a file size limit)
}
_OS_CODES: dict[int, type[LedgerUnavailable]] = {
    errno.ENOSPC: LedgerFull,
    errno.EDQUOT: LedgerFull,
    errno.EROFS: LedgerReadOnly,
    errno.EACCES: LedgerReadOnly,
    errno.EPERM: LedgerReadOnly,
}
_WHAT = {
    LedgerFull: "is full (no space left on its disk)",
    LedgerReadOnly: "is read-only",
    LedgerLocked: "is locked by another process",
    LedgerUnavailable: "cannot be read or written",
}


def storage_error(e: BaseException, path: Path | None = None) -> DPProxyError:
    """The error a failure of the ledger's storage (a ``sqlite3.Error`` or an ``OSError``)
    becomes: PostgreSQL's closest SQLSTATE — 53100 disk full, 25006 read-only, 55P03 locked,
    else 58030 I/O error (22023 for a file that is not a SQLite database). With ``path``
    (opening the ledger, for the operator) the message names the file and the cause; without
    (a query, for a client) the cause goes to ``log_detail`` only."""
    if isinstance(e, DPProxyError):
        if path is None or not isinstance(e.__cause__, sqlite3.Error | OSError):
            return e
        e = e.__cause__
    if isinstance(e, OSError):
        cls = _OS_CODES.get(e.errno or 0, LedgerUnavailable)
        cause = e.strerror or str(e)
    else:
        code = getattr(e, "sqlite_errorcode", 0) & 0xFF
        cause = f"{e} ({getattr(e, 'sqlite_errorname', type(e).__name__)})"
        if code == 26:  # SQLITE_NOTADB
            where = f"{path}" if path is not None else "the budget ledger file"
            return InvalidParameter(
                f"{where} is not a dpproxy ledger (a SQLite database): {cause}",
                hint="--ledger (or $DPPROXY_LEDGER) must name a dpproxy ledger",
            )
        cls = _SQLITE_CODES.get(code, LedgerUnavailable)
    if path is not None:
        return cls(f"the budget ledger {path} {_WHAT[cls]}: {cause}", log_detail=cause)
    return cls(
        f"the budget ledger {_WHAT[cls]}: no charge can be recorded, so nothing is released",
        log_detail=cause,
    )


class LedgerConnection(sqlite3.Connection):
    """A connection to the ledger whose failures are DPProxyErrors (:func:`storage_error`):
    a client gets a SQLSTATE, never a raw ``sqlite3`` exception or a dropped session."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as e:
            raise storage_error(e) from e

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.Error as e:
            raise storage_error(e) from e


@dataclass(frozen=True, slots=True)
class Account:
    """One principal's budget on one dataset."""

    principal: str
    kind: str  # "analyst" | "group"
    total: Cost
    spent: Cost
    reserved: Cost
    period_seconds: int | None
    period_start: float

    @property
    def remaining(self) -> Cost:
        return self.total - (self.spent + self.reserved)


@dataclass(frozen=True, slots=True)
class LogEntry:
    seq: int
    time: float
    kind: str
    principal: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Verification:
    """``head`` is the hash of the last entry: keep it elsewhere to detect a truncated log
    (removing the newest entries leaves a consistent chain that only the head can expose)."""

    ok: bool
    entries: int
    problems: tuple[str, ...]
    head: str = GENESIS


@dataclass(frozen=True, slots=True)
class ReleaseRecord:
    """What the log keeps about a release: never a value, only what was asked and how."""

    query: str
    plan: str
    mechanism: str


def cost_body(c: Cost) -> dict[str, str]:
    return {"eps": text_of(c.epsilon), "delta": text_of(c.delta), "rho": text_of(c.rho)}


def body_cost(b: dict[str, Any]) -> Cost:
    return Cost(frac_of(b["eps"]), frac_of(b["delta"]), frac_of(b.get("rho", "0")))


def entry_hash(
    prev: str, seq: int, t: float, kind: str, dataset: str, principal: str, body: str
) -> str:
    canon = json.dumps([prev, seq, repr(t), kind, dataset, principal, body], ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def process_started(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, from /proc), or "" where /proc is
    unavailable: with the pid it names one run of a process, so a later process that got the
    same pid — dpproxy as PID 1 in a restarted container — is not taken for the one that made
    a reservation."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int, started: str) -> bool:
    """Is the process that made a reservation still running?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not started or process_started(pid) == started
