"""Administering and verifying the budget ledger (``accounting/ledger.py``): grants, resets,
groups, the accounts and the log as the ``dpproxy budget`` commands and the console read them,
and ``budget verify``'s replay of the hash-chained log against the accounts.

:class:`LedgerAdmin` is a mixin of :class:`~dpproxy.accounting.ledger.Ledger`; what it uses of
the ledger is the protocol :class:`_Core`.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from typing import Any, Protocol

from dpproxy.accounting.ledger_store import (
    GENESIS,
    Account,
    LogEntry,
    Verification,
    body_cost,
    cost_body,
    entry_hash,
    frac_of,
)
from dpproxy.errors import InvalidParameter
from dpproxy.values import Cost


class _Core(Protocol):
    """What :class:`LedgerAdmin`'s methods use of the :class:`Ledger` they are part of."""

    dataset: str
    _clock: Any

    def _con(self) -> sqlite3.Connection: ...

    def _write(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]: ...

    def _append(
        self, con: sqlite3.Connection, kind: str, principal: str, body: dict[str, Any]
    ) -> int: ...

    def _account(self, con: sqlite3.Connection, principal: str, kind: str) -> Account | None: ...

    def _store(self, con: sqlite3.Connection, a: Account) -> None: ...

    def members(self) -> list[tuple[str, str]]: ...

    def _replay(self, entries: list[tuple[str, str, dict[str, Any]]]) -> list[str]: ...


class LedgerAdmin:
    """The administration and verification methods of :class:`Ledger` (module docstring)."""

    # ------------------------------------------------------------------ administration

    def grant(
        self: _Core,
        principal: str,
        total: Cost,
        *,
        group: bool = False,
        period_seconds: int | None = None,
    ) -> Account:
        """Set a principal's total budget (creating the account), optionally renewing."""
        kind = "group" if group else "analyst"
        if period_seconds is not None and period_seconds <= 0:
            raise InvalidParameter("a renewal period must be positive")
        with self._write() as con:
            a = self._account(con, principal, kind)
            now = float(self._clock())
            if a is None:
                a = Account(principal, kind, total, Cost.zero(), Cost.zero(), period_seconds, now)
            else:
                # A period given to an account that had none starts now.
                start = a.period_start if a.period_seconds or not period_seconds else now
                a = Account(principal, kind, total, a.spent, a.reserved, period_seconds, start)
            body: dict[str, Any] = {
                "kind": kind,
                "period_seconds": period_seconds,
                "period_start": repr(a.period_start),
                **cost_body(total),
            }
            self._append(con, "grant", principal, body)
            self._store(con, a)
            return a

    def reset(self: _Core, principal: str, *, group: bool = False) -> Account:
        """Forget what a principal spent (a new budget period, by hand). Logged."""
        kind = "group" if group else "analyst"
        with self._write() as con:
            a = self._account(con, principal, kind)
            if a is None:
                raise InvalidParameter(f"no {kind} {principal!r} in the ledger")
            a = Account(
                a.principal,
                a.kind,
                a.total,
                Cost.zero(),
                a.reserved,
                a.period_seconds,
                float(self._clock()),
            )
            self._append(
                con, "reset", principal, {"kind": kind, "period_start": repr(a.period_start)}
            )
            self._store(con, a)
            return a

    def add_member(self: _Core, group: str, analyst: str) -> None:
        with self._write() as con:
            if self._account(con, group, "group") is None:
                raise InvalidParameter(
                    f"no group {group!r}", hint="create it with dpproxy budget grant --group"
                )
            added = con.execute(
                "INSERT OR IGNORE INTO members VALUES (?, ?, ?)", (self.dataset, group, analyst)
            ).rowcount
            if added:
                self._append(con, "join", analyst, {"group": group})

    def remove_member(self: _Core, group: str, analyst: str) -> None:
        with self._write() as con:
            removed = con.execute(
                "DELETE FROM members WHERE dataset = ? AND grp = ? AND analyst = ?",
                (self.dataset, group, analyst),
            ).rowcount
            if removed:
                self._append(con, "leave", analyst, {"group": group})

    def members(self: _Core) -> list[tuple[str, str]]:
        """(group, analyst) pairs of this dataset."""
        rows = (
            self._con()
            .execute(
                "SELECT grp, analyst FROM members WHERE dataset = ? ORDER BY grp, analyst",
                (self.dataset,),
            )
            .fetchall()
        )
        return [(r[0], r[1]) for r in rows]

    def accounts(self: _Core) -> list[Account]:
        rows = (
            self._con()
            .execute(
                "SELECT principal, kind FROM accounts WHERE dataset = ? ORDER BY kind, principal",
                (self.dataset,),
            )
            .fetchall()
        )
        con = self._con()
        return [a for p, k in rows if (a := self._account(con, p, k)) is not None]

    def account(self: _Core, principal: str, *, group: bool = False) -> Account | None:
        return self._account(self._con(), principal, "group" if group else "analyst")

    def entries(
        self: _Core, principal: str | None = None, limit: int | None = None
    ) -> list[LogEntry]:
        sql = "SELECT seq, time, kind, principal, body FROM log WHERE dataset = ?"
        args: list[Any] = [self.dataset]
        if principal is not None:
            sql += " AND principal = ?"
            args.append(principal)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        rows = self._con().execute(sql, args).fetchall()
        return [LogEntry(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in reversed(rows)]

    # ------------------------------------------------------------------ verification

    def verify(self: _Core) -> Verification:
        """Recompute the hash chain over the whole file and replay this dataset's log."""
        con = self._con()
        problems: list[str] = []
        prev, expected_seq = GENESIS, 1
        rows = con.execute(
            "SELECT seq, time, kind, dataset, principal, body, prev, hash FROM log ORDER BY seq"
        ).fetchall()
        for seq, t, kind, dataset, principal, body, stored_prev, stored in rows:
            if seq != expected_seq:
                problems.append(f"entry {expected_seq} is missing (next is {seq})")
            if stored_prev != prev:
                problems.append(f"entry {seq}: the link to the previous entry is broken")
            if entry_hash(stored_prev, seq, t, kind, dataset, principal, body) != stored:
                problems.append(f"entry {seq}: its contents do not match its hash")
            prev, expected_seq = stored, seq + 1
        entries: list[tuple[str, str, dict[str, Any]]] = []
        for seq, _t, kind, dataset, principal, body, _p, _h in rows:
            if dataset != self.dataset:
                continue
            try:
                parsed = json.loads(body)
                if not isinstance(parsed, dict):
                    raise ValueError("not an object")
            except ValueError:
                problems.append(f"entry {seq}: its body cannot be read")
                continue
            entries.append((kind, principal, parsed))
        try:
            problems += self._replay(entries)
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
            problems.append(f"the log cannot be replayed: {type(e).__name__}: {e}")
        return Verification(not problems, len(rows), tuple(problems), prev)

    def _replay(self: _Core, entries: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
        """The accounts, periods, memberships and open reservations the log implies, against
        the tables."""
        accounts: dict[tuple[str, str], dict[str, Any]] = {}
        open_: dict[str, tuple[str, list[str], Cost]] = {}
        members: set[tuple[str, str]] = set()

        def acct(p: str, k: str) -> dict[str, Any]:
            return accounts.setdefault(
                (p, k),
                {
                    "total": Cost.zero(),
                    "spent": Cost.zero(),
                    "reserved": Cost.zero(),
                    "period_seconds": None,
                    "period_start": None,
                },
            )

        for kind, principal, b in entries:
            if kind in ("open", "grant"):
                a = acct(principal, b["kind"])
                a["total"] = Cost(frac_of(b["eps"]), frac_of(b["delta"]))
                if kind == "grant":
                    a["period_seconds"] = b.get("period_seconds")
                a["period_start"] = b.get("period_start")  # the account's start afterwards
            elif kind in ("reset", "renew"):
                a = acct(principal, b["kind"])
                a["spent"] = Cost.zero()
                a["period_start"] = b.get("period_start")
            elif kind == "reserve":
                cost = body_cost(b)
                open_[b["token"]] = (principal, b["groups"], cost)
                for p, k in [(principal, "analyst"), *((g, "group") for g in b["groups"])]:
                    acct(p, k)["reserved"] = acct(p, k)["reserved"] + cost
            elif kind in ("release", "rollback", "expire"):
                if b["token"] not in open_:
                    return [f"the log closes reservation {b['token'][:8]}… it never opened"]
                who, groups, cost = open_.pop(b["token"])
                for p, k in [(who, "analyst"), *((g, "group") for g in groups)]:
                    a = acct(p, k)
                    a["reserved"] = a["reserved"] - cost
                    if kind != "rollback":
                        a["spent"] = a["spent"] + cost
            elif kind == "join":
                members.add((b["group"], principal))
            elif kind == "leave":
                members.discard((b["group"], principal))
        problems = []
        con = self._con()
        for (p, k), want in accounts.items():
            row = self._account(con, p, k)
            if row is None:
                problems.append(f"{k} {p!r}: the account row is missing")
                continue
            for what, have in (
                ("total", row.total),
                ("spent", row.spent),
                ("reserved", row.reserved),
            ):
                w = want[what]
                same = (have.epsilon, have.delta) == (w.epsilon, w.delta)
                if what != "total":
                    same = same and have.rho == w.rho
                if not same:
                    problems.append(f"{k} {p!r}: {what} {have} but the log says {w}")
            if row.period_seconds != want["period_seconds"]:
                problems.append(f"{k} {p!r}: the renewal period differs from the log's")
            if want["period_start"] is not None and repr(row.period_start) != want["period_start"]:
                problems.append(f"{k} {p!r}: the period start differs from the log's")
        tables = con.execute(
            "SELECT principal, kind FROM accounts WHERE dataset = ?", (self.dataset,)
        ).fetchall()
        for p, k in tables:
            if (p, k) not in accounts:
                problems.append(f"{k} {p!r}: an account with no entry in the log")
        held = {
            r[0]
            for r in con.execute(
                "SELECT token FROM reservations WHERE dataset = ?", (self.dataset,)
            ).fetchall()
        }
        if held != set(open_):
            problems.append("the open reservations differ from the log's")
        if set(self.members()) != members:
            problems.append("the group memberships differ from the log's")
        return problems
