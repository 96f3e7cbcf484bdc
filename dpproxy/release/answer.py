"""The engine's value objects: a query planned and rewritten (:class:`Prepared`), what a
reserved run has done so far (:class:`Progress`), and an answer (:class:`Answer`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a union's plan module is imported for a UNION only
    from dpproxy.planning.plan import QueryPlan
    from dpproxy.planning.public import PublicPlan
    from dpproxy.planning.scalars import ComposedPlan
    from dpproxy.planning.union_plan import UnionPlan
    from dpproxy.release.postprocess import Released
    from dpproxy.values import Cost


@dataclass(frozen=True, slots=True)
class Prepared:
    """A planned query: the plan and the exact SQL the backend would run — the main statement
    (``None`` when no primitive needs it) and one statement per stat that reads its own data."""

    plan: QueryPlan | PublicPlan | ComposedPlan | UnionPlan  # Composed/Union: in parts
    sql: str | None
    extra: tuple[tuple[str, str], ...] = ()
    truncation: str | None = None  # runs first when the rows per unit are chosen with DP

    @property
    def statements(self) -> tuple[str, ...]:
        first = (self.truncation,) if self.truncation is not None else ()
        main = (self.sql,) if self.sql is not None else ()
        return first + main + tuple(s for _, s in self.extra)


@dataclass(slots=True)
class Progress:
    """What a reserved run has done so far: did a statement reach the data, and the
    rows-per-unit bounds it drew (kept with the answer when it is committed)."""

    touched: bool = False
    drawn: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Answer:
    released: Released
    cost: Cost  # what this call spent: zero for an answer from the cache
    remaining: Cost
    plan: QueryPlan | PublicPlan  # PublicPlan: public tables only, exact and free
    cached: bool = False  # the very answer released earlier for the same query
