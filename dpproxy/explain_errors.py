"""The predicted 95% error of each output column, and every candidate plan of each aggregate
with its predicted error, as ``explain`` shows them: computed from the plan alone (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpproxy.explain_notes import derived_column
from dpproxy.mechanisms.base import laplace_sum_half_width
from dpproxy.planning.plan import Method, QueryPlan, StatPlan
from dpproxy.release.noise import drawn_half_width
from dpproxy.release.postprocess import CONFIDENCE
from dpproxy.sql.scope import COUNT_KINDS
from dpproxy.sql.validate import AggKind

_COUNTS = COUNT_KINDS


@dataclass(frozen=True, slots=True)
class ColumnError:
    name: str
    error95: str  # human text: "±3.0", "≈ ±24.6/n (n = group size)", "exact (group key)"
    value: float | None  # the absolute 95% half-width when it does not depend on the data


def column_errors(plan: QueryPlan) -> tuple[ColumnError, ...]:
    """The predicted 95% error of each output column, before any data is read."""
    alpha = 1 - CONFIDENCE
    out = []
    for item in plan.query.outputs:
        e = item.expr
        if item.is_key:
            out.append(ColumnError(item.name, "exact (group key)", 0.0))
            continue
        if isinstance(e, exp.Column) and e.name.startswith(("__lo_", "__hi_")):
            i = int(e.name[5:])
            end = "lower" if e.name.startswith("__lo_") else "upper"
            note = (
                "NULL for this plan: its noise scale is not public"
                if plan.aggregates[i].method in (Method.EXPONENTIAL, Method.SMOOTH)
                else "post-processing, no cost of its own"
            )
            text = f"{end} end of the 95% interval of {_aggregate_label(plan, i)} ({note})"
            out.append(ColumnError(item.name, text, None))
            continue
        if not (isinstance(e, exp.Column) and e.name.startswith("__agg_")):
            text = (
                f"{derived_column(plan.query, e)} (see the cursor's error bounds after the query)"
            )
            out.append(ColumnError(item.name, text, None))
            continue
        agg = plan.aggregates[int(e.name[6:])]
        if agg.stat is not None:
            chosen = next((c for c in agg.candidates if c.method is agg.method), None)
            text = (
                f"{chosen.formula} ({agg.method.value}{note_suffix(chosen.note)})"
                if chosen is not None and chosen.formula
                else f"({agg.method.value})"
            )
            out.append(ColumnError(item.name, text, chosen.error95 if chosen else None))
            continue
        if agg.derived is not None:  # A + B of a JOINT mean's release (planning/derived.py)
            h = laplace_sum_half_width(agg.derived.scale, alpha)
            text = f"±{h:.4g} (read off the joint release of the mean: no cost of its own)"
            out.append(ColumnError(item.name, text, h))
            continue
        halves = [
            drawn_half_width(plan, plan.release_for(p), alpha / len(agg.parts)) for p in agg.parts
        ]
        if agg.kind in _COUNTS or agg.kind is AggKind.SUM:
            out.append(ColumnError(item.name, f"±{halves[0]:.4g}", halves[0]))
            continue
        assert agg.bounds is not None and agg.bounds.lo is not None and agg.bounds.hi is not None
        half_range = float(agg.bounds.hi - agg.bounds.lo) / 2
        if agg.kind is AggKind.AVG:
            # |Ŝ/n̂ − S/n| ≲ (h_S + |S/n|·h_n)/n with |S/n| ≤ half the range after centring.
            k = halves[1] + half_range * halves[0]
            out.append(ColumnError(item.name, f"≈ ±{k:.4g}/n (n = rows in the group)", None))
        else:
            k = halves[2] + half_range**2 * halves[0] + 2 * half_range * halves[1]
            out.append(
                ColumnError(
                    item.name, f"≈ ±{k:.4g}/n for the variance (n = rows in the group)", None
                )
            )
    return tuple(out)


def note_suffix(note: str) -> str:
    return f"; {note.strip()}" if note.strip() else ""


def _aggregate_label(plan: QueryPlan, i: int) -> str:
    agg = plan.query.aggregates[i]
    args = [a.sql("postgres") for a in (agg.measure, agg.second) if a is not None]
    if agg.kind.quantile and agg.kind not in (AggKind.MEDIAN, AggKind.MIN, AggKind.MAX):
        assert agg.q is not None
        return f"{agg.kind.value}({float(agg.q):g}) of {', '.join(args)}"
    return f"{agg.kind.value}({', '.join(args) or '*'})"


def _stat_data(st: StatPlan) -> dict[str, Any]:
    d: dict[str, Any] = {
        "method": st.method.value,
        "epsilon_per_group": float(st.epsilon),
        "delta_per_group": float(st.delta),
        "groups_per_unit": st.groups,
        "rows_per_unit_per_group": st.rows,
        "epsilon": float(st.cost.epsilon),
        "delta": float(st.cost.delta),
    }
    if st.method is Method.JOINT:
        d["noise"] = f"Laplace(b={float(st.scale):.6g}) on Σ(x−lo)/w and on Σ(hi−x)/w"
    elif st.method is Method.PTR:
        d.update(
            proposed_bound=float(st.bound or 0),
            test=f"distance + Laplace(b={float(st.test_scale):.6g}) > {float(st.threshold):.6g}",
            noise=f"Laplace(b={float(st.scale):.6g})",
        )
    elif st.method is Method.SMOOTH:
        d.update(beta=float(st.beta), noise="Laplace(2S/ε), S computed from the data")
    elif st.method is Method.EXPONENTIAL:
        d.update(
            cells=st.cells,
            noise=f"report-noisy-min, scale {float(st.scale):.6g}, over the cells' scores",
        )
    elif st.method is Method.SAA:
        assert st.output is not None
        d.update(
            chunks=st.chunks,
            output_range=str(st.output),
            noise=f"Laplace(b={float(st.scale):.6g})",
        )
    if st.window:
        d["order_statistics_fetched_per_group"] = 2 * st.window + 3
    return d


def aggregate_plans(plan: QueryPlan) -> list[dict[str, Any]]:
    """Per aggregate with a choice: every candidate, its predicted error, and the winner."""
    out = []
    for i, agg in enumerate(plan.aggregates):
        if not agg.candidates:
            continue
        out.append(
            {
                "aggregate": _aggregate_label(plan, i),
                "chosen": agg.method.value,
                "why": agg.reason,
                "candidates": [
                    {
                        "method": c.method.value,
                        "error95": c.error95,
                        "formula": c.formula,
                        "applicable": c.applicable,
                        "note": c.note,
                    }
                    for c in agg.candidates
                ],
                "release": _stat_data(agg.stat) if agg.stat is not None else None,
            }
        )
    return out
