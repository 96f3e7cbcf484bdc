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
With ``--peer`` (``tumult_rerun.py --collect``'s lines of a peer rerun for this addendum), a
query in it is compared with that rerun instead: the peer's median from its runs, and the
ratio's interval resampling the cells of both sides, as the full report does. Queries of the
committed addendum that are not remeasured now are kept as it recorded them, so the addendum
grows query by query. ``--docs`` prints docs/performance.md's paragraph on it (the test
compares the two).

Usage, from the repository root (``data.py --datasets pums`` first)::

    python benchmarks/compare/dpproxy_accuracy.py --queries Q11,Q12 --runs 400 --out after.jsonl
    <tumult venv>/bin/python benchmarks/compare/tumult_model.py --queries Q12 \\
        --quantile-draws 10000 --seed 21 --out model.jsonl
    python benchmarks/compare/accuracy_addendum.py --after after.jsonl --model model.jsonl \\
        --earlier-commit b5845e0 --earlier-date 2026-11-27 [--peer tumult.jsonl]
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
LINK = acc.ADDENDUM_LINK


def median_ci(values: list[float]) -> tuple[float, float]:
    """A bootstrap 95% interval of the median: ``report.ratio_ci`` against a constant 1."""
    return report.ratio_ci(values, [1.0])


def build(
    data_dir: Path,
    after: Path,
    model: Path | None,
    earlier: dict[str, str],
    peer: Path | None = None,
    kept: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The addendum's figures (see the module docstring); ``kept``: the queries of an earlier
    addendum, kept where ``after`` does not remeasure them."""
    answers = acc.exact(data_dir)
    mine, drawn = acc.load(after), (acc.load(model) if model else {})
    fresh = acc.load(peer) if peer else {}
    recorded = json.loads(acc.SUMMARY.read_text())
    titles = acc.queries()
    out: dict[str, Any] = {"earlier": earlier, "queries": dict(kept or {})}
    for qid, rec in mine.items():
        errors = acc.column_errors(rec, answers[qid])
        sim = acc.column_errors(drawn.get(qid), answers[qid]) or [[] for _ in errors]
        theirs = acc.column_errors(fresh.get(qid), answers[qid]) or [[] for _ in errors]
        old = recorded[qid].get("rerun")
        cols = []
        for j, (a, b, c) in enumerate(zip(errors, theirs, sim, strict=True)):
            ma = statistics.median(a)
            col: dict[str, Any] = {"dpproxy": ma, "dpproxy_ci": median_ci(a)}
            if old is not None:
                was = old["per_column"][j]
                col.update(
                    earlier_dpproxy=was["dpproxy"],
                    earlier_ratio=was["ratio"],
                    earlier_ci=was["ci"],
                    **versus(a, b, old, was),
                )
            if c:
                mc = statistics.median(c)
                col.update(
                    model=mc,
                    model_ci=median_ci(c),
                    model_draws=len(drawn[qid]["runs"]),
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
            "peer_runs": len(fresh[qid]["runs"]) if qid in fresh else old and old["peer_runs"],
            "peer_rerun": qid in fresh,
            "earlier_peer_runs": old and old["peer_runs"],
            "model_seed": drawn.get(qid, {}).get("seed"),
            "per_column": cols,
        }
    out["now"] = standing(recorded, out["queries"])
    out["q14_law"] = exact_chance(len(answers["Q14"][2]), recorded["Q14"]["rerun"]["peer_runs"])
    for key, runs in (("rerun", fresh), ("dpproxy", mine)):
        if "Q14" in fresh and "Q14" in runs:
            cells = [e for col in acc.column_errors(runs["Q14"], answers["Q14"]) for e in col]
            out["q14_law"][key] = {
                "runs": len(runs["Q14"]["runs"]),
                "cells": len(cells),
                "exact": sum(1 for e in cells if e == 0),
                "median": statistics.median(cells),
            }
    return out


def versus(a: list[float], b: list[float], old: dict[str, Any], was: dict[str, Any]) -> dict:
    """dpproxy's errors ``a`` against the best peer: the peer rerun for the addendum if it has
    cells ``b`` (its median from them, the ratio's interval resampling both sides' cells), else
    the rerun peer's median recorded in DPPROXY_ACCURACY.json (dpproxy's cells resampled against
    it). The best peer is the lowest median, the rerun one on a tie (as ``acc.rerun``)."""
    ma = statistics.median(a)
    if not b:
        name, best = was["best"]
        return {
            "peer": was["peer"],
            "best": [name, best],
            "ratio": report.safe_ratio(ma, best),
            "ratio_ci": report.ratio_ci(a, [best]),
        }
    mb, rerun_peer = statistics.median(b), old["peer_name"]
    name, best = min(
        [(rerun_peer, mb), *old.get("recorded", {}).items()],
        key=lambda x: (x[1], x[0] != rerun_peer),
    )
    return {
        "peer": mb,
        "peer_ci": median_ci(b),
        "earlier_peer": was["peer"],
        "best": [name, best],
        "ratio": report.safe_ratio(ma, best),
        "ratio_ci": report.ratio_ci(a, b if name == rerun_peer else [best]),
        "both_resampled": name == rerun_peer,
    }


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
    the earlier rerun recorded them; which are above the best peer (the point ratio > 1, the
    target's test), and, of the remeasured ones, which ratio intervals hold 1 (a tie within
    sampling) and which exclude it."""
    cells, above, holds, below, over = 0, [], [], [], []
    for qid, q in sorted(recorded.items()):
        if "rerun" not in q:
            continue
        for j, was in enumerate(q["rerun"]["per_column"]):
            cells += 1
            now = new[qid]["per_column"][j] if qid in new else None
            ratio, ci = (now["ratio"], now["ratio_ci"]) if now else (was["ratio"], was["ci"])
            if ratio is not None and ratio > 1:
                above.append({"query": qid, "ratio": ratio, "ci": ci, "remeasured": bool(now)})
            if now and ci is not None:
                (holds if ci[0] <= 1 <= ci[1] else below if ci[1] < 1 else over).append(qid)
    above.sort(key=lambda x: -x["ratio"])
    return {
        "columns": cells,
        "above": above,
        "ci_holds_1": holds,
        "ci_below_1": below,
        "ci_above_1": over,
    }


def _median(v: float, ci: Any) -> str:
    return f"{acc._fmt(v)} [{acc._fmt(ci[0])}–{acc._fmt(ci[1])}]"


def render(data: dict[str, Any]) -> str:
    """ACCURACY_ADDENDUM.md."""
    rerun = sorted(q for q, d in data["queries"].items() if d.get("peer_rerun"))
    lines = [
        "# Addendum to DPPROXY_ACCURACY.md: queries remeasured since (pums, ε = 1)",
        "",
        "_Generated by `benchmarks/compare/accuracy_addendum.py`; do not edit by hand._ "
        "dpproxy remeasured on the queries below alone (`dpproxy_accuracy.py --queries`); the "
        "earlier figures and the rerun peer's are those recorded in "
        f"[DPPROXY_ACCURACY.json](DPPROXY_ACCURACY.json) (dpproxy at "
        f"{data['earlier']['commit']}, {data['earlier']['date']}), whose raw runs are not kept: "
        "the interval of *ratio* resamples dpproxy's cells only, against the peer's median"
        + (
            f", except for {_and(rerun)}, whose peer was rerun for this addendum "
            "(`tumult_rerun.py`, fresh runs not pooled with the earlier ones, which were not "
            "kept): there the peer's median has its own interval and *ratio* resamples both "
            "sides' cells, as DPPROXY_ACCURACY.md does"
            if rerun
            else ""
        )
        + ". *model*: Tumult's mechanism restated without Spark (`tumult_model.py`, seeded), "
        "both sides resampled. Intervals: bootstrap 95%; dpproxy's percentile releases take few "
        "distinct values (its cells' grid), and relative errors of counts lie on the grid k/n, "
        "so the interval of a median can be one value.",
        "",
        "| query | column | commit | runs | dpproxy | dpproxy earlier | best peer (runs) "
        "| peer earlier (runs) | ratio | ratio earlier | model (draws) | dpproxy / model |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for qid, q in sorted(data["queries"].items()):
        for col, c in zip(q["columns"], q["per_column"], strict=True):
            ci = c.get("peer_ci") if c.get("both_resampled") else None
            best = (
                f"{_median(c['best'][1], ci) if ci else acc._fmt(c['best'][1])} "
                f"({c['best'][0]}, {q['peer_runs']})"
                if "best" in c
                else "–"
            )
            earlier_peer = (
                f"{acc._fmt(c['earlier_peer'])} ({q['earlier_peer_runs']})"
                if "earlier_peer" in c
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
                f"{acc._fmt(c.get('earlier_dpproxy'))} | {best} | {earlier_peer} | "
                f"{acc._ratio(c.get('ratio'), c.get('ratio_ci'))} | "
                f"{acc._ratio(c.get('earlier_ratio'), c.get('earlier_ci'))} | {model} |"
            )
    now = data["now"]
    lines += [
        "",
        f"Target columns as they stand (the others as DPPROXY_ACCURACY.md records "
        f"them): ≤ the best peer on {now['columns'] - len(now['above'])}/{now['columns']}; "
        f"above: {_above(now)}. {_intervals(now)}",
        "",
        _q14(data["q14_law"]),
        "",
    ]
    return "\n".join(lines)


def _intervals(now: dict[str, Any]) -> str:
    """Which remeasured columns' ratio intervals hold 1, lie below it, or above it."""
    return (
        "Of the remeasured columns, the ratio's interval holds 1 (tied within sampling) for "
        f"{_and(now['ci_holds_1'])}, lies below 1 for {_and(now['ci_below_1'])} and above 1 "
        f"for {_and(now['ci_above_1'])}."
    )


def _and(items: list[str]) -> str:
    """ "A, B and C"; "none" for no items."""
    if not items:
        return "none"
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _q14(law: dict[str, Any]) -> str:
    """Q14's exact cells: the law, the earlier rerun's chance, and the rerun here if any."""
    text = (
        f"Q14's counts: any ε-DP integer noise on a count is exact with probability at most "
        f"tanh(ε/2) = {law['p_exact']:.3f} at ε = {law['epsilon']:g} (the two-sided geometric "
        "attains it), below 1/2, so the median absolute error is ≥ 1 in law. The earlier "
        f"rerun's median of 0 over {law['runs']} runs needed more than half of its "
        f"{law['cells']} cells exact: probability {law['chance_median_zero']:.2f}."
    )
    for key, who in (("rerun", "Tumult rerun here"), ("dpproxy", "dpproxy")):
        if key in law:
            r = law[key]
            text += (
                f" {who}: {r['exact']:,} of {r['cells']:,} cells exact "
                f"({r['exact'] / r['cells']:.3f}) over {r['runs']} runs, median relative error "
                f"{acc._fmt(r['median'])}."
            )
    return text


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
    parts, when = [], {}
    for qid, q in sorted(data["queries"].items()):
        key = ((q["commit"] or "?")[:7], q["dpproxy_runs"])
        when.setdefault(key, []).append(qid)
        for c in q["per_column"]:
            text = (
                f"{qid} {_median(c['dpproxy'], c['dpproxy_ci'])} (was "
                f"{acc._fmt(c.get('earlier_dpproxy'))})"
            )
            if "best" in c:
                peer = (
                    f"{q['peer_runs']} runs rerun, was {acc._fmt(c['earlier_peer'])} over "
                    f"{q['earlier_peer_runs']}"
                    if "earlier_peer" in c
                    else f"{q['peer_runs']} runs"
                )
                text += (
                    f", {acc._ratio(c['ratio'], c['ratio_ci'])} the best peer's "
                    f"{acc._fmt(c['best'][1])} ({c['best'][0]}, {peer})"
                )
            if "model" in c:
                text += (
                    f", {acc._ratio(c['model_ratio'], c['model_ratio_ci'])} Tumult's "
                    f"model ({c['model_draws']:,} draws)"
                )
            parts.append(text)
    at = "; ".join(
        f"{_and(qs)} at {commit} ({runs} runs each)"
        for (commit, runs), qs in sorted(when.items(), key=lambda x: x[1])
    )
    rerun = sorted(q for q, d in data["queries"].items() if d.get("peer_rerun"))
    resampled = (
        f"dpproxy's cells only against a recorded peer, both sides' against the peer rerun for "
        f"{_and(rerun)}"
        if rerun
        else "dpproxy's cells only"
    )
    remeasured = sorted(data["queries"])
    if len(when) == 1 and len(remeasured) == now["columns"]:  # all of them, in one run
        (commit, runs), = when
        what = f"all {len(remeasured)} queries were remeasured at {commit} ({runs} runs each"
    else:
        what = f"{_and(remeasured)} were remeasured ({at}"
    return (
        f"The target row above is the rerun of {early['date']} (dpproxy at {early['commit']}). "
        f"Since then {what}; "
        "[ACCURACY_ADDENDUM.md](../benchmarks/compare/ACCURACY_ADDENDUM.md), ratio intervals "
        f"resampling {resampled}): {'; '.join(parts)}. As they stand, ≤ on "
        f"{now['columns'] - len(now['above'])}/{now['columns']} columns; above: "
        f"{_above(now)}. {_intervals(now)} {_q14(data['q14_law'])}\n"
    )


def link(report_md: Path, data: dict[str, Any]) -> None:
    """Add (or refresh) the line pointing from DPPROXY_ACCURACY.md to the addendum."""
    line = f"{LINK} ({', '.join(sorted(data['queries']))})."
    report_md.write_text(acc.with_addendum_link(report_md.read_text(), line))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=HERE / "work" / "data")
    p.add_argument("--after", type=Path, help="dpproxy_accuracy.py's runs of the subset")
    p.add_argument("--model", type=Path, help="tumult_model.py's draws (JSON lines)")
    p.add_argument("--peer", type=Path, help="a peer rerun for the addendum (JSON lines)")
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
    kept = json.loads(args.json.read_text())["queries"] if args.json.is_file() else {}
    data = build(args.data_dir, args.after, args.model, earlier, args.peer, kept)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    args.md.write_text(render(data))
    link(args.report_md, data)
    print(f"wrote {args.json}, {args.md} and the link in {args.report_md}")


if __name__ == "__main__":
    main()
