"""What a query will cost and how noisy it will be, computed from the plan alone (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpproxy.planning.plan import QueryPlan, describe_mechanism
from dpproxy.release.postprocess import CONFIDENCE, output_columns
from dpproxy.sql.validate import AggKind

_COUNTS = (AggKind.COUNT, AggKind.COUNT_STAR, AggKind.COUNT_UNITS)


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
        if not (isinstance(e, exp.Column) and e.name.startswith("__agg_")):
            out.append(
                ColumnError(
                    item.name,
                    "derived from the aggregates (see the cursor's error bounds after the query)",
                    None,
                )
            )
            continue
        agg = plan.aggregates[int(e.name[6:])]
        halves = [plan.release_for(p).half_width(alpha / len(agg.parts)) for p in agg.parts]
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


def explain_data(plan: QueryPlan, sql: str) -> dict[str, Any]:
    """A JSON-ready description of the plan."""
    q = plan.query
    grouping: str
    if not q.keys:
        grouping = "none"
    elif q.public_keys:
        n = 1
        for k in q.keys:
            assert k.domain is not None
            n *= len(k.domain)
        grouping = f"public domain: {n} groups, every one released (zero-filled)"
    else:
        assert plan.selection is not None
        grouping = (
            f"private keys: a group is released when its noisy count of units exceeds "
            f"{float(plan.selection.threshold):.4g}"
        )
    s = plan.stability
    return {
        "query": q.sql,
        "neighbouring": plan.neighbouring.value,
        "contribution_bound": {
            "rows_per_unit": s.rows,
            "groups_per_unit": s.groups,
            "rows_per_group_per_unit": s.rows_per_group,
            "enforced_in_sql": plan.needs_bounding,
        },
        "grouping": grouping,
        "primitives": [
            {
                "name": r.primitive.name,
                "kind": r.primitive.kind.value,
                "measure": (
                    r.primitive.measure.sql("postgres") if r.primitive.measure is not None else "*"
                ),
                "values": str(r.primitive.values) if r.primitive.values is not None else None,
                "sensitivity_l1": float(r.sensitivity.l1),
                "sensitivity_l2": float(r.sensitivity.l2),
                "mechanism": describe_mechanism(r.mechanism),
                "noise_std": r.mechanism.std,
                "error95": r.half_width(0.05),
                "epsilon": float(r.cost.epsilon) if r.cost.epsilon else None,
                "rho": float(r.cost.rho) if r.cost.rho else None,
            }
            for r in (*plan.releases, *((plan.selection.release,) if plan.selection else ()))
        ],
        "columns": [
            {"name": c.name, "type": t.type, "error95": c.error95}
            for c, t in zip(column_errors(plan), output_columns(plan), strict=True)
        ],
        "cost": {"epsilon": float(plan.cost.epsilon), "delta": float(plan.cost.delta)},
        "rewritten_sql": sql,
    }


def explain_text(plan: QueryPlan, sql: str) -> str:
    """The plan as text for a terminal."""
    d = explain_data(plan, sql)
    lines = [
        f"query:        {d['query']}",
        f"neighbours:   {d['neighbouring'].replace('_', '/')} one privacy unit",
        "bound:        {rows_per_unit} row(s) per unit, {groups_per_unit} group(s) per unit, "
        "{rows_per_group_per_unit} row(s) per group{e}".format(
            **d["contribution_bound"],
            e=""
            if d["contribution_bound"]["enforced_in_sql"]
            else " (unit column is unique: no bounding needed)",
        ),
        f"grouping:     {d['grouping']}",
        f"cost:         ε = {d['cost']['epsilon']:.6g}, δ = {d['cost']['delta']:.3g}",
        "",
        "noisy primitives:",
    ]
    for p in d["primitives"]:
        cost = (
            f"ε={p['epsilon']:.4g}"
            if p["epsilon"]
            else (f"ρ={p['rho']:.4g}" if p["rho"] else "ε=0")
        )
        values = f" over {p['values']}" if p["values"] else ""
        lines.append(
            f"  {p['name']:7} {p['kind']:5} {p['measure']}{values}: Δ1={p['sensitivity_l1']:.4g} "
            f"Δ2={p['sensitivity_l2']:.4g} → {p['mechanism']}, {cost}, 95% error ±"
            f"{p['error95']:.4g}"
        )
    lines += ["", "output columns (95% error):"]
    for c in d["columns"]:
        lines.append(f"  {c['name']}: {c['type']}, {c['error95']}")
    lines += ["", "rewritten SQL (runs on the database; noise is added by dpproxy):", f"  {sql}"]
    return "\n".join(lines)


def explain_json(plan: QueryPlan, sql: str) -> str:
    return json.dumps(explain_data(plan, sql), indent=2, ensure_ascii=False)
