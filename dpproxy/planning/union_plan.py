"""The plan of a UNION [ALL] of aggregate SELECTs (built by ``dpproxy/union.py``).

Privacy: each branch is a separate DP release over the same data with the requested (ε, δ);
by sequential composition the whole costs the sum of the branches' costs (a public branch
costs nothing). Dropping duplicate released rows (UNION), ORDER BY, OFFSET and LIMIT are
applied by dpproxy to the released rows: post-processing, free.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.values import Cost

Plan = QueryPlan | PublicPlan


@dataclass(frozen=True)
class UnionPlan:
    """A UNION [ALL] of aggregate SELECTs: every branch planned, in the order they run."""

    query: str  # the analyst's query
    branches: tuple[str, ...]  # each branch as a query of its own (with the query's hints)
    plans: tuple[Plan, ...]
    distinct: bool  # UNION (duplicates dropped) rather than UNION ALL
    order: tuple[tuple[int, bool, bool], ...] = ()  # (column, descending, NULLs first)
    limit: int | None = None
    offset: int = 0
    statements: tuple[tuple[str, ...], ...] = ()  # each branch's statements (for explain)

    @property
    def cost(self) -> Cost:
        """The sum of the branches' costs (sequential composition)."""
        total = Cost.zero()
        for p in self.plans:
            if isinstance(p, QueryPlan):
                total = total + p.cost
        return total

    @property
    def dp_plan(self) -> QueryPlan:
        """The first DP branch's plan: its (ε, δ) is the requested one."""
        return next(p for p in self.plans if isinstance(p, QueryPlan))

    @property
    def first(self) -> Plan:
        """The first branch's plan: its columns name the answer's (as in PostgreSQL)."""
        return self.plans[0]
