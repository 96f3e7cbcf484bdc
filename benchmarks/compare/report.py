"""Metrics, targets, ``RESULTS.md`` and figures of the peer comparison, from ``work/results/``.

Reads every adapter JSON line (``*.jsonl``, INTERFACE.md) and ``run.json`` (what ``run.py``
ran, on what machine, how long), computes the exact answers with DuckDB from the same CSVs (and,
for the TPC-H queries, from ``work/data/tpch/tpch.duckdb``), and writes the generated
``benchmarks/compare/RESULTS.md`` and
``benchmarks/compare/figures/compare_{latency,error,error_vs_epsilon}.png``. Never edit those
by hand: rerun ``python benchmarks/compare/report.py`` (``run.py`` calls it).

Metrics per (system, data set, query):

* supported or not, with the system's error message;
* latency: median and 95th percentile of the timed runs (end to end, SQL text in → rows out)
  and the one-time set-up cost (``setup_s``);
* accuracy over all runs and true cells: the share of true cells released (a group the system
  suppresses, or a null value, counts against it here), and on the released cells the median
  relative error, the median and 95th-percentile absolute error; released groups that are not
  in the exact answer are counted as spurious;
* dpproxy: the predicted 95% error (``explain``) next to the measured 95th percentile.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # _common.py
sys.path.insert(0, str(HERE))

import workload  # noqa: E402
from _common import fmt_ms, fmt_ratio, machine_line, md_table, percentile  # noqa: E402

RESULTS = HERE / "work" / "results"
DATA_DIR = HERE / "work" / "data"
FIGURES = HERE / "figures"
OUT_MD = HERE / "RESULTS.md"
PEERS = ("smartnoise", "qrlew", "tumult")
SYSTEMS = ("dpproxy", *PEERS)
NAMES = {
    "dpproxy": "dpproxy",
    "smartnoise": "SmartNoise SQL",
    "qrlew": "Qrlew",
    "tumult": "Tumult Analytics",
    "duckdb": "DuckDB (raw, no privacy)",
    "dpproxy_sql": "dpproxy's SQL alone",
    "dpproxy_pg": "dpproxy (PostgreSQL)",
    "postgres": "PostgreSQL (raw, no privacy)",
    "dpproxy_pg_sql": "dpproxy's SQL alone (PostgreSQL)",
}
BASELINES = ("duckdb", "dpproxy_sql")  # latency only, from adapters/dpproxy.py --raw/--rewritten
# dpproxy on PostgreSQL and its baselines there (adapters/dpproxy.py --backend postgres): latency
# only, in a table of their own next to Qrlew, which runs on PostgreSQL too.
ON_POSTGRES = ("dpproxy_pg", "postgres", "dpproxy_pg_sql")
CORE = workload.queries_for("pums")  # the 16 queries of pums and synthetic_1m
TPCH = workload.queries_for("tpch")  # the TPC-H queries (T01, T03)
TPCH_TITLE = f"TPC-H scale {workload.TPCH_SCALE:g}"
SWEEP = {"Q01": "COUNT(*)", "Q04": "AVG(age)", "Q11": "MEDIAN(age)"}
# Targets of the issue.
SPEED_PUMS = {"smartnoise": 10.0, "qrlew": 4.0}  # dpproxy at least this many times faster
AVG_VS_SMARTNOISE = 1.5  # dpproxy's AVG median relative error this many times lower
RAW_FACTOR = 1.5  # dpproxy on 1 M rows within this factor of raw DuckDB
BOOTSTRAP = 2000
# Why a target can be missed on a query, for the summary (written after reading the results;
# shown only when the target is actually missed on that query).
_GROUPED = ("dpproxy's SQL groups every row, as the raw query does, and then keeps the public "
            "domain's groups (a semi-join on the domain's values, so that the released groups "
            "are exactly the domain's).")
_CLAMP = ("dpproxy's SQL clamps every value to its public bounds (a CAST to DOUBLE and a CASE "
          "per row; AVG, VAR and the rate also sum a centred copy), which DuckDB's plain "
          "aggregate does not do.")
_FIXED = ("Here the SQL is not the problem: the raw query takes only milliseconds, and "
          "dpproxy's fixed cost per query (parse, plan lookup, noise, post-processing, "
          "accounting) is of the same order.")
EXPLAIN: dict[tuple[str, str], str] = {
    ("accuracy", "Q01"): (
        "Both clip a count to the table size: Qrlew reads it from the data at set-up (a "
        "COUNT(*) it then treats as public), dpproxy's schema declares it (`public_max_rows`). "
        "The exact answer is that size, so each is exactly right whenever its noise is not "
        "negative, and the median error compares two nearly equal shares of exact answers."
    ),
    ("raw", "Q03"): _CLAMP,
    ("raw", "Q04"): _CLAMP,
    ("raw", "Q05"): _CLAMP,
    ("raw", "Q13"): _CLAMP,
    ("raw", "Q15"): _CLAMP,
    ("raw", "Q08"): _GROUPED,
    ("raw", "Q10"): _GROUPED + " " + _CLAMP,
    ("raw", "Q14"): _GROUPED,
    ("raw", "Q16"): _GROUPED + " " + _CLAMP,
    ("raw", "Q09"): (
        "For partition selection dpproxy's SQL also counts the units of every group "
        "(`COUNT(pid)` next to `COUNT(*)`)."
    ),
    ("raw", "Q12"): (
        "For its exponential mechanism dpproxy fetches the order statistics around the 90th "
        "percentile with a window (ROW_NUMBER over all 1 M clamped values); DuckDB's own "
        "PERCENTILE_CONT is a single selection."
    ),
}


# ---------------------------------------------------------------------------- loading


def load_records(results: Path) -> list[dict[str, Any]]:
    """Every adapter JSON line under ``results`` (one per system, data set, mode, ε, query)."""
    out = []
    for path in sorted(results.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def load_manifest(results: Path) -> dict[str, Any]:
    path = results / "run.json"
    return json.loads(path.read_text()) if path.is_file() else {}


Answer = tuple[list[str], int, list[list[Any]]]  # columns, number of key columns, rows


def exact_answers(
    data_dir: Path, datasets: Iterable[str], queries: Iterable[str] | None = None
) -> dict[tuple[str, str], Answer]:
    """The exact answer of every query on every data set, computed by DuckDB from the CSVs
    (tpch: from ``tpch/tpch.duckdb``, read-only). Only the queries of each data set."""
    import duckdb

    ids = list(queries) if queries is not None else [q.id for q in workload.QUERIES]
    types = {"int": "BIGINT", "text": "VARCHAR"}
    read_types = ", ".join(f"'{c.name}': '{types[c.type]}'" for c in workload.COLUMNS)
    out: dict[tuple[str, str], Answer] = {}
    for ds in datasets:
        mine = [q for q in ids if q in workload.BY_ID and ds in workload.BY_ID[q].datasets]
        if ds == "tpch":
            path = data_dir / "tpch" / "tpch.duckdb"
            if not path.is_file() or not mine:
                continue
            con = duckdb.connect(str(path), read_only=True)
        else:
            path = data_dir / f"{ds}.csv"
            if not path.is_file() or not mine:
                continue
            con = duckdb.connect()
            con.execute(
                f"CREATE TABLE {workload.TABLE} AS SELECT * FROM "
                f"read_csv('{path}', header = true, types = {{{read_types}}})"
            )
        for qid in mine:
            cur = con.execute(workload.BY_ID[qid].sql)
            desc = cur.description
            rows = cur.fetchall()
            keys = sum(1 for d in desc if str(d[1]).upper() in ("VARCHAR", "STRING"))
            cols = [d[0] for d in desc]
            out[(ds, qid)] = (cols, keys, normalise_rows(rows, keys))
        con.close()
    return out


def _key(v: Any) -> str | None:
    if v is None:
        return None
    s = str(v)
    try:
        f = float(s)
    except ValueError:
        return s
    return str(int(f)) if f.is_integer() else s


def normalise_rows(rows: Iterable[Sequence[Any]], keys: int) -> list[list[Any]]:
    """Keys as canonical strings ("1.0" → "1"), values as floats (None stays None), sorted."""
    out = []
    for r in rows:
        out.append(
            [_key(v) for v in r[:keys]]
            + [None if v is None or _nan(v) else float(v) for v in r[keys:]]
        )
    out.sort(key=lambda r: tuple("" if k is None else k for k in r[:keys]))
    return out


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


# ---------------------------------------------------------------------------- metrics


@dataclass
class Accuracy:
    runs: int
    true_cells: int  # cells of the exact answer (per run)
    released: int  # true cells released, over all runs
    spurious: int  # released groups not in the exact answer, over all runs
    abs_errors: list[float] = field(default_factory=list)
    rel_errors: list[float] = field(default_factory=list)

    @property
    def share_released(self) -> float:
        total = self.runs * self.true_cells
        return self.released / total if total else float("nan")

    @property
    def median_rel(self) -> float | None:
        return statistics.median(self.rel_errors) if self.rel_errors else None

    @property
    def median_abs(self) -> float | None:
        return statistics.median(self.abs_errors) if self.abs_errors else None

    @property
    def mean_abs(self) -> float | None:
        return statistics.fmean(self.abs_errors) if self.abs_errors else None

    @property
    def p95_abs(self) -> float | None:
        return percentile(self.abs_errors, 95) if self.abs_errors else None


def accuracy(rec: dict[str, Any], exact: Answer) -> Accuracy | None:
    """Errors of one accuracy record against the exact answer; None if nothing was run."""
    if not rec.get("supported") or not rec.get("runs"):
        return None
    _, keys, truth = exact
    truth_by_key = {tuple(r[:keys]): r[keys:] for r in truth}
    acc = Accuracy(runs=0, true_cells=sum(len(v) for v in truth_by_key.values()), released=0,
                   spurious=0)
    for run in rec["runs"]:
        rows = run.get("rows")
        if rows is None:
            continue
        acc.runs += 1
        got = {tuple(r[:keys]): r[keys:] for r in normalise_rows(rows, keys)}
        acc.spurious += sum(1 for k in got if k not in truth_by_key)
        for k, true_values in truth_by_key.items():
            values = got.get(k)
            for j, t in enumerate(true_values):
                v = values[j] if values is not None and j < len(values) else None
                if v is None or t is None:
                    continue
                acc.released += 1
                err = abs(v - t)
                acc.abs_errors.append(err)
                if t != 0:
                    acc.rel_errors.append(err / abs(t))
    return acc if acc.runs else None


@dataclass
class Latency:
    median: float
    p95: float
    runs: int
    setup_s: float | None


def latency(rec: dict[str, Any]) -> Latency | None:
    if not rec.get("supported") or not rec.get("runs"):
        return None
    secs = [r["seconds"] for r in rec["runs"] if r.get("seconds") is not None]
    if not secs:
        return None
    return Latency(percentile(secs, 50), percentile(secs, 95), len(secs), rec.get("setup_s"))


def ratio_ci(a: Sequence[float], b: Sequence[float], seed: int = 7) -> tuple[float, float]:
    """A bootstrap 95% interval of median(a) / median(b), resampling the cells of each."""
    import numpy as np

    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma = np.median(xa[rng.integers(0, len(xa), (BOOTSTRAP, len(xa)))], axis=1)
    mb = np.median(xb[rng.integers(0, len(xb), (BOOTSTRAP, len(xb)))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(mb > 0, ma / np.where(mb > 0, mb, 1), np.where(ma > 0, np.inf, 1.0))
    r = np.sort(r)  # order statistics: no arithmetic on infinities
    return float(r[int(0.025 * (len(r) - 1))]), float(r[int(0.975 * (len(r) - 1))])


def safe_ratio(a: float | None, b: float | None) -> float | None:
    """a / b with 0/0 = 1 (both exact) and x/0 = inf."""
    if a is None or b is None:
        return None
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


class Metrics:
    """Everything the report needs, indexed by (system, dataset, mode, ε, query)."""

    def __init__(self, records: list[dict[str, Any]], exact: dict[tuple[str, str], Answer]):
        self.records: dict[tuple[str, str, str, float, str], dict[str, Any]] = {}
        for r in records:
            key = (r["system"], r["dataset"], r["mode"], float(r["epsilon"]), r["query"])
            self.records[key] = r
        self.exact = exact
        self._acc: dict[tuple[str, str, float, str], Accuracy | None] = {}
        self._alone: dict[tuple[str, str], bool] = {}

    def systems(self) -> list[str]:
        seen = {k[0] for k in self.records}
        order = [*SYSTEMS, *BASELINES, *ON_POSTGRES]
        return [s for s in order if s in seen] + sorted(seen - set(order))

    def record(self, system: str, dataset: str, mode: str, qid: str,
               eps: float = workload.EPSILON) -> dict[str, Any] | None:
        return self.records.get((system, dataset, mode, float(eps), qid))

    def supported(self, system: str, dataset: str, mode: str, qid: str) -> bool | None:
        r = self.record(system, dataset, mode, qid)
        return None if r is None else bool(r.get("supported"))

    def error(self, system: str, qid: str) -> str | None:
        """The first error the system gave for the query (any data set or mode)."""
        for k, r in self.records.items():
            if k[0] == system and k[4] == qid and not r.get("supported"):
                note = f" ({r['error_note']})" if r.get("error_note") else ""
                return (r.get("error") or "unsupported") + note
        return None

    def accuracy(self, system: str, dataset: str, qid: str,
                 eps: float = workload.EPSILON) -> Accuracy | None:
        key = (system, dataset, float(eps), qid)
        if key not in self._acc:
            r = self.record(system, dataset, "accuracy", qid, eps)
            ex = self.exact.get((dataset, qid))
            self._acc[key] = None if r is None or ex is None else accuracy(r, ex)
        return self._acc[key]

    def latency(self, system: str, dataset: str, qid: str) -> Latency | None:
        """From the latency call; for a slow peer without one, from its accuracy runs when
        that call ran alone on the machine (run.py marks its lines ``alone``; every tpch call
        does), each timed end to end in the same way."""
        r = self.record(system, dataset, "latency", qid)
        if r is None and self.latency_from_accuracy(system, dataset):
            r = self.record(system, dataset, "accuracy", qid)
        return None if r is None else latency(r)

    def latency_from_accuracy(self, system: str, dataset: str) -> bool:
        """No latency call for (system, data set), but an accuracy call that ran alone."""
        if not self._alone:
            for k, r in self.records.items():
                if k[2] == "latency":
                    self._alone[(k[0], k[1])] = False
                elif k[3] == workload.EPSILON and (r.get("alone") or k[1] == "tpch"):
                    self._alone.setdefault((k[0], k[1]), True)
        return self._alone.get((system, dataset), False)

    def setup(self, system: str, dataset: str) -> float | None:
        mode = "accuracy" if self.latency_from_accuracy(system, dataset) else "latency"
        vals = [r.get("setup_s") for k, r in self.records.items()
                if k[0] == system and k[1] == dataset and k[2] == mode
                and k[3] == workload.EPSILON and r.get("setup_s") is not None]
        return statistics.median(vals) if vals else None

    def version(self, system: str) -> str | None:
        for k, r in self.records.items():
            if k[0] == system and r.get("version"):
                return str(r["version"])
        return None

    def predicted(self, qid: str, dataset: str = "pums") -> float | None:
        """dpproxy's predicted 95% error of the query's (last) aggregate column."""
        r = self.record("dpproxy", dataset, "accuracy", qid)
        if r is None or not r.get("predicted_error95"):
            return None
        return r["predicted_error95"][-1]

    def epsilons(self) -> list[float]:
        return sorted({k[3] for k in self.records if k[2] == "accuracy" and k[1] == "pums"})


# ---------------------------------------------------------------------------- targets


@dataclass
class Target:
    name: str
    goal: str
    status: str  # "met" | "not met" | "not evaluated"
    measured: str
    why: str = ""
    details: list[str] = field(default_factory=list)  # bullets for "where and why"


def _fmt_num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if math.isinf(x):
        return "∞"
    ax = abs(x)
    if ax >= 1e5 or ax < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if ax < 1000 else f"{x:,.0f}"


def _x(r: float | None) -> str:
    if r is None:
        return "–"
    if math.isinf(r):
        return "∞"
    return fmt_ratio(r)


def _ci(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.2f}"


def runs_note(m: Metrics, dataset: str, mode: str, eps: float = workload.EPSILON,
              only: tuple[str, ...] | None = None) -> str:
    """'runs: dpproxy 200, SmartNoise SQL 200, ...' from the records themselves (``only``:
    just these systems; else every system but the baselines)."""
    parts = []
    for s in m.systems():
        if (s not in only) if only is not None else (s in BASELINES or s in ON_POSTGRES):
            continue
        n = [len(r.get("runs") or []) for k, r in m.records.items()
             if k[0] == s and k[1] == dataset and k[2] == mode and k[3] == eps
             and r.get("supported")]
        if n:
            parts.append(f"{NAMES[s]} {max(n)}" if min(n) == max(n)
                         else f"{NAMES[s]} {min(n)}–{max(n)} (by query)")
    return "runs per query: " + ", ".join(parts) if parts else "no runs"


def _explain(target: str, qids: Iterable[str]) -> str:
    by_note: dict[str, list[str]] = {}
    for q in qids:
        if (target, q) in EXPLAIN:
            by_note.setdefault(EXPLAIN[(target, q)], []).append(q)
    notes = [f"{', '.join(qs)}: {note}" for note, qs in by_note.items()]
    return (" " + " ".join(notes)) if notes else ""


def ran(m: Metrics, system: str) -> bool:
    return any(k[0] == system for k in m.records)


def run_ids(m: Metrics) -> list[str]:
    """The workload queries of the data sets that have any result (by any system)."""
    seen = {k[1] for k in m.records}
    return [q.id for q in workload.QUERIES if seen & set(q.datasets)]


def home(qid: str) -> str:
    """The data set on which a query's accuracy is compared: pums, or tpch for T01/T03."""
    return workload.BY_ID[qid].datasets[0]


def run_time(manifest: dict[str, Any]) -> float | None:
    """Seconds one full invocation takes, with a few seconds for the report: the wall clock of
    a complete invocation that kept nothing from an earlier one; otherwise environments, data
    and every adapter call added up (kept calls with the time they took then; calls that ran
    side by side counted one after the other, an overestimate)."""
    calls = manifest.get("calls")
    if not calls:
        return None
    if manifest.get("complete") and manifest.get("total_s") and not any(
            c.get("reused") for c in calls) and not manifest.get("resumed_from"):
        return float(manifest["total_s"]) + 10
    envs_s = sum(float(i.get("env_s") or 0) for i in manifest.get("systems", {}).values())
    return envs_s + float(manifest.get("data_s") or 0) + sum(c["seconds"] for c in calls) + 10


def targets(m: Metrics, not_run: dict[str, str] | None = None,
            manifest: dict[str, Any] | None = None) -> list[Target]:
    not_run = not_run or {}
    ids = run_ids(m)
    out: list[Target] = []

    # Coverage: every workload query answered by dpproxy, on every data set and mode.
    if ran(m, "dpproxy"):
        miss = sorted({k[4] for k, r in m.records.items()
                       if k[0] == "dpproxy" and not r.get("supported")})
        answered = [q for q in ids if q not in miss and any(
            k[0] == "dpproxy" and k[4] == q for k in m.records)]
        out.append(Target(
            "Coverage", "every workload query answered by dpproxy",
            "met" if not miss and len(answered) == len(ids) else "not met",
            f"{len(answered)}/{len(ids)} queries",
            "" if not miss else "unanswered: " + "; ".join(
                f"{q} ({m.error('dpproxy', q)})" for q in miss),
        ))
    else:
        out.append(Target("Coverage", "every workload query answered by dpproxy",
                          "not evaluated", "–", "dpproxy was not run"))

    peers = [p for p in PEERS if ran(m, p)]
    # Accuracy: on every query, median relative error at ε = 1 no worse than the best peer's.
    goal = "on every query, dpproxy's median relative error at ε = 1 (pums" + (
        f"; {', '.join(q.id for q in TPCH)} on {TPCH_TITLE}"
        if any(k[1] == "tpch" for k in m.records) else "") + ") ≤ the best peer's"
    if not ran(m, "dpproxy") or not peers:
        out.append(Target("Accuracy vs the best peer", goal, "not evaluated", "–",
                          "no peer was run" if ran(m, "dpproxy") else "dpproxy was not run"))
    else:
        rows = accuracy_vs_best(m)
        compared = [r for r in rows if r["ratio"] is not None]
        worse = [r for r in compared if r["ratio"] > 1]
        # Not shown to be worse: the bootstrap 95% interval of the ratio reaches 1 (for a peer
        # whose median error is 0 and dpproxy's not, too: the ratio is then ∞ however close).
        noise = [r for r in worse if r["ci"] is not None and r["ci"][0] <= 1]
        worst = max(compared, key=lambda r: r["ratio"]) if compared else None
        measured = (f"worst ratio {_x(worst['ratio'])} ({worst['query']} vs "
                    f"{NAMES[worst['best']]}); {len(compared) - len(worse)}/{len(compared)} "
                    "queries ≤ 1" if worst else "no query answered by a peer")
        why = ""
        if worse:
            why = "worse on " + ", ".join(
                f"{r['query']} ({_x(r['ratio'])} vs {NAMES[r['best']]}"
                + (", within sampling noise" if r in noise else "") + ")" for r in worse
            ) + "." + _explain("accuracy", [r["query"] for r in worse])
        if worse and len(noise) == len(worse):
            measured += (f"; none of the {len(worse)} above 1 is significant (a bootstrap 95% "
                         "interval of the ratio reaching 1)")
        out.append(Target("Accuracy vs the best peer", goal,
                          "not evaluated" if not compared else "met" if not worse else "not met",
                          measured, why))

    # AVG: at least 1.5× lower median relative error than SmartNoise SQL's.
    goal = f"AVG (Q04, Q05, Q15): dpproxy's median relative error ≥ {AVG_VS_SMARTNOISE}× lower " \
           "than SmartNoise SQL's"
    avg_ids = [q.id for q in CORE if q.kind == "avg"]
    if not ran(m, "smartnoise") or not ran(m, "dpproxy"):
        why = not_run.get("smartnoise", "SmartNoise SQL was not run")
        out.append(Target("AVG vs SmartNoise SQL", goal, "not evaluated", "–", why))
    else:
        parts, bad, none = [], [], []
        for q in avg_ids:
            a, b = m.accuracy("dpproxy", "pums", q), m.accuracy("smartnoise", "pums", q)
            r = safe_ratio(b.median_rel if b else None, a.median_rel if a else None)
            if r is None:
                none.append(q)
                continue
            parts.append(f"{q} {_x(r)}")
            if r < AVG_VS_SMARTNOISE:
                bad.append(q)
        status = ("not evaluated" if not parts else
                  "met" if not bad and not none else "not met")
        why = ""
        if bad:
            why += "below the target on " + ", ".join(bad) + "." + _explain("avg", bad)
        if none:
            why += (" " if why else "") + "not comparable on " + ", ".join(
                f"{q} ({m.error('smartnoise', q) or m.error('dpproxy', q) or 'no data'})"
                for q in none)
        out.append(Target("AVG vs SmartNoise SQL", goal, status,
                          "SmartNoise/dpproxy: " + ", ".join(parts) if parts else "–", why))

    # Speed on 1,000 rows: ≥ 10× lower than SmartNoise SQL, ≥ 4× lower than Qrlew.
    for peer, factor in SPEED_PUMS.items():
        goal = f"1,000 rows: dpproxy's median latency ≥ {factor:g}× lower than {NAMES[peer]}'s " \
               "on every query both answer"
        name = f"Speed vs {NAMES[peer]}"
        if not ran(m, peer) or not ran(m, "dpproxy"):
            out.append(Target(name, goal, "not evaluated", "–",
                              not_run.get(peer, f"{NAMES[peer]} was not run")))
            continue
        ratios = speed_ratios(m, peer)
        if not ratios:
            out.append(Target(name, goal, "not evaluated", "–", "no query answered by both"))
            continue
        low = [(q, r) for q, r in ratios.items() if r < factor]
        worst = min(ratios.items(), key=lambda kv: kv[1])
        gm = geomean(ratios.values())
        measured = (f"{peer}/dpproxy: min {_x(worst[1])} ({worst[0]}), geometric mean "
                    f"{_x(gm)}, {len(ratios) - len(low)}/{len(ratios)} queries ≥ {factor:g}×")
        why = ("below on " + ", ".join(f"{q} ({_x(r)})" for q, r in low) + "."
               + _explain(f"speed_{peer}", [q for q, _ in low])) if low else ""
        out.append(Target(name, goal, "met" if not low else "not met", measured, why))

    # 1 M rows: within 1.5× of the same aggregate on raw DuckDB (no contribution bounding).
    goal = f"1 M rows: dpproxy's median latency ≤ {RAW_FACTOR:g}× raw DuckDB's on every query " \
           "(pid is a primary key: no contribution bounding)"
    ratios = raw_ratios(m)
    if not ratios:
        out.append(Target("1 M rows vs raw DuckDB", goal, "not evaluated", "–",
                          "no latency runs on synthetic_1m"))
    else:
        high = [(q, r) for q, r in ratios.items() if r > RAW_FACTOR]
        worst = max(ratios.items(), key=lambda kv: kv[1])
        measured = (f"dpproxy/raw: max {_x(worst[1])} ({worst[0]}), geometric mean "
                    f"{_x(geomean(ratios.values()))}, {len(ratios) - len(high)}/{len(ratios)} "
                    f"queries ≤ {RAW_FACTOR:g}×")
        why, details = "", []
        if high:
            why = "above on " + ", ".join(f"{q} ({_x(r)})" for q, r in high) + "."
            split = latency_split(m, [q for q, _ in high])
            if split:
                why += (f" There dpproxy's SQL alone takes {split['sql']} raw DuckDB's time "
                        f"(geometric mean) and dpproxy's own work adds {split['own']} per "
                        "query (median); see below.")
            details = raw_details(m, [q for q, _ in high])
        out.append(Target("1 M rows vs raw DuckDB", goal, "met" if not high else "not met",
                          measured, why, details))

    # One command in under 30 minutes.
    total = run_time(manifest or {})
    if total is not None and manifest is not None:
        per: dict[str, float] = defaultdict(float)
        for c in manifest["calls"]:
            per[c["system"]] += c["seconds"]
        slowest = sorted(per.items(), key=lambda kv: -kv[1])
        la = (manifest.get("machine") or {}).get("loadavg_start")
        why = ""
        if total > 1800:
            why = ("the slowest systems: " + ", ".join(
                f"{NAMES.get(s, s)} {v / 60:.1f} min" for s, v in slowest[:2]) + ".")
            if la and la[0] > 1.5:
                why += (f" The machine was shared with other jobs (load average {la[0]:.1f} "
                        f"on {(manifest.get('machine') or {}).get('cores', '?')} cores at the "
                        "start), which slows every system.")
        out.append(Target(
            "Run time", "one command reruns the whole comparison in under 30 minutes",
            "met" if total <= 1800 else "not met",
            f"{total / 60:.1f} min (environments, data, every adapter call, report)", why))
    return out


def accuracy_vs_best(m: Metrics, dataset: str = "pums") -> list[dict[str, Any]]:
    """Per query: dpproxy's median relative error, the best peer's, their ratio and its CI
    (the 16 queries on ``dataset``, the TPC-H queries on tpch)."""
    rows = []
    for q in workload.QUERIES:
        ds = dataset if q in CORE else home(q.id)
        a = m.accuracy("dpproxy", ds, q.id)
        best, best_acc = None, None
        for p in PEERS:
            b = m.accuracy(p, ds, q.id)
            if b is None or b.median_rel is None:
                continue
            if best_acc is None or b.median_rel < (best_acc.median_rel or 0):
                best, best_acc = p, b
        ratio = ci = None
        if a is not None and a.median_rel is not None and best_acc is not None:
            ratio = safe_ratio(a.median_rel, best_acc.median_rel)
            if ratio is not None and ratio > 1:
                ci = ratio_ci(a.rel_errors, best_acc.rel_errors)
        rows.append({"query": q.id, "dpproxy": a.median_rel if a else None, "best": best,
                     "best_value": best_acc.median_rel if best_acc else None,
                     "ratio": ratio, "ci": ci})
    return rows


def speed_ratios(m: Metrics, peer: str, dataset: str = "pums") -> dict[str, float]:
    out = {}
    for q in workload.queries_for(dataset):
        a, b = m.latency("dpproxy", dataset, q.id), m.latency(peer, dataset, q.id)
        if a and b and a.median > 0:
            out[q.id] = b.median / a.median
    return out


def raw_ratios(m: Metrics, dataset: str = "synthetic_1m") -> dict[str, float]:
    out = {}
    for q in workload.queries_for(dataset):
        a, b = m.latency("dpproxy", dataset, q.id), m.latency("duckdb", dataset, q.id)
        if a and b and b.median > 0:
            out[q.id] = a.median / b.median
    return out


def latency_split(m: Metrics, qids: Iterable[str],
                  dataset: str = "synthetic_1m") -> dict[str, str] | None:
    """Where dpproxy's time over raw DuckDB goes: its SQL alone vs raw, and its own work."""
    sql, own = [], []
    for q in qids:
        a, b, c = (m.latency("dpproxy", dataset, q), m.latency("dpproxy_sql", dataset, q),
                   m.latency("duckdb", dataset, q))
        if a and b and c and c.median > 0:
            sql.append(b.median / c.median)
            own.append(a.median - b.median)
    if not sql:
        return None
    return {"sql": _x(geomean(sql)), "own": f"{fmt_ms(statistics.median(own))} ms"}


def raw_details(m: Metrics, qids: list[str], dataset: str = "synthetic_1m") -> list[str]:
    """Why dpproxy is slower than raw DuckDB on these queries, grouped by cause, from the
    split into dpproxy's SQL alone and dpproxy's own work."""
    groups: dict[str, list[tuple[str, float, float, float]]] = {}
    for q in qids:
        a, b, c = (m.latency("dpproxy", dataset, q), m.latency("dpproxy_sql", dataset, q),
                   m.latency("duckdb", dataset, q))
        if not (a and b and c and c.median > 0):
            continue
        sql_ratio, own = b.median / c.median, a.median - b.median
        note = (EXPLAIN.get(("raw", q), "dpproxy's SQL does more work than the raw query.")
                if sql_ratio > RAW_FACTOR else _FIXED)
        groups.setdefault(note, []).append((q, sql_ratio, own, c.median))
    out = []
    for note, items in groups.items():
        qs = ", ".join(i[0] for i in items)
        lo, hi = min(i[1] for i in items), max(i[1] for i in items)
        own = [i[2] for i in items]
        span = _x(lo) if _x(lo) == _x(hi) else f"{_x(lo)}–{_x(hi)}"

        def ms(x: float) -> str:
            return "≈ 0" if x < 0.05e-3 else fmt_ms(x)  # below zero: measurement noise

        own_s = (f"{ms(min(own))} ms" if ms(min(own)) == ms(max(own))
                 else f"{ms(min(own))}–{ms(max(own))} ms")
        out.append(f"{qs}: dpproxy's SQL alone takes {span} raw DuckDB's time, dpproxy's own "
                   f"work adds {own_s}. {note}")
    return out


def geomean(values: Iterable[float]) -> float:
    v = [x for x in values if x > 0 and not math.isinf(x)]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


# ---------------------------------------------------------------------------- figures


def plot(m: Metrics, figures: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no figures",
              file=sys.stderr)
        return []
    figures.mkdir(parents=True, exist_ok=True)
    colors = {"dpproxy": "C0", "smartnoise": "C1", "qrlew": "C2", "tumult": "C3",
              "duckdb": "0.5", "dpproxy_sql": "#9ecae1", "dpproxy_pg": "#08519c",
              "postgres": "0.75", "dpproxy_pg_sql": "#c6dbef"}
    paths = []

    def bars(ax: Any, series: dict[str, list[float | None]], floor: float,
             ids: list[str]) -> None:
        from matplotlib.transforms import blended_transform_factory

        n = len(series)
        width = 0.8 / max(n, 1)
        where = blended_transform_factory(ax.transData, ax.transAxes)
        for i, (s, vals) in enumerate(series.items()):
            xs = [j + (i - (n - 1) / 2) * width for j in range(len(ids))]
            shown = [(x, max(v, floor)) for x, v in zip(xs, vals, strict=True) if v is not None]
            ax.bar([x for x, _ in shown], [y for _, y in shown], width,
                   label=NAMES.get(s, s), color=colors.get(s))
            for x, v in zip(xs, vals, strict=True):
                if v is None:
                    ax.text(x, 0.01, "×", ha="center", va="bottom", fontsize=8,
                            color=colors.get(s), transform=where)
        ax.set_xticks(range(len(ids)))
        ax.set_xticklabels(ids, rotation=0, fontsize=8)
        ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)

    systems = m.systems()
    # Latency: median per system and query, one panel per data set.
    datasets = [d for d in workload.DATASETS if any(k[1] == d and k[2] == "latency"
                                                    for k in m.records)]
    if datasets:
        fig, axes = plt.subplots(len(datasets), 1, figsize=(13, 3.6 * len(datasets)),
                                 squeeze=False)
        for ax, d in zip(axes[:, 0], datasets, strict=True):
            series = {}
            for s in systems:
                if not any(k[0] == s and k[1] == d and k[2] == "latency" for k in m.records):
                    continue
                ids = [q.id for q in workload.queries_for(d)]
                series[s] = [
                    (lat.median * 1e3 if (lat := m.latency(s, d, q)) else None) for q in ids
                ]
            bars(ax, series, floor=1e-2, ids=[q.id for q in workload.queries_for(d)])
            ax.set_ylabel("median latency (ms)")
            label = (f"{TPCH_TITLE} ({workload.DATASETS[d]:,} line items)" if d == "tpch"
                     else f"{d} ({workload.DATASETS[d]:,} rows)")
            ax.set_title(f"{label}: end-to-end latency per query "
                         "(× = not answered or not run)", fontsize=10)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=5, fontsize=8)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / (3.6 * len(datasets))))
        path = figures / "compare_latency.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)

    # Error: median relative error at ε = 1 on pums per system and query.
    dp_systems = [s for s in systems if s not in (*BASELINES, *ON_POSTGRES)]
    if any(k[2] == "accuracy" and k[1] == "pums" for k in m.records):
        fig, ax = plt.subplots(figsize=(13, 3.8))
        series = {}
        ids = [q.id for q in CORE]
        for s in dp_systems:
            series[s] = [(a.median_rel if (a := m.accuracy(s, "pums", q)) else None)
                         for q in ids]
        bars(ax, series, floor=1e-5, ids=ids)
        ax.set_ylabel("median relative error")
        ax.set_title("pums (1,000 rows), ε = 1: median relative error per query "
                     "(× = not answered; 0 drawn at 1e-5)", fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=4, fontsize=8)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        path = figures / "compare_error.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)

    # Error against ε for COUNT, AVG, MEDIAN.
    eps = m.epsilons()
    if len(eps) > 1:
        fig, axes = plt.subplots(1, len(SWEEP), figsize=(4.4 * len(SWEEP), 3.6))
        for ax, (qid, title) in zip(axes, SWEEP.items(), strict=True):
            for s in dp_systems:
                pts = [(e, a.mean_abs) for e in eps
                       if (a := m.accuracy(s, "pums", qid, e)) and a.mean_abs is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [max(p[1], 1e-3) for p in pts], "o-",
                            label=NAMES[s], color=colors.get(s))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{qid} {title}", fontsize=10)
            ax.set_xlabel("ε")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("mean absolute error (0 drawn at 1e-3)")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        path = figures / "compare_error_vs_epsilon.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------- markdown


def _anchor(title: str) -> str:
    """The GitHub anchor of the TPC-H section's heading."""
    heading = f"{title}: the customer as privacy unit".lower()
    return "".join(c for c in heading.replace(" ", "-") if c.isalnum() or c in "-_")


def _ms(lat: Latency | None) -> str:
    return "–" if lat is None else f"{fmt_ms(lat.median)} ({fmt_ms(lat.p95)})"


def postgres_lines(m: Metrics) -> list[str]:
    """Latency on PostgreSQL: dpproxy with its raw and rewritten baselines there, and Qrlew,
    whose rewritten SQL runs on the same server."""
    data = [d for d in workload.DATASETS
            if any(k[0] == "dpproxy_pg" and k[1] == d and k[2] == "latency" for k in m.records)]
    if not data:
        return []
    lines = [
        "### On PostgreSQL",
        "",
        "The same queries with dpproxy on its PostgreSQL backend (`adapters/dpproxy.py --backend "
        "postgres`: the CSV in a table with `pid` as primary key, on the server Qrlew uses), "
        "next to the exact SQL on a plain psycopg connection (*PostgreSQL (raw)*) and dpproxy's "
        "PostgreSQL rewrite alone. Qrlew's column is its end-to-end latency from the tables "
        "above (its rewritten SQL runs on the same server). Median (95th percentile) "
        "milliseconds; " + "; ".join(
            f"{d} {runs_note(m, d, 'latency', only=('dpproxy_pg',))}" for d in data) + ".",
        "",
    ]
    cols = [s for s in ("dpproxy_pg", "qrlew", "postgres", "dpproxy_pg_sql")
            if any(k[0] == s and k[2] == "latency" for k in m.records)]
    ratios = [("dpproxy_pg", "postgres", "dpproxy / raw"),
              ("qrlew", "dpproxy_pg", "Qrlew / dpproxy")]
    for d in data:
        rows = []
        for q in workload.queries_for(d):
            cells = [_ms(m.latency(s, d, q.id)) for s in cols]
            for num, den, _ in ratios:
                a, b = m.latency(num, d, q.id), m.latency(den, d, q.id)
                cells.append(_x(a.median / b.median) if a and b and b.median > 0 else "–")
            rows.append([f"{q.id} {q.title}", *cells])
        lines += [f"{d} ({workload.DATASETS[d]:,} rows):", "",
                  md_table(["query", *[NAMES[s] for s in cols], *[h for _, _, h in ratios]],
                           rows), ""]
    return lines


def coverage_lines(m: Metrics, systems: list[str], queries: Any) -> list[str]:
    """The coverage table of ``queries`` (✓, ✗ with a numbered footnote, partly) and its
    footnotes: each system's own error, numbered in order of first appearance."""
    foot: dict[str, int] = {}
    rows = [[q.id, q.title] + [_cell_supported(m, s, q.id, foot) for s in systems]
            for q in queries]
    lines = [md_table(["query", "what", *[NAMES[s] for s in systems]], rows,
                      "ll" + "c" * len(systems)).replace("---:", ":---:"), ""]
    lines += [f"{n}. {text}" for text, n in foot.items()]
    return lines + ([""] if foot else [])


def _cell_supported(m: Metrics, s: str, q: str, foot: dict[str, int]) -> str:
    statuses = [r.get("supported") for k, r in m.records.items() if k[0] == s and k[4] == q]
    if not statuses:
        return "–"
    if all(statuses):
        return "✓"
    err = m.error(s, q) or "unsupported"
    n = foot.setdefault(f"{NAMES[s]} {q}: {err}", len(foot) + 1)
    return f"✗ [{n}]" if not any(statuses) else f"partly [{n}]"


def render(m: Metrics, manifest: dict[str, Any], figures: list[Path],
           tpch_meta: dict[str, Any] | None = None) -> str:
    """RESULTS.md. ``tpch_meta``: the TPC-H data's scale, generator and table sizes (from
    ``tpch.duckdb``), shown in the TPC-H section when given."""
    systems = [s for s in m.systems() if s not in (*BASELINES, *ON_POSTGRES)]
    not_run = {s: info.get("status", "not run")
               for s, info in manifest.get("systems", {}).items()
               if not str(info.get("status", "")).startswith("run")}
    for s in SYSTEMS:
        if s not in systems and s not in not_run:
            not_run[s] = "not run"
    ts = targets(m, {s: f"{NAMES[s]} {v}" for s, v in not_run.items()}, manifest)
    settings = manifest.get("settings", {})
    out: list[str] = []
    w = out.append

    w("# dpproxy against SmartNoise SQL, Qrlew and Tumult Analytics")
    w("")
    w("_Generated by `benchmarks/compare/report.py` from the results of "
      "`benchmarks/compare/run.py`; do not edit by hand._")
    w("")
    w(f"One shared workload ({len(CORE)} SQL queries over one table, and {len(TPCH)} TPC-H "
      "queries over several; [workload.py](workload.py)) runs through dpproxy "
      "and each peer, every system in its own virtual environment with pinned versions, with "
      "the same bounds, the same privacy unit (`pid`, one row per person; on TPC-H the "
      "customer, with all their orders and line items), ε = 1 per query and "
      "δ = 1e-5 where a mechanism needs one. The harness and the adapter contract are described "
      "in [INTERFACE.md](INTERFACE.md).")
    w("")
    w("To rerun everything (data, virtual environments, measurements, this file and the "
      "figures) from the repository root, in dpproxy's virtual environment with the `bench` "
      "extra (`pip install -e '.[bench]'`), with Java 17 on the PATH (Tumult's PySpark) and a "
      "PostgreSQL server at `postgresql://postgres@127.0.0.1:5432` or `$QRLEW_PG_URL` (Qrlew "
      "runs its rewritten SQL there, its usual set-up); the peers are installed from PyPI "
      "into `benchmarks/compare/work/venvs/`. The data is prepared first under "
      "`benchmarks/compare/work/data/` (`data.py`): the PUMS sample, UCI Adult in the same "
      "columns, a synthetic table of "
      f"1,000,000 rows from a fixed seed, and {TPCH_TITLE} generated offline by `tpchgen-cli` "
      "(in the `bench` extra; about 30 s and 570 MB): a DuckDB file, one Parquet file per "
      f"table, and a copy in PostgreSQL schema `{workload.TPCH_PG_SCHEMA}` "
      "(`--datasets pums,adult,synthetic_1m` skips it):")
    w("")
    w("```console")
    w("$ python benchmarks/compare/run.py")
    w("```")
    w("")
    if manifest:
        total = run_time(manifest)
        calls = manifest.get("calls", [])
        kept = sum(1 for c in calls if c.get("reused"))
        text = (f"This report: `{manifest.get('command', 'python benchmarks/compare/run.py')}`, "
                f"started {manifest.get('started', '?')}")
        if total:
            text += f"; the whole comparison took {total / 60:.1f} min"
        if kept:
            text += (f" ({kept} of its {len(calls)} adapter calls were kept from an "
                     f"earlier invocation started {manifest.get('resumed_from', '?')}, "
                     "with the time they took then)")
        w(text + ".")
        w("")
        if manifest.get("machine"):
            java = f" Java: {manifest['java']}." if manifest.get("java") else ""
            w(f"Machine: {machine_line(manifest['machine'])}.{java}")
            w("")

    # Versions.
    w("## Systems and versions")
    w("")
    rows = []
    for s in SYSTEMS:
        info = manifest.get("systems", {}).get(s, {})
        pk = info.get("packages") or {}
        pkgs = ", ".join(f"{k} {v}" for k, v in pk.items()) or "–"
        status = "run" if s in systems else not_run.get(s, "not run")
        rows.append([NAMES[s], m.version(s) or "–", pkgs, status])
    w(md_table(["system", "version (adapter)", "packages in its environment", "status"], rows,
               "llll"))
    w("")
    missing = [s for s in SYSTEMS if s not in systems]
    if missing:
        w("**Not run:** " + "; ".join(f"{NAMES[s]} ({not_run.get(s, 'not run')})"
                                      for s in missing)
          + ". Targets that need a system that was not run are marked *not evaluated*.")
        w("")

    # Summary.
    w("## Summary")
    w("")
    w(md_table(["target", "goal", "status", "measured", "why / where"],
               [[t.name, t.goal, f"**{t.status}**", t.measured, t.why or ""] for t in ts],
               "lllll"))
    w("")
    detailed = [t for t in ts if t.details]
    for t in detailed:
        w(f"**{t.name}, where and why:**")
        w("")
        for d in t.details:
            w(f"- {d}")
        w("")
    w(summary_table(m, systems))
    w("")
    w("*Coverage*: queries answered on every data set and mode (the TPC-H queries on tpch). "
      f"*Median relative error*: the median over the {len(CORE)} one-table queries of each "
      "query's median relative error at ε = 1 on pums (queries the system answers; the TPC-H "
      f"queries are in [their own section](#{_anchor(TPCH_TITLE)})). *Latency*: the median "
      "over queries of the median end-to-end latency; a system that answers fewer queries "
      "is averaged over fewer.")
    w("")

    # The one-table sections (dropped below when only tpch was run).
    core_run = any(k[1] != "tpch" for k in m.records)
    core_start = len(out)

    # Coverage.
    w("## Coverage")
    w("")
    out.extend(coverage_lines(m, systems, CORE))

    # Accuracy.
    w("## Accuracy on pums (1,000 rows), ε = 1")
    w("")
    w(runs_note(m, "pums", "accuracy") + ".")
    w("")
    w("Median relative error over all runs and released cells (lower is better); the best "
      "system per query in bold. *ratio* is dpproxy's error over the best peer's (≤ 1: dpproxy "
      "at least as accurate); in brackets a bootstrap 95% interval where the ratio is above 1.")
    w("")
    vs = {r["query"]: r for r in accuracy_vs_best(m)}
    rows = []
    for q in CORE:
        vals = {s: (a.median_rel if (a := m.accuracy(s, "pums", q.id)) else None)
                for s in systems}
        best = min((v for v in vals.values() if v is not None), default=None)
        cells = [("**" + _fmt_num(v) + "**") if v is not None and v == best else _fmt_num(v)
                 for v in vals.values()]
        r = vs[q.id]
        ratio = _x(r["ratio"]) + (f" [{_ci(r['ci'][0])}–{_ci(r['ci'][1])}]" if r["ci"] else "")
        rows.append([f"{q.id} {q.title}", *cells, ratio])
    w(md_table(["query", *[NAMES[s] for s in systems], "ratio"], rows))
    w("")
    w("Absolute error: median / 95th percentile over all runs and released cells.")
    w("")
    rows = []
    for q in CORE:
        cells = []
        for s in systems:
            a = m.accuracy(s, "pums", q.id)
            cells.append("–" if a is None else f"{_fmt_num(a.median_abs)} / {_fmt_num(a.p95_abs)}")
        rows.append([q.id, *cells])
    w(md_table(["query", *[NAMES[s] for s in systems]], rows))
    w("")

    # Partition selection.
    w("### Groups released (partition selection, HAVING/LIMIT)")
    w("")
    w("Share of the exact answer's groups that a system released, over all runs, and released "
      "groups not in the exact answer (per run). Q09 groups by `educ`, which has no public "
      "domain: groups must be chosen by differentially private partition selection, so small "
      "groups may be missing. Q14 keeps the three largest races with more than 50 people; a "
      "noisy count can swap a group in or out. Errors above are computed on released cells "
      "only.")
    w("")
    rows = []
    for qid in ("Q09", "Q14", "Q08"):
        cells = []
        for s in systems:
            a = m.accuracy(s, "pums", qid)
            cells.append("–" if a is None else
                         f"{a.share_released:.1%} ({a.spurious / a.runs:.2f} extra)")
        rows.append([f"{qid} {workload.BY_ID[qid].title}", *cells])
    w(md_table(["query", *[NAMES[s] for s in systems]], rows))
    w("")

    # Predicted vs measured.
    if "dpproxy" in systems:
        w("### dpproxy: predicted 95% error against the measured one")
        w("")
        w("`dpproxy explain` predicts each aggregate's 95% absolute error from the plan alone "
          "(no data read; blank where the prediction depends on the data, e.g. variances). "
          "*Within* is the share of released cells whose error was at most the prediction "
          "(≥ 95% expected).")
        w("")
        rows = []
        for q in CORE:
            a = m.accuracy("dpproxy", "pums", q.id)
            pred = m.predicted(q.id)
            within = ""
            if a is not None and pred is not None and a.abs_errors:
                within = f"{sum(e <= pred + 1e-9 for e in a.abs_errors) / len(a.abs_errors):.1%}"
            rows.append([f"{q.id} {q.title}", _fmt_num(pred),
                         _fmt_num(a.p95_abs if a else None), within])
        w(md_table(["query", "predicted 95% error", "measured p95 |error|", "within"], rows))
        w("")

    # Error against ε.
    eps = m.epsilons()
    if len(eps) > 1:
        w("### Error against ε (pums)")
        w("")
        sweep_eps = next((e for e in eps if e != workload.EPSILON), workload.EPSILON)
        w(f"Median / mean absolute error (the figure shows the mean: the median of a count's "
          f"integer noise moves in steps of 1). {runs_note(m, 'pums', 'accuracy', sweep_eps)} "
          "(per ε ≠ 1; ε = 1 comes from the accuracy runs above).")
        w("")
        rows = []
        for qid, title in SWEEP.items():
            for s in systems:
                cells = [f"{_fmt_num(a.median_abs)} / {_fmt_num(a.mean_abs)}"
                         if (a := m.accuracy(s, "pums", qid, e)) else "–" for e in eps]
                rows.append([f"{qid} {title}", NAMES[s], *cells])
        w(md_table(["query", "system", *[f"ε = {e:g}" for e in eps]], rows, "ll" + "r" * len(eps)))
        w("")
    for p in figures:
        if p.name == "compare_error_vs_epsilon.png":
            w("![error against ε](figures/compare_error_vs_epsilon.png)")
            w("")
    if any(p.name == "compare_error.png" for p in figures):
        w("![median relative error per query](figures/compare_error.png)")
        w("")

    # Accuracy on the larger one-table data sets.
    about = {
        "adult": "UCI Adult in PUMS's columns and codes (`data.py`; income is the capital "
                 "gain, 0 for 92% of the people, so SUM and AVG of income are small and their "
                 "relative errors large for everyone)",
        "synthetic_1m": "the noise is the same; the answers are 1,000 times larger",
    }
    for d in ("adult", "synthetic_1m"):
        if not any(k[1] == d and k[2] == "accuracy" for k in m.records):
            continue
        w(f"### Accuracy on {d} ({workload.DATASETS[d]:,} rows), ε = 1")
        w("")
        w(f"Median relative error ({about[d]}). " + runs_note(m, d, "accuracy") + ".")
        w("")
        rows = []
        for q in CORE:
            cells = [(s, m.accuracy(s, d, q.id)) for s in systems]
            known = [a.median_rel for _, a in cells if a is not None and a.median_rel is not None]
            best = min(known) if known else None
            rows.append([f"{q.id} {q.title}"] + [
                "–" if a is None or a.median_rel is None else
                (f"**{_fmt_num(a.median_rel)}**" if a.median_rel == best and len(known) > 1
                 else _fmt_num(a.median_rel)) for _, a in cells])
        w(md_table(["query", *[NAMES[s] for s in systems]], rows))
        w("")

    # Latency.
    w("## Latency")
    w("")
    w(f"Timed runs after {settings.get('warmup', '?')} warm-up "
      f"run{'' if settings.get('warmup') == 1 else 's'} (fewer for the slow peers: see "
      f"[Run](#run)); " + "; ".join(
          f"{d} {runs_note(m, d, 'latency')}" for d in ("pums", "adult", "synthetic_1m")
          if any(k[1] == d for k in m.records)) + ".")
    w("")
    w("Median (95th percentile) end-to-end milliseconds per query: SQL text in, released rows "
      "out, on a system already set up. *DuckDB (raw)* is the query's exact SQL on a plain "
      "read-only DuckDB connection to the file dpproxy uses, with no privacy; *dpproxy's SQL "
      "alone* is the SQL dpproxy sends to DuckDB for the query (its rewrite), timed without "
      "dpproxy around it, so dpproxy − SQL alone is dpproxy's own work and SQL alone − raw is "
      "what the private query asks of the database.")
    w("")
    lat_systems = [s for s in m.systems() if s not in ON_POSTGRES and any(
        k[2] == "latency" or m.latency_from_accuracy(s, k[1])
        for k in m.records if k[0] == s)]
    daggers: set[str] = set()
    for d in workload.DATASETS:
        if d == "tpch" or not any(k[1] == d and k[2] == "latency" for k in m.records):
            continue  # tpch: in its own section below
        w(f"### {d} ({workload.DATASETS[d]:,} rows)")
        w("")
        # Ratios: (numerator, denominator, header).
        extra: list[tuple[str, str, str]] = []
        if d == "pums":
            extra = [(p, "dpproxy", f"{NAMES[p]} / dpproxy") for p in SPEED_PUMS
                     if p in lat_systems]
        if d == "synthetic_1m" and "duckdb" in lat_systems:
            extra = [("dpproxy", "duckdb", "dpproxy / raw"),
                     ("dpproxy_sql", "duckdb", "dpproxy's SQL / raw")]
        cols = [s for s in lat_systems if m.latency_from_accuracy(s, d) or any(
            k[0] == s and k[1] == d and k[2] == "latency" for k in m.records)]
        rows = []
        dagger = {s for s in cols if m.latency_from_accuracy(s, d)}
        daggers |= dagger
        for q in workload.queries_for(d):
            cells = [_ms(m.latency(s, d, q.id)) + (" †" if s in dagger and m.latency(s, d, q.id)
                                                   else "") for s in cols]
            ratios = []
            for num, den, _ in extra:
                a, b = m.latency(num, d, q.id), m.latency(den, d, q.id)
                ratios.append(_x(a.median / b.median) if a and b and b.median > 0 else "–")
            rows.append([f"{q.id} {q.title}", *cells, *ratios])
        head = [NAMES[s] for s in cols] + [h for _, _, h in extra]
        w(md_table(["query", *head], rows))
        w("")
    if daggers:
        w("† " + ", ".join(NAMES[s] for s in sorted(daggers)) + ": no separate latency call "
          "(`SLOW_PEERS` in `run.py`); the seconds of its accuracy runs, which ran alone on "
          "the machine, each timed end to end in the same way but with no warm-up run "
          "before them.")
        w("")
    out.extend(postgres_lines(m))
    w("One-time set-up per adapter process (seconds): loading the CSV and preparing the system "
      "(dpproxy: a DuckDB file with typed columns and the engine; on tpch only the engine "
      "over the prepared DuckDB file; SmartNoise: the reader over "
      "the data and its metadata; Qrlew: the dataset and its relations; Tumult: a Spark "
      "session and the session object).")
    w("")
    set_ds = [d for d in workload.DATASETS if any(k[1] == d and k[2] == "latency"
                                                  for k in m.records)]
    rows = []
    for s in lat_systems:
        if s in BASELINES:
            continue  # measured in dpproxy's process, on its set-up
        rows.append([NAMES[s]] + [_fmt_num(m.setup(s, d)) for d in set_ds])
    w(md_table(["system", *[f"{d}" for d in set_ds]], rows))
    w("")
    if not core_run:
        del out[core_start:]
    if any(p.name == "compare_latency.png" for p in figures):
        w("![latency per system and query](figures/compare_latency.png)")
        w("")

    if any(k[1] == "tpch" for k in m.records):
        out.extend(tpch_section(m, systems, settings, tpch_meta))

    notes = observations(m)
    if notes:
        w("## Observations")
        w("")
        w("Things the numbers above show that a reader should know (each printed only when "
          "the results show it).")
        w("")
        for n in notes:
            w(f"- {n}")
        w("")

    # Run notes.
    calls = manifest.get("calls", [])
    if calls:
        w("## Run")
        w("")
        per: dict[str, float] = defaultdict(float)
        for c in calls:
            per[c["system"]] += c.get("seconds", 0.0)
        env_s = {s: info.get("env_s") for s, info in manifest.get("systems", {}).items()}
        w(md_table(["system", "environment (s)", "measurements (s)"],
                   [[NAMES.get(s, s), _fmt_num(env_s.get(s)), f"{v:.0f}"]
                    for s, v in per.items()]))
        w("")
        if manifest.get("untimed_s") is not None:
            jobs = manifest.get("settings", {}).get("jobs", 1)
            w(f"Wall clock: {manifest['untimed_s'] / 60:.1f} min for the untimed calls "
              f"(accuracy and the ε sweep on pums, adult and synthetic_1m, {jobs} systems at a "
              "time), "
              f"then {manifest.get('timed_s', 0) / 60:.1f} min for the timed ones, each alone "
              "on the machine (every latency call, and all of TPC-H); the measurement seconds "
              "above add up calls that overlapped.")
            w("")
        w("Runs per query of every call (timed runs + warm-up runs for latency; a dash: not "
          "run). The slow peers get fewer runs than the defaults (`SLOW_PEERS` in `run.py`) so "
          "that the whole comparison stays under 30 minutes on a 2-core machine; their "
          "medians are correspondingly less precise.")
        w("")
        cols = [("pums", "accuracy", 1.0), ("pums", "latency", 1.0),
                ("adult", "accuracy", 1.0), ("adult", "latency", 1.0),
                ("synthetic_1m", "accuracy", 1.0), ("synthetic_1m", "latency", 1.0),
                ("tpch", "accuracy", 1.0), ("tpch", "latency", 1.0)]
        sweep = sorted({c["epsilon"] for c in calls if c["epsilon"] != workload.EPSILON})
        rows = []
        for s in per:
            row = [NAMES.get(s, s)]
            for d, mode, e in cols:
                mine = [c for c in calls if c["system"] == s and c["dataset"] == d
                        and c["mode"] == mode and c["epsilon"] == e]
                row.append("–" if not mine else " / ".join(  # a call in parts: each one's
                    f"{c['runs']} + {c['warmup']}" if mode == "latency"
                    else str(c["runs"]) + (f" ({c['queries']} queries)" if len(mine) > 1 else "")
                    for c in mine))
            c = next((c for c in calls if c["system"] == s and c["epsilon"] in sweep), None)
            row.append("–" if c is None else str(c["runs"]))
            rows.append(row)
        w(md_table(["system", "pums accuracy", "pums latency", "Adult accuracy", "Adult latency",
                    "1 M accuracy", "1 M latency",
                    "TPC-H accuracy", "TPC-H latency",
                    "ε sweep" + (" (" + ", ".join(f"{e:g}" for e in sweep) + ")"
                                 if sweep else "")], rows))
        w("")
        inc = [(c["system"], c["dataset"], c["mode"], i) for c in calls
               for i in c.get("incidents", [])]
        if inc:
            w("Adapter incidents (a hung or crashed adapter is killed and restarted for the "
              "remaining queries; the query is counted as unsupported):")
            w("")
            for s, d, mode, i in inc:
                w(f"- {NAMES.get(s, s)} {d} {mode}: {i['query']}: {i['error']}")
            w("")
    w("## Method")
    w("")
    w("- Exact answers: the workload SQL on DuckDB over the same CSV files "
      "(`benchmarks/compare/work/data/`, written by `data.py`: PUMS as shipped, and a "
      "synthetic table of 1,000,000 rows from a fixed seed); for the TPC-H queries, the SQL on "
      "DuckDB over `work/data/tpch/tpch.duckdb` (the file dpproxy reads; the Parquet files "
      "and the PostgreSQL copy the peers read are exported from it), with no bound on the "
      "rows per customer, so truncation counts as error.")
    w("- Relative error = |released − exact| / |exact| per released cell; medians and 95th "
      "percentiles are over all runs and cells. A group a system does not release is not an "
      "error cell; it lowers the *share released* instead.")
    w("- Latency: each adapter times one call of its system per run, on the same process after "
      "set-up. A call whose seconds are reported (latency, and every TPC-H call) runs alone "
      "on the machine; accuracy calls of different systems, whose seconds nothing reads, run "
      "`--jobs` (2) at a time, never two of one system.")
    w("- Peers: each in its own venv (`envs.py`), driven by `adapters/<system>.py` with the "
      "pins listed above; a query a system cannot express or refuses is reported with the "
      "system's own error.")
    w("")
    return "\n".join(out)


BOUND_KEYS = ("rows_per_unit", "max_rows_per_unit", "max_multiplicity", "max_ids",
              "max_rows_per_id")


def taus(m: Metrics, qid: str, system: str = "dpproxy") -> list[int]:
    """The bounds on rows per customer dpproxy drew with DP in its tpch runs (``tau``)."""
    out = []
    for mode in ("accuracy", "latency"):
        r = m.record(system, "tpch", mode, qid)
        if r and r.get("supported"):
            out += [int(run["tau"]) for run in r.get("runs") or [] if run.get("tau") is not None]
    return out


def given_bound(m: Metrics, system: str) -> Any:
    """The bound on rows per customer a peer's adapter reports it was given on tpch, if any."""
    for k, r in m.records.items():
        if k[0] == system and k[1] == "tpch":
            for key in BOUND_KEYS:
                if r.get(key) is not None:
                    return r[key]
    return None


def column_rel(rec: dict[str, Any] | None, exact: Answer | None) -> list[float | None]:
    """Median relative error per value column of one accuracy record (released cells)."""
    if rec is None or exact is None or not rec.get("supported"):
        return []
    cols, keys, truth = exact
    truth_by_key = {tuple(r[:keys]): r[keys:] for r in truth}
    errs: list[list[float]] = [[] for _ in cols[keys:]]
    for run in rec.get("runs") or []:
        if run.get("rows") is None:
            continue
        got = {tuple(r[:keys]): r[keys:] for r in normalise_rows(run["rows"], keys)}
        for k, true_values in truth_by_key.items():
            values = got.get(k)
            for j, t in enumerate(true_values):
                v = values[j] if values is not None and j < len(values) else None
                if v is not None and t:
                    errs[j].append(abs(v - t) / abs(t))
    return [statistics.median(e) if e else None for e in errs]


def tpch_section(m: Metrics, systems: list[str], settings: dict[str, Any],
                 tpch_meta: dict[str, Any] | None = None) -> list[str]:
    """The TPC-H section: data, privacy unit, bounds per customer, coverage, accuracy,
    latency."""
    out: list[str] = []
    w = out.append
    meta = tpch_meta or {}
    w(f"## {TPCH_TITLE}: the customer as privacy unit")
    w("")
    sizes = meta.get("rows") or {}
    plural = {"customer": "customers", "orders": "orders", "lineitem": "line items"}
    size_text = (", ".join(f"{sizes[t]:,} {plural[t]}" for t in plural if t in sizes)
                 or f"{workload.DATASETS['tpch']:,} line items")
    gen = f" by {meta['generator']}" if meta.get("generator") else " by `tpchgen-cli`"
    w(f"TPC-H at scale {workload.TPCH_SCALE:g} ({size_text}), generated offline{gen} "
      "(`data.py`). The privacy unit is the customer with all their orders and line items, "
      "the set-up of Wilson et al., \"Differentially Private SQL with Bounded User "
      "Contribution\" (PoPETs 2020): orders belong to their customer through `o_custkey`, line "
      "items to their order's customer (`l_orderkey` → `o_orderkey` → `o_custkey`), so "
      "removing a customer removes all of those rows. Public bounds (the specification's): "
      + ", ".join(f"`{c}` {lo:,g}..{hi:,g}"
                  for c, (lo, hi) in workload.TPCH_BOUNDS.items())
      + "; public domains for " + ", ".join(f"`{c}`" for c in workload.TPCH_DOMAINS)
      + ". ε = 1 per query.")
    w("")
    for q in TPCH:
        w(f"- **{q.id}** {q.title}: `{q.sql}`")
    w("")

    # Rows per customer: how each system bounded them.
    w("**Rows per customer.** No customer has a fixed maximum of orders or line items, so "
      "each system must bound a customer's contribution, and the bound sets the noise "
      "(a larger bound: more noise) and the bias (rows over the bound are dropped).")
    w("")
    items = []
    if ran(m, "dpproxy"):
        drawn = []
        for q in TPCH:
            t = taus(m, q.id)
            if t:
                lo, hi = min(t), max(t)
                span = f"{statistics.median(t):g}" + ("" if lo == hi else f" ({lo}–{hi})")
                drawn.append(f"{q.id} {span}")
        items.append(
            "dpproxy is given no bound: it chooses one at every run with differential "
            "privacy, from 10% of the query's ε (the rest answers the query), as the "
            "smallest bound that keeps every row of about 99.9% of the customers (README, "
            "*Joins and flat maps*); each run used a new analyst, so no earlier choice was "
            "reused"
            + (": median (range) of the bounds drawn: " + ", ".join(drawn) if drawn else "")
            + ".")
    for p in PEERS:
        if not any(k[0] == p and k[1] == "tpch" for k in m.records):
            continue
        answered = [q.id for q in TPCH
                    if (r := m.record(p, "tpch", "accuracy", q.id)) and r.get("supported")]
        bound = given_bound(m, p)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        if not answered:
            items.append(f"{NAMES[p]} answered none of the TPC-H queries (see below)"
                         + (f", although it was given {bound} rows per customer"
                            if bound is not None else "") + ".")
        elif bound is not None:
            items.append(
                f"{NAMES[p]} was given {bound} rows per customer (`TPCH_GUESS_ROWS`), a fixed "
                "guess from the specification, chosen without looking at the data and paid for "
                "with no ε, unlike dpproxy's choice.")
        else:
            items.append(
                f"{NAMES[p]}'s adapter reports no bound; the workload gives peers that need "
                f"one `TPCH_GUESS_ROWS` = {workload.TPCH_GUESS_ROWS} rows per customer, a "
                "fixed guess paid for with no ε.")
    for it in items:
        w(f"- {it}")
    w("")

    # Coverage.
    w(f"### Coverage ({TPCH_TITLE})")
    w("")
    out.extend(coverage_lines(m, systems, TPCH))

    # Accuracy.
    acc_systems = [s for s in systems if any(k[0] == s and k[1] == "tpch" and k[2] == "accuracy"
                                             for k in m.records)]
    if acc_systems:
        w(f"### Accuracy ({TPCH_TITLE}), ε = 1")
        w("")
        w(runs_note(m, "tpch", "accuracy") + ". Median relative error over all runs and "
          "released cells (every aggregate of every group of the exact answer; lower is "
          "better), then in brackets the share of the exact answer's cells released and the "
          "released groups not in the exact answer per run. dpproxy releases every group of a "
          "public domain, zero-filled when absent from the data (T01: 3 × 2 = 6 groups, of "
          "which the data has 4), so its extra groups are expected. The exact answer keeps "
          "every row of every customer: the rows a bound drops count as error.")
        w("")
        vs = {r["query"]: r for r in accuracy_vs_best(m)}
        rows = []
        for q in TPCH:
            cells = []
            for s in acc_systems:
                a = m.accuracy(s, "tpch", q.id)
                cells.append("–" if a is None else
                             f"{_fmt_num(a.median_rel)} ({a.share_released:.0%}, "
                             f"{a.spurious / a.runs:.2f} extra)")
            r = vs.get(q.id) or {}
            ratio = _x(r.get("ratio")) + (
                f" [{_ci(r['ci'][0])}–{_ci(r['ci'][1])}]" if r.get("ci") else "")
            rows.append([f"{q.id} {q.title}", *cells, ratio])
        w(md_table(["query", *[NAMES[s] for s in acc_systems], "ratio"], rows))
        w("")
        w("*ratio*: dpproxy's median relative error over the best peer's (– where no peer "
          "answered). Per aggregate (median relative error over runs and groups):")
        w("")
        rows = []
        for q in TPCH:
            ex = m.exact.get(("tpch", q.id))
            if ex is None:
                continue
            cols, keys, _ = ex
            per = {s: column_rel(m.record(s, "tpch", "accuracy", q.id), ex) for s in acc_systems}
            for j, c in enumerate(cols[keys:]):
                rows.append([q.id, f"`{c}`"] + [
                    _fmt_num(per[s][j]) if per[s] and j < len(per[s]) else "–"
                    for s in acc_systems])
        w(md_table(["query", "aggregate", *[NAMES[s] for s in acc_systems]], rows))
        w("")
        if "dpproxy" in acc_systems:
            notes = {q.id: r.get("predicted_note") for q in TPCH
                     if (r := m.record("dpproxy", "tpch", "accuracy", q.id))
                     and r.get("predicted_note")}
            if notes:
                w("dpproxy's predicted 95% errors (`explain`) are not shown for these queries: "
                  "the bound is drawn at run time, and the plan `explain` sees is calibrated "
                  "at the largest candidate bound, which would overstate the error many times.")
                w("")

    # Latency. A slow peer without latency runs on tpch: the seconds of its accuracy runs.
    lat_systems = [s for s in m.systems() if any(k[0] == s and k[1] == "tpch"
                                                 and k[2] in ("latency", "accuracy")
                                                 for k in m.records)]
    from_acc = {s for s in lat_systems if m.latency_from_accuracy(s, "tpch")}

    def tpch_latency(s: str, qid: str) -> Latency | None:
        return m.latency(s, "tpch", qid)

    if lat_systems:
        w(f"### Latency ({TPCH_TITLE})")
        w("")
        warm = min(int(settings.get("warmup", 1)), 1)
        w(f"Timed runs after {warm} warm-up run{'' if warm == 1 else 's'} (see [Run](#run)); "
          f"{runs_note(m, 'tpch', 'latency')}. Median (95th percentile) end-to-end "
          "milliseconds per query. *DuckDB (raw)*: the query's SQL on a plain read-only "
          "DuckDB connection to the same file, no privacy and no bound per customer; "
          "*dpproxy's SQL alone*: the per-customer row count dpproxy's DP choice of the "
          "bound reads, then its rewritten query at a drawn bound, run directly. dpproxy's "
          "SQL for T01 also joins `orders` (a line item's customer is its order's), which the "
          "raw SQL does not.")
        w("")
        extra = [("dpproxy", "duckdb", "dpproxy / raw")] if {"dpproxy", "duckdb"} <= set(
            lat_systems) else []
        rows = []
        for q in TPCH:
            cells = [_ms(tpch_latency(s, q.id)) + (" †" if s in from_acc and tpch_latency(
                s, q.id) else "") for s in lat_systems]
            ratios = []
            for num, den, _ in extra:
                a, b = m.latency(num, "tpch", q.id), m.latency(den, "tpch", q.id)
                ratios.append(_x(a.median / b.median) if a and b and b.median > 0 else "–")
            rows.append([f"{q.id} {q.title}", *cells, *ratios])
        w(md_table(["query", *[NAMES.get(s, s) for s in lat_systems],
                    *[h for _, _, h in extra]], rows))
        w("")
        if from_acc & {s for s in lat_systems
                       if any(tpch_latency(s, q.id) for q in TPCH)}:
            w("† No separate latency runs on tpch for this slow peer (`SLOW_PEERS` in "
              "`run.py`): the seconds of its accuracy runs, each timed end to end in the same "
              "way but with no warm-up run before them.")
            w("")
        setups = []
        for s in lat_systems:
            if s in BASELINES:
                continue
            v = m.setup(s, "tpch")
            if v is None:  # no latency call: the set-up of its accuracy call
                vals = [r.get("setup_s") for k, r in m.records.items()
                        if k[0] == s and k[1] == "tpch" and r.get("setup_s") is not None]
                v = statistics.median(vals) if vals else None
            if v is not None:
                setups.append(f"{NAMES[s]} {_fmt_num(v)} s")
        if setups:
            w("One-time set-up per adapter process on tpch (the data already prepared by "
              "`data.py`): " + ", ".join(setups) + ".")
            w("")
    return out


def observations(m: Metrics) -> list[str]:
    """Notes on behaviour the results show, each guarded by the condition that shows it."""
    out = []
    a = m.accuracy("qrlew", "pums", "Q06")
    if a is not None and a.median_rel is not None and a.median_rel > 1:
        out.append(
            f"Qrlew's `VAR(age)` is far off (median relative error {_fmt_num(a.median_rel)}): "
            "its answers lie near E[age²] (≈ 2,300 on pums) rather than the variance "
            "(≈ 309), as if its VARIANCE did not subtract the squared mean.")
    a, d = m.accuracy("qrlew", "pums", "Q01"), m.accuracy("dpproxy", "pums", "Q01")
    if a is not None and a.abs_errors and sum(e == 0 for e in a.abs_errors) > len(
            a.abs_errors) / 2:
        out.append(
            f"Qrlew's `COUNT(*)` is exact in {sum(e == 0 for e in a.abs_errors)} of "
            f"{len(a.abs_errors)} runs: it clips counts to the table size, which it reads from "
            "the data when the dataset is set up (`COUNT(*)`, taken as public), and the exact "
            "count is that size. Its noise is otherwise larger (95th-percentile error "
            f"{_fmt_num(a.p95_abs)}" + (f" against dpproxy's {_fmt_num(d.p95_abs)}" if d else "")
            + ")." + (
                f" dpproxy clips the same way (its schema declares the size as "
                f"`public_max_rows`): exact in {sum(e == 0 for e in d.abs_errors)} of "
                f"{len(d.abs_errors)} runs." if d is not None and d.abs_errors else ""))
    for s in PEERS:
        for q in CORE:
            statuses = {k[2]: r.get("supported") for k, r in m.records.items()
                        if k[0] == s and k[4] == q.id and k[1] == "pums"}
            if len(set(statuses.values())) > 1:
                out.append(
                    f"{NAMES[s]} answered {q.id} in some calls and failed in others "
                    f"({m.error(s, q.id)}); one failed run marks the whole call's query as "
                    "unsupported, so its accuracy is missing here.")
    for q in CORE:
        a, pred = m.accuracy("dpproxy", "pums", q.id), m.predicted(q.id)
        if a is None or pred is None or not a.abs_errors:
            continue
        within = sum(e <= pred + 1e-9 for e in a.abs_errors) / len(a.abs_errors)
        if within < 0.9:
            cause = (" The query has a WHERE clause, and the prediction assumes the table's "
                     "`public_rows`, not the (smaller) filtered count." if " WHERE " in
                     q.sql.upper() else "")
            out.append(f"dpproxy's predicted 95% error for {q.id} ({_fmt_num(pred)}) "
                       f"under-states the measured one: only {within:.0%} of its cells were "
                       f"within it.{cause}")
    return out


def summary_table(m: Metrics, systems: list[str]) -> str:
    rows = []
    ids = run_ids(m)
    core = [q.id for q in CORE]
    datasets = [d for d in workload.DATASETS if any(k[1] == d for k in m.records)]
    for s in systems:
        answered = [q for q in ids if (r := m.record(s, home(q), "accuracy", q)) and r.get(
            "supported")]
        everywhere = [q for q in ids if all(
            r.get("supported") for k, r in m.records.items() if k[0] == s and k[4] == q
        ) and any(k[0] == s and k[4] == q for k in m.records)]
        rels = [a.median_rel for q in core
                if (a := m.accuracy(s, "pums", q)) and a.median_rel is not None]
        lat = {d: [la.median for q in workload.queries_for(d) if (la := m.latency(s, d, q.id))]
               for d in datasets}
        rows.append([
            NAMES[s], f"{len(everywhere)}/{len(ids)}" + (
                f" ({len(answered)} in accuracy runs)" if len(answered) != len(everywhere)
                else ""),
            _fmt_num(statistics.median(rels)) if rels else "–",
            *[(fmt_ms(statistics.median(v)) if v else "–") for v in lat.values()],
            _fmt_num(m.setup(s, "pums")),
        ])
    return md_table(["system", "coverage", "median relative error (ε = 1, pums)",
                     *[f"latency {d} (ms)" for d in datasets], "set-up pums (s)"],
                    rows)


def tpch_info(data_dir: Path) -> dict[str, Any] | None:
    """Scale, generator and row counts of the TPC-H data (``tpch/tpch.duckdb``)."""
    import duckdb

    path = data_dir / "tpch" / "tpch.duckdb"
    if not path.is_file():
        return None
    con = duckdb.connect(str(path), read_only=True)
    try:
        scale, generator = con.execute(
            "SELECT scale_factor, generator FROM tpch_meta").fetchone() or (None, None)
        rows = {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
                for t in ("customer", "orders", "lineitem")}
    except duckdb.Error:
        return None
    finally:
        con.close()
    return {"scale": scale, "generator": generator, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--data-dir", type=Path, default=DATA_DIR)
    p.add_argument("--out", type=Path, default=OUT_MD)
    p.add_argument("--figures", type=Path, default=FIGURES)
    args = p.parse_args(argv)
    records = load_records(args.results)
    if not records:
        raise SystemExit(f"no results under {args.results}: run benchmarks/compare/run.py")
    manifest = load_manifest(args.results)
    datasets = sorted({r["dataset"] for r in records})
    queries = sorted({r["query"] for r in records})
    exact = exact_answers(args.data_dir, datasets, queries)
    m = Metrics(records, exact)
    figures = plot(m, args.figures)
    text = render(m, manifest, figures,
                  tpch_info(args.data_dir) if "tpch" in datasets else None)
    args.out.write_text(text)
    print(f"report: wrote {args.out} and {len(figures)} figures", file=sys.stderr)


if __name__ == "__main__":
    main()
