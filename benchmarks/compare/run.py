"""The one command of the peer comparison: data → venvs → every adapter → report.

For each system (dpproxy, smartnoise, qrlew, tumult) and data set it runs the system's adapter
(``adapters/<system>.py``, INTERFACE.md) with the system's own interpreter, one subprocess per
(system, data set, mode):

* accuracy: ``--accuracy-runs`` runs (default 200) of every query on pums;
  ``--accuracy-runs-adult`` (default 50) on adult (UCI Adult in PUMS's columns, 32,561 rows);
  ``--accuracy-runs-large`` (default 20) on synthetic_1m;
* latency: ``--latency-runs`` timed runs (default 20) after ``--warmup`` (3) untimed ones, on
  pums, adult and synthetic_1m;
* error against ε: Q01 (COUNT), Q04 (AVG), Q11 (MEDIAN) at each of ``--epsilons`` with
  ``--epsilon-runs`` runs (default 100) on pums (ε = 1 reuses the accuracy runs);
* tpch (TPC-H scale 1, the customer as privacy unit; only the queries whose ``datasets``
  include it, T01 and T03): ``--accuracy-runs-tpch`` (default 10) accuracy runs and
  ``--latency-runs-tpch`` (default 5) timed runs after at most one warm-up run (dpproxy takes
  2–6 s per run of T01 on 6 M line items), with ``--tpch-timeout`` (default 600 s) as both the
  set-up and the per-query timeout;
* dpproxy's latency on PostgreSQL as well (``adapters/dpproxy.py --backend postgres
  --with-baselines``, label ``dpproxy_pg``; ``--no-postgres`` skips it), next to the raw query
  on PostgreSQL and dpproxy's PostgreSQL rewrite alone;
* with dpproxy's latency runs, interleaved run by run (``adapters/dpproxy.py
  --with-baselines``): the raw DuckDB baseline (every query's exact SQL on plain DuckDB), and
  dpproxy's rewritten SQL alone, which splits dpproxy's latency into what it asks of the
  database and its own work.

Calls run in two phases: first the untimed ones (accuracy and the ε sweep on pums, adult and
synthetic_1m), ``--jobs`` (default 2) systems at a time, never two calls of one system at once;
then every timed call alone on the machine: latency, all of tpch, and the accuracy calls whose
seconds stand for a slow peer's latency (``LATENCY_FROM_ACCURACY``).

A hung or crashed adapter cannot stop the run: when an adapter writes no line for
``--query-timeout`` seconds (``--setup-timeout`` before its first line), it is killed, the query
it was on is recorded as unsupported with the timeout as its error, and it is restarted for the
queries left. A system whose adapter file does not exist is recorded as not run.

Results go to ``work/results/*.jsonl`` and ``work/results/run.json``; then ``report.py`` writes
``RESULTS.md`` and ``figures/compare_*.png``. Usage::

    python benchmarks/compare/run.py                 # the full comparison
    python benchmarks/compare/run.py --quick         # a smoke run (20 accuracy, 5 latency runs)
    python benchmarks/compare/run.py --systems dpproxy --skip-envs
    python benchmarks/compare/run.py --resume        # after an interruption: redo only what
                                                     # run.json does not list as done
    python benchmarks/compare/run.py --datasets tpch --resume   # just the TPC-H suite, keeping
                                                     # the results of the other data sets
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # _common.py
sys.path.insert(0, str(HERE))  # first: benchmarks/ has a report.py of its own

import data as data_mod  # noqa: E402
import envs  # noqa: E402
import workload  # noqa: E402

WORK = HERE / "work"
RESULTS = WORK / "results"
ADAPTERS = HERE / "adapters"
SWEEP_QUERIES = ("Q01", "Q04", "Q11")  # COUNT, AVG, MEDIAN
# Fewer runs for the slow peers, so that the whole comparison stays under 30 minutes on a
# 2-core machine: (system, mode, data set) → (runs, warm-up runs[, only these queries]);
# mode "epsilon" is the ε sweep; 0 runs skips the call. Measured per query and run (2 cores,
# alone on the machine): SmartNoise SQL ≈ 0.1 s on pums and 1–3 s on 1 M rows (its in-memory
# SQLite), Qrlew ≈ 15 ms on pums and 2–15 s on 1 M rows (its rewritten SQL on PostgreSQL),
# Tumult ≈ 1–5 s on pums (nearly twice that next to another system) and 10–80 s on 1 M rows
# (Spark jobs per evaluation; about twice as long on adult's 32,561 rows). So Tumult gets 10
# accuracy runs on pums and 2 on adult, which run alone and double as its latency runs
# (LATENCY_FROM_ACCURACY), and one timed run of three queries on 1 M rows; Qrlew one timed run
# on 1 M rows, and 10 + 1 latency runs on adult (≈ 0.1 s a query). On tpch (6 M line items,
# joins), per
# run of T01: dpproxy 2–6 s, Qrlew 30–45 s, Tumult a Spark job per evaluation after a set-up
# near 60 s; SmartNoise refuses both queries at once. So Qrlew and Tumult get 2 accuracy runs
# there and no separate latency call (their latency: the seconds of those runs, marked †).
# SmartNoise 5 and 3 + 1; dpproxy the defaults of --accuracy-runs-tpch and
# --latency-runs-tpch.
# `--peer-runs SYSTEM:MODE:DATASET=N` overrides an entry, `--full-peers` drops them all
# (every system then gets the full counts: hours with Tumult).
# Seconds per query and run, roughly (pums), to order the untimed phase's chains longest first.
CHAIN_WEIGHT = {"tumult": 3.5, "smartnoise": 0.1, "qrlew": 0.02, "dpproxy": 0.003}
TUMULT_1M = ("Q01", "Q08", "Q11")  # COUNT, grouped COUNT, MEDIAN (its AVG: 45–80 s a run)
SLOW_PEERS: dict[tuple[str, str, str], tuple[Any, ...]] = {
    ("smartnoise", "accuracy", "synthetic_1m"): (2, 0),
    ("smartnoise", "latency", "synthetic_1m"): (3, 1),
    ("qrlew", "accuracy", "synthetic_1m"): (0, 0),
    ("qrlew", "latency", "synthetic_1m"): (1, 0),
    ("qrlew", "latency", "adult"): (10, 1),
    ("tumult", "accuracy", "pums"): (10, 0),
    ("tumult", "latency", "pums"): (0, 0),  # from its accuracy runs (LATENCY_FROM_ACCURACY)
    ("smartnoise", "latency", "adult"): (10, 1),
    ("tumult", "accuracy", "adult"): (2, 0),
    ("tumult", "latency", "adult"): (0, 0),
    ("tumult", "epsilon", "pums"): (5, 0),
    ("tumult", "accuracy", "synthetic_1m"): (0, 0),
    ("tumult", "latency", "synthetic_1m"): (1, 0, TUMULT_1M),
    ("smartnoise", "accuracy", "tpch"): (5, 0),
    ("smartnoise", "latency", "tpch"): (3, 1),
    ("qrlew", "accuracy", "tpch"): (2, 0),
    ("qrlew", "latency", "tpch"): (0, 0),
    ("tumult", "accuracy", "tpch"): (2, 0),
    ("tumult", "latency", "tpch"): (0, 0),
    # dpproxy on PostgreSQL at 1 M rows: ≈ 0.1 s per statement, 1.4 s for the percentile.
    ("dpproxy_pg", "latency", "synthetic_1m"): (5, 1),
}


# Slow peers whose latency on a data set is read from their accuracy runs, which then run alone
# on the machine (timed phase) instead of a separate latency call: (system, data set).
LATENCY_FROM_ACCURACY = {("tumult", "pums"), ("tumult", "adult"), ("qrlew", "tpch"),
                         ("tumult", "tpch")}
# dpproxy's adapter calls other than its plain one: the command-line options of each variant.
VARIANT_ARGS = {"postgres": ["--backend", "postgres", "--with-baselines"]}


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def result_name(system: str, dataset: str, mode: str, epsilon: float | None = None) -> str:
    tail = "" if epsilon is None else f"_eps{epsilon:g}"
    return f"{system}_{dataset}_{mode}{tail}.jsonl"


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for line in f if line.endswith(b"\n"))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the adapter's whole session: its process group, and the groups its JVM or worker
    daemons made for themselves (PySpark's daemon does) inside the session."""
    pids = [proc.pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == proc.pid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


def _stub(system: str, dataset: str, mode: str, epsilon: float, qid: str, error: str) -> str:
    return json.dumps({
        "system": system, "version": None, "dataset": dataset, "query": qid, "mode": mode,
        "epsilon": epsilon, "supported": False, "error": error, "columns": [], "runs": [],
        "setup_s": None, "predicted_error95": None,
    })


def run_adapter(
    system: str,
    python: str,
    dataset: str,
    mode: str,
    queries: list[str],
    runs: int,
    warmup: int,
    epsilon: float,
    out: Path,
    setup_timeout: float,
    query_timeout: float,
    variant: str | None = None,
) -> dict[str, Any]:
    """Run one adapter call to completion, restarting past a hung or crashed query.

    Returns what happened: seconds, restarts, per-restart stderr tails."""
    label = {None: system, "with-baselines": system, "raw": "duckdb",
             "rewritten": "dpproxy_sql", "postgres": "dpproxy_pg"}[variant]
    out.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    todo = list(queries)
    incidents: list[dict[str, Any]] = []
    started = time.perf_counter()
    while todo:
        part = out.with_suffix(f".part{len(incidents)}")
        part.unlink(missing_ok=True)
        cmd = [
            python, str(ADAPTERS / f"{system}.py"),
            "--dataset", dataset, "--data-dir", str(data_mod.DATA_DIR),
            "--queries", ",".join(todo), "--mode", mode, "--runs", str(runs),
            "--warmup", str(warmup), "--epsilon", f"{epsilon:g}",
            "--delta", f"{workload.DELTA:g}", "--out", str(part),
            *VARIANT_ARGS.get(variant, [f"--{variant}"] if variant else []),
        ]
        errlog = out.with_suffix(".stderr")
        with errlog.open("a") as err:
            err.write(f"$ {' '.join(cmd)}\n")
            err.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True, cwd=str(HERE))
            done, last = 0, time.perf_counter()
            timed_out = False
            try:
                while proc.poll() is None:
                    time.sleep(0.2)
                    n = _count_lines(part)
                    if n != done:
                        done, last = n, time.perf_counter()
                    limit = setup_timeout if done == 0 else query_timeout
                    if time.perf_counter() - last > limit:
                        timed_out = True
                        _kill(proc)
                        break
            except BaseException:  # interrupted: take the adapter (and its JVM) down too
                _kill(proc)
                raise
        got = part.read_text().splitlines() if part.exists() else []
        got = [g for g in got if g.strip()]
        part.unlink(missing_ok=True)
        seen = {json.loads(g)["query"] for g in got}
        lines += got
        todo = [q for q in todo if q not in seen]
        if not todo:
            break
        stuck = todo.pop(0)
        if timed_out:
            limit = setup_timeout if not got else query_timeout
            why = f"TimeoutError: no answer within {limit:.0f} s (killed by run.py)"
        else:
            tail = errlog.read_text().strip().splitlines()[-1:] if errlog.exists() else []
            why = f"AdapterCrashed: exit status {proc.returncode}" + (
                f"; {tail[0][:300]}" if tail else "")
        incidents.append({"query": stuck, "error": why})
        progress(f"    {label} {dataset} {mode}: {stuck}: {why}")
        lines.append(_stub(label, dataset, mode, epsilon, stuck, why))
    out.write_text("".join(line + "\n" for line in lines))
    return {"seconds": time.perf_counter() - started, "incidents": incidents}


def _java_version() -> str | None:
    try:
        res = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (res.stderr or res.stdout).strip().splitlines()
    return lines[0] if lines else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="dpproxy,smartnoise,qrlew,tumult")
    p.add_argument("--datasets", default=",".join(workload.DATASETS),
                   help="comma-separated: pums, adult, synthetic_1m, tpch (default: all)")
    p.add_argument("--queries", default="all", help="comma-separated ids or all")
    p.add_argument("--accuracy-runs", type=int, default=200, help="accuracy runs on pums")
    p.add_argument("--accuracy-runs-adult", type=int, default=50,
                   help="accuracy runs on adult (32,561 rows)")
    p.add_argument("--accuracy-runs-large", type=int, default=20,
                   help="accuracy runs on synthetic_1m")
    p.add_argument("--accuracy-runs-tpch", type=int, default=10,
                   help="accuracy runs on tpch")
    p.add_argument("--latency-runs", type=int, default=20)
    p.add_argument("--latency-runs-tpch", type=int, default=5,
                   help="timed latency runs on tpch (after at most one warm-up run)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--epsilons", default="0.1,0.5,1,2",
                   help="ε values of the error-vs-ε sweep (Q01, Q04, Q11 on pums); '' skips it")
    p.add_argument("--epsilon-runs", type=int, default=100)
    p.add_argument("--peer-runs", action="append", default=[], metavar="SYSTEM:MODE:DATASET=N",
                   help="override the runs of one peer, e.g. tumult:accuracy:synthetic_1m=10 "
                        "(repeatable; MODE accuracy, latency or epsilon; 0 skips)")
    p.add_argument("--full-peers", action="store_true",
                   help="no reduced runs for slow peers (SLOW_PEERS): far over 30 minutes")
    p.add_argument("--setup-timeout", type=float, default=300,
                   help="seconds an adapter may take before its first answer")
    p.add_argument("--query-timeout", type=float, default=300,
                   help="seconds an adapter may take per further query (all its runs)")
    p.add_argument("--tpch-timeout", type=float, default=600,
                   help="on tpch: the set-up and the per-query timeout")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 20/5 accuracy runs, 5 latency runs, 1 warm-up, 10 per ε")
    p.add_argument("--skip-envs", action="store_true", help="use the venvs as they are")
    p.add_argument("--resume", action="store_true",
                   help="keep the results of calls an earlier run completed with the same "
                        "settings (work/results/run.json) and run only the others")
    p.add_argument("--no-postgres", action="store_true",
                   help="skip dpproxy's latency on PostgreSQL (needs a server: the one of "
                        "$QRLEW_PG_URL, else postgresql://postgres@127.0.0.1:5432)")
    p.add_argument("--jobs", type=int, default=2,
                   help="untimed calls (accuracy, ε sweep) of different systems run this many at "
                        "a time; timed calls always run alone (default 2, the cores here)")
    p.add_argument("--no-report", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.accuracy_runs, args.accuracy_runs_large, args.accuracy_runs_adult = 20, 5, 5
        args.latency_runs, args.warmup, args.epsilon_runs = 5, 1, 10
        args.accuracy_runs_tpch, args.latency_runs_tpch = 3, 2

    t0 = time.perf_counter()
    started_at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    from _common import loadavg, machine

    mach = machine()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = [d for d in datasets if d not in workload.DATASETS]
    if unknown:
        p.error(f"unknown data set(s) {', '.join(unknown)}: one of {', '.join(workload.DATASETS)}")
    queries = ([q.id for q in workload.QUERIES] if args.queries == "all"
               else args.queries.split(","))
    epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]
    overrides: dict[tuple[str, str, str], tuple[Any, ...]] = (
        {} if args.full_peers else dict(SLOW_PEERS))
    for spec in args.peer_runs:
        key, _, n = spec.partition("=")
        s, m, d = key.split(":")
        overrides[(s, m, d)] = (int(n), overrides.get((s, m, d), (0, args.warmup))[1])

    def runs_for(system: str, mode: str, dataset: str, runs: int, warmup: int,
                 qs: list[str]) -> tuple[int, int, list[str]]:
        """The runs, warm-up and queries of one call: the defaults, or a slow peer's fewer."""
        if (system, mode, dataset) not in overrides:
            return runs, warmup, qs
        n, w, *only = overrides[(system, mode, dataset)]
        return min(n, runs), min(w, warmup), [q for q in qs if not only or q in only[0]]

    progress(f"compare: systems {', '.join(systems)}; data sets {', '.join(datasets)}; "
             f"{len(queries)} queries")
    t = time.perf_counter()
    # The PostgreSQL copy of TPC-H is Qrlew's only.
    data_mod.prepare(datasets=datasets, postgres="qrlew" in systems)
    data_s = time.perf_counter() - t

    manifest: dict[str, Any] = {
        "started": started_at,
        "command": "python benchmarks/compare/run.py " + " ".join(sys.argv[1:]),
        "machine": mach,
        "data_s": data_s,
        "java": _java_version(),
        "settings": {k: v for k, v in vars(args).items()},
        "systems": {},
        "calls": [],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    previous: list[dict[str, Any]] = []
    old_systems: dict[str, Any] = {}
    if args.resume and (RESULTS / "run.json").is_file():
        old_manifest = json.loads((RESULTS / "run.json").read_text())
        previous = old_manifest.get("calls", [])
        old_systems = old_manifest.get("systems", {})
        manifest["resumed_from"] = old_manifest.get("resumed_from") or old_manifest.get("started")
    elif not args.resume:
        for old in [*RESULTS.glob("*.jsonl"), *RESULTS.glob("*.stderr"), *RESULTS.glob("*.part*")]:
            old.unlink()

    # Which systems can run: adapter present, venv ready.
    ready: dict[str, str] = {}
    for system in systems:
        info: dict[str, Any] = {"pins": envs.PINS.get(system, [])}
        manifest["systems"][system] = info
        if not (ADAPTERS / f"{system}.py").exists():
            info["status"] = f"not run: no adapter (adapters/{system}.py missing)"
            progress(f"compare: {system}: {info['status']}")
            continue
        try:
            if args.skip_envs and system != "dpproxy":
                info["env_s"] = 0.0
                if not envs.venv_python(system).exists():
                    raise RuntimeError(f"no venv at {envs.venv_python(system)}")
            else:
                info["env_s"] = envs.ensure(system)["seconds"]
        except Exception as e:
            info["status"] = f"not run: environment failed ({type(e).__name__}: {e})"
            progress(f"compare: {system}: {info['status']}")
            continue
        info["status"] = "run"
        info["python"] = str(envs.venv_python(system))
        have = envs.installed_versions(envs.venv_python(system), envs.REPORTED.get(system, []))
        info["packages"] = {k: v for k, v in have.items() if v}
        ready[system] = info["python"]

    # The plan: (label, system, python, dataset, mode, runs, warmup, ε, queries, variant).
    plan: list[tuple[Any, ...]] = []  # (label, system, python, dataset, mode, runs, warm-up,
    # ε, queries, variant)
    for system, python in ready.items():
        for dataset in datasets:
            mine = [q for q in queries if dataset in workload.BY_ID[q].datasets]
            acc = {"pums": args.accuracy_runs, "adult": args.accuracy_runs_adult,
                   "tpch": args.accuracy_runs_tpch}.get(dataset, args.accuracy_runs_large)
            lat = args.latency_runs_tpch if dataset == "tpch" else args.latency_runs
            acc, _, qa = runs_for(system, "accuracy", dataset, acc, 0, mine)
            warm = min(args.warmup, 1) if dataset == "tpch" else args.warmup
            lat, warm, ql = runs_for(system, "latency", dataset, lat, warm, mine)
            if acc and qa:
                plan.append((system, system, python, dataset, "accuracy", acc, 0,
                             workload.EPSILON, qa, None))
            if lat and ql:  # dpproxy: with the DuckDB baselines, interleaved run by run
                plan.append((system, system, python, dataset, "latency", lat, warm,
                             workload.EPSILON, ql,
                             "with-baselines" if system == "dpproxy" else None))
            if system == "dpproxy" and dataset != "tpch" and not args.no_postgres:
                # On PostgreSQL too (Qrlew's backend), with its raw and rewritten baselines.
                lat, warm, ql = runs_for("dpproxy_pg", "latency", dataset, args.latency_runs,
                                         args.warmup, mine)
                if lat and ql:
                    plan.append(("dpproxy_pg", system, python, dataset, "latency", lat, warm,
                                 workload.EPSILON, ql, "postgres"))
        n, _, sweep = runs_for(system, "epsilon", "pums", args.epsilon_runs, 0,
                               [q for q in SWEEP_QUERIES if q in queries])
        if "pums" in datasets and sweep and n:
            for eps in epsilons:
                if eps == workload.EPSILON:
                    continue  # the accuracy runs at ε = 1 serve
                plan.append((system, system, python, "pums", "accuracy", n, 0, eps, sweep,
                             None))

    # With --resume, the earlier calls this invocation does not make (other data sets, systems
    # or ε) stay in the manifest as they were, as long as their result files are there.
    planned = {(c[0], c[3], c[4], c[7]) for c in plan}
    for c in previous:
        if (c["system"], c["dataset"], c["mode"], c["epsilon"]) in planned:
            continue
        if not (RESULTS / c["file"]).is_file():
            continue
        manifest["calls"].append({**c, "reused": True})
        if c["system"] not in manifest["systems"] and c["system"] in old_systems:
            manifest["systems"][c["system"]] = old_systems[c["system"]]
    if len(manifest["calls"]):
        progress(f"compare: kept {len(manifest['calls'])} calls of the earlier run that this "
                 "one does not repeat")

    lock = threading.Lock()  # the manifest, run.json and the call counter
    counter = iter(range(1, len(plan) + 1))

    def do_call(entry: tuple[Any, ...]) -> None:
        alone = timed(entry)
        label, system, python, dataset, mode, runs, warmup, eps, qs, variant = entry
        sweep_eps = None if eps == workload.EPSILON else eps
        out = RESULTS / result_name(label, dataset, mode, sweep_eps)
        eps_note = f" ε={eps:g}" if sweep_eps is not None else ""
        call = {"system": label, "dataset": dataset, "mode": mode, "epsilon": eps,
                "runs": runs, "warmup": warmup, "queries": len(qs), "query_ids": qs,
                "file": out.name}
        same = next((c for c in previous if all(c.get(k) == v for k, v in call.items())),
                    None)
        if same is not None and out.is_file():
            with lock:
                manifest["calls"].append({**same, "reused": True})
                progress(f"[{next(counter)}/{len(plan)}] {label} {dataset} {mode}{eps_note}: "
                         f"kept from the earlier run ({same['seconds']:.1f} s then)")
            return
        setup_timeout, query_timeout = (
            (args.tpch_timeout, args.tpch_timeout) if dataset == "tpch"
            else (args.setup_timeout, args.query_timeout))
        res = run_adapter(system, python, dataset, mode, qs, runs, warmup, eps, out,
                          setup_timeout, query_timeout, variant=variant)
        lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        if alone:  # its seconds may stand for latency (LATENCY_FROM_ACCURACY)
            out.write_text("".join(json.dumps({**r, "alone": True}) + "\n" for r in lines))
        ok = sum(1 for r in lines if r.get("supported") and r.get("system") == label)
        with lock:
            progress(f"[{next(counter)}/{len(plan)}] {label} {dataset} {mode}{eps_note}: "
                     f"{len(qs)} queries ({ok} answered), {runs} runs, {res['seconds']:.1f} s")
            manifest["calls"].append({**call, "answered": ok, **res})
            manifest["calls_s"] = sum(c["seconds"] for c in manifest["calls"])
            (RESULTS / "run.json").write_text(
                json.dumps(manifest, indent=1, default=str) + "\n")

    # Two phases. First the calls whose seconds nothing reads (accuracy and the ε sweep on pums,
    # adult and synthetic_1m), ``--jobs`` at a time: one chain of calls per system, so two calls of
    # one system never overlap (Qrlew's tables in PostgreSQL, Spark's ports), the longest chain
    # first. Then every timed call alone on the machine: latency, all of tpch, and the accuracy
    # calls whose seconds stand for a slow peer's latency (LATENCY_FROM_ACCURACY).
    def timed(entry: tuple[Any, ...]) -> bool:
        return (entry[4] != "accuracy" or entry[3] == "tpch"
                or ((entry[1], entry[3]) in LATENCY_FROM_ACCURACY and entry[7] == workload.EPSILON))

    chains: dict[str, list[Any]] = {}
    for entry in plan:
        if not timed(entry):
            chains.setdefault(entry[1], []).append(entry)
    by_cost = sorted(chains.values(), key=lambda c: -sum(CHAIN_WEIGHT.get(e[1], 1.0) * e[5]
                                                          * len(e[8]) for e in c))
    phase = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for done in [pool.submit(lambda c=c: [do_call(e) for e in c]) for c in by_cost]:
            done.result()
    manifest["untimed_s"] = time.perf_counter() - phase
    phase = time.perf_counter()
    for entry in plan:
        if timed(entry):
            do_call(entry)
    manifest["timed_s"] = time.perf_counter() - phase

    mach["loadavg_end"] = loadavg()
    manifest["total_s"] = time.perf_counter() - t0
    manifest["calls_s"] = sum(c["seconds"] for c in manifest["calls"])
    manifest["complete"] = True
    (RESULTS / "run.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    progress(f"compare: measured in {manifest['total_s'] / 60:.1f} min")
    if not args.no_report:
        import report

        report.main([])
    progress(f"compare: done in {(time.perf_counter() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
