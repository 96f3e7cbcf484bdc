"""Accuracy against ε on the Adult demo: measured error, the 95% bound dpproxy reports, coverage.

For each ε and query, the query runs ``--runs`` times through the embedded engine (real OpenDP
noise, a budget large enough never to run out) and every released cell is compared with the exact
answer computed directly on DuckDB. Reported per (query, ε):

* the median and 95th-percentile absolute error over all runs and cells;
* the median of the 95% error bound dpproxy attached to the cells (``cursor.error_bounds``);
* *coverage*: the share of cells whose true value lay inside the reported bound (≥ 95% is the
  claim; the bounds are union bounds, so more is expected).

Writes ``benchmarks/out/accuracy.json``, ``benchmarks/figures/error_vs_epsilon.png`` and the
generated ``benchmarks/ACCURACY.md``. Usage: ``python benchmarks/bench_accuracy.py [--runs 200]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import duckdb

import dpproxy
from dpproxy.demo import demo_database_path

OUT = Path(__file__).resolve().parent / "out"
FIGURES = Path(__file__).resolve().parent / "figures"
EPSILONS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
QUERIES = {
    "COUNT by sex": "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY sex",
    "AVG(age) by sex": "SELECT sex, AVG(age) FROM adult GROUP BY sex ORDER BY sex",
    "VAR_POP(hours_per_week)": "SELECT VAR_POP(hours_per_week) FROM adult",
    "SUM(capital_gain)": "SELECT SUM(capital_gain) FROM adult",
}


def measure(runs: int) -> list[dict[str, object]]:
    db = demo_database_path(progress=True)
    raw = duckdb.connect(str(db), read_only=True)
    results: list[dict[str, object]] = []
    steps = len(QUERIES) * len(EPSILONS)
    step = 0
    for name, sql in QUERIES.items():
        exact = raw.execute(sql).fetchall()
        for eps in EPSILONS:
            step += 1
            started = time.perf_counter()
            con = dpproxy.connect(
                epsilon=str(eps), budget_epsilon=10**9, budget_delta="0.5", cache="off"
            )
            cur = con.cursor()
            errors: list[float] = []
            bounds: list[float] = []
            covered = 0
            for _ in range(runs):
                rows = cur.execute(sql).fetchall()
                for row, true_row, cell_bounds in zip(rows, exact, cur.error_bounds, strict=True):
                    value, truth, bound = row[-1], true_row[-1], cell_bounds[-1]
                    err = abs(float(value) - float(truth))
                    errors.append(err)
                    if bound is not None:
                        bounds.append(bound)
                        covered += err <= bound
            con.close()
            errors.sort()
            results.append(
                {
                    "query": name,
                    "epsilon": eps,
                    "median_abs_error": statistics.median(errors),
                    "p95_abs_error": errors[int(0.95 * (len(errors) - 1))],
                    "median_reported_bound95": statistics.median(bounds) if bounds else None,
                    "coverage": covered / len(bounds) if bounds else None,
                    "cells": len(errors),
                }
            )
            print(
                f"[{step}/{steps}] {name} ε={eps}: median |error| "
                f"{results[-1]['median_abs_error']:.4g} "
                f"({time.perf_counter() - started:.1f} s)",
                file=sys.stderr,
            )
    raw.close()
    return results


def plot(results: list[dict[str, object]]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no figure", file=sys.stderr)
        return None
    fig, axes = plt.subplots(1, len(QUERIES), figsize=(4.2 * len(QUERIES), 3.6))
    for ax, name in zip(axes, QUERIES, strict=True):
        rows = [r for r in results if r["query"] == name]
        eps = [r["epsilon"] for r in rows]
        ax.plot(eps, [r["median_abs_error"] for r in rows], "o-", label="median |error|")
        ax.plot(eps, [r["p95_abs_error"] for r in rows], "s--", label="95th pct |error|")
        ax.plot(eps, [r["median_reported_bound95"] for r in rows], "k:", label="reported 95% bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("ε per query")
    axes[0].set_ylabel("absolute error")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    FIGURES.mkdir(exist_ok=True)
    path = OUT / "error_vs_epsilon.png"
    fig.savefig(path, dpi=110)
    shutil.copy(path, FIGURES / path.name)
    return FIGURES / path.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per (query, ε)")
    args = parser.parse_args()
    results = measure(args.runs)
    OUT.mkdir(exist_ok=True)
    (OUT / "accuracy.json").write_text(json.dumps(results, indent=2))
    plot(results)
    lines = [
        "# Accuracy against ε (Adult demo)",
        "",
        "_Generated by `benchmarks/bench_accuracy.py`; do not edit by hand._ "
        f"{args.runs} runs per (query, ε) through the embedded engine with OpenDP noise; errors "
        "against the exact answer computed directly on DuckDB. *Coverage* is the share of cells "
        "whose exact value lay within the 95% error bound dpproxy reported for that cell.",
        "",
        "| query | ε | median abs error | p95 abs error | reported 95% bound (median) | coverage |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        bound = r["median_reported_bound95"]
        cov = r["coverage"]
        lines.append(
            f"| {r['query']} | {r['epsilon']} | {r['median_abs_error']:.4g} | "
            f"{r['p95_abs_error']:.4g} | {'' if bound is None else f'{bound:.4g}'} | "
            f"{'' if cov is None else f'{cov:.1%}'} |"
        )
    lines += ["", "![error against epsilon](figures/error_vs_epsilon.png)", ""]
    text = "\n".join(lines)
    (Path(__file__).resolve().parent / "ACCURACY.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
