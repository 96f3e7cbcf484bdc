"""The accounts of the budget ledger (``accounting/ledger.py``): a principal's row read and
stored, an analyst's account opened with the default budget on first use, a new period started
when one has run out, an analyst's groups, and what an analyst has left and has spent.

:class:`LedgerAccounts` is a mixin of :class:`~dpproxy.accounting.ledger.Ledger`; what it uses of
the ledger is the protocol :class:`_Accounting`.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any, Protocol

from dpproxy.accounting.composition import tightest
from dpproxy.accounting.ledger_store import (
    Account,
    LogEntry,
    body_cost,
    cost_body,
    frac_of,
    text_of,
)
from dpproxy.accounting.memory import BudgetStatus, Spending
from dpproxy.values import Cost


class _Accounting(Protocol):
    """What :class:`LedgerAccounts`' methods use of the :class:`Ledger` they are part of."""

    dataset: str
    default_budget: Cost
    _clock: Any

    def _con(self) -> sqlite3.Connection: ...

    def _write(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]: ...

    def _append(
        self, con: sqlite3.Connection, kind: str, principal: str, body: dict[str, Any]
    ) -> int: ...

    def _account(self, con: sqlite3.Connection, principal: str, kind: str) -> Account | None: ...

    def _store(self, con: sqlite3.Connection, a: Account) -> None: ...

    def _open_account(self, con: sqlite3.Connection, analyst: str) -> Account: ...

    def _renewed(self, con: sqlite3.Connection, a: Account) -> Account: ...

    def _groups(self, con: sqlite3.Connection, analyst: str) -> list[str]: ...

    def entries(self, principal: str | None = None, limit: int | None = None) -> list[LogEntry]: ...

    def releases(self, analyst: str) -> list[Spending]: ...

    def _period_releases(self, analyst: str) -> list[Spending]: ...


class LedgerAccounts:
    """The accounts of :class:`Ledger` and what they have left and spent (module docstring)."""

    # ------------------------------------------------------------------ accounts

    def _account(
        self: _Accounting, con: sqlite3.Connection, principal: str, kind: str
    ) -> Account | None:
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

    def _store(self: _Accounting, con: sqlite3.Connection, a: Account) -> None:
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

    def _open_account(self: _Accounting, con: sqlite3.Connection, analyst: str) -> Account:
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

    def _renewed(self: _Accounting, con: sqlite3.Connection, a: Account) -> Account:
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

    def _groups(self: _Accounting, con: sqlite3.Connection, analyst: str) -> list[str]:
        rows = con.execute(
            "SELECT grp FROM members WHERE dataset = ? AND analyst = ? ORDER BY grp",
            (self.dataset, analyst),
        ).fetchall()
        return [r[0] for r in rows]

    # ------------------------------------------------------------------ left and spent

    def remaining(self: _Accounting, analyst: str) -> Cost:
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

    def spent(self: _Accounting, analyst: str) -> Cost:
        with self._write() as con:
            return self._open_account(con, analyst).spent

    def status(self: _Accounting, analyst: str) -> BudgetStatus:
        """The analyst's own account (groups aside) and the tightest (ε, δ) of its spending
        in the current period."""
        with self._write() as con:
            a = self._open_account(con, analyst)
        costs = [s.cost for s in self._period_releases(analyst)]
        return BudgetStatus(a.total, a.spent, a.reserved, tightest(costs))

    def releases(self: _Accounting, analyst: str) -> list[Spending]:
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

    def _period_releases(self: _Accounting, analyst: str) -> list[Spending]:
        since = 0
        for e in self.entries(analyst):
            if e.kind in ("reset", "renew") and e.body.get("kind") == "analyst":
                since = e.seq
        return [s for s in self.releases(analyst) if s.seq > since]
