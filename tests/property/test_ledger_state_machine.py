"""The durable SQLite Ledger under any interleaving of its operations, crashes included.

A hypothesis state machine drives a real ledger file (a fresh temporary directory per run, a fake
clock) next to a plain-Python model of every account: the total, and the ε and δ spent and
reserved. Three analysts share the file; a group ``team`` always has alice as a member (bob and
carol join and leave), so her reservations must fit her budget *and* the group's. Besides
reserve / commit / rollback the machine

* *crashes*: some open reservations are made to belong to a process that is certainly dead (their
  ``pid`` is rewritten in the file to one above the kernel's largest) and a new ``Ledger`` is
  opened on the file — recovery must turn exactly those into spent, never refund them, and leave
  this (living) process's reservations open and committable;
* *reopens* the file (nothing may change), *grants* new totals (never below what is already
  used), optionally with a renewal period, *resets* accounts and lets the clock run so that
  periods renew.

After every step: the ledger's accounts equal the model's; ``spent + reserved ≤ total`` in ε and
δ; ``remaining()`` is the model's (the smallest over the analyst and their groups); spent never
shrinks except through a reset or renewal the log records; the open reservations are exactly the
model's; ``verify()`` is ok; and, per account, the log's release and expire entries since its last
reset or renewal add up to what it has spent.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction as F
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from dpproxy.accounting.ledger import Ledger, LogEntry
from dpproxy.accounting.memory import Reservation
from dpproxy.errors import BudgetExhausted, InternalError, InvalidParameter
from dpproxy.values import Cost

ANALYSTS = ("alice", "bob", "carol")
GROUP = "team"
DATASET = "adult"
# Linux pids never exceed 2**22 (the largest pid_max), so no process can have this one.
DEAD_PID = 2**22 + 1

costs = st.sampled_from(
    [
        Cost(F(1, 3)),
        Cost(F(1, 2), F(1, 10**6)),
        Cost(F(1)),
        Cost(F(2, 3), F(1, 4)),
        Cost(F(5, 2)),
    ]
)
totals = st.sampled_from(
    [Cost(F(0)), Cost(F(1)), Cost(F(2), F(1, 10**6)), Cost(F(3), F(1, 2)), Cost(F(10), F(1, 10**5))]
)
extra_eps = st.sampled_from([F(0), F(1, 3), F(1), F(5, 2)])
extra_delta = st.sampled_from([F(0), F(1, 10**6), F(1, 4)])
periods = st.sampled_from([None, None, 10, 25])
ticks = st.sampled_from([1, 7, 30])

Pair = tuple[F, F]  # (ε, δ)


def _pair(c: Cost) -> Pair:
    return (c.epsilon, c.delta)


def _add(a: Pair, b: Pair) -> Pair:
    return (a[0] + b[0], a[1] + b[1])


def _sub(a: Pair, b: Pair) -> Pair:
    return (a[0] - b[0], a[1] - b[1])


def _le(a: Pair, b: Pair) -> bool:
    return a[0] <= b[0] and a[1] <= b[1]


ZERO: Pair = (F(0), F(0))


@dataclass
class Account:
    """The model of one account."""

    total: Pair
    period: int | None
    start: float
    spent: Pair = ZERO
    reserved: Pair = ZERO

    @property
    def used(self) -> Pair:
        return _add(self.spent, self.reserved)


@dataclass
class Open:
    r: Reservation
    groups: list[str]
    cost: Pair = field(init=False)

    def __post_init__(self) -> None:
        self.cost = _pair(self.r.cost)


Key = tuple[str, str]  # (principal, "analyst" | "group")


class LedgerMachine(RuleBasedStateMachine):
    """Any interleaving of ledger operations and crashes keeps the budgets sound."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-sm-"))
        self.path = self.dir / "ledger.sqlite"
        self.now = 1000.0
        self.ledger: Ledger | None = None

    def teardown(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --------------------------------------------------------------- helpers

    def _clock(self) -> float:
        return self.now

    def _open_ledger(self) -> Ledger:
        return Ledger(self.path, DATASET, self.default, clock=self._clock)

    @property
    def led(self) -> Ledger:
        assert self.ledger is not None
        return self.ledger

    def _groups_of(self, analyst: str) -> list[str]:
        return [GROUP] if analyst in self.members else []

    def _charged(self, analyst: str, groups: list[str]) -> list[Account]:
        return [self.model[(analyst, "analyst")], *(self.model[(g, "group")] for g in groups)]

    def _sync_renewals(self) -> None:
        """Touch every account (remaining() renews lapsed periods) and renew the model alike.

        alice is always in the group, so asking for her budget renews the group too."""
        for a in ANALYSTS:
            self.led.remaining(a)
        for key, acct in self.model.items():
            if not acct.period:
                continue
            n = int((self.now - acct.start) // acct.period)
            if n > 0:
                acct.start += n * acct.period
                acct.spent = ZERO
                self.spent_may_drop.add(key)

    # --------------------------------------------------------------- setup

    @initialize(default=totals, group_total=totals)
    def setup(self, default: Cost, group_total: Cost) -> None:
        self.default = default
        self.ledger = self._open_ledger()
        self.led.grant(GROUP, group_total, group=True)
        self.led.add_member(GROUP, "alice")
        self.members = {"alice"}
        self.model: dict[Key, Account] = {
            (GROUP, "group"): Account(_pair(group_total), None, self.now)
        }
        for a in ANALYSTS:
            self.led.remaining(a)  # opens the account with the default budget
            self.model[(a, "analyst")] = Account(_pair(default), None, self.now)
        self.open: list[Open] = []
        self.closed: list[Reservation] = []
        self.expired = 0
        self.last_spent: dict[Key, Pair] = {k: ZERO for k in self.model}
        self.spent_may_drop: set[Key] = set()

    # --------------------------------------------------------------- the accountant

    @rule(analyst=st.sampled_from(ANALYSTS), cost=costs)
    def reserve(self, analyst: str, cost: Cost) -> None:
        groups = self._groups_of(analyst)
        charged = self._charged(analyst, groups)
        c = _pair(cost)
        if all(_le(_add(a.used, c), a.total) for a in charged):
            r = self.led.reserve(analyst, cost)
            assert (r.analyst, r.cost) == (analyst, cost)
            for a in charged:
                a.reserved = _add(a.reserved, c)
            self.open.append(Open(r, groups))
        else:
            with pytest.raises(BudgetExhausted) as e:
                self.led.reserve(analyst, cost)
            assert e.value.sqlstate == "ZD001"

    def _take(self, i: int) -> Open:
        return self.open.pop(i % len(self.open))

    @precondition(lambda self: self.open)
    @rule(i=st.integers(min_value=0, max_value=50))
    def commit(self, i: int) -> None:
        o = self._take(i)
        self.led.commit(o.r)
        for a in self._charged(o.r.analyst, o.groups):
            a.reserved = _sub(a.reserved, o.cost)
            a.spent = _add(a.spent, o.cost)
        self.closed.append(o.r)

    @precondition(lambda self: self.open)
    @rule(i=st.integers(min_value=0, max_value=50))
    def rollback(self, i: int) -> None:
        o = self._take(i)
        self.led.rollback(o.r)
        for a in self._charged(o.r.analyst, o.groups):
            a.reserved = _sub(a.reserved, o.cost)
        self.closed.append(o.r)

    @precondition(lambda self: self.closed)
    @rule(i=st.integers(min_value=0, max_value=50), commit=st.booleans())
    def close_again(self, i: int, commit: bool) -> None:
        """A closed reservation (committed, rolled back or expired) cannot be closed again."""
        r = self.closed[i % len(self.closed)]
        with pytest.raises(InternalError):
            (self.led.commit if commit else self.led.rollback)(r)

    @rule(analyst=st.sampled_from(ANALYSTS), cost=costs)
    def forged_reservation_is_refused(self, analyst: str, cost: Cost) -> None:
        with pytest.raises(InternalError):
            self.led.commit(Reservation(analyst, cost, "not-a-token"))

    # --------------------------------------------------------------- crashes

    @rule(dead=st.lists(st.booleans(), max_size=8))
    def crash(self, dead: list[bool]) -> None:
        """The process holding some open reservations dies; a new process opens the file."""
        chosen = [o for o, d in zip(self.open, dead, strict=False) if d]
        raw = sqlite3.connect(self.path, timeout=60)
        try:
            with raw:
                for o in chosen:
                    raw.execute(
                        "UPDATE reservations SET pid = ? WHERE token = ?", (DEAD_PID, o.r.token)
                    )
        finally:
            raw.close()
        self.led.close()
        self.ledger = self._open_ledger()  # recovery runs here
        for o in chosen:
            self.open.remove(o)
            for a in self._charged(o.r.analyst, o.groups):
                a.reserved = _sub(a.reserved, o.cost)
                a.spent = _add(a.spent, o.cost)  # spent, never refunded
            self.closed.append(o.r)
        self.expired += len(chosen)
        assert sum(e.kind == "expire" for e in self.led.entries()) == self.expired

    @rule()
    def reopen(self) -> None:
        """Closing and reopening the file changes nothing (this process is alive)."""
        before = self.led.accounts()
        self.led.close()
        self.ledger = self._open_ledger()
        assert self.led.accounts() == before

    # --------------------------------------------------------------- administration

    @rule(
        who=st.sampled_from([*ANALYSTS, GROUP]),
        more_eps=extra_eps,
        more_delta=extra_delta,
        period=periods,
    )
    def grant(self, who: str, more_eps: F, more_delta: F, period: int | None) -> None:
        """A new total, never below what the account already uses (lowering one below is
        tested on its own, below). A period given to an account that had none starts now."""
        key = (who, "group" if who == GROUP else "analyst")
        acct = self.model[key]
        total = _add(acct.used, (more_eps, more_delta))
        got = self.led.grant(who, Cost(*total), group=who == GROUP, period_seconds=period)
        assert _pair(got.total) == total
        if period and not acct.period:
            acct.start = self.now
        acct.total, acct.period = total, period
        self._sync_renewals()

    @rule(who=st.sampled_from([*ANALYSTS, GROUP]))
    def reset(self, who: str) -> None:
        key = (who, "group" if who == GROUP else "analyst")
        self.led.reset(who, group=who == GROUP)
        acct = self.model[key]
        acct.spent, acct.start = ZERO, self.now
        self.spent_may_drop.add(key)

    @rule()
    def reset_of_an_unknown_account_is_refused(self) -> None:
        with pytest.raises(InvalidParameter):
            self.led.reset("nobody")

    @rule(analyst=st.sampled_from(ANALYSTS[1:]), join=st.booleans())
    def membership(self, analyst: str, join: bool) -> None:
        if join:
            self.led.add_member(GROUP, analyst)
            self.members.add(analyst)
        else:
            self.led.remove_member(GROUP, analyst)
            self.members.discard(analyst)

    @rule(dt=ticks)
    def tick(self, dt: int) -> None:
        self.now += dt
        self._sync_renewals()

    # --------------------------------------------------------------- invariants

    @invariant()
    def sound(self) -> None:
        if self.ledger is None:
            return
        led = self.led
        # remaining() first: it is a write (it may open or renew); nothing may change here
        for a in ANALYSTS:
            charged = self._charged(a, self._groups_of(a))
            want = (
                min(max(F(0), x.total[0] - x.used[0]) for x in charged),
                min(max(F(0), x.total[1] - x.used[1]) for x in charged),
            )
            assert _pair(led.remaining(a)) == want, a
            assert _pair(led.spent(a)) == self.model[(a, "analyst")].spent
        entries = led.entries()
        for (p, kind), m in self.model.items():
            acct = led.account(p, group=kind == "group")
            assert acct is not None
            got = (_pair(acct.total), _pair(acct.spent), _pair(acct.reserved))
            assert got == (m.total, m.spent, m.reserved), (p, kind)
            assert _le(m.used, m.total)
            assert _le(_add(_pair(acct.spent), _pair(acct.reserved)), _pair(acct.total))
            assert acct.period_seconds == m.period and acct.period_start == m.start
            # nothing spent is lost, unless the account was reset or renewed (and logged so)
            key = (p, kind)
            if key in self.spent_may_drop:
                assert any(
                    e.kind in ("reset", "renew") and e.principal == p and e.body["kind"] == kind
                    for e in entries
                )
            else:
                assert _le(self.last_spent[key], m.spent), key
            self.last_spent[key] = m.spent
            assert _log_spent(entries, p, kind) == m.spent, (p, kind)
        self.spent_may_drop.clear()
        held = {o.r.token for o in self.open}
        con = sqlite3.connect(self.path, timeout=60)
        try:
            rows = con.execute("SELECT token FROM reservations").fetchall()
        finally:
            con.close()
        assert {r[0] for r in rows} == held
        v = led.verify()
        assert v.ok, v.problems
        assert v.entries == len(entries)


def _log_spent(entries: list[LogEntry], principal: str, kind: str) -> Pair:
    """What the log says the account spent since its last reset or renewal."""
    total = ZERO
    for e in entries:
        if e.kind in ("reset", "renew") and e.principal == principal and e.body["kind"] == kind:
            total = ZERO
        elif e.kind in ("release", "expire"):
            charged = (
                e.principal == principal if kind == "analyst" else principal in e.body["groups"]
            )
            if charged:
                total = _add(total, (F(e.body["eps"]), F(e.body["delta"])))
    return total


TestLedgerMachine = LedgerMachine.TestCase
# Each step is a few SQLite transactions with fsync: a modest share of the profile's examples
# (dev: 25, ci: 250, derandomized). No "explain" phase: it re-runs failing machines for minutes.
TestLedgerMachine.settings = settings(
    max_examples=max(10, settings().max_examples // 2),
    stateful_step_count=30,
    deadline=None,
    phases=[p for p in Phase if p is not Phase.explain],
)


def test_lowering_a_total_below_what_was_used_stops_all_spending(tmp_path: Path) -> None:
    """A steward may cut an analyst off: a total below spent + reserved is accepted (logged),
    nothing more can be reserved, the open reservation still commits, and verify is ok."""
    led = Ledger(tmp_path / "l.sqlite", DATASET, Cost(F(10)))
    try:
        led.commit(led.reserve("alice", Cost(F(4))))
        held = led.reserve("alice", Cost(F(3)))
        led.grant("alice", Cost(F(5)))
        assert led.remaining("alice") == Cost.zero()
        with pytest.raises(BudgetExhausted):
            led.reserve("alice", Cost(F(1, 10**6)))
        led.commit(held)
        acct = led.account("alice")
        assert acct is not None and acct.spent == Cost(F(7)) and acct.total == Cost(F(5))
        assert led.verify().ok
    finally:
        led.close()
