"""Privacy budget accounting: reserve before the data is touched, commit after noise.

The :class:`Accountant` protocol is what the engine uses; :class:`MemoryAccountant` keeps budgets
in this process (embedded mode, tests, one CLI invocation). A durable ledger implements the same
protocol later. Composition is basic: ε's and δ's add. Invariant, for every analyst:
``spent + reserved ≤ total``. A reservation is committed unless the failure provably happened
before the database saw the query (then it may be rolled back); a crash never refunds.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from dpproxy.errors import BudgetExhausted, InternalError
from dpproxy.values import Cost


@dataclass(frozen=True, slots=True)
class Reservation:
    analyst: str
    cost: Cost
    token: str


class Accountant(Protocol):
    """Reserve before the data is touched, commit after noise; also keeps released answers so
    that an identical query is answered again, identically, at no cost."""

    def reserve(self, analyst: str, cost: Cost, record: Any = None) -> Reservation: ...
    def commit(self, r: Reservation, cache: tuple[str, str] | None = None) -> None: ...
    def rollback(self, r: Reservation) -> None: ...
    def remaining(self, analyst: str) -> Cost: ...
    def spent(self, analyst: str) -> Cost: ...
    def cache_key(self, analyst: str, normalised: str) -> str: ...
    def cached(self, key: str) -> str | None: ...


@dataclass
class _Account:
    total: Cost
    spent: Cost
    reserved: Cost


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
        self._lock = threading.Lock()

    def _account(self, analyst: str) -> _Account:
        acct = self._accounts.get(analyst)
        if acct is None:
            total = self._budgets.get(analyst, self._default)
            acct = self._accounts[analyst] = _Account(total, Cost.zero(), Cost.zero())
        return acct

    def reserve(self, analyst: str, cost: Cost, record: Any = None) -> Reservation:
        with self._lock:
            acct = self._account(analyst)
            used = acct.spent + acct.reserved
            after = used + cost
            if not acct.total.covers(after):
                left = acct.total - used
                raise BudgetExhausted(
                    f"privacy budget exhausted for analyst {analyst!r}: the query costs {cost}, "
                    f"{left} remains",
                    hint="ask for a smaller epsilon (and delta), or ask the data steward for "
                    "more budget",
                )
            acct.reserved = acct.reserved + cost
            r = Reservation(analyst, cost, secrets.token_hex(8))
            self._open[r.token] = r
            return r

    def _close(self, r: Reservation) -> _Account:
        if self._open.pop(r.token, None) is None:
            raise InternalError("unknown or already closed budget reservation")
        acct = self._account(r.analyst)
        acct.reserved = acct.reserved - r.cost
        return acct

    def commit(self, r: Reservation, cache: tuple[str, str] | None = None) -> None:
        with self._lock:
            acct = self._close(r)
            acct.spent = acct.spent + r.cost
            if cache is not None and self.cache_scope != "off":
                self._cache.setdefault(cache[0], cache[1])

    def rollback(self, r: Reservation) -> None:
        """Only for failures that provably happened before the database saw the query."""
        with self._lock:
            self._close(r)

    def remaining(self, analyst: str) -> Cost:
        with self._lock:
            acct = self._account(analyst)
            return acct.total - (acct.spent + acct.reserved)

    def spent(self, analyst: str) -> Cost:
        with self._lock:
            return self._account(analyst).spent

    def cache_key(self, analyst: str, normalised: str) -> str:
        return json.dumps([analyst if self.cache_scope == "analyst" else "*", normalised])

    def cached(self, key: str) -> str | None:
        if self.cache_scope == "off":
            return None
        with self._lock:
            return self._cache.get(key)
