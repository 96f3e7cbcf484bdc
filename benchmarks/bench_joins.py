"""Joins on TPC-H: dpproxy's latency against the raw SQL, and accuracy per truncation method.

The workload is the TPC-H Q1/Q3/Q5/Q10-style queries of ``dpproxy.tpch.QUERIES``
(the same SQL texts), over the TPC-H tables with the customer as the privacy unit
(``schemas/tpch.yaml``). None of the joins has a bound on the rows per customer in the schema,
so every query must bound them with some τ (``dpproxy/planning/truncation.py``).

* **Latency**, per query and backend, in one interleaved loop after one warm-up: the original
  SQL executed directly on the backend (*raw*); the rewritten SQL alone
  (``engine.prepare(sql with /*+ dpproxy max_rows=τ */).sql`` executed on the backend); and
  dpproxy end to end (``engine.run``) with the DP choice of τ (a fresh analyst every run, so τ
  is drawn every time) and with τ fixed by the hint to the value the warm-up's DP choice
  picked. Median and 95th percentile over ``--latency-runs``. DuckDB always; PostgreSQL with
  ``--postgres DSN``.
* **Accuracy**, per query and truncation method on DuckDB at ε = 1: fixed guesses
  τ ∈ {1, 10, 100, 1000} (the hint ``max_rows``), the DP choice at the default coverage
  (99.9% of customers keep all their rows) and at ``coverage=0.99``. Each runs ``--runs`` times
  (``--q1-runs`` for Q1) with real OpenDP noise; the main aggregate (``sum_disc_price`` for Q1,
  ``revenue`` otherwise) of every group whose exact value is non-zero is compared with the
  exact, untruncated answer of the plain SQL on DuckDB. Also: the truncation bias (the same
  method with the noise off), the τ values drawn, and the share of customers (and of rows)
  that τ keeps whole, from per-customer row counts computed directly in SQL.

    python benchmarks/bench_joins.py                              # TPC-H SF1, generated once
    python benchmarks/bench_joins.py --database /path/sf1.duckdb \\
        --postgres 'postgresql://user@host/db?options=-csearch_path%3Dtpch1'
    python benchmarks/bench_joins.py --scale 0.01 --runs 3 --out-dir /tmp/x   # smoke run
    python benchmarks/bench_joins.py --report-only   # JOINS.md and figures from out/joins.json

Writes ``benchmarks/out/joins.json``, ``benchmarks/figures/joins_*.png`` and the generated
``benchmarks/JOINS.md`` (with ``--out-dir D``: ``D/joins.json``, ``D/figures/``, ``D/JOINS.md``,
and the generated database in ``D``). Progress goes to stderr, one line per step.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb
from _common import (
    FIGURES,
    HERE,
    OUT,
    REPO,
    fmt_ms,
    fmt_ratio,
    loadavg,
    machine,
    machine_line,
    md_table,
    percentile,
    progress,
    summary,
)

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.dsn import redact_dsn
from dpproxy.engine import Answer, Engine
from dpproxy.mechanisms.noise import NoiseSource, OpenDPNoise
from dpproxy.tpch import QUERIES, TABLE_NAMES, generate_tpch, recorded_scale
from dpproxy.values import Cost

SCHEMA = REPO / "schemas" / "tpch.yaml"
BUDGET = Cost(Fraction(10**9), Fraction(1, 2))  # per analyst: never runs out
EPSILON = Fraction(1)
FIXED_TAUS = (1, 10, 100, 1000)

# The TPC-H Q1/Q3/Q5/Q10-style queries of dpproxy.tpch (also run by tests/integration).
Q1, Q3, Q5, Q10 = (QUERIES[k] for k in ("q1", "q3", "q5", "q10"))


@dataclass(frozen=True, slots=True)
class QuerySpec:
    key: str
    label: str
    sql: str
    keys: int  # the leading GROUP BY columns of the answer
    main: str  # the aggregate whose accuracy is measured
    units_sql: str  # one row per customer with rows in the query's relation: its row count n


QUERY_SPECS = (
    QuerySpec(
        "q1",
        "Q1 (lineitem, unit via orders)",
        Q1,
        2,
        "sum_disc_price",
        "SELECT o_custkey AS unit, COUNT(*) AS n FROM lineitem JOIN orders "
        "ON l_orderkey = o_orderkey WHERE l_shipdate <= DATE '1998-09-02' GROUP BY o_custkey",
    ),
    QuerySpec(
        "q3",
        "Q3 (customer ⋈ orders ⋈ lineitem)",
        Q3,
        1,
        "revenue",
        "SELECT c_custkey AS unit, COUNT(*) AS n FROM customer, orders, lineitem "
        "WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey "
        "AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15' "
        "GROUP BY c_custkey",
    ),
    QuerySpec(
        "q5",
        "Q5 (six tables)",
        Q5,
        1,
        "revenue",
        "SELECT c_custkey AS unit, COUNT(*) AS n FROM customer, orders, lineitem, supplier, "
        "nation, region WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey "
        "AND l_suppkey = s_suppkey AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey "
        "AND n_regionkey = r_regionkey AND r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' "
        "AND o_orderdate < DATE '1995-01-01' GROUP BY c_custkey",
    ),
    QuerySpec(
        "q10",
        "Q10 (JOIN … ON, four tables)",
        Q10,
        1,
        "revenue",
        "SELECT c.c_custkey AS unit, COUNT(*) AS n FROM customer AS c "
        "JOIN orders AS o ON c.c_custkey = o.o_custkey "
        "JOIN lineitem AS l ON l.l_orderkey = o.o_orderkey "
        "JOIN nation AS n ON c.c_nationkey = n.n_nationkey "
        "WHERE o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01' "
        "AND l.l_returnflag = 'R' GROUP BY c.c_custkey",
    ),
)
QUERY_KEYS = tuple(q.key for q in QUERY_SPECS)


@dataclass(frozen=True, slots=True)
class MethodSpec:
    key: str
    label: str
    short: str  # for sentences
    hint: str  # the body of /*+ dpproxy … */, empty for none
    dp: bool


METHODS = (
    *(
        MethodSpec(
            f"fixed_{t}", f"τ = {t} (hint)", f"the fixed guess τ = {t}", f"max_rows={t}", False
        )
        for t in FIXED_TAUS
    ),
    MethodSpec(
        "dp", "DP choice, coverage 99.9% (default)", "the DP choice at 99.9% (default)", "", True
    ),
    MethodSpec("dp_99", "DP choice, coverage 99%", "the DP choice at 99%", "coverage=0.99", True),
)
TINY = 1e-9  # relative differences below this are floating-point rounding of the sums
LATENCY_MODES = (  # key, label
    ("raw", "raw SQL"),
    ("rewritten", "rewritten SQL alone"),
    ("dpproxy_dp", "dpproxy, DP choice of τ"),
    ("dpproxy_fixed", "dpproxy, τ fixed by hint"),
)


class ZeroNoise:
    """A noise source that adds nothing (a copy of ``tests/noise.NoNoise``): the engine then
    releases the exact answer of the rewritten, truncated query, and the DP choice of τ becomes
    the exact argmin of its scores. For measuring the truncation bias only."""

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        return [float(v) for v in values]

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        return [float(v) for v in values]

    def noisy_min_index(self, scores: Sequence[float], scale: Fraction) -> int:
        return min(range(len(scores)), key=lambda i: scores[i])


def with_hint(sql: str, hint: str) -> str:
    """``sql`` with ``/*+ dpproxy hint */`` after its first SELECT (as the tests write it)."""
    if not hint:
        return sql
    return sql.replace("SELECT ", f"SELECT /*+ dpproxy {hint} */ ", 1)


_analysts: Iterator[int] = itertools.count(1)


def fresh_analyst() -> str:
    """A name never used before: no τ drawn for it can be reused."""
    return f"bench-{next(_analysts)}"


def open_engine(backend: Any, noise: NoiseSource) -> Engine:
    return Engine(
        load_catalog(SCHEMA),
        backend,
        accountant=MemoryAccountant(BUDGET, cache="off"),  # a fresh release every run
        noise=noise,
    )


# --------------------------------------------------------------------------------------- data


def prepare_database(args: argparse.Namespace, out_dir: Path) -> tuple[Path, float | None]:
    if args.database is not None:
        path = args.database.resolve()
        if not path.is_file():
            raise SystemExit(f"--database {path}: no such file")
        scale = recorded_scale(path)
        progress(f"data: {path} (scale {scale if scale is not None else 'not recorded'})")
        return path, scale
    path = out_dir / f"tpch-sf{args.scale:g}.duckdb"
    progress(f"data: TPC-H scale {args.scale:g} in {path}")
    generate_tpch(path, args.scale, progress=True)
    return path, args.scale


def table_sizes(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    sizes = {}
    for name in TABLE_NAMES:
        row = con.execute(f"SELECT COUNT(*) FROM {name}").fetchone()
        sizes[name] = int(row[0]) if row is not None else 0
    return sizes


def group_label(key: Sequence[Any]) -> str:
    return " / ".join(str(k) for k in key)


def exact_answer(con: duckdb.DuckDBPyConnection, spec: QuerySpec) -> dict[str, float]:
    """The main aggregate per group of the plain SQL on DuckDB: the untruncated truth."""
    cur = con.execute(spec.sql)
    names = [d[0] for d in cur.description or ()]
    col = names.index(spec.main)
    return {group_label(r[: spec.keys]): float(r[col]) for r in cur.fetchall()}


def unit_counts(con: duckdb.DuckDBPyConnection, spec: QuerySpec) -> dict[int, int]:
    """{n: customers with exactly n rows in the query's relation} (customers with rows)."""
    rows = con.execute(
        f"SELECT n, COUNT(*) FROM ({spec.units_sql}) AS per_unit GROUP BY n ORDER BY n"
    ).fetchall()
    return {int(n): int(c) for n, c in rows}


def kept(dist: dict[int, int], tau: int) -> tuple[float, float]:
    """The shares of customers whose rows are all kept at τ, and of rows kept."""
    units = sum(dist.values())
    rows = sum(n * c for n, c in dist.items())
    whole = sum(c for n, c in dist.items() if n <= tau)
    kept_rows = sum(min(n, tau) * c for n, c in dist.items())
    return (whole / units if units else 1.0), (kept_rows / rows if rows else 1.0)


def quantile_of_counts(dist: dict[int, int], q: float) -> int:
    """The smallest n such that a share ≥ q of the customers have at most n rows."""
    units = sum(dist.values())
    cumulative = 0
    for n in sorted(dist):
        cumulative += dist[n]
        if cumulative >= q * units:
            return n
    return max(dist) if dist else 0


def check_bins(
    con: duckdb.DuckDBPyConnection, engine: Engine, spec: QuerySpec, dist: dict[int, int]
) -> dict[str, Any]:
    """dpproxy's own per-unit statement (the input of the DP choice), run directly, against
    the per-customer counts of ``units_sql`` binned on the same candidate grid."""
    prepared = engine.prepare(spec.sql)
    trunc = prepared.plan.truncation
    if prepared.truncation is None or trunc is None:
        return {"grid": [], "match": None, "note": "no DP choice of τ for this query"}
    grid = list(trunc.grid)
    theirs = [0] * (len(grid) + 1)
    for b, units in con.execute(prepared.truncation).fetchall():
        theirs[int(b)] += int(units)
    ours = [0] * (len(grid) + 1)
    for n, c in dist.items():
        ours[next((j for j, g in enumerate(grid) if n <= g), len(grid))] += c
    return {"grid": grid, "match": theirs == ours, "dpproxy_bins": theirs, "sql_bins": ours}


# ------------------------------------------------------------------------------------ latency


def raw_sql(engine: Engine, sql: str) -> str:
    """A hand-written query as ``engine``'s backend runs it: on PostgreSQL each table named
    with the schema it was attached from (dpproxy's sessions search pg_catalog only:
    ``dpproxy/sql/qualify.py``)."""
    if engine.backend.dialect != "postgres":
        return sql
    from dpproxy.sql.qualify import qualified_text

    return qualified_text(sql, engine.schemas)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    value = fn()
    return time.perf_counter() - t, value


def measure_latency(engine: Engine, spec: QuerySpec, runs: int) -> dict[str, Any]:
    """Raw SQL, rewritten SQL alone, and dpproxy end to end (DP τ and τ fixed by hint), one
    warm-up each, then ``runs`` interleaved rounds."""
    backend = engine.backend
    raw = raw_sql(engine, spec.sql)

    def dp_run() -> Answer:
        return engine.run(spec.sql, analyst=fresh_analyst(), epsilon=EPSILON)

    backend.execute(raw)  # warm-up
    warm = dp_run()
    assert warm.plan.truncation is not None
    tau = warm.plan.truncation.rows
    hinted = with_hint(spec.sql, f"max_rows={tau}")
    rewritten = engine.prepare(hinted, epsilon=EPSILON).sql
    assert rewritten is not None
    backend.execute(rewritten)
    engine.run(hinted, analyst=fresh_analyst(), epsilon=EPSILON)
    times: dict[str, list[float]] = {k: [] for k, _ in LATENCY_MODES}
    taus: list[int] = []
    for _ in range(runs):
        times["raw"].append(timed(lambda: backend.execute(raw))[0])
        statement = engine.prepare(hinted, epsilon=EPSILON).sql  # a fresh key, not timed
        assert statement is not None
        t0 = time.perf_counter()
        backend.execute(statement)
        times["rewritten"].append(time.perf_counter() - t0)
        seconds, answer = timed(dp_run)
        times["dpproxy_dp"].append(seconds)
        assert answer.plan.truncation is not None
        taus.append(answer.plan.truncation.rows)
        times["dpproxy_fixed"].append(
            timed(lambda: engine.run(hinted, analyst=fresh_analyst(), epsilon=EPSILON))[0]
        )
    stats = {k: summary(v) for k, v in times.items()}
    raw = stats["raw"]["p50"]
    return {
        "tau_fixed": tau,
        "dp_taus": taus,
        "seconds": times,
        "stats": stats,
        "ratios": {k: stats[k]["p50"] / raw for k, _ in LATENCY_MODES if k != "raw"},
    }


# ----------------------------------------------------------------------------------- accuracy


def released_main(answer: Answer, spec: QuerySpec) -> dict[str, float]:
    names = [c.name for c in answer.released.columns]
    col = names.index(spec.main)
    return {group_label(r[: spec.keys]): float(r[col]) for r in answer.released.rows}


def measure_accuracy(
    noisy: Engine,
    quiet: Engine,
    spec: QuerySpec,
    method: MethodSpec,
    runs: int,
    exact: dict[str, float],
    dist: dict[int, int],
) -> dict[str, Any]:
    sql = with_hint(spec.sql, method.hint)
    groups = sorted(g for g, v in exact.items() if v != 0)
    started = time.perf_counter()
    errors: list[list[float]] = []
    taus: list[int] = []
    missing = 0
    for _ in range(runs):
        answer = noisy.run(sql, analyst=fresh_analyst(), epsilon=EPSILON)
        assert answer.plan.truncation is not None
        taus.append(answer.plan.truncation.rows)
        got = released_main(answer, spec)
        missing += sum(g not in got for g in groups)
        errors.append([abs(got.get(g, 0.0) - exact[g]) / abs(exact[g]) for g in groups])
    seconds = time.perf_counter() - started
    # The same method with the noise off: what the truncation alone does to the answer.
    answer = quiet.run(sql, analyst=fresh_analyst(), epsilon=EPSILON)
    assert answer.plan.truncation is not None
    got = released_main(answer, spec)
    signed = {g: (got.get(g, 0.0) - exact[g]) / abs(exact[g]) for g in groups}
    total_exact = sum(exact[g] for g in groups)
    total_bias = (sum(got.get(g, 0.0) for g in groups) - total_exact) / abs(total_exact)
    pooled = [e for run in errors for e in run]
    shares = [kept(dist, t) for t in taus]
    median_tau = statistics.median_low(taus)
    return {
        "label": method.label,
        "short": method.short,
        "hint": method.hint,
        "dp": method.dp,
        "sql": sql,
        "runs": runs,
        "groups": groups,
        "rel_errors": errors,
        "missing_groups": missing,
        "median_rel_error": statistics.median(pooled),
        "p90_rel_error": percentile(pooled, 90),
        "taus": taus,
        "tau_counts": {str(k): v for k, v in sorted(Counter(taus).items())},
        "median_tau": median_tau,
        "units_kept_share": statistics.median(s[0] for s in shares),
        "rows_kept_share": statistics.median(s[1] for s in shares),
        "bias": {
            "tau": answer.plan.truncation.rows,
            "per_group": signed,
            "median_abs": statistics.median(abs(v) for v in signed.values()),
            "total": total_bias,
        },
        "seconds": seconds,
        "median_run_ms": 1000 * seconds / runs,
    }


# ------------------------------------------------------------------------------------ figures


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


LATENCY_COLOURS = ("#4c72b0", "#8da0cb", "#dd8452", "#c44e52")
FIXED_COLOURS = ("#d9d9d9", "#b0b0b0", "#858585", "#5a5a5a")
DP_COLOURS = {"dp": "#e6550d", "dp_99": "#3182bd"}


def latency_figure(data: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    backends = list(data["latency"])
    fig, axes = plt.subplots(1, len(backends), figsize=(6.2 * len(backends), 4.4), squeeze=False)
    for ax, backend in zip(axes[0], backends, strict=True):
        results = data["latency"][backend]
        queries = list(results)
        width = 0.8 / len(LATENCY_MODES)
        for i, ((mode, label), colour) in enumerate(
            zip(LATENCY_MODES, LATENCY_COLOURS, strict=True)
        ):
            med = [1000 * results[q]["stats"][mode]["p50"] for q in queries]
            p95 = [1000 * results[q]["stats"][mode]["p95"] for q in queries]
            xs = [j + (i - (len(LATENCY_MODES) - 1) / 2) * width for j in range(len(queries))]
            ax.bar(
                xs,
                med,
                width,
                color=colour,
                label=label,
                yerr=[[0] * len(med), [b - a for a, b in zip(med, p95, strict=True)]],
                capsize=2,
                error_kw={"elinewidth": 0.8},
            )
        ax.set_xticks(range(len(queries)))
        ax.set_xticklabels(
            [f"{q.upper()}\nτ = {results[q]['tau_fixed']}" for q in queries], fontsize=9
        )
        ax.set_yscale("log")
        ax.set_ylabel("latency, ms (bar: median; whisker: p95)")
        runs = results[queries[0]]["stats"]["raw"]["n"] if queries else 0
        ax.set_title(f"{data['backends'][backend]}: {runs} runs per bar")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"TPC-H joins, scale {data['scale_label']}: raw SQL against dpproxy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def accuracy_figure(data: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    acc = data["accuracy"]
    queries = list(acc)
    keys = [m.key for m in METHODS]
    fig, ax = plt.subplots(figsize=(9, 5.4))
    width = 0.8 / len(keys)
    fixed_colours = iter(FIXED_COLOURS)
    for i, key in enumerate(keys):
        method = next(m for m in METHODS if m.key == key)
        colour = DP_COLOURS[key] if method.dp else next(fixed_colours)
        xs = [j + (i - (len(keys) - 1) / 2) * width for j in range(len(queries))]
        ys = [max(100 * acc[q]["methods"][key]["median_rel_error"], 1e-9) for q in queries]
        ax.bar(
            xs,
            ys,
            width,
            color=colour,
            label=method.label,
            edgecolor="black" if method.dp else colour,
            linewidth=1.2 if method.dp else 0,
        )
        bias = [100 * abs(acc[q]["methods"][key]["bias"]["total"]) for q in queries]
        ax.scatter(
            [x for x, b in zip(xs, bias, strict=True) if b > 100 * TINY],
            [b for b in bias if b > 100 * TINY],
            marker="_",
            s=60,
            color="black",
            zorder=3,
            label="|bias| with the noise off" if i == 0 else None,
        )
    ax.set_xticks(range(len(queries)))
    ax.set_xticklabels([q.upper() for q in queries])
    ax.set_yscale("log")
    ax.set_ylabel("median relative error of the main SUM, % (log)")
    runs = ", ".join(f"{q.upper()} {acc[q]['runs']}" for q in queries)
    ax.set_title(
        f"Error per truncation method, TPC-H scale {data['scale_label']}, ε = 1\n(runs: {runs}; "
        "DP choices outlined)"
    )
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.07))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tau_figure(data: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    acc = data["accuracy"]
    queries = list(acc)
    cols = min(2, len(queries))
    nrows = math.ceil(len(queries) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(queries) :]:
        ax.set_visible(False)
    for ax, q in zip(axes.flat, queries, strict=False):
        dist = {int(n): c for n, c in acc[q]["units"]["distribution"].items()}
        ns = sorted(dist)
        top = max(ns or [1])
        ax.bar(ns, [dist[n] for n in ns], width=1.0, color="#b0b0b0", label="customers with n rows")
        ax.set_xlabel("rows per customer in the query's relation (n), or τ")
        ax.set_ylabel("customers")
        twin = ax.twinx()
        width = max(0.4, 0.012 * top)
        for shift, key in ((-0.5, "dp"), (0.5, "dp_99")):
            counts = acc[q]["methods"][key]["tau_counts"] if key in acc[q]["methods"] else {}
            twin.bar(
                [int(t) + shift * width for t in counts],
                list(counts.values()),
                width=width,
                color=DP_COLOURS[key],
                alpha=0.85,
                label=f"τ drawn, coverage {'99.9%' if key == 'dp' else '99%'}",
            )
        twin.set_ylabel("runs that drew τ")
        ax.set_title(
            f"{q.upper()}: {sum(dist.values()):,} customers, up to {top} rows each", fontsize=10
        )
        handles = ax.get_legend_handles_labels()
        more = twin.get_legend_handles_labels()
        ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="upper right")
    fig.suptitle(
        f"TPC-H scale {data['scale_label']}: rows per customer (grey) and the τ drawn with DP"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figures(data: dict[str, Any], directory: Path) -> list[Path]:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        progress("matplotlib is not installed (pip install -e '.[bench]'): no figures")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    if data["latency"]:
        made.append(latency_figure(data, directory / "joins_latency.png"))
    if data["accuracy"]:
        made.append(accuracy_figure(data, directory / "joins_accuracy.png"))
        made.append(tau_figure(data, directory / "joins_tau.png"))
    return made


# ------------------------------------------------------------------------------------- report


def fmt_pct(x: float | None) -> str:
    """A share as a percentage with 3 significant digits."""
    if x is None or not math.isfinite(x):
        return "–"
    v = 100 * x
    if v == 0:
        return "0%"
    if abs(v) >= 1000:
        return f"{v:,.0f}%"
    for digits in range(3, 8):  # a share just below 100% never shows as 100%
        text = f"{v:.{digits}g}"
        if v == 100 or float(text) != 100:
            break
    return f"{text}%"


def fmt_signed_pct(x: float) -> str:
    if abs(x) < TINY:
        return "0%"
    return ("+" if x > 0 else "−") + fmt_pct(abs(x))


def fmt_taus(taus: Sequence[int]) -> str:
    lo, hi = min(taus), max(taus)
    med = statistics.median_low(taus)
    return f"{med}" if lo == hi else f"{med} ({lo}–{hi})"


def fmt_range(taus: Sequence[int]) -> str:
    lo, hi = min(taus), max(taus)
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def latency_table(results: dict[str, Any]) -> str:
    header = [
        "query",
        "τ fixed (DP draws in the runs)",
        *(f"{label}, ms" for _, label in LATENCY_MODES),
        "rewritten / raw",
        "dpproxy (DP τ) / raw",
        "dpproxy (fixed τ) / raw",
    ]
    rows = []
    for q, r in results.items():
        cells = [
            f"{fmt_ms(r['stats'][m]['p50'])} ({fmt_ms(r['stats'][m]['p95'])})"
            for m, _ in LATENCY_MODES
        ]
        rows.append(
            [
                q.upper(),
                f"{r['tau_fixed']} ({fmt_range(r['dp_taus'])})",
                *cells,
                fmt_ratio(r["ratios"]["rewritten"]),
                fmt_ratio(r["ratios"]["dpproxy_dp"]),
                fmt_ratio(r["ratios"]["dpproxy_fixed"]),
            ]
        )
    return md_table(header, rows, "lr" + "r" * (len(header) - 2))


def units_table(data: dict[str, Any]) -> str:
    header = [
        "query",
        "groups (non-zero)",
        "customers with rows",
        "rows",
        "median / p99 / p99.9 / max rows per customer",
        "dpproxy's per-unit bins = SQL counts",
    ]
    rows = []
    for q, a in data["accuracy"].items():
        u = a["units"]
        match = u["check"]["match"]
        rows.append(
            [
                q.upper(),
                len(a["exact"]),
                f"{u['customers']:,}",
                f"{u['rows']:,}",
                f"{u['median']} / {u['p99']} / {u['p999']} / {u['max']}",
                "yes" if match else ("**no**" if match is False else "–"),
            ]
        )
    return md_table(header, rows, "lrrrrl")


def accuracy_table(data: dict[str, Any]) -> str:
    header = [
        "query",
        "method",
        "τ: median (range)",
        "median rel. error",
        "p90 rel. error",
        "bias, noise off (τ)",
        "customers kept whole",
        "rows kept",
        "ms / run",
    ]
    rows = []
    for q, a in data["accuracy"].items():
        best = min(a["methods"].values(), key=lambda r: r["median_rel_error"])
        for r in a["methods"].values():
            err = fmt_pct(r["median_rel_error"])
            name = f"**{r['label']}**" if r["dp"] else r["label"]
            rows.append(
                [
                    q.upper(),
                    name,
                    fmt_taus(r["taus"]),
                    f"**{err}**" if r is best else err,
                    fmt_pct(r["p90_rel_error"]),
                    f"{fmt_signed_pct(r['bias']['total'])} ({r['bias']['tau']})",
                    fmt_pct(r["units_kept_share"]),
                    fmt_pct(r["rows_kept_share"]),
                    f"{r['median_run_ms']:.0f}",
                ]
            )
    return md_table(header, rows, "llrrrrrrr")


def findings(data: dict[str, Any]) -> str:
    lines = []
    zeros = []
    for q, a in data["accuracy"].items():
        methods = a["methods"]
        best = min(methods.values(), key=lambda r: r["median_rel_error"])
        line = (
            f"- **{q.upper()}**: the lowest median error, {fmt_pct(best['median_rel_error'])}, "
            f"came from {best['short']}."
        )
        fixed = [r for r in methods.values() if not r["dp"]]
        if fixed:
            fbest = min(fixed, key=lambda r: r["median_rel_error"])
            fworst = max(fixed, key=lambda r: r["median_rel_error"])
            line += (
                f" Among the fixed guesses the best was τ = {fbest['median_tau']} "
                f"({fmt_pct(fbest['median_rel_error'])}, bias "
                f"{fmt_signed_pct(fbest['bias']['total'])}), the worst τ = "
                f"{fworst['median_tau']} ({fmt_pct(fworst['median_rel_error'])}, bias "
                f"{fmt_signed_pct(fworst['bias']['total'])})."
            )
            for key in ("dp", "dp_99"):
                r = methods.get(key)
                if r is None:
                    continue
                base = fbest["median_rel_error"]
                ratio = f"{r['median_rel_error'] / base:.2f}×" if base > 0 else "–"
                line += (
                    f" {r['short'][0].upper()}{r['short'][1:]} drew τ = {fmt_taus(r['taus'])}, "
                    f"which keeps every row of {fmt_pct(r['units_kept_share'])} of the "
                    f"customers with rows; its error, {fmt_pct(r['median_rel_error'])}, is "
                    f"{ratio} the best fixed guess's."
                )
        lines.append(line)
        zeros += [
            f"{q.upper()} {r['short'].removeprefix('the ')}"
            for r in methods.values()
            if abs(r["median_rel_error"] - 1) < TINY
        ]
    if zeros:
        lines.append(
            "- A median error of exactly 100% ("
            + ", ".join(zeros)
            + ") means at least half of the releases were 0: a SUM of a non-negative measure is "
            "clipped at 0 (`release/postprocess.py`), so every noise draw below −(true sum) "
            "releases 0."
        )
    for backend, results in data["latency"].items():
        parts = [
            f"{q.upper()} {fmt_ratio(r['ratios']['rewritten'])} / "
            f"{fmt_ratio(r['ratios']['dpproxy_fixed'])} / {fmt_ratio(r['ratios']['dpproxy_dp'])}"
            for q, r in results.items()
        ]
        extra = [
            f"{q.upper()} "
            + fmt_ms(r["stats"]["dpproxy_dp"]["p50"] - r["stats"]["dpproxy_fixed"]["p50"])
            for q, r in results.items()
        ]
        lines.append(
            f"- **Latency on {data['backends'][backend]}**, medians as multiples of the raw "
            f"SQL's (rewritten SQL alone / dpproxy with τ fixed / dpproxy drawing τ): "
            f"{'; '.join(parts)}. Drawing τ (its per-unit statement, a second plan and rewrite) "
            f"added, in ms: {'; '.join(extra)}."
        )
    return "\n".join(lines)


def command_line(args: argparse.Namespace) -> str:
    parts = ["python", "benchmarks/bench_joins.py"]
    if args.database is not None:
        parts += ["--database", str(args.database)]
    elif args.scale != 1:
        parts += ["--scale", f"{args.scale:g}"]
    if args.postgres:
        parts += ["--postgres", redact_dsn(args.postgres)]
    defaults = {"runs": 50, "q1_runs": 20, "latency_runs": 7}
    for name, default in defaults.items():
        value = getattr(args, name)
        if value != default:
            parts += [f"--{name.replace('_', '-')}", str(value)]
    if args.queries != ",".join(QUERY_KEYS):
        parts += ["--queries", args.queries]
    return shlex.join(parts)


def report(data: dict[str, Any]) -> str:
    sizes = md_table(["table", "rows"], [[t, f"{n:,}"] for t, n in data["sizes"].items()], "lr")
    queries = "\n".join(f"- **{q.upper()}**: `{data['queries'][q]}`" for q in data["queries"])
    latency = "\n\n".join(
        f"### {data['backends'][b]}\n\n{latency_table(r)}" for b, r in data["latency"].items()
    )
    pg_note = ""
    if "postgres" in data["backends"]:
        pg = data.get("postgres_check", {})
        pg_note = (
            f" PostgreSQL: {data['backends']['postgres']}, lineitem rows "
            f"{pg.get('lineitem', '?'):,} "
            f"({'the same as' if pg.get('same') else '**not** the same as'} DuckDB's)."
        )
    acc_runs = ", ".join(f"{q.upper()} {a['runs']}" for q, a in data["accuracy"].items())
    return f"""# Joins on TPC-H: latency and the choice of rows per customer

_Generated by `benchmarks/bench_joins.py`; do not edit by hand._ Rerun with
`{data["command"]}`.

Measured on {machine_line(data["machine"])}. Total run time {data["seconds"] / 60:.1f} min.

## Data and queries

TPC-H scale {data["scale_label"]} in DuckDB (`{data["database_name"]}`), privacy schema
`schemas/tpch.yaml`: the customer is the privacy unit, orders and line items belong to their
customer, the other tables are public.{pg_note}

{sizes}

The queries are `dpproxy.tpch.QUERIES` (also run by `tests/integration/test_joins.py`):

{queries}

No join has a bound on the rows per customer in the schema, so each query needs a bound τ:
dpproxy keeps at most τ rows of the query's relation per customer (a keyed hash picks which),
and its noise grows with τ. Per query, the customers that have any row in the relation, and how
many rows they have (computed directly in SQL; the last column checks that dpproxy's own
per-unit statement, the input of its DP choice, sees the same counts):

{units_table(data) if data["accuracy"] else "(accuracy not measured)"}

## Latency

Median (p95) over {data["latency_runs"]} interleaved runs after one warm-up, in ms. *Raw SQL*:
the query above executed directly on the backend (through the same backend object dpproxy
uses). *Rewritten SQL alone*: `engine.prepare(sql with /*+ dpproxy max_rows=τ */).sql` executed
directly (truncation, clamping and aggregation, no planning or noise). *dpproxy*: `engine.run`
end to end (parse, plan, rewrite, execute, noise), either drawing τ with DP (a fresh analyst
every run, so the per-unit statement runs first every time) or with τ fixed by the hint to the
value the warm-up's DP choice drew (the τ column; the DP choices of the timed runs in
parentheses). Ratios are of medians. Q1 reads `lineitem` alone, but a line item's customer is
found through its order, so dpproxy's SQL for Q1 also joins `orders` (the raw SQL does not);
the other queries join the customer's tables themselves.

{latency}

![latency](figures/joins_latency.png)

## Accuracy per truncation method

ε = 1 per query on DuckDB with real OpenDP noise, runs per method: {acc_runs}. A fixed guess
spends all of ε on the aggregates; a DP choice spends 10% of it on τ (the same total). *Error*:
|released − exact| / |exact| of the main SUM (`sum_disc_price` for Q1, `revenue` otherwise)
for each group whose exact value is non-zero, against the plain SQL's untruncated answer;
median and 90th percentile over all runs and groups (the best per query in bold). *Bias*: the
same method with the noise off (so the DP choice takes the argmin of its scores, τ in
parentheses), (Σ released − Σ exact) / Σ exact over those groups. *Kept whole*: customers with
rows in the relation that have at most τ rows; *rows kept*: Σ min(n, τ) / Σ n; both at each
run's τ, median over runs. A released SUM of a non-negative measure is clipped at 0, so a
release of 0 has an error of exactly 100%.

{accuracy_table(data) if data["accuracy"] else "(not measured)"}

![accuracy](figures/joins_accuracy.png)

![τ](figures/joins_tau.png)

## Findings

{findings(data)}
"""


# --------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="TPC-H scale factor to generate with tpchgen-cli into "
        "benchmarks/out/tpch-sf<scale>.duckdb (or into --out-dir), reused if already there "
        "(default 1)",
    )
    parser.add_argument(
        "--database",
        type=Path,
        default=None,
        help="an existing TPC-H DuckDB file (from dpproxy.tpch.generate_tpch) instead of "
        "generating one; --scale is then ignored",
    )
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        default=None,
        help="also measure latency on PostgreSQL: a DSN whose search_path holds the same TPC-H "
        "tables (e.g. postgresql://user@host/db?options=-csearch_path%%3Dtpch1)",
    )
    parser.add_argument(
        "--pg-timeout",
        type=float,
        default=600,
        help="PostgreSQL statement timeout in seconds (default 600)",
    )
    parser.add_argument(
        "--runs", type=int, default=50, help="accuracy runs per method for Q3, Q5, Q10 (default 50)"
    )
    parser.add_argument(
        "--q1-runs", type=int, default=20, help="accuracy runs per method for Q1 (default 20)"
    )
    parser.add_argument(
        "--latency-runs",
        type=int,
        default=7,
        help="timed runs per query, mode and backend after one warm-up (default 7)",
    )
    parser.add_argument(
        "--queries",
        default=",".join(QUERY_KEYS),
        help=f"comma-separated subset of {','.join(QUERY_KEYS)} (default all)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: rewrite JOINS.md and the figures from an earlier run's joins.json",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write joins.json, JOINS.md, figures/ (and a generated database) here instead of "
        "benchmarks/",
    )
    args = parser.parse_args()
    if min(args.runs, args.q1_runs, args.latency_runs) < 1:
        parser.error("--runs, --q1-runs and --latency-runs must be at least 1")
    wanted = [q.strip().lower() for q in args.queries.split(",") if q.strip()]
    unknown = sorted(set(wanted) - set(QUERY_KEYS))
    if unknown or not wanted:
        parser.error(f"--queries: unknown {', '.join(unknown) or '(none given)'}")
    specs = [q for q in QUERY_SPECS if q.key in wanted]
    if args.out_dir is None:
        data_dir, json_path, md_path, fig_dir = OUT, OUT / "joins.json", HERE / "JOINS.md", FIGURES
    else:
        out = args.out_dir.resolve()
        data_dir, json_path, md_path, fig_dir = (
            out,
            out / "joins.json",
            out / "JOINS.md",
            (out / "figures"),
        )
    if args.report_only:
        if not json_path.is_file():
            parser.error(f"--report-only: no {json_path} from an earlier run")
        data = json.loads(json_path.read_text(encoding="utf-8"))
        write_outputs(data, None, md_path, fig_dir)
        return
    started = time.perf_counter()
    meta = machine()
    database, scale = prepare_database(args, data_dir)

    con = duckdb.connect(str(database), read_only=True)
    noisy = open_engine(DuckDBBackend(database), OpenDPNoise())
    quiet = open_engine(DuckDBBackend(database), ZeroNoise())
    pg_engine: Engine | None = None
    backends = {"duckdb": f"DuckDB {duckdb.__version__}"}
    pg_check: dict[str, Any] = {}
    try:
        sizes = table_sizes(con)
        progress("data: " + ", ".join(f"{t} {n:,}" for t, n in sizes.items()))
        if args.postgres:
            from dpproxy.backends.postgres import PostgresBackend

            pg_backend = PostgresBackend(args.postgres, statement_timeout=args.pg_timeout)
            pg_engine = open_engine(pg_backend, OpenDPNoise())
            version = pg_backend.server_version
            backends["postgres"] = f"PostgreSQL {version // 10000}.{version % 10000}"
            count = raw_sql(pg_engine, "SELECT COUNT(*) FROM lineitem")
            pg_lines = int(pg_backend.execute(count).rows[0][0])
            pg_check = {"lineitem": pg_lines, "same": pg_lines == sizes["lineitem"]}
            if pg_lines != sizes["lineitem"]:
                progress(
                    f"warning: PostgreSQL has {pg_lines:,} line items, DuckDB {sizes['lineitem']:,}"
                )
        # The truth and the per-customer counts, straight from DuckDB.
        truth: dict[str, dict[str, Any]] = {}
        for spec in specs:
            exact = exact_answer(con, spec)
            dist = unit_counts(con, spec)
            check = check_bins(con, noisy, spec, dist)
            if check["match"] is False:
                progress(f"warning: {spec.key}: dpproxy's per-unit bins differ from the SQL counts")
            customers = sum(dist.values())
            truth[spec.key] = {
                "exact": exact,
                "units": {
                    "customers": customers,
                    "rows": sum(n * c for n, c in dist.items()),
                    "median": quantile_of_counts(dist, 0.5),
                    "p99": quantile_of_counts(dist, 0.99),
                    "p999": quantile_of_counts(dist, 0.999),
                    "max": max(dist) if dist else 0,
                    "distribution": {str(n): c for n, c in dist.items()},
                    "check": check,
                },
            }
            progress(
                f"{spec.key}: {len(exact)} groups, {customers:,} customers with rows, up to "
                f"{truth[spec.key]['units']['max']} rows each"
            )
        # Latency.
        latency: dict[str, dict[str, Any]] = {}
        engines = {"duckdb": noisy, **({"postgres": pg_engine} if pg_engine else {})}
        for name, engine in engines.items():
            latency[name] = {}
            for spec in specs:
                t0 = time.perf_counter()
                r = measure_latency(engine, spec, args.latency_runs)
                latency[name][spec.key] = r
                s = r["stats"]
                progress(
                    f"latency {name} {spec.key}: raw {fmt_ms(s['raw']['p50'])} ms, rewritten "
                    f"{fmt_ms(s['rewritten']['p50'])} ms, dpproxy DP τ "
                    f"{fmt_ms(s['dpproxy_dp']['p50'])} ms, fixed τ = {r['tau_fixed']} "
                    f"{fmt_ms(s['dpproxy_fixed']['p50'])} ms ({time.perf_counter() - t0:.1f} s)"
                )
        # Accuracy.
        accuracy: dict[str, dict[str, Any]] = {}
        for spec in specs:
            runs = args.q1_runs if spec.key == "q1" else args.runs
            dist = {int(n): c for n, c in truth[spec.key]["units"]["distribution"].items()}
            methods: dict[str, Any] = {}
            for i, method in enumerate(METHODS, 1):
                r = measure_accuracy(
                    noisy, quiet, spec, method, runs, truth[spec.key]["exact"], dist
                )
                methods[method.key] = r
                progress(
                    f"accuracy {spec.key} [{i}/{len(METHODS)}] {method.label}: τ "
                    f"{fmt_taus(r['taus'])}, median error {fmt_pct(r['median_rel_error'])}, "
                    f"bias {fmt_signed_pct(r['bias']['total'])} ({r['seconds']:.1f} s)"
                )
            accuracy[spec.key] = {"runs": runs, **truth[spec.key], "methods": methods}
    finally:
        con.close()
        noisy.close()
        quiet.close()
        if pg_engine is not None:
            pg_engine.close()
    meta["loadavg_end"] = loadavg()
    data = {
        "machine": meta,
        "command": command_line(args),
        "database": str(database),
        "database_name": database.name,
        "scale": scale,
        "scale_label": f"{scale:g}" if scale is not None else "unknown",
        "sizes": sizes,
        "backends": backends,
        **({"postgres_check": pg_check} if pg_check else {}),
        "epsilon": str(EPSILON),
        "latency_runs": args.latency_runs,
        "queries": {q.key: q.sql for q in specs},
        "methods": {m.key: {"label": m.label, "hint": m.hint, "dp": m.dp} for m in METHODS},
        "latency": latency,
        "accuracy": accuracy,
        "seconds": time.perf_counter() - started,
    }
    write_outputs(data, json_path, md_path, fig_dir)
    progress(f"total {data['seconds']:.1f} s")


def write_outputs(
    data: dict[str, Any], json_path: Path | None, md_path: Path, fig_dir: Path
) -> None:
    """The JSON (unless None: a report from an existing one), the figures and the report."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    made = figures(data, fig_dir)
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(report(data), encoding="utf-8")
    written = ", ".join(str(x) for x in (json_path, md_path) if x is not None)
    progress(f"wrote {written} and {len(made)} figures in {fig_dir}")


if __name__ == "__main__":
    main()
