"""UNION ALL and UNION of aggregate SELECTs, each an ordinary DP query or a public one.

Planning (:func:`plan_union`, before anything is read or reserved): the set operation is
split into its branches, each planned by the engine's own planner exactly as if it were sent
alone (a DP query, or a query over public tables only). Anything the planner refuses in a
branch refuses the whole query; so do INTERSECT and EXCEPT, a mix of UNION and UNION ALL, an
ORDER BY or LIMIT on the whole union, branches with subqueries of their own, and branches
whose columns differ in number or type. All of it depends on the query text and the catalog
only, never on the data.

Privacy: the branches are separate DP releases over the same data, each with the requested
(ε, δ) — sequential composition: the whole query costs the sum of the branches' costs,
reserved once before the first branch runs and charged once (nothing when a branch is
refused, since every branch is planned first). A public branch reads public tables only and
costs nothing. Concatenating the released rows, and for UNION (without ALL) dropping
duplicate released rows in dpproxy (NULLs equal, as PostgreSQL's DISTINCT treats them), is
post-processing of released values: it costs nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpproxy.accounting.ledger import ReleaseRecord
from dpproxy.backends import CancelToken
from dpproxy.composed import EngineCore, Options, plan_summary
from dpproxy.errors import UnsupportedQuery
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.release.answer import Answer, Progress
from dpproxy.release.postprocess import Released
from dpproxy.release.public import columns_of
from dpproxy.sql.parse import parse
from dpproxy.values import Cost

_HINT = re.compile(r"/\*\+\s*dpproxy\b.*?\*/", re.DOTALL | re.IGNORECASE)
Plan = QueryPlan | PublicPlan


@dataclass(frozen=True)
class UnionPlan:
    """A UNION [ALL] of aggregate SELECTs: every branch planned, in the order they run."""

    query: str  # the analyst's query
    branches: tuple[str, ...]  # each branch as a query of its own (with the query's hints)
    plans: tuple[Plan, ...]
    distinct: bool  # UNION (duplicates dropped) rather than UNION ALL

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


def _branches(tree: exp.Expression) -> tuple[list[exp.Expression], bool]:
    """The branches of a chain of UNIONs, left to right, and whether it is UNION (not ALL)."""
    if isinstance(tree, exp.Intersect | exp.Except):
        op = "INTERSECT" if isinstance(tree, exp.Intersect) else "EXCEPT"
        raise UnsupportedQuery(
            f"{op} is not supported: only UNION and UNION ALL of aggregate queries are",
            hint=f"run the two queries separately and compare the released rows "
            f"(an {op} of released rows would be post-processing done by you)",
        )
    if not isinstance(tree, exp.Union):
        return [tree], False
    if tree.args.get("order") or tree.args.get("limit") or tree.args.get("offset"):
        raise UnsupportedQuery(
            "ORDER BY, LIMIT or OFFSET on a whole UNION is not supported",
            hint="sort and cut the released rows yourself, or give each branch its own query",
        )
    distinct = bool(tree.args.get("distinct"))
    out: list[exp.Expression] = []
    for side in (tree.left, tree.right):
        if isinstance(side, exp.Subquery) and not side.alias:
            side = side.this
        assert isinstance(side, exp.Expression)
        parts, kind = _branches(side)
        if isinstance(side, exp.Union) and kind != distinct:
            raise UnsupportedQuery(
                "a mix of UNION and UNION ALL is not supported",
                hint="use UNION ALL (or UNION) between every pair of branches",
            )
        out.extend(parts)
    return out, distinct


def plan_union(
    sql: str,
    plan_of: Callable[[str], Plan],
    composed: Callable[[str], bool],
) -> UnionPlan | None:
    """The plan of a UNION [ALL] of aggregate SELECTs, or None for any other statement.
    ``plan_of``: the engine's planner for one query (public or DP); ``composed``: would the
    engine plan this query in parts (subqueries)? Refusals are raised here, before any data."""
    tree = parse(sql)
    if not isinstance(tree, exp.SetOperation):
        return None
    branches, distinct = _branches(tree)
    hints = "".join(m + " " for m in _HINT.findall(sql))
    texts = tuple(hints + b.sql("postgres", comments=False) for b in branches)
    for text in texts:
        if composed(text):
            raise UnsupportedQuery(
                "a UNION branch with subqueries of its own is not supported",
                hint="send that branch as a query of its own",
            )
    plans = tuple(plan_of(t) for t in texts)
    first = columns_of(plans[0])
    for i, p in enumerate(plans[1:], start=2):
        cols = columns_of(p)
        if len(cols) != len(first):
            raise UnsupportedQuery(
                f"each branch of a UNION must have as many columns: the first has "
                f"{len(first)}, branch {i} has {len(cols)}"
            )
        for a, b in zip(first, cols, strict=True):
            if a.type != b.type:
                raise UnsupportedQuery(
                    f"column {a.name} of a UNION is {a.type} in the first branch and "
                    f"{b.type} in branch {i}",
                    hint="CAST one side so that both have the same type",
                )
    if not any(isinstance(p, QueryPlan) for p in plans):
        return None  # public tables only: the public path answers it
    return UnionPlan(sql, texts, plans, distinct)


def run_union(
    engine: EngineCore,
    union: UnionPlan,
    analyst: str,
    opts: Options,
    cancel: CancelToken | None,
) -> Answer:
    """Every branch under one reservation of the summed cost; rows concatenated in branch
    order, and for UNION the first of equal released rows kept (NULLs equal)."""
    text, normalised = engine._normalised(union.query, union.dp_plan, opts[2], opts[3])
    parts = " | ".join(plan_summary(p) for p in union.plans)
    record = ReleaseRecord(text, f"union of: {parts}", engine._noise_name(opts[2]))

    def body(progress: Progress) -> tuple[Released, Plan]:
        rows: list[tuple[Any, ...]] = []
        errors: list[tuple[float | None, ...]] = []
        seen: set[tuple[Any, ...]] = set()
        for sql, plan in zip(union.branches, union.plans, strict=True):
            if isinstance(plan, PublicPlan):
                released = engine._run_public(plan, analyst, cancel).released
            else:
                prepared = engine._prepared(sql, opts, analyst)
                released = engine._execute(sql, prepared, analyst, opts, cancel, progress)[0]
            for row, err in zip(released.rows, released.errors, strict=True):
                if union.distinct:
                    if row in seen:
                        continue
                    seen.add(row)
                rows.append(tuple(row))
                errors.append(tuple(err))
        columns = columns_of(union.first)
        return Released(columns, tuple(rows), tuple(errors)), union.dp_plan

    key = engine.accountant.cache_key(analyst, normalised)
    return engine._spend(analyst, union.dp_plan, union.cost, (key, record), cancel, body)
