"""An addendum to ``DPPROXY_ACCURACY.md``: some queries remeasured after a later commit.

The full report (``dpproxy_accuracy.py --report``) needs the raw runs of both dpproxy sides
and of the peer rerun; when only some queries are remeasured (``dpproxy_accuracy.py
--queries``), this writes ``ACCURACY_ADDENDUM.json`` and ``ACCURACY_ADDENDUM.md`` from the new
dpproxy runs (``--after``) and, optionally, ``tumult_model.py``'s draws (``--model``): per query
and output column, dpproxy's median relative error with a bootstrap 95% interval, the figures
the committed ``DPPROXY_ACCURACY.json`` recorded for the same column (dpproxy's earlier median,
the rerun peer's median and run count, the best peer), the model's median, and the ratios. The
ratio to the recorded peer resamples dpproxy's cells only (the peer's cells are not kept, only
its median), so its interval is narrower than the full report's, which resampled both sides.
``--docs`` prints docs/performance.md's paragraph on it (the test compares the two).

Usage, from the repository root (``data.py --datasets pums`` first)::

    python benchmarks/compare/dpproxy_accuracy.py --queries Q11,Q12 --runs 400 --out after.jsonl
    <tumult venv>/bin/python benchmarks/compare/tumult_model.py --queries Q12 \\
        --quantile-draws 10000 --seed 21 --out model.jsonl
    python benchmarks/compare/accuracy_addendum.py --after after.jsonl --model model.jsonl \\
        --earlier-commit b5845e0 --earlier-date 2026-11-27
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dpproxy_accuracy as acc  # noqa: E402
import report  # noqa: E402
import workload  # noqa: E402

JSON_OUT = HERE / "ACCURACY_ADDENDUM.json"
MD_OUT = HERE / "ACCURACY_ADDENDUM.md"
LINK = "Remeasured since: see [ACCURACY_ADDENDUM.md](ACCURACY_ADDENDUM.md)"


def median_ci(values: list[float]) -> tuple[float, float]:
    """A bootstrap 95% interval of the median: ``report.ratio_ci`` against a constant 1."""
    return report.ratio_ci(values, [1.0])


def build(
    data_dir: Path, after: Path, model: Path | None, earlier: dict[str, str]
) -> dict[str, Any]:
    """The addendum's figures (see the module docstring)."""
    answers = acc.exact(data_dir)
    mine, drawn = acc.load(after), (acc.load(model) if model else {})
    recorded = json.loads(acc.SUMMARY.read_text())
    titles = acc.queries()
    out: dict[str, Any] = {"earlier": earlier, "queries": {}}
    for qid, rec in mine.items():
        errors = acc.column_errors(rec, answers[qid])
        sim = acc.column_errors(drawn.get(qid), answers[qid]) or [[] for _ in errors]
        old = recorded[qid].get("rerun")
        cols = []
        for j, (a, c) in enumerate(zip(errors, sim, strict=True)):
            ma = statistics.median(a)
            col: dict[str, Any] = {"dpproxy": ma, "dpproxy_ci": median_ci(a)}
            if old is not None:
                was = old["per_column"][j]
                name, best = was["best"]
                col.update(
                    earlier_dpproxy=was["dpproxy"],
                    earlier_ratio=was["ratio"],
                    earlier_ci=was["ci"],
                    peer=was["peer"],
                    best=[name, best],
                    ratio=report.safe_ratio(ma, best),
                    ratio_ci=report.ratio_ci(a, [best]),
                )
            if c:
                mc = statistics.median(c)
                col.update(
                    model=mc,
                    model_ci=median_ci(c),
                    model_draws=len(c),
                    model_ratio=report.safe_ratio(ma, mc),
                    model_ratio_ci=report.ratio_ci(a, c),
                )
            cols.append(col)
        out["queries"][qid] = {
            "title": titles[qid][0],
            "sql": titles[qid][1],
            "columns": answers[qid][0][answers[qid][1] :],
            "commit": rec.get("commit"),
            "dpproxy_runs": len(rec["runs"]),
            "peer_name": old and old["peer_name"],
            "peer_runs": old and old["peer_runs"],
            "model_seed": drawn.get(qid, {}).get("seed"),
            "per_column": cols,
        }
    out["now"] = standing(recorded, out["queries"])
    out["q14_law"] = exact_chance(len(answers["Q14"][2]), recorded["Q14"]["rerun"]["peer_runs"])
    return out


def exact_chance(cells_per_run: int, runs: int, eps: float = workload.EPSILON) -> dict[str, Any]:
    """Q14's law: the largest P(exact) of an ε-DP integer noise on a count, and the chance
    that more than half of ``runs`` × ``cells_per_run`` independent cells are exact at it."""
    p, cells = geometric_exact_share(eps), cells_per_run * runs
    return {
        "epsilon": eps,
        "p_exact": p,
        "runs": runs,
        "cells": cells,
        "chance_median_zero": binomial_tail(cells, p, cells // 2 + 1),
    }


def standing(recorded: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The target's columns as they stand: the remeasured ones from ``new``, the others as
    the earlier rerun recorded them; which are above the best peer."""
    cells, above = 0, []
    for qid, q in sorted(recorded.items()):
        if "rerun" not in q:
            continue
        for j, was in enumerate(q["rerun"]["per_column"]):
            cells += 1
            now = new[qid]["per_column"][j] if qid in new else None
            ratio, ci = (now["ratio"], now["ratio_ci"]) if now else (was["ratio"], was["ci"])
            if ratio is not None and ratio > 1:
                above.append({"query": qid, "ratio": ratio, "ci": ci, "remeasured": bool(now)})
    above.sort(key=lambda x: -x["ratio"])
    return {"columns": cells, "above": above}


def _median(v: float, ci: Any) -> str:
    return f"{acc._fmt(v)} [{acc._fmt(ci[0])}–{acc._fmt(ci[1])}]"


def render(data: dict[str, Any]) -> str:
    """ACCURACY_ADDENDUM.md."""
    lines = [
        "# Addendum to DPPROXY_ACCURACY.md: queries remeasured since (pums, ε = 1)",
        "",
        "_Generated by `benchmarks/compare/accuracy_addendum.py`; do not edit by hand._ "
        "dpproxy remeasured on the queries below alone (`dpproxy_accuracy.py --queries`); the "
        "earlier figures and the rerun peer's are those recorded in "
        f"[DPPROXY_ACCURACY.json](DPPROXY_ACCURACY.json) (dpproxy at "
        f"{data['earlier']['commit']}, {data['earlier']['date']}), whose raw runs are not kept: "
        "the interval of *ratio* resamples dpproxy's cells only, against the peer's median. "
        "*model*: Tumult's mechanism restated without Spark (`tumult_model.py`, seeded), both "
        "sides resampled. Intervals: bootstrap 95%; dpproxy's percentile releases take few "
        "distinct values (its cells' grid), so the interval of a median can be one value.",
        "",
        "| query | column | commit | runs | dpproxy | dpproxy earlier | best peer (runs) | ratio "
        "| ratio earlier | model (draws) | dpproxy / model |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for qid, q in sorted(data["queries"].items()):
        for col, c in zip(q["columns"], q["per_column"], strict=True):
            best = (
                f"{acc._fmt(c['best'][1])} ({c['best'][0]}, {q['peer_runs']})"
                if "best" in c
                else "–"
            )
            model = (
                f"{_median(c['model'], c['model_ci'])} ({c['model_draws']:,}) | "
                f"{acc._ratio(c['model_ratio'], c['model_ratio_ci'])}"
                if "model" in c
                else "– | –"
            )
            lines.append(
                f"| {qid} {q['title']} | `{col}` | {(q['commit'] or '?')[:7]} | "
                f"{q['dpproxy_runs']} | {_median(c['dpproxy'], c['dpproxy_ci'])} | "
                f"{acc._fmt(c.get('earlier_dpproxy'))} | {best} | "
                f"{acc._ratio(c.get('ratio'), c.get('ratio_ci'))} | "
                f"{acc._ratio(c.get('earlier_ratio'), c.get('earlier_ci'))} | {model} |"
            )
    now = data["now"]
    lines += [
        "",
        f"Target columns as they stand (the others as DPPROXY_ACCURACY.md records "
        f"them): ≤ the best peer on {now['columns'] - len(now['above'])}/{now['columns']}; "
        f"above: {_above(now)}.",
        "",
    ]
    return "\n".join(lines)


def _above(now: dict[str, Any]) -> str:
    return (
        ", ".join(
            f"{a['query']} {acc._ratio(a['ratio'], a['ci'])}"
            + ("" if a["remeasured"] else " (not remeasured)")
            for a in now["above"]
        )
        or "none"
    )


def geometric_exact_share(eps: float) -> float:
    """P(noise = 0) of two-sided geometric noise P(k) ∝ e^(−ε|k|): (1 − e^−ε)/(1 + e^−ε) =
    tanh(ε/2), the most any ε-DP integer noise added to a count can put on 0."""
    return math.tanh(eps / 2)


def binomial_tail(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) ≥ k)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def docs(data: dict[str, Any]) -> str:
    """docs/performance.md's paragraph after the issue-21 table (links from docs/)."""
    early = data["earlier"]
    now = data["now"]
    parts = []
    for qid, q in sorted(data["queries"].items()):
        for c in q["per_column"]:
            text = (
                f"{qid} {_median(c['dpproxy'], c['dpproxy_ci'])} (was "
                f"{acc._fmt(c.get('earlier_dpproxy'))})"
            )
            if "best" in c:
                text += (
                    f", {acc._ratio(c['ratio'], c['ratio_ci'])} the best peer's "
                    f"{acc._fmt(c['best'][1])} ({c['best'][0]}, {q['peer_runs']} runs)"
                )
            if "model" in c:
                text += (
                    f", {acc._ratio(c['model_ratio'], c['model_ratio_ci'])} Tumult's "
                    f"model ({c['model_draws']:,} draws)"
                )
            parts.append(text)
    runs = sorted({q["dpproxy_runs"] for q in data["queries"].values()})
    commits = sorted({(q["commit"] or "?")[:7] for q in data["queries"].values()})
    law = data["q14_law"]
    eps, p, cells, chance = law["epsilon"], law["p_exact"], law["cells"], law["chance_median_zero"]
    return (
        f"The target row above is the rerun of {early['date']} (dpproxy at {early['commit']}). "
        f"Since then {' and '.join(sorted(data['queries']))} were remeasured at "
        f"{', '.join(commits)} ({'/'.join(map(str, runs))} runs each; "
        "[ACCURACY_ADDENDUM.md](../benchmarks/compare/ACCURACY_ADDENDUM.md), ratio intervals "
        f"resampling dpproxy's cells only): {'; '.join(parts)}. As they stand, ≤ on "
        f"{now['columns'] - len(now['above'])}/{now['columns']} columns; above: "
        f"{_above(now)}. Q14 (three noisy counts) cannot be beaten in law: both systems add "
        "two-sided geometric noise to each count, and any ε-DP integer noise added to a count "
        "(pmf f with f(k) ≥ f(0)·e^(−ε|k|), summing to 1) has P(exact) = f(0) ≤ tanh(ε/2), "
        f"{p:.3f} at ε = {eps:g}, which the geometric attains: below 1/2, so every such "
        "mechanism's median absolute error is ≥ 1 in law. Tumult's median of 0 over "
        f"{law['runs']} runs means more than half of its {cells} cells were exact by chance "
        f"(probability {chance:.2f} for independent cells exact with p = {p:.3f}).\n"
    )


def link(report_md: Path, data: dict[str, Any]) -> None:
    """Add (or refresh) the line pointing from DPPROXY_ACCURACY.md to the addendum."""
    line = f"{LINK} ({', '.join(sorted(data['queries']))})."
    lines = [x for x in report_md.read_text().split("\n") if not x.startswith(LINK)]
    at = next(i for i, x in enumerate(lines) if x.startswith("_Generated by")) + 1
    report_md.write_text("\n".join([*lines[:at], "", line, *lines[at:]]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=HERE / "work" / "data")
    p.add_argument("--after", type=Path, help="dpproxy_accuracy.py's runs of the subset")
    p.add_argument("--model", type=Path, help="tumult_model.py's draws (JSON lines)")
    p.add_argument("--earlier-commit", default="?", help="dpproxy's commit in the full report")
    p.add_argument("--earlier-date", default="?", help="the date of the full report's rerun")
    p.add_argument("--json", type=Path, default=JSON_OUT)
    p.add_argument("--md", type=Path, default=MD_OUT)
    p.add_argument("--report-md", type=Path, default=acc.OUT, help="linked from here")
    p.add_argument("--docs", action="store_true", help="print docs/performance.md's paragraph")
    args = p.parse_args(argv)
    if args.docs:
        data = json.loads(args.json.read_text())
        print(docs(data), end="")
        return
    if args.after is None:
        p.error("give --after (or --docs)")
    earlier = {"commit": args.earlier_commit, "date": args.earlier_date}
    data = build(args.data_dir, args.after, args.model, earlier)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    args.md.write_text(render(data))
    link(args.report_md, data)
    print(f"wrote {args.json}, {args.md} and the link in {args.report_md}")


if __name__ == "__main__":
    main()
