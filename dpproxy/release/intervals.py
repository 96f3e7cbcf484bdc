"""``DP_INTERVAL_LOW(agg)`` / ``DP_INTERVAL_HIGH(agg)``: the ends of a released aggregate's 95%
interval, as values an analyst (or a BI chart's error bars) can select.

The interval is post-processing of the released noisy values and the public law of their noise,
so it costs nothing, and the aggregate inside the function is the same release as the one
outside it (``sql/aggregates.py`` maps both to one ``__agg_i``). It holds the *noiseless* value
of the mechanism — the exact clamped, contribution-bounded aggregate — with probability ≥ 95%:

* COUNT/SUM (GS): the noisy value ± the noise's 95% half-width; a count's ends are rounded
  inwards to integers and kept within [0, the table's public_max_rows], a SUM of a non-negative
  (non-positive) measure keeps its lower (upper) end at 0 — clipping to where the noiseless
  value is known to lie keeps the coverage.
* AVG/VAR/STDDEV from GS primitives: interval arithmetic over the parts' intervals, each at
  level α/parts (a union bound), clipped to the measure's interval.
* JOINT means: the interval of Σ(x−lo) and Σ(hi−x) mapped through the mean (monotone).
* PTR (means, medians, percentiles): when the test passes, the released value is the exact
  statistic plus Laplace(b/ε_r) with public scale, so value ± (b/ε_r)·ln 20 (exactly 95%),
  clipped to the measure's interval; PTR's refusal is NULL.
* SAA: released ± its public Laplace scale·ln 20, around the mean of the chunk statistics (an
  estimate of the statistic, not the statistic itself: the interval does not cover that bias).
* The exponential mechanism (the usual plan of medians and percentiles) and smooth
  sensitivity: NULL, with a NOTICE. The exponential mechanism's error is in rank — with
  probability ≥ 95% the released cell is within ±t rows of the requested rank, t = scale·ln(cells
  /0.05) — and no value interval follows from a rank without the data; smooth sensitivity's noise
  scale is itself private. Force a plan with a public scale (``/*+ dpproxy mechanism=ptr
  ptr_bound=B */``, ``mechanism=saa``, or ``SET dpproxy.mechanism``) to get one.
* VAR_SAMP/STDDEV_SAMP whose count interval reaches 1: NULL.
"""

from __future__ import annotations

import math

from sqlglot import exp

from dpproxy.planning.plan import AggregatePlan, Method, QueryPlan
from dpproxy.sql.scope import COUNT_KINDS, AggKind

Span = tuple[float, float]
_COUNTS = COUNT_KINDS
_NO_INTERVAL = (Method.EXPONENTIAL, Method.SMOOTH)


def interval_ends(
    agg: AggregatePlan, span: Span | None, max_count: int | None = None
) -> tuple[float | None, float | None]:
    """The ends of the 95% interval of one released aggregate (None, None: no interval)."""
    if span is None:
        return None, None
    lo, hi = float(span[0]), float(span[1])
    if agg.kind in _COUNTS:
        lo, hi = max(0.0, float(math.ceil(lo))), float(math.floor(hi))
        if max_count is not None:
            hi = min(hi, float(max_count))
        return lo, max(lo, hi)
    b = agg.bounds
    if b is not None and b.lo is not None and b.hi is not None:
        if agg.kind is AggKind.SUM:
            lo = max(lo, 0.0) if b.lo >= 0 else lo
            hi = min(hi, 0.0) if b.hi <= 0 else hi
        elif agg.kind is AggKind.AVG or agg.kind.quantile:
            lo, hi = min(max(lo, float(b.lo)), float(b.hi)), min(max(hi, float(b.lo)), float(b.hi))
    return lo, hi


def requested(plan: QueryPlan) -> list[int]:
    """The aggregates whose interval the query selects (or filters or orders by)."""
    nodes = [o.expr for o in plan.query.outputs] + [o.expr for o in plan.query.order]
    if plan.query.having is not None:
        nodes.append(plan.query.having)
    found: set[int] = set()
    for node in nodes:
        for col in node.find_all(exp.Column):
            if col.name.startswith(("__lo_", "__hi_")):
                found.add(int(col.name[5:]))
    return sorted(found)


def _label(plan: QueryPlan, i: int) -> str:
    agg = plan.query.aggregates[i]
    args = [a.sql("postgres") for a in (agg.measure, agg.second) if a is not None]
    q = f"{float(agg.q):g}, " if agg.q is not None and agg.kind.name.startswith("PERC") else ""
    return f"{agg.kind.value.upper()}({q}{', '.join(args) or '*'})"


def interval_notes(plan: QueryPlan) -> list[str]:
    """A NOTICE for every requested interval that is NULL by construction, saying why."""
    notes = []
    for i in requested(plan):
        agg = plan.aggregates[i]
        if agg.stat is None or agg.method not in _NO_INTERVAL:
            continue
        label = _label(plan, i)
        if agg.method is Method.EXPONENTIAL:
            st = agg.stat
            t = float(st.scale) * math.log(st.cells / 0.05)
            why = (
                f"the exponential mechanism's error is in rank (the released value's rank is "
                f"within ±{t:.4g} rows of the requested one with 95% probability), and no value "
                "interval follows from a rank without the data"
            )
        else:
            why = "smooth sensitivity's noise scale depends on the data and is not released"
        notes.append(
            f"dpproxy: DP_INTERVAL_LOW/HIGH of {label} is NULL: {why}; for an interval, use a "
            "plan whose noise scale is public: /*+ dpproxy mechanism=ptr ptr_bound=B */ or "
            "mechanism=saa (or SET dpproxy.mechanism)"
        )
    return notes
