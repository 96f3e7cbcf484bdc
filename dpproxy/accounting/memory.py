"""Privacy budget accounting: reserve before the data is touched, commit after noise.

The :class:`Accountant` protocol is what the engine uses; :class:`MemoryAccountant` keeps
budgets in this process (embedded mode, tests, one CLI invocation) and
:class:`dpproxy.accounting.ledger.Ledger` durably, in SQLite. Budgets are checked with basic
composition (ε's and δ's add); ``accounting/composition.py`` reports the tightest valid (ε, δ)
of what was spent. Invariant, for every analyst:
``spent + reserved ≤ total``. A reservation is committed unless the failure provably happened
before the database saw the query (then it may be rolled back); a crash never refunds.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dpproxy.accounting.composition import tightest
from dpproxy.errors import BudgetExhausted, InternalError, QueryCanceled
from dpproxy.values import Cost


@dataclass(frozen=True, slots=True)
class Reservation:
    analyst: str
    cost: Cost
    token: str
    key: str | None = None  # the answer this reservation is the one flight for (claim)


class Accountant(Protocol):
    """Reserve before the data is touched, commit after noise; also keeps released answers so
    that an identical query is answered again, identically, at no cost."""

    def reserve(self, analyst: str, cost: Cost, record: Any = None) -> Reservation: ...
    def claim(
        self,
        analyst: str,
        cost: Cost,
        key: str,
        record: Any = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Reservation | str: ...
    def commit(
        self,
        r: Reservation,
        cache: tuple[str, str] | None = None,
        more: tuple[tuple[str, str], ...] = (),
        *,
        failed: str | None = None,
    ) -> None: ...
    def rollback(self, r: Reservation) -> None: ...
    def remaining(self, analyst: str) -> Cost: ...
    def spent(self, analyst: str) -> Cost: ...
    def cache_key(self, analyst: str, normalised: str) -> str: ...
    def cached(self, key: str) -> str | None: ...
    def status(self, analyst: str) -> BudgetStatus: ...
    def releases(self, analyst: str) -> list[Spending]: ...


@dataclass(frozen=True, slots=True)
class Spending:
    """One entry of an analyst's own release log (what ``dpproxy.spending`` shows them)."""

    seq: int
    time: float
    # "release"; "failed" for an attempt charged without an answer (``failure`` is the
    # SQLSTATE its analyst got); "expire" for a reservation a crash left behind
    kind: str
    query: str
    plan: str
    mechanism: str
    cost: Cost
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """An analyst's budget: ``tightest`` is the tightest valid (ε, δ) of what was spent."""

    total: Cost
    spent: Cost
    reserved: Cost
    tightest: Cost

    @property
    def remaining(self) -> Cost:
        return self.total - (self.spent + self.reserved)


@dataclass
class _Account:
    total: Cost
    spent: Cost
    reserved: Cost
    releases: list[Spending] = field(default_factory=list)
    used: Cost | None = None  # spent + reserved, kept up to date by MemoryAccountant

    def __post_init__(self) -> None:
        if self.used is None:
            self.used = _plus(self.spent, self.reserved)


def _is_zero(c: Cost) -> bool:
    return not (c.epsilon or c.delta or c.rho)


def _plus(a: Cost, b: Cost) -> Cost:
    """``a + b``; when either is zero, the other as it is (costs are immutable). Exact Fraction
    arithmetic costs microseconds per term, several times per query."""
    if _is_zero(b):
        return a
    if _is_zero(a):
        return b
    return a + b


def _minus(a: Cost, b: Cost) -> Cost:
    """``a - b`` (clamped at zero per term, like ``Cost.__sub__``); ``a`` itself when ``b`` is
    zero, and zero when they are equal."""
    if _is_zero(b):
        return a
    if a == b:
        return _ZERO
    return a - b


_ZERO = Cost.zero()


class MemoryAccountant:
    """In-process accountant with basic composition; thread-safe."""

    def __init__(
        self,
        default_budget: Cost,
        budgets: dict[str, Cost] | None = None,
        *,
        cache: str = "analyst",
    ) -> None:
        self.cache_scope = cache
        self._cache: dict[str, str] = {}
        self._default = default_budget
        self._budgets = dict(budgets or {})
        self._accounts: dict[str, _Account] = {}
        self._open: dict[str, Reservation] = {}
        self._records: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._landed = threading.Condition(self._lock)  # a flight ended
        self._flights: dict[str, str] = {}  # answer cache key -> the token that computes it

    def _account(self, analyst: str) -> _Account:
        acct = self._accounts.get(analyst)
        if acct is None:
            total = self._budgets.get(analyst, self._default)
            acct = self._accounts[analyst] = _Account(total, Cost.zero(), Cost.zero())
        return acct

    def reserve(self, analyst: str, cost: Cost, record: Any = None) -> Reservation:
        with self._lock:
            return self._reserve(analyst, cost, record, None)

    def claim(
        self,
        analyst: str,
        cost: Cost,
        key: str,
        record: Any = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Reservation | str:
        """Single flight for the answer ``key``: the answer kept for it (a ``str``, at no
        cost); else, while another reservation is computing it, wait for that one; else a
        reservation that holds ``key`` until it is committed or rolled back. Waiting is free:
        when the flight ends without an answer (a failure, charged to its own analyst), one
        waiter reserves and runs the query itself. ``cancelled`` is polled while waiting
        (``QueryCanceled``, nothing charged)."""
        if self.cache_scope == "off":
            return self.reserve(analyst, cost, record)
        with self._lock:
            while True:
                hit = self._cache.get(key)
                if hit is not None:
                    return hit
                if key not in self._flights:
                    r = self._reserve(analyst, cost, record, key)
                    self._flights[key] = r.token
                    return r
                if cancelled is not None and cancelled():
                    raise QueryCanceled("canceling statement due to user request")
                self._landed.wait(0.05)

    def _reserve(self, analyst: str, cost: Cost, record: Any, key: str | None) -> Reservation:
        """``reserve`` with the lock held."""
        acct = self._account(analyst)
        used = acct.used
        assert used is not None
        after = _plus(used, cost)
        if not acct.total.covers(after):
            left = acct.total - used
            raise BudgetExhausted(
                f"privacy budget exhausted for analyst {analyst!r}: the query costs {cost}, "
                f"{left} remains",
                hint="ask for a smaller epsilon (and delta), or ask the data steward for "
                "more budget",
            )
        acct.reserved = _plus(acct.reserved, cost)
        acct.used = after
        r = Reservation(analyst, cost, secrets.token_hex(8), key)
        self._open[r.token] = r
        self._records[r.token] = record
        return r

    def _close(self, r: Reservation) -> _Account:
        if r.key is not None and self._flights.get(r.key) == r.token:
            del self._flights[r.key]  # the flight lands: its waiters look for the answer
            self._landed.notify_all()
        if self._open.pop(r.token, None) is None:
            raise InternalError("unknown or already closed budget reservation")
        acct = self._account(r.analyst)
        acct.reserved = _minus(acct.reserved, r.cost)
        return acct

    def commit(
        self,
        r: Reservation,
        cache: tuple[str, str] | None = None,
        more: tuple[tuple[str, str], ...] = (),
        *,
        failed: str | None = None,
    ) -> None:
        """``cache`` (the answer) and ``more`` (other released values, such as a drawn bound
        on rows per unit) are kept for reuse as (key, payload) pairs. ``failed``: the attempt
        is charged but released no answer; the SQLSTATE its analyst got."""
        with self._lock:
            record = self._records.pop(r.token, None)
            acct = self._close(r)  # spent + reserved (acct.used) is unchanged: moved over
            acct.spent = _plus(acct.spent, r.cost)
            acct.releases.append(
                Spending(
                    len(acct.releases) + 1,
                    time.time(),
                    "release" if failed is None else "failed",
                    getattr(record, "query", ""),
                    getattr(record, "plan", ""),
                    getattr(record, "mechanism", ""),
                    r.cost,
                    failed,
                )
            )
            if self.cache_scope != "off":
                for key, payload in ((cache,) if cache is not None else ()) + more:
                    self._cache.setdefault(key, payload)

    def rollback(self, r: Reservation) -> None:
        """Only for failures that provably happened before the database saw the query."""
        with self._lock:
            self._records.pop(r.token, None)
            acct = self._close(r)
            assert acct.used is not None
            acct.used = _minus(acct.used, r.cost)

    def remaining(self, analyst: str) -> Cost:
        with self._lock:
            acct = self._account(analyst)
            assert acct.used is not None
            return _minus(acct.total, acct.used)

    def spent(self, analyst: str) -> Cost:
        with self._lock:
            return self._account(analyst).spent

    def status(self, analyst: str) -> BudgetStatus:
        with self._lock:
            a = self._account(analyst)
            return BudgetStatus(a.total, a.spent, a.reserved, tightest(s.cost for s in a.releases))

    def releases(self, analyst: str) -> list[Spending]:
        with self._lock:
            return list(self._account(analyst).releases)

    def cache_key(self, analyst: str, normalised: str) -> str:
        return json.dumps([analyst if self.cache_scope == "analyst" else "*", normalised])

    def cached(self, key: str) -> str | None:
        if self.cache_scope == "off":
            return None
        with self._lock:
            return self._cache.get(key)
