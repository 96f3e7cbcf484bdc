"""MemoryAccountant under any interleaving of reserve / commit / rollback, and under threads.

A plain-Python model keeps, per analyst, the total budget and the ε and δ spent and reserved.
After every step the accountant must agree with it: a reservation is refused with
``BudgetExhausted`` exactly when ``spent + reserved + cost`` would exceed the total in ε or in δ
(basic composition), ``spent + reserved ≤ total`` always holds, and closing a reservation twice
(commit or rollback) is an ``InternalError``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from fractions import Fraction

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from dpproxy.accounting.memory import MemoryAccountant, Reservation
from dpproxy.errors import BudgetExhausted, InternalError
from dpproxy.values import Cost

ANALYSTS = ("alice", "bob")

# Small denominators keep shrinking fast; δ values straddle the totals and sum past 1.
epsilons = st.fractions(min_value=0, max_value=5, max_denominator=20)
deltas = st.sampled_from([Fraction(0), Fraction(1, 10**6), Fraction(1, 10), Fraction(1, 4),
                          Fraction(2, 5), Fraction(1, 2), Fraction(7, 10), Fraction(999, 1000)])
costs = st.builds(Cost, epsilons, deltas)
totals = st.builds(Cost, st.fractions(min_value=0, max_value=10, max_denominator=20), deltas)


@dataclass
class Ledger:
    total: Cost
    spent_eps: Fraction = Fraction(0)
    spent_delta: Fraction = Fraction(0)
    reserved_eps: Fraction = Fraction(0)
    reserved_delta: Fraction = Fraction(0)

    def fits(self, c: Cost) -> bool:
        return (self.spent_eps + self.reserved_eps + c.epsilon <= self.total.epsilon
                and self.spent_delta + self.reserved_delta + c.delta <= self.total.delta)


class AccountantMachine(RuleBasedStateMachine):
    """Any interleaving of reserve/commit/rollback keeps the ledger sound."""

    open_reservations = Bundle("open_reservations")
    closed_reservations = Bundle("closed_reservations")

    @initialize(default=totals, alice=totals)
    def setup(self, default: Cost, alice: Cost) -> None:
        self.acct = MemoryAccountant(default, {"alice": alice})
        self.model = {"alice": Ledger(alice), "bob": Ledger(default)}

    @rule(target=open_reservations, analyst=st.sampled_from(ANALYSTS), cost=costs)
    def reserve(self, analyst: str, cost: Cost) -> Reservation | None:
        m = self.model[analyst]
        if m.fits(cost):
            r = self.acct.reserve(analyst, cost)
            assert r.analyst == analyst and r.cost == cost
            m.reserved_eps += cost.epsilon
            m.reserved_delta += cost.delta
            return r
        with pytest.raises(BudgetExhausted) as e:
            self.acct.reserve(analyst, cost)
        assert e.value.sqlstate == "ZD001"
        return None  # nothing was reserved; the later rules skip None

    @rule(target=closed_reservations, r=consumes(open_reservations))
    def commit(self, r: Reservation | None) -> Reservation | None:
        if r is None:
            return None
        self.acct.commit(r)
        m = self.model[r.analyst]
        m.reserved_eps -= r.cost.epsilon
        m.reserved_delta -= r.cost.delta
        m.spent_eps += r.cost.epsilon
        m.spent_delta += r.cost.delta
        return r

    @rule(target=closed_reservations, r=consumes(open_reservations))
    def rollback(self, r: Reservation | None) -> Reservation | None:
        if r is None:
            return None
        self.acct.rollback(r)
        m = self.model[r.analyst]
        m.reserved_eps -= r.cost.epsilon
        m.reserved_delta -= r.cost.delta
        return r

    @rule(r=closed_reservations, commit=st.booleans())
    def close_again(self, r: Reservation | None, commit: bool) -> None:
        """A second commit (or a rollback after a commit, or vice versa) is refused."""
        if r is None:
            return
        with pytest.raises(InternalError) as e:
            (self.acct.commit if commit else self.acct.rollback)(r)
        assert e.value.sqlstate == "XX000"

    @rule(analyst=st.sampled_from(ANALYSTS), cost=costs)
    def forged_reservation_is_refused(self, analyst: str, cost: Cost) -> None:
        with pytest.raises(InternalError):
            self.acct.commit(Reservation(analyst, cost, "not-a-token"))

    @invariant()
    def never_overspent(self) -> None:
        for analyst, m in self.model.items():
            assert m.spent_eps + m.reserved_eps <= m.total.epsilon
            assert m.spent_delta + m.reserved_delta <= m.total.delta
            spent = self.acct.spent(analyst)
            assert (spent.epsilon, spent.delta) == (m.spent_eps, m.spent_delta)
            left = self.acct.remaining(analyst)
            assert left.epsilon == m.total.epsilon - m.spent_eps - m.reserved_eps
            assert left.delta == m.total.delta - m.spent_delta - m.reserved_delta


TestAccountantMachine = AccountantMachine.TestCase
# No "explain" phase: on a failing machine it re-runs steps for minutes (measured 130 s here).
TestAccountantMachine.settings = settings(
    max_examples=200, stateful_step_count=30, deadline=None,
    phases=[p for p in Phase if p is not Phase.explain],
)


def test_delta_overflow_is_budget_exhausted_not_an_invalid_cost() -> None:
    """spent δ + requested δ ≥ 1 (each valid on its own) is simply more than the budget."""
    acct = MemoryAccountant(Cost(Fraction(10), Fraction(1, 2)))
    acct.reserve("alice", Cost(Fraction(1), Fraction(2, 5)))
    with pytest.raises(BudgetExhausted):
        acct.reserve("alice", Cost(Fraction(1), Fraction(7, 10)))
    assert acct.remaining("alice") == Cost(Fraction(9), Fraction(1, 10))


@pytest.mark.parametrize("repeat", range(5))
def test_threads_racing_for_the_last_budget(repeat: int) -> None:
    """16 threads reserve + commit ε = 1 at once against a total of 5: exactly 5 succeed."""
    acct = MemoryAccountant(Cost(Fraction(5), Fraction(0)))
    start = threading.Barrier(16)
    results: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        try:
            r = acct.reserve("alice", Cost(Fraction(1)))
        except BudgetExhausted:
            outcome = "refused"
        else:
            acct.commit(r)
            outcome = "ok"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 16
    assert results.count("ok") == 5 and results.count("refused") == 11
    assert acct.spent("alice") == Cost(Fraction(5))
    assert acct.remaining("alice") == Cost(Fraction(0))
