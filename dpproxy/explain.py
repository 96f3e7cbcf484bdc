"""What a query will cost and how noisy it will be, computed from the plan alone (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dpproxy.explain_errors import aggregate_plans, column_errors, note_suffix
from dpproxy.explain_notes import abbreviated, fixed_bound, how_lines
from dpproxy.planning.keyed import KeyedPart
from dpproxy.planning.plan import QueryPlan, describe_mechanism
from dpproxy.planning.public import PublicPlan
from dpproxy.planning.relations import RelationPart
from dpproxy.planning.scalars import FIRST_NOTE, ComposedPlan, Part
from dpproxy.planning.union_plan import UnionPlan
from dpproxy.release.noise import drawn
from dpproxy.release.postprocess import output_columns
from dpproxy.release.public import PUBLIC_NOTE
from dpproxy.values import Cost


@dataclass(frozen=True, slots=True)
class BudgetView:
    """What the analyst's ledger says about this query: the budget, and whether the same query
    was answered before (then asking again costs nothing)."""

    analyst: str
    remaining: Cost
    spent: Cost
    tightest: Cost  # the tightest valid (ε, δ) of what was spent
    cached: bool


def explain_data(plan: QueryPlan, sql: str, budget: BudgetView | None = None) -> dict[str, Any]:
    """A JSON-ready description of the plan; ``sql`` is every statement the backend runs."""
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
        counted = (
            "noisy count (the released COUNT itself: no ε of its own)"
            if plan.selection.shared
            else "noisy count of units"
        )
        grouping = (
            f"private keys: a group is released when its {counted} exceeds "
            f"{float(plan.selection.threshold):.4g}"
        )
    s = plan.stability
    t = plan.truncation
    return {
        "query": q.sql,
        "neighbouring": plan.neighbouring.value,
        "relation": q.source.description if q.source is not None else q.table.name,
        "contribution_bound": {
            "rows_per_unit": s.rows,
            "groups_per_unit": s.groups,
            "rows_per_group_per_unit": s.rows_per_group,
            "enforced_in_sql": plan.needs_bounding,
            "source": t.source if t is not None else "schema",
            "chosen": t.chosen if t is not None else True,
            "choice_epsilon": float(t.epsilon) if t is not None else 0.0,
            "coverage": float(t.coverage) if t is not None and t.coverage is not None else None,
            "candidates": list(t.grid) if t is not None else [],
            "how": t.describe() if t is not None else fixed_bound(q),
        },
        "grouping": grouping,
        "how": how_lines(q),
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
            for r in (
                *(drawn(plan, r) for r in plan.releases),
                *(
                    (plan.selection.release,)
                    if plan.selection and not plan.selection.shared
                    else ()
                ),
            )
        ],
        "columns": [
            {"name": c.name, "type": t.type, "error95": c.error95}
            for c, t in zip(column_errors(plan), output_columns(plan), strict=True)
        ],
        "aggregate_plans": aggregate_plans(plan),
        "cost": {"epsilon": float(plan.cost.epsilon), "delta": float(plan.cost.delta)},
        "budget": _budget_data(plan, budget),
        "rewritten_sql": sql,
    }


def public_data(plan: PublicPlan, sql: str, budget: BudgetView | None = None) -> dict[str, Any]:
    """The plan of a query over public tables only: exact, free, at most ``max_rows`` rows."""
    return {
        "query": plan.query,
        "mechanism": PUBLIC_NOTE,
        "tables": list(plan.tables),
        "max_rows": plan.max_rows,
        "columns": [{"name": n, "type": t, "error95": "exact"} for n, t in plan.columns],
        "cost": {"epsilon": 0.0, "delta": 0.0},
        "budget": _budget_data(plan, budget),
        "rewritten_sql": sql,
    }


def _public_text(d: dict[str, Any]) -> str:
    lines = [
        f"query:        {abbreviated(d['query'])}",
        f"mechanism:    {d['mechanism']}",
        f"tables:       {', '.join(d['tables'])} (public)",
        "cost:         ε = 0, δ = 0",
        *_budget_lines(d["budget"]),
        f"rows:         at most {d['max_rows']:,} (a larger answer is refused, SQLSTATE 53400)",
        "",
        "output columns (exact):",
        *(f"  {c['name']}: {c['type']}" for c in d["columns"]),
        "",
        "SQL (runs on the database; the answer is released as it is):",
        f"  {d['rewritten_sql']}",
    ]
    return "\n".join(lines)


def composed_data(plan: ComposedPlan, budget: BudgetView | None = None) -> dict[str, Any]:
    """A query with scalar subqueries: each part's plan, in the order the parts run."""
    parts = plan.plans
    statements = plan.statements or tuple(() for _ in parts)
    data = [
        explain_data(p, ";\n".join(s)) if isinstance(p, QueryPlan) else public_data(p, "".join(s))
        for p, s in zip(parts, statements, strict=True)
    ]
    return {
        "query": plan.query,
        "mechanism": FIRST_NOTE,
        "scalar_subqueries": [
            {**d, "released_as": _part_how(i, part)}
            for i, (part, d) in enumerate(zip(plan.parts, data[:-1], strict=True))
        ],
        "correlated": [  # released once per key of a public domain (planning/keyed.py)
            {"domain_sql": p.corr.domain_sql, "keys": len(p.keys), "released": p.plan is not None}
            for p in plan.scalars
            if isinstance(p, KeyedPart)
        ],
        "relations": [  # released first, then read as public rows (planning/relations.py)
            {"name": p.name, "keys": len(p.keys), "domains": list(p.domains)}
            for p in plan.scalars
            if isinstance(p, RelationPart)
        ],
        "outer": data[-1],
        "cost": {"epsilon": float(plan.cost.epsilon), "delta": float(plan.cost.delta)},
        "budget": _budget_data(plan, budget),
    }


def _part_how(i: int, part: Part) -> str:
    """What part ``i`` of a composed query is and how it is released, in a short sentence."""
    assert part.plan is not None
    how = "released first with noise" if isinstance(part.plan, QueryPlan) else "exact, free"
    how = f"scalar subquery {i + 1}, {how}"
    if isinstance(part, RelationPart):
        how = (
            f"part {i + 1}, the aggregate relation {part.name}, released first with noise for "
            "each of the "
            f"{len(part.keys)} keys of its public domain ({'; '.join(part.domains)}), then "
            "read by the rest of the query as public rows"
        )
    if isinstance(part, KeyedPart):
        how = (
            f"subquery {i + 1}, correlated on "
            f"{', '.join(c.sql('postgres') for c in part.corr.outer)}, keyed on "
            f"a public table: released first with noise for each of the {len(part.keys)} "
            "keys of the public domain "
            f"{part.corr.domain_sql} (exact, free), then used as a CASE over those keys"
        )
    return how


def _composed_text(plan: ComposedPlan, budget: BudgetView | None) -> str:
    d = composed_data(plan, budget)
    lines = [
        f"query:        {abbreviated(d['query'])}",
        f"cost:         ε = {d['cost']['epsilon']:.6g}, δ = {d['cost']['delta']:.3g} "
        f"(the sum of the {len(plan.parts) + 1} parts below)",
        *_budget_lines(d["budget"]),
        f"how:          {FIRST_NOTE}.",
    ]
    statements = plan.statements or tuple(() for _ in range(len(plan.parts) + 1))
    for i, part in enumerate(plan.parts):
        assert part.plan is not None
        lines += ["", f"--- {abbreviated(_part_how(i, part))}: {abbreviated(part.sql)}"]
        lines += [explain_text(part.plan, ";\n".join(statements[i]))]
    lines += [
        f"--- correlated subquery with no key in its public domain {p.corr.domain_sql}: "
        "NULL, nothing released"
        for p in plan.scalars
        if isinstance(p, KeyedPart) and p.plan is None
    ]
    lines += [
        "",
        "--- the outer query, planned with 0 in place of each scalar subquery (and of each "
        "key's value; the released values replace them; the plan is the same whatever they "
        "are):",
        explain_text(plan.outer, ";\n".join(statements[-1])),
    ]
    return "\n".join(lines)


AnyPlan = QueryPlan | PublicPlan | ComposedPlan | UnionPlan


def _union_how(plan: UnionPlan) -> str:
    """What a UNION [ALL] does, in a sentence: composition, then post-processing."""
    kind = "UNION" if plan.distinct else "UNION ALL"
    how = (
        f"{kind} of {len(plan.plans)} branches, each released as a query of its own; the "
        "cost is the sum of the branches' costs (sequential composition); the released "
        "rows are concatenated in branch order"
    )
    if plan.distinct:
        how += ", duplicates of released rows dropped by dpproxy"
    tail = [w for w, on in (("ORDER BY", plan.order), ("LIMIT", plan.limit is not None)) if on]
    tail += ["OFFSET"] if plan.offset else []
    if tail:
        how += f"; {', '.join(tail)} applied by dpproxy to the released rows (free)"
    return how


def _branch_sql(plan: UnionPlan, i: int) -> str:
    return ";\n".join(plan.statements[i]) if plan.statements else ""


def union_data(plan: UnionPlan, budget: BudgetView | None = None) -> dict[str, Any]:
    """A UNION [ALL]: each branch's plan as if sent alone, the summed cost, what dpproxy does."""
    branches = [
        explain_data(p, _branch_sql(plan, i))
        if isinstance(p, QueryPlan)
        else public_data(p, _branch_sql(plan, i))
        for i, p in enumerate(plan.plans)
    ]
    return {
        "query": plan.query,
        "union": "UNION" if plan.distinct else "UNION ALL",
        "how": _union_how(plan),
        "branches": branches,
        "cost": {"epsilon": float(plan.cost.epsilon), "delta": float(plan.cost.delta)},
        "budget": _budget_data(plan, budget),
    }


def _union_text(plan: UnionPlan, budget: BudgetView | None) -> str:
    d = union_data(plan, budget)
    lines = [
        f"query:        {abbreviated(d['query'])}",
        f"cost:         ε = {d['cost']['epsilon']:.6g}, δ = {d['cost']['delta']:.3g} "
        f"(the sum of the {len(plan.plans)} branches below)",
        *_budget_lines(d["budget"]),
        f"how:          {d['how']}.",
    ]
    for i, (text, p) in enumerate(zip(plan.branches, plan.plans, strict=True)):
        free = "" if isinstance(p, QueryPlan) else " (public tables only: exact, free)"
        lines += ["", f"--- branch {i + 1} of the {d['union']}{free}: {text[:2000]}"]
        lines += [explain_text(p, _branch_sql(plan, i))]
    return "\n".join(lines)


def _budget_data(plan: AnyPlan, budget: BudgetView | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    remaining = budget.remaining
    return {
        "analyst": budget.analyst,
        "cached": budget.cached,
        "would_spend": {"epsilon": 0.0, "delta": 0.0}
        if budget.cached
        else {"epsilon": float(plan.cost.epsilon), "delta": float(plan.cost.delta)},
        "affordable": budget.cached or remaining.covers(plan.cost),
        "remaining": {"epsilon": float(remaining.epsilon), "delta": float(remaining.delta)},
        "spent": {"epsilon": float(budget.spent.epsilon), "delta": float(budget.spent.delta)},
        "spent_tightest": {
            "epsilon": float(budget.tightest.epsilon),
            "delta": float(budget.tightest.delta),
        },
    }


def explain_text(plan: AnyPlan, sql: str, budget: BudgetView | None = None) -> str:
    """The plan as text for a terminal."""
    if isinstance(plan, UnionPlan):
        return _union_text(plan, budget)
    if isinstance(plan, ComposedPlan):
        return _composed_text(plan, budget)
    if isinstance(plan, PublicPlan):
        return _public_text(public_data(plan, sql, budget))
    d = explain_data(plan, sql, budget)
    lines = [
        f"query:        {abbreviated(d['query'])}",
        f"neighbours:   {d['neighbouring'].replace('_', '/')} one privacy unit",
        f"relation:     {d['relation']}",
        "bound:        {rows_per_unit} row(s) per unit, {groups_per_unit} group(s) per unit, "
        "{rows_per_group_per_unit} row(s) per group{e}".format(
            **d["contribution_bound"],
            e=""
            if d["contribution_bound"]["enforced_in_sql"]
            else (
                " (bounded inside the join, below)"
                if d["contribution_bound"]["source"] == "join"
                else " (unit column is unique: no bounding needed)"
            ),
        ),
        f"              {d['contribution_bound']['how']}",
        f"grouping:     {d['grouping']}",
        *(f"{'how:' if i == 0 else '':14}{line}" for i, line in enumerate(d["how"])),
        f"cost:         ε = {d['cost']['epsilon']:.6g}, δ = {d['cost']['delta']:.3g}",
        *_budget_lines(d["budget"]),
        "",
        "noisy primitives:",
    ]
    if not d["primitives"]:
        lines.append("  (none: every aggregate is released by its own plan, below)")
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
    if d["aggregate_plans"]:
        lines += ["", "aggregate plans (predicted 95% error; * = chosen):"]
    for a in d["aggregate_plans"]:
        lines.append(f"  {a['aggregate']}: {a['chosen']} — {a['why']}")
        for c in a["candidates"]:
            mark = "*" if c["method"] == a["chosen"] else " "
            if c["applicable"]:
                err = f"±{c['error95']:.4g}" if c["error95"] is not None else "—"
                text = f"{err:>12}  {c['formula']}{note_suffix(c['note'])}"
            else:
                text = f"{'n/a':>12}  {c['note']}"
            lines.append(f"    {mark} {c['method']:12}{text}")
        if a["release"] is not None:
            r = a["release"]
            extra = ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in r.items()
                if k not in ("method", "epsilon", "delta")
            )
            lines.append(f"      release: ε={r['epsilon']:.4g}, δ={r['delta']:.3g}; {extra}")
    lines += ["", "output columns (95% error):"]
    for c in d["columns"]:
        lines.append(f"  {c['name']}: {c['type']}, {c['error95']}")
    # The same text whatever the rows: on a DuckDB file the statement that runs may leave out
    # clamps that its rows prove change nothing (backends/scanned.py), never anything else.
    lines += [
        "",
        "rewritten SQL (the database computes exactly this; noise is added by dpproxy):",
    ]
    lines += [f"  {statement}" for statement in sql.split(";\n")]
    return "\n".join(lines)


def _budget_lines(b: dict[str, Any] | None) -> list[str]:
    if b is None:
        return []
    rem = b["remaining"]
    head = (
        f"budget:       {b['analyst']!r} has ε = {rem['epsilon']:.6g}, δ = {rem['delta']:.3g} left"
    )
    if b["cached"]:
        return [head + "; answered before: asking again returns that answer and costs nothing"]
    if not b["affordable"]:
        return [head + "; NOT enough for this query (ZD001)"]
    return [head]


def explain_json(plan: AnyPlan, sql: str, budget: BudgetView | None = None) -> str:
    data = (
        union_data(plan, budget)
        if isinstance(plan, UnionPlan)
        else composed_data(plan, budget)
        if isinstance(plan, ComposedPlan)
        else public_data(plan, sql, budget)
        if isinstance(plan, PublicPlan)
        else explain_data(plan, sql, budget)
    )
    return json.dumps(data, indent=2, ensure_ascii=False)
