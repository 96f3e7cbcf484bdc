"""Issue 21's speed targets, before and after, side by side in one run.

Every measurement runs in a child process, once with the *baseline* dpproxy on ``PYTHONPATH``
(a ``git worktree`` of an earlier commit, ``--base``) and once with this checkout, alternating
baseline / current round by round so that a change in machine load hits both alike. Each
figure is the median over the rounds of the child's p50.

* **plan**: cold planning per query class of ``bench_plan.QUERIES`` (Adult catalog): parse →
  validate → plan + check → rewrite, the pure functions called directly, nothing cached.
* **join**: a join of two tables whose privacy unit is the PRIMARY KEY of both, on the unit,
  ``--join-rows`` rows each (1,000,000 by default): raw DuckDB against dpproxy end to end
  (``cursor.execute`` + ``fetchall``); also whether the plan bounds contributions.
* **small**: the ten classes of ``bench_embedded.SYNTH_QUERIES`` on the 1,000-row ``people``
  table (unit a PRIMARY KEY): raw DuckDB against dpproxy end to end.

    git worktree add /tmp/speed-base <start-commit>
    python benchmarks/bench_issue21.py --base /tmp/speed-base [--rounds 3]

Writes ``out/issue21.json`` and prints markdown tables; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import OUT, REPO, loadavg, machine, progress, write_json

SEED = 20261126
JOIN_QUERIES = {
    "join_sum": "SELECT SUM(balance) FROM people JOIN accounts ON people.uid = accounts.uid",
    "join_grouped_avg": (
        "SELECT grp, AVG(balance) FROM people p JOIN accounts a ON p.uid = a.uid GROUP BY grp"
    ),
    "join_count_where": (
        "SELECT COUNT(*) FROM people p JOIN accounts a ON p.uid = a.uid WHERE p.age >= 40"
    ),
}


def join_schema() -> str:
    domain = ", ".join(f"g{i:02d}" for i in range(50))
    return (
        "version: 1\n"
        "dataset: unique_join\n"
        "privacy:\n"
        "  epsilon: 1.0\n"
        "  delta: 1.0e-6\n"
        "  budget: {epsilon: 1000000000, delta: 0.5}\n"
        "tables:\n"
        "  people:\n"
        "    privacy_unit: uid\n"
        "    max_rows_per_unit: 1\n"
        "    columns:\n"
        "      uid: {type: integer}\n"
        f"      grp: {{type: text, domain: [{domain}]}}\n"
        "      age: {type: integer, lower: 0, upper: 100}\n"
        "  accounts:\n"
        "    privacy_unit: uid\n"
        "    max_rows_per_unit: 1\n"
        "    columns:\n"
        "      uid: {type: integer}\n"
        "      balance: {type: float, lower: 0, upper: 1000}\n"
    )


def join_data(n: int) -> tuple[Path, Path]:
    """``out/issue21_join_<n>.duckdb``: ``people`` and ``accounts``, n rows each, uid the
    PRIMARY KEY of both (generated once inside DuckDB), and its schema."""
    import duckdb

    OUT.mkdir(parents=True, exist_ok=True)
    db, schema = OUT / f"issue21_join_{n}.duckdb", OUT / f"issue21_join_{n}.yaml"
    schema.write_text(join_schema(), encoding="utf-8")
    if db.is_file():
        return db, schema
    tmp = db.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute(
            "CREATE TABLE people (uid BIGINT PRIMARY KEY, grp VARCHAR NOT NULL, "
            "age INTEGER NOT NULL)"
        )
        con.execute(
            f"INSERT INTO people SELECT i, 'g' || lpad((hash(i, {SEED}, 1) % 50)::VARCHAR, 2, "
            f"'0'), (hash(i, {SEED}, 2) % 101)::INTEGER FROM range({n}) t(i)"
        )
        con.execute("CREATE TABLE accounts (uid BIGINT PRIMARY KEY, balance DOUBLE NOT NULL)")
        con.execute(
            f"INSERT INTO accounts SELECT i, (hash(i, {SEED}, 3) % 1000001)::DOUBLE / 1000 "
            f"FROM range({n}) t(i)"
        )
        con.execute("CHECKPOINT")
    finally:
        con.close()
    tmp.replace(db)
    return db, schema


# ------------------------------------------------------------------------------ child tasks


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def task_plan(iterations: int) -> dict[str, Any]:
    from bench_plan import QUERIES

    from dpproxy.engine import open_engine
    from dpproxy.planning.check import check_plan
    from dpproxy.planning.planner import plan_query
    from dpproxy.rewrite.pipeline import rewrite
    from dpproxy.sql.parse import parse
    from dpproxy.sql.validate import validate

    engine = open_engine(cache="off")
    catalog = engine.catalog
    out: dict[str, Any] = {}
    pc = time.perf_counter
    for name, sql in QUERIES.items():
        total, plan_only = [], []
        for i in range(iterations + 20):
            t0 = pc()
            query = validate(parse(sql), catalog, sql)
            t1 = pc()
            plan = plan_query(query, catalog.policy)
            check_plan(plan)
            t2 = pc()
            rewrite(plan, 12345, "duckdb")
            t3 = pc()
            if i >= 20:
                total.append(t3 - t0)
                plan_only.append(t2 - t1)
        out[name] = {"total": _p50(total), "plan": _p50(plan_only)}
    engine.close()
    return out


def _end_to_end(db: Path, schema: Path, queries: dict[str, str], runs: int) -> dict[str, Any]:
    import duckdb

    import dpproxy

    con = duckdb.connect(str(db), read_only=True)
    dp = dpproxy.connect(
        str(db),
        schema=str(schema),
        budget_epsilon=10**9,
        budget_delta="0.5",
        cache="off",
    )
    cur = dp.cursor()
    out: dict[str, Any] = {}
    pc = time.perf_counter
    for name, sql in queries.items():
        bounded = dp.engine.prepare(sql).plan.needs_bounding
        raw, mine = [], []
        for i in range(runs + 2):
            t0 = pc()
            con.execute(sql).fetchall()
            t1 = pc()
            cur.execute(sql)
            cur.fetchall()
            t2 = pc()
            if i >= 2:
                raw.append(t1 - t0)
                mine.append(t2 - t1)
        out[name] = {"raw": _p50(raw), "dpproxy": _p50(mine), "bounded": bounded}
    cur.close()
    dp.close()
    con.close()
    return out


def task_join(rows: int, runs: int) -> dict[str, Any]:
    db, schema = join_data(rows)
    return _end_to_end(db, schema, JOIN_QUERIES, runs)


def task_small(runs: int) -> dict[str, Any]:
    from bench_embedded import SYNTH_QUERIES, dataset

    db, schema = dataset(1000)
    queries = {k: v.replace("FROM events", "FROM people") for k, v in SYNTH_QUERIES.items()}
    return _end_to_end(db, schema, queries, runs)


def child(task: str, args: argparse.Namespace) -> None:
    import dpproxy

    if task == "plan":
        res = task_plan(args.iterations)
    elif task == "join":
        res = task_join(args.join_rows, args.join_runs)
    else:
        res = task_small(args.small_runs)
    print(json.dumps({"dpproxy": dpproxy.__file__, "result": res}))


# ------------------------------------------------------------------------------ parent


def run_child(root: Path, task: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(root))
    cmd = [
        sys.executable,
        __file__,
        "--child",
        task,
        "--iterations",
        str(args.iterations),
        "--join-rows",
        str(args.join_rows),
        "--join-runs",
        str(args.join_runs),
        "--small-runs",
        str(args.small_runs),
    ]
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd="/tmp")
    payload = json.loads(done.stdout.strip().splitlines()[-1])
    where = Path(payload["dpproxy"]).resolve()
    if not where.is_relative_to(root.resolve()):
        raise SystemExit(f"the child imported {where}, not the dpproxy of {root}")
    return payload["result"]


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per query and figure, the median over rounds (booleans: the first round's)."""
    out: dict[str, Any] = {}
    for name in rounds[0]:
        out[name] = {}
        for key, value in rounds[0][name].items():
            if isinstance(value, bool):
                out[name][key] = value
            else:
                out[name][key] = statistics.median(r[name][key] for r in rounds)
    return out


def table(results: dict[str, Any], task: str) -> str:
    base, cur = results["base"][task], results["current"][task]
    lines = []
    if task == "plan":
        lines.append("| class | baseline total | now total | baseline plan | now plan |")
        lines.append("|---|---:|---:|---:|---:|")
        for name in base:
            b, c = base[name], cur[name]
            lines.append(
                f"| {name} | {b['total']:.3f} | {c['total']:.3f} | {b['plan']:.3f} | "
                f"{c['plan']:.3f} |"
            )
    else:
        lines.append(
            "| query | raw | baseline dpproxy | now dpproxy | baseline / raw | now / raw | "
            "bounding (baseline → now) |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---|")
        for name in base:
            b, c = base[name], cur[name]
            raw = statistics.median([b["raw"], c["raw"]])
            lines.append(
                f"| {name} | {raw:.3f} | {b['dpproxy']:.3f} | {c['dpproxy']:.3f} | "
                f"{b['dpproxy'] / b['raw']:.2f}× | {c['dpproxy'] / c['raw']:.2f}× | "
                f"{b['bounded']} → {c['bounded']} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="a checkout of the baseline commit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=200, help="plan: per class and round")
    ap.add_argument("--join-rows", type=int, default=1_000_000)
    ap.add_argument("--join-runs", type=int, default=5)
    ap.add_argument("--small-runs", type=int, default=40)
    ap.add_argument("--tasks", default="plan,small,join")
    ap.add_argument("--child", choices=("plan", "join", "small"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args)
        return
    if args.base is None:
        ap.error("--base is required (a git worktree of the baseline commit)")
    tasks = args.tasks.split(",")
    join_data(args.join_rows)  # generated once, before any timing
    started = time.time()
    load_start = loadavg()
    per: dict[str, dict[str, list[dict[str, Any]]]] = {"base": {}, "current": {}}
    for r in range(args.rounds):
        for task in tasks:
            for label, root in (("base", args.base), ("current", REPO)):
                progress(f"round {r + 1}/{args.rounds}: {task} with {label} ({root})")
                per[label].setdefault(task, []).append(run_child(root, task, args))
    results: dict[str, Any] = {
        label: {task: combine(rounds) for task, rounds in tasks_.items()}
        for label, tasks_ in per.items()
    }
    base_commit = subprocess.run(
        ["git", "-C", str(args.base), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    meta = {
        "machine": machine(),
        "base": str(args.base),
        "base_commit": base_commit,
        "rounds": args.rounds,
        "iterations": args.iterations,
        "join_rows": args.join_rows,
        "join_runs": args.join_runs,
        "small_runs": args.small_runs,
        "load_start": load_start,
        "load_end": loadavg(),
        "minutes": (time.time() - started) / 60,
    }
    write_json("issue21.json", {"meta": meta, "results": results})
    for task in tasks:
        print(f"\n### {task} (ms, p50, median over {args.rounds} rounds)\n")
        print(table(results, task))


if __name__ == "__main__":
    main()
