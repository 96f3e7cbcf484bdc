"""The exact answer of a query over public tables only (``planning/public.py``), and what the
interfaces show of any plan: its columns and its notices.

An answer from public tables is released as the database computed it: no noise, and every
cell's 95% error bound is 0. Its values are made to match the column types the planner
promised before the query ran (Describe answers from those, over the wire): ``integer``
(an integral numeric), ``double``, ``text``, ``date`` (a timestamp at midnight is its date)
or ``boolean``; a value of another kind is an error naming the column, never a silent
re-typing. Nothing here touches the budget.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

from dpproxy.errors import (
    BackendUnavailable,
    ConnectionLost,
    DPProxyError,
    PublicQueryFailed,
    PublicResultTooLarge,
    QueryCanceled,
)
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.release.exact import ExactResult
from dpproxy.release.intervals import interval_notes
from dpproxy.release.memo import per_plan
from dpproxy.release.postprocess import OutputColumn, Released, output_columns

PUBLIC_NOTE = "public tables only: answered exactly, no privacy cost"
FREE = "nothing was charged: the query reads public tables only"


def columns_of(plan: QueryPlan | PublicPlan) -> tuple[OutputColumn, ...]:
    """The released columns of either kind of plan, before anything runs (Describe)."""
    if isinstance(plan, PublicPlan):
        return tuple(OutputColumn(name, kind) for name, kind in plan.columns)
    return _output_columns(plan)


def plan_notes(plan: QueryPlan | PublicPlan) -> list[str]:
    """Notices that come with an answer: why an interval end is NULL (DP plans), or that the
    answer is exact and free (public tables only)."""
    if isinstance(plan, PublicPlan):
        return [PUBLIC_NOTE]
    return list(_interval_notes(plan))  # a copy: the caller may keep and change its list


# Products of the plan alone, once per plan object (release/memo.py).
_interval_notes = per_plan(interval_notes)
_output_columns = per_plan(output_columns)


def public_failure(e: Exception) -> DPProxyError:
    """The error for a public-only query the database failed to run. It read no private row,
    so the database's own message (first line) is safe to show; a cancellation, a timeout
    and a lost or unreachable database keep their SQLSTATE. Nothing was charged."""
    if isinstance(e, QueryCanceled | BackendUnavailable | ConnectionLost):
        return type(e)(e.message, hint=FREE)
    message = "the database failed to run the query over public tables"
    if isinstance(e, DPProxyError):
        said = (e.log_detail or e.message).strip().splitlines()
        if said:
            return PublicQueryFailed(message, hint=f"the database said: {said[0][:300]}; {FREE}")
    return PublicQueryFailed(message, hint=FREE)


def release_public(plan: PublicPlan, exact: ExactResult) -> Released:
    """The rows as released: at most ``plan.max_rows`` of them, typed as planned."""
    if len(exact.rows) > plan.max_rows:
        raise PublicResultTooLarge(
            f"the answer has more than {plan.max_rows:,} rows",
            hint=f"add LIMIT {plan.max_rows} (or less), a WHERE clause or an aggregate; {FREE}",
        )
    columns = columns_of(plan)
    if len(exact.columns) != len(columns):
        raise PublicQueryFailed("the database returned other columns than planned")
    rows = tuple(
        tuple(_typed(v, c) for v, c in zip(row, columns, strict=True)) for row in exact.rows
    )
    zero = tuple(0.0 for _ in columns)
    return Released(columns, rows, tuple(zero for _ in rows))


def _typed(v: Any, column: OutputColumn) -> Any:
    if v is None:
        return None
    kind = column.type
    number = isinstance(v, int | float | Decimal) and not isinstance(v, bool)
    if kind == "integer" and number and _integral(v):
        return int(v)
    if kind == "double" and number:
        return float(v)
    if kind == "text" and isinstance(v, str):
        return v
    if kind == "boolean" and isinstance(v, bool):
        return v
    if kind == "date" and isinstance(v, datetime.datetime):
        if v.tzinfo is None and v.time() == datetime.time(0):
            return v.date()
    elif kind == "date" and isinstance(v, datetime.date):
        return v
    raise PublicQueryFailed(
        f'the database returned a {type(v).__name__} for column "{column.name}", planned as {kind}',
        hint=f"CAST the column to the type you expect; {FREE}",
    )


def _integral(v: int | float | Decimal) -> bool:
    if isinstance(v, int):
        return True
    if isinstance(v, Decimal):
        return v.is_finite() and v == v.to_integral_value()
    return math.isfinite(v) and v.is_integer()
