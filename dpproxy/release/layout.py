"""What post-processing binds, per plan (``release/postprocess.py``): the names of the keys,
aggregates, spans and interval ends, and which outputs are bare columns. A product of the plan
alone, computed once per plan object (``release/memo.py``), not once per group."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpproxy.planning.plan import QueryPlan
from dpproxy.release.intervals import requested
from dpproxy.release.memo import per_plan
from dpproxy.release.noise import derived_name
from dpproxy.sql.scope import COUNT_KINDS


def _intervals_read(plan: QueryPlan) -> frozenset[int] | None:
    """The aggregates whose DP_INTERVAL ends the query reads (None: all of them, when it has
    window functions, whose arguments ``requested`` does not look into)."""
    return None if plan.query.windows else frozenset(requested(plan))


_wanted_intervals = per_plan(_intervals_read)


@dataclass(frozen=True, slots=True)
class Layout:
    """The names post-processing binds, per plan: each key's, each aggregate's (with the
    span name it reads and its interval ends' names, or None when the query reads none), and
    each output's column name when the output is a bare column (else None: evaluated)."""

    keys: tuple[str, ...]
    aggregates: tuple[tuple[str, str | None, tuple[str, str] | None], ...]
    outputs: tuple[str | None, ...]
    # per aggregate: its one primitive when it is a COUNT of one noisy primitive (no stat,
    # no JOINT mean), which post-processing reads directly; else None
    counts: tuple[str | None, ...] = ()


def _layout_of(plan: QueryPlan) -> Layout:
    wanted = _wanted_intervals(plan)
    aggregates = []
    for i, agg in enumerate(plan.aggregates):
        span = (
            agg.stat.name
            if agg.stat is not None
            else derived_name(agg.derived.name)
            if agg.derived is not None
            else None
        )
        ends = (f"__lo_{i}", f"__hi_{i}") if wanted is None or i in wanted else None
        aggregates.append((f"__agg_{i}", span, ends))
    outputs = tuple(
        o.expr.name if isinstance(o.expr, exp.Column) else None for o in plan.query.outputs
    )
    keys = tuple(f"__key_{i}" for i in range(len(plan.query.keys)))
    counts = tuple(
        a.parts[0]
        if a.stat is None and a.derived is None and a.kind in COUNT_KINDS and len(a.parts) == 1
        else None
        for a in plan.aggregates
    )
    return Layout(keys, tuple(aggregates), outputs, counts)


layout = per_plan(_layout_of)
