"""What the steward console shows, as plain data (the pages and the JSON API share it).

Everything here reads the budget ledger (``accounting/ledger.py``) and the privacy schema, never
the data: accounts and their budgets, the release log (what was asked, how, at what cost), the
released answers kept in the ledger's answer cache (values the analyst already received, with
their 95% half-widths), the hash chain's verification and the schema's declarations.
"""

from __future__ import annotations

import datetime
from fractions import Fraction
from typing import Any

from dpproxy.accounting.ledger import Account, Ledger, LogEntry
from dpproxy.backends.opener import describe
from dpproxy.catalog.check import check_schema_file
from dpproxy.catalog.model import Catalog
from dpproxy.errors import DPProxyError
from dpproxy.release.encoding import decode_released

PAGE_SIZE = 50


def number(x: Fraction) -> float:
    return float(x)


def when(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def account_data(a: Account) -> dict[str, Any]:
    """One account: totals, spent, reserved and remaining ε and δ, shares for the bars."""
    out: dict[str, Any] = {
        "principal": a.principal,
        "kind": a.kind,
        "period_seconds": a.period_seconds,
        "period_start": when(a.period_start) if a.period_seconds else None,
    }
    for part in ("epsilon", "delta"):
        total = number(getattr(a.total, part))
        spent = number(getattr(a.spent, part))
        reserved = number(getattr(a.reserved, part))
        out[part] = {
            "total": total,
            "spent": spent,
            "reserved": reserved,
            "remaining": number(getattr(a.remaining, part)),
            "spent_share": min(spent / total, 1.0) if total > 0 else 0.0,
            "reserved_share": min(reserved / total, 1.0) if total > 0 else 0.0,
        }
    return out


def accounts(ledger: Ledger) -> dict[str, Any]:
    """Every account of the dataset, analysts first, with the groups' members."""
    members: dict[str, list[str]] = {}
    for group, analyst in ledger.members():
        members.setdefault(group, []).append(analyst)
    rows = sorted(ledger.accounts(), key=lambda a: (a.kind != "analyst", a.principal))
    return {
        "dataset": ledger.dataset,
        "default_budget": {
            "epsilon": number(ledger.default_budget.epsilon),
            "delta": number(ledger.default_budget.delta),
        },
        "accounts": [
            {**account_data(a), "members": sorted(members.get(a.principal, []))} for a in rows
        ],
    }


def _release(e: LogEntry) -> dict[str, Any]:
    b = e.body
    return {
        "seq": e.seq,
        "time": when(e.time),
        "timestamp": e.time,
        "analyst": e.principal,
        "query": b.get("query", ""),
        "plan": b.get("plan", ""),
        "mechanism": b.get("mechanism", ""),
        "epsilon": float(Fraction(b.get("eps", "0"))),
        "delta": float(Fraction(b.get("delta", "0"))),
        "failed": b.get("failed"),
        "has_answer": "answer" in b,
    }


def release_log(ledger: Ledger, search: str = "", page: int = 1) -> dict[str, Any]:
    """Releases, newest first, whose analyst, query, plan or mechanism contains ``search``
    (case-insensitive), :data:`PAGE_SIZE` per page."""
    needle = search.strip().lower()
    found = []
    for e in reversed(ledger.entries()):
        if e.kind != "release":
            continue
        r = _release(e)
        text = " ".join((r["analyst"], r["query"], r["plan"], r["mechanism"])).lower()
        if needle and needle not in text:
            continue
        found.append(r)
    pages = max(1, -(-len(found) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    return {
        "search": search,
        "page": page,
        "pages": pages,
        "total": len(found),
        "releases": found[(page - 1) * PAGE_SIZE : page * PAGE_SIZE],
    }


def release(ledger: Ledger, seq: int) -> dict[str, Any] | None:
    """One release and, when the ledger kept its answer, the released rows with their 95%
    half-widths: per numeric column, one error bar per row."""
    entry = next((e for e in ledger.entries() if e.seq == seq and e.kind == "release"), None)
    if entry is None:
        return None
    out = _release(entry)
    payload = ledger.cached(entry.body["answer"]) if "answer" in entry.body else None
    if payload is None:
        out["answer"] = None
        return out
    answer = decode_released(payload)
    names = [c.name for c in answer.columns]
    cells = list(zip(answer.rows, answer.errors, strict=True))
    # Group keys are released exactly (half-width 0) or are not numbers.
    keys = [i for i in range(len(names)) if all(not _numeric(r[i]) or e[i] == 0 for r, e in cells)]
    charts = []
    for i, name in enumerate(names):
        if i in keys:
            continue
        bars = [
            {
                "label": ", ".join(str(row[k]) for k in keys) or name,
                "value": float(row[i]),
                "half_width": float(errs[i] or 0.0),
            }
            for row, errs in cells
            if _numeric(row[i]) and errs[i] is not None
        ]
        if bars:
            charts.append({"column": name, "bars": bars})
    out["answer"] = {
        "columns": names,
        "rows": [[_cell(v) for v in row] for row in answer.rows],
        "errors": [list(e) for e in answer.errors],
        "charts": charts,
    }
    return out


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _cell(v: Any) -> Any:
    if isinstance(v, datetime.date | datetime.datetime):
        return v.isoformat()
    return v if isinstance(v, int | float | str | bool) or v is None else str(v)


def spend_series(ledger: Ledger) -> dict[str, list[tuple[float, float]]]:
    """Per analyst, the cumulative ε spent after each release, in time order (resets of the
    account start again from 0)."""
    series: dict[str, list[tuple[float, float]]] = {}
    total: dict[str, float] = {}
    for e in ledger.entries():
        if e.kind == "reset":
            total[e.principal] = 0.0
            series.setdefault(e.principal, []).append((e.time, 0.0))
        if e.kind != "release":
            continue
        total[e.principal] = total.get(e.principal, 0.0) + float(Fraction(e.body.get("eps", "0")))
        series.setdefault(e.principal, []).append((e.time, total[e.principal]))
    return series


def verification(ledger: Ledger, recent: int = 50) -> dict[str, Any]:
    """The hash chain's check, and the newest ``recent`` entries of every kind (grants,
    resets, memberships, releases) as the chain holds them."""
    v = ledger.verify()
    entries = [
        {
            "seq": e.seq,
            "time": when(e.time),
            "kind": e.kind,
            "principal": e.principal,
            "detail": _detail(e),
        }
        for e in reversed(ledger.entries(limit=recent))
    ]
    return {
        "ok": v.ok,
        "entries": v.entries,
        "problems": list(v.problems),
        "head": v.head,
        "recent": entries,
    }


def _detail(e: LogEntry) -> str:
    b = e.body
    cost = ""
    if "eps" in b:
        cost = f"ε = {float(Fraction(b['eps'])):g}, δ = {float(Fraction(b.get('delta', '0'))):g}"
    if e.kind == "grant":
        return f"total {cost}" + (
            f", renews every {b['period_seconds']} s" if b.get("period_seconds") else ""
        )
    if e.kind == "release":
        return f"{cost}: {str(b.get('query', ''))[:100]}"
    if cost:
        return cost
    return ", ".join(f"{k} {v}" for k, v in b.items() if isinstance(v, str | int))[:120]


def schema(catalog: Catalog) -> dict[str, Any]:
    """The privacy schema's declarations (no data): tables, units, bounds, domains."""
    tables = []
    for t in catalog.tables:
        unit = t.privacy_unit
        if t.unit_via is not None:
            unit = f"{t.unit_via.column} → {t.unit_via.table}.{t.unit_via.key}"
        tables.append(
            {
                "name": t.name,
                "private": t.private,
                "privacy_unit": unit,
                "max_rows_per_unit": t.bound.max_rows,
                "columns": [
                    {
                        "name": c.name,
                        "type": c.type.value,
                        "nullable": c.nullable,
                        "lower": None if c.lower is None else float(c.lower),
                        "upper": None if c.upper is None else float(c.upper),
                        "domain": None if c.domain is None else [str(v) for v in c.domain],
                    }
                    for c in t.columns
                ],
            }
        )
    policy = catalog.policy
    return {
        "dataset": catalog.dataset,
        "source": catalog.source,
        "neighbouring": policy.neighbouring.value,
        "epsilon": float(policy.epsilon),
        "delta": float(policy.delta),
        "budget": {"epsilon": float(policy.budget.epsilon), "delta": float(policy.budget.delta)},
        "tables": tables,
    }


def schema_findings(schema_path: str | None, database: str | None) -> dict[str, Any] | None:
    """``dpproxy schema check``'s report on the schema file, against the database's metadata
    when one is given (tables, columns, types: no row is read); None without a schema file."""
    if schema_path is None:
        return None
    shapes = None
    problems: list[str] = []
    if database is not None:
        try:
            shapes = describe(database)
        except DPProxyError as e:
            problems.append(f"{database}: {e.message} (SQLSTATE {e.sqlstate})")
    report = check_schema_file(schema_path, shapes)
    return {
        "source": report.source,
        "database": database,
        "ok": report.ok and not problems,
        "problems": [*problems, *report.problems],
        "todos": list(report.todos),
    }
