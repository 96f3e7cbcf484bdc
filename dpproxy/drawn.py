"""Rows-per-unit bounds drawn with DP, and kept for reuse (the engine's part of
``planning/truncation.py``).

When the schema declares no ``max_rows_per_unit`` for a relation, the plan's bound K is drawn
with the exponential mechanism from the per-unit row counts that the plan's
:func:`~dpproxy.rewrite.pipeline.truncation_sql` statement returns (:func:`draw_rows`), under
the same reservation as the query it bounds. A bound once drawn is a released value: reusing
it for the same analyst, the same per-unit statement and the same coverage is post-processing
and costs nothing (:class:`DrawnBounds`). It is kept in memory (the most recent
:data:`KEPT`) and by the accountant, which keeps it across restarts like a released answer."""

from __future__ import annotations

import threading
from collections import OrderedDict

from dpproxy.accounting.memory import Accountant
from dpproxy.backends import Backend, CancelToken
from dpproxy.mechanisms.noise import NoiseSource
from dpproxy.planning.plan import QueryPlan

KEPT = 4096  # rows-per-unit bounds remembered for reuse (per analyst and relation)

Choice = tuple[str, str, str]  # (analyst, per-unit statement, coverage)


class DrawnBounds:
    """The bounds drawn lately, by :meth:`choice`; thread-safe."""

    def __init__(self, accountant: Accountant) -> None:
        self.accountant = accountant
        self._kept: OrderedDict[Choice, int] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def choice(plan: QueryPlan, statement: str, analyst: str) -> Choice:
        """Equal keys draw from the same rows: the analyst, the per-unit statement (the
        plan's ``truncation_sql``) and the coverage."""
        trunc = plan.truncation
        assert trunc is not None
        return (analyst, statement, f"{trunc.coverage}")

    def reusable(self, plan: QueryPlan, statement: str, analyst: str | None) -> int | None:
        """A bound drawn earlier for this analyst and these rows: in memory, or kept by the
        accountant (the ledger keeps it across restarts, like released answers)."""
        if analyst is None:
            return None
        key = self.choice(plan, statement, analyst)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        kept = self.accountant.cached(self.ledger_key(key))
        return int(kept) if kept is not None and kept.isdigit() else None

    def ledger_key(self, key: Choice) -> str:
        """The accountant's cache key of a drawn bound (committed with the query's charge)."""
        analyst, statement, coverage = key
        return self.accountant.cache_key(analyst, f"rows per unit|{coverage}|{statement}")

    def remember(self, key: Choice, rows: int) -> None:
        with self._lock:
            self._kept[key] = rows
            while len(self._kept) > KEPT:  # the oldest is drawn again
                self._kept.popitem(last=False)


def draw_rows(
    backend: Backend,
    noise: NoiseSource,
    plan: QueryPlan,
    statement: str,
    cancel: CancelToken | None,
) -> int:
    """Draw the rows-per-unit bound with DP (``planning/truncation.py``) from the counts
    ``statement`` (the plan's ``truncation_sql``) returns: reads the data, so the budget must
    be reserved first."""
    trunc = plan.truncation
    assert trunc is not None and trunc.coverage is not None
    exact = backend.execute(statement, cancel)
    units = [0] * (len(trunc.grid) + 1)
    for row in exact.rows:
        units[int(row[0])] += int(row[1])
    scale = 2 / trunc.epsilon
    from dpproxy.planning.truncation import scores as truncation_scores
    from dpproxy.release.local import exponential_index

    scores = truncation_scores(units, trunc.coverage, trunc.grid, scale)
    index = exponential_index(scores, scale, noise)
    return trunc.grid[index]
