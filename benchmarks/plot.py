"""Figures of ``out/*.json`` (PNG, in ``out/`` and ``figures/``).

    python benchmarks/plot.py        (needs matplotlib: pip install matplotlib)

* ``plan_stages.png``: cold planning latency per stage and query class (p50, stacked), with the
  warm ``prepare`` p50 and the 0.5 ms target.
* ``latency_vs_size.png``: end-to-end latency against table size, dpproxy and raw DuckDB, log-log.
* ``bounding_alternatives.png``: the SQL formulations of contribution bounding on the large table.
* ``postgres_latency.png``: per query class, raw vs dpproxy on PostgreSQL and on DuckDB
  (``out/postgres.json``), log scale.
* ``server_throughput.png``: queries per second and p50 latency against the number of
  concurrent clients, through ``dpproxy serve`` and directly to PostgreSQL (``out/server.json``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import FIGURES, OUT, read_json

STAGE_LABELS = (
    ("parse", "parse"),
    ("validate", "validate"),
    ("plan_check", "plan + check"),
    ("rewrite", "rewrite"),
)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plan_stages(plan: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    classes = list(plan["classes"])
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(classes) + 2.4))
    left = [0.0] * len(classes)
    for key, label in STAGE_LABELS:
        vals = [plan["classes"][c][key]["p50"] * 1e3 for c in classes]
        ax.barh(classes, vals, left=left, label=f"cold {label}")
        left = [a + b for a, b in zip(left, vals, strict=True)]
    warm = [plan["classes"][c]["warm_prepare"]["p50"] * 1e3 for c in classes]
    warm_b = [plan["classes"][c]["warm_prepare_bounded"]["p50"] * 1e3 for c in classes]
    ax.scatter(warm, classes, marker="D", color="black", zorder=3, label="warm prepare")
    ax.scatter(
        warm_b,
        classes,
        marker="o",
        facecolors="none",
        edgecolors="black",
        zorder=3,
        label="warm prepare, bounding (fresh secret)",
    )
    ax.axvline(0.5, color="red", linestyle="--", linewidth=1, label="target p50 0.5 ms")
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds (p50)")
    ax.set_title(
        f"dpproxy planning latency per stage (Adult catalog, {plan['iterations']} iterations)"
    )
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_vs_size(emb: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    sweep = emb["sweep"]
    sizes = sorted(int(n) for n in sweep)
    classes = list(next(iter(sweep.values()))["classes"])
    fig, axes = plt.subplots(1, len(classes), figsize=(5.2 * len(classes), 4.2), squeeze=False)
    series = (
        ("raw", "raw DuckDB", "o-"),
        ("dpproxy", f"dpproxy, events (bounding k={emb['bound']})", "s-"),
        ("rewritten", "rewritten SQL alone, events", "x:"),
        ("dpproxy_pk", "dpproxy, people (unit is PK: no bounding)", "^-"),
    )
    for ax, c in zip(axes[0], classes, strict=True):
        for key, label, style in series:
            ys = [sweep[str(n)]["classes"][c][key]["p50"] * 1e3 for n in sizes]
            ax.plot(sizes, ys, style, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows")
        ax.set_ylabel("latency, ms (p50)")
        ax.set_title(c)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("End-to-end embedded latency vs table size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bounding_alternatives(emb: dict[str, Any], path: Path) -> Path | None:
    alts = emb.get("alternatives")
    if not alts:
        return None
    plt = _plt()
    names, vals, colors = [], [], []
    for name, v in alts["variants"].items():
        for c, r in v["classes"].items():
            if r is None:
                continue
            names.append(f"{name} [{c}{', k=20' if v['k'] != emb['bound'] else ''}]")
            vals.append(r["min"])
            ok = v["privacy"].startswith("holds")
            colors.append(
                "tab:green"
                if ok
                else (
                    "tab:grey"
                    if "reference" in v["privacy"] or "no bound" in v["privacy"]
                    else "tab:red"
                )
            )
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(names) + 1.5))
    ax.barh(names, vals, color=colors)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (best run)")
    ax.set_title(
        f"Contribution bounding formulations, {alts['rows']:,} rows "
        "\n(green: privacy argument holds, red: broken, grey: reference)",
        fontsize=9,
    )
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


PG_SERIES = (  # key prefix in out/postgres.json, label, colour
    ("pg_raw", "PostgreSQL raw", "#9ecae1"),
    ("pg_dpproxy", "PostgreSQL dpproxy", "#2171b5"),
    ("duckdb_raw", "DuckDB raw", "#fdae6b"),
    ("duckdb_dpproxy", "DuckDB dpproxy", "#d94801"),
)


def postgres_latency(pg: dict[str, Any], path: Path) -> Path:
    """Grouped bars per query class: raw and dpproxy on PostgreSQL and DuckDB, both tables."""
    plt = _plt()
    classes = list(pg["classes"])
    panels = (
        ("", f"events (bounding k={pg['bound']})"),
        ("_pk", "people (unit is PRIMARY KEY: no bounding)"),
    )
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 8.5), squeeze=False)
    width = 0.8 / len(PG_SERIES)
    for ax, (suffix, title) in zip(axes[:, 0], panels, strict=True):
        for j, (key, label, color) in enumerate(PG_SERIES):
            xs, ys = [], []
            for i, c in enumerate(classes):
                r = pg["classes"][c]
                x = i + (j - (len(PG_SERIES) - 1) / 2) * width
                if key + suffix in r:
                    xs.append(x)
                    ys.append(r[key + suffix]["p50"] * 1e3)
                elif key + suffix in r.get("errors", {}):
                    ax.text(
                        x,
                        0.02,
                        "failed",
                        transform=ax.get_xaxis_transform(),
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        color="red",
                    )
            ax.bar(xs, ys, width, label=label, color=color)
        ax.set_yscale("log")
        ax.set_ylabel("ms (p50)")
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(len(classes)))
        ax.set_xticklabels(classes, rotation=25, ha="right", fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=len(PG_SERIES), loc="lower center")
    fig.suptitle(
        f"Raw SQL vs dpproxy, PostgreSQL and DuckDB, {pg['rows']:,} rows "
        f"(p50 of {pg['runs']} interleaved runs)"
    )
    fig.tight_layout(rect=(0, 0.035, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


SERVER_SERIES = (  # target in out/server.json, label, colour, marker
    ("dpproxy", "dpproxy serve (DuckDB, DP)", "#d94801", "o"),
    ("postgres", "PostgreSQL directly (raw aggregate)", "#2171b5", "s"),
)


def server_throughput(srv: dict[str, Any], path: Path) -> Path:
    """Throughput and latency (p50, p95 dashed) against concurrent clients, both targets."""
    plt = _plt()
    thr = srv["throughput"]
    levels = sorted(int(n) for n in thr)
    fig, (ax_q, ax_l) = plt.subplots(1, 2, figsize=(11, 4.3))
    for key, label, color, marker in SERVER_SERIES:
        pts = [(n, thr[str(n)][key]) for n in levels if "per_second" in thr[str(n)][key]]
        xs = [n for n, _ in pts]
        ax_q.plot(xs, [e["per_second"] for _, e in pts], marker=marker, color=color, label=label)
        ax_l.plot(
            xs,
            [e["latency"]["p50"] * 1e3 for _, e in pts],
            marker=marker,
            color=color,
            label=f"{label}, p50",
        )
        ax_l.plot(
            xs,
            [e["latency"]["p95"] * 1e3 for _, e in pts],
            marker=marker,
            color=color,
            linestyle="--",
            alpha=0.6,
            label=f"{label}, p95",
        )
    for ax in (ax_q, ax_l):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(n) for n in levels])
        ax.set_xlabel("concurrent clients (one connection each)")
        ax.grid(True, which="both", alpha=0.3)
    ax_q.set_ylim(bottom=0)
    ax_q.set_ylabel("queries per second")
    ax_q.set_title("Throughput", fontsize=10)
    ax_l.set_yscale("log")
    ax_l.set_ylabel("latency per query, ms")
    ax_l.set_title("Latency", fontsize=10)
    ax_q.legend(fontsize=8)
    ax_l.legend(fontsize=7)
    fig.suptitle(
        f"Adult DP query mix, {srv['duration_s']:g} s per point, "
        f"{srv['machine']['cores']} cores shared by clients and servers"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_figures() -> list[Path]:
    """Draw every figure whose data exists; copy each to ``figures/``. Returns the copies."""
    OUT.mkdir(parents=True, exist_ok=True)
    FIGURES.mkdir(parents=True, exist_ok=True)
    made: list[Path | None] = []
    plan = read_json("plan.json")
    emb = read_json("embedded.json")
    if plan:
        made.append(plan_stages(plan, OUT / "plan_stages.png"))
    if emb:
        made.append(latency_vs_size(emb, OUT / "latency_vs_size.png"))
        made.append(bounding_alternatives(emb, OUT / "bounding_alternatives.png"))
    pg = read_json("postgres.json")
    if pg:
        made.append(postgres_latency(pg, OUT / "postgres_latency.png"))
    srv = read_json("server.json")
    if srv and srv.get("throughput"):
        made.append(server_throughput(srv, OUT / "server_throughput.png"))
    copies = []
    for p in made:
        if p is not None:
            copies.append(Path(shutil.copy2(p, FIGURES / p.name)))
    return copies


if __name__ == "__main__":
    for p in make_figures():
        print(p)
