"""Issue 21's speed targets, before and after, side by side in one run.

Every measurement runs in a child process, once with the *baseline* dpproxy on ``PYTHONPATH``
(a ``git worktree`` of an earlier commit, ``--base``) and once with this checkout, alternating
baseline / current round by round so that a change in machine load hits both alike. Each
figure is the median over the rounds of the child's p50.

* **plan**: cold planning per query class of ``bench_plan.QUERIES`` (Adult catalog): parse →
  validate → plan + check → rewrite, the pure functions called directly, each iteration as
  the query's first: the plan cache is off and the memos keyed by a query's trees are cleared
  (:func:`_query_memos`; caches keyed by numbers alone stay warm); CPU time of the planning
  thread (``time.thread_time``), so a loaded machine does not inflate it; the memos keyed by
  a query's text (``sql/parse.PARSED``) are cleared too. Each iteration then times
  ``Engine.prepare`` of the text as the engine's first (its text-keyed caches cleared as
  well, :func:`_engine_caches`): a first query's whole path, with the looks of the
  public-table, UNION and composition planners (``engine``); and plans the query once more
  with *every* memo emptied (:func:`_every_memo`): what the first query of its bounds and
  budget in a fresh process pays (``empty``).
* **join**: a join of two tables whose privacy unit is the PRIMARY KEY of both, on the unit,
  ``--join-rows`` rows each (1,000,000 by default): raw DuckDB against dpproxy end to end
  (``cursor.execute`` + ``fetchall``), wall time and the CPU time of the whole process (all
  of DuckDB's threads included); also whether the plan bounds contributions.
* **small**: the ten classes of ``bench_embedded.SYNTH_QUERIES`` on the 1,000-row ``people``
  table (unit a PRIMARY KEY): raw DuckDB against dpproxy end to end.

    git worktree add /tmp/speed-base <start-commit>
    python benchmarks/bench_issue21.py --base /tmp/speed-base [--rounds 3]

Writes ``benchmarks/ISSUE21.json`` (committed: the README's figures) and prints markdown
tables; progress goes to stderr. ``--readme`` prints the README's section from that file
(``tests/unit/test_bench_issue21.py`` checks the README holds it). ``--merge TASK RUN.json``
replaces one task's figures in ``ISSUE21.json`` by those of a run of that task alone
(``--tasks TASK --results RUN.json``); the README's row then names that run's baseline, rounds
and load.
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

from _common import HERE, OUT, REPO, loadavg, machine, progress

RESULTS = HERE / "ISSUE21.json"
PLAN_TARGET_MS = 1.0  # cold planning p50, every class
JOIN_TARGET = 1.5  # × raw DuckDB, 1M rows without contribution bounding
SMALL_TARGET = 2.0  # × raw DuckDB at 1,000 rows

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


def _query_memos() -> list[Any]:
    """dpproxy's memos keyed by a query's own trees (``sql/treekey.ValueMemo``: a measure's
    guarded form, its bounds, …), found in the modules the planning path has imported.

    The plan task repeats each query, so without clearing these a repeat would be planned from
    what its first run memoised, which is not cold. Caches keyed by numbers only (a sensitivity,
    a partition-selection threshold at given ε and δ) are left warm: any query with the same
    parameters fills them, as the first queries of a session do. A baseline without such memos
    has nothing to clear."""
    memos: list[Any] = []
    try:
        from dpproxy.sql.treekey import ValueMemo
    except ImportError:
        return memos
    import importlib

    for holder in ("dpproxy.planning.planner", "dpproxy.rewrite.pipeline"):  # the memos' modules
        importlib.import_module(holder)

    for name, module in list(sys.modules.items()):
        if name.startswith("dpproxy") and module is not None:
            memos.extend(v for v in vars(module).values() if isinstance(v, ValueMemo))
    parsed = getattr(sys.modules.get("dpproxy.sql.parse"), "PARSED", None)
    if parsed is not None:  # the trees of texts parsed lately (since 2026-11-29): by text
        memos.append(parsed)
    return memos


def _engine_caches(engine: Any) -> list[Any]:
    """The engine's caches keyed by a query's text (its plan cache and the public-table
    planner's, ``functools.lru_cache`` on its methods, some under a decorator), found on its
    class and its bases (the planning methods are ``engine_plans.EnginePlans``') through each
    method's ``__wrapped__`` chain."""
    found = []
    for value in (v for cls in type(engine).__mro__ for v in vars(cls).values()):
        while value is not None:
            if callable(getattr(value, "cache_clear", None)):
                found.append(value)
                break
            value = getattr(value, "__wrapped__", None)
    return found


# module-level dicts memoising numbers (planner's until the split of 2026-11-29, then choosing's)
NUMBER_MEMOS = (("dpproxy.planning.planner", "_SCORED"), ("dpproxy.planning.choosing", "_SCORED"))


def _every_memo() -> list[Any]:
    """Everything :func:`task_plan`'s *empty* figure clears before each plan: the query memos
    of :func:`_query_memos`, every ``functools.lru_cache`` of a dpproxy module (a
    sensitivity, a guard, a threshold, parsed dialect settings, …) and the number-keyed dicts
    of :data:`NUMBER_MEMOS`. Planned this way a query also pays what it would as the first of
    its bounds and budget in a fresh process, which the *cold* figure (the target's) leaves
    warm."""
    memos = _query_memos()
    for name, module in list(sys.modules.items()):
        if name.startswith("dpproxy") and module is not None:
            memos.extend(
                v for v in vars(module).values() if callable(getattr(v, "cache_clear", None))
            )
    for module_name, attr in NUMBER_MEMOS:
        found = getattr(sys.modules.get(module_name), attr, None)
        if isinstance(found, dict):
            memos.append(found)
    return memos


def _clear(memo: Any) -> None:
    (memo.cache_clear if hasattr(memo, "cache_clear") else memo.clear)()


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
    forget = _query_memos()
    out: dict[str, Any] = {}
    pc = time.thread_time  # CPU time of this thread: what planning costs, whatever the load

    caches = _engine_caches(engine)

    def first_prepare(sql: str) -> float:
        """``Engine.prepare`` of a text as the engine sees it the first time: a first query's
        whole path (the public-table, UNION and composition checks, the plan cache's miss)."""
        for cache in caches:
            cache.cache_clear()
        t0 = pc()
        engine.prepare(sql)
        return pc() - t0

    def once(sql: str) -> tuple[float, float]:
        t0 = pc()
        query = validate(parse(sql), catalog, sql)
        t1 = pc()
        plan = plan_query(query, catalog.policy)
        check_plan(plan)
        t2 = pc()
        rewrite(plan, 12345, "duckdb")
        t3 = pc()
        return t3 - t0, t2 - t1

    for name, sql in QUERIES.items():
        total, plan_only, empty, prepared = [], [], [], []
        for i in range(iterations + 20):
            for memo in forget:  # each iteration plans the query as if for the first time
                memo.clear()
            whole, inner = once(sql)
            for memo in forget:
                memo.clear()
            through = first_prepare(sql)
            for memo in _every_memo():  # and again with every memo emptied
                _clear(memo)
            first, _ = once(sql)
            if i >= 20:
                total.append(whole)
                plan_only.append(inner)
                empty.append(first)
                prepared.append(through)
        out[name] = {
            "total": _p50(total),
            "plan": _p50(plan_only),
            "empty": _p50(empty),
            "engine": _p50(prepared),
        }
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
    pc, cpu = time.perf_counter, time.process_time  # wall, and CPU of all the process's threads
    for name, sql in queries.items():
        bounded = dp.engine.prepare(sql).plan.needs_bounding
        raw, mine, raw_cpu, mine_cpu = [], [], [], []
        for i in range(runs + 2):
            t0, c0 = pc(), cpu()
            con.execute(sql).fetchall()
            t1, c1 = pc(), cpu()
            cur.execute(sql)
            cur.fetchall()
            t2, c2 = pc(), cpu()
            if i >= 2:
                raw.append(t1 - t0)
                mine.append(t2 - t1)
                raw_cpu.append(c1 - c0)
                mine_cpu.append(c2 - c1)
        out[name] = {
            "raw": _p50(raw),
            "dpproxy": _p50(mine),
            "raw_cpu": _p50(raw_cpu),
            "dpproxy_cpu": _p50(mine_cpu),
            "bounded": bounded,
        }
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
    # Retried: a tree edited by others, or a DuckDB file another process holds, can fail a
    # child for a moment.
    for attempt in (1, 2, 3):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/tmp")
        if done.returncode == 0:
            break
        progress(f"{task} with {root} failed (attempt {attempt}):\n{done.stderr[-2000:]}")
        time.sleep(2)
    else:
        raise SystemExit(f"the {task} child of {root} failed three times")
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
        lines.append(
            "| class | baseline total | now total | baseline plan | now plan | "
            "baseline, every memo emptied | now, every memo emptied | "
            "baseline `Engine.prepare` | now `Engine.prepare` |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name in base:
            b, c = base[name], cur[name]
            lines.append(
                f"| {name} | {b['total']:.3f} | {c['total']:.3f} | {b['plan']:.3f} | "
                f"{c['plan']:.3f} | {_ms(b, 'empty')} | {_ms(c, 'empty')} | "
                f"{_ms(b, 'engine')} | {_ms(c, 'engine')} |"
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


def _ms(figures: dict[str, Any], key: str) -> str:
    """A figure of a run, or a dash where that run did not measure it (an older run)."""
    return f"{figures[key]:.3f}" if key in figures else "–"


def _range_of(per_class: dict[str, Any], key: str) -> str:
    """The range over classes of one figure, or a dash where the run did not measure it."""
    values = [v[key] for v in per_class.values() if key in v]
    return _range(values, " ms") if len(values) == len(per_class) else "–"


def _range(values: list[float], unit: str = "", digits: int = 2) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}–{hi:.{digits}f}{unit}"


def _status(ok: int, total: int) -> str:
    return "**met**" if ok == total else f"**not met** ({ok} of {total})"


def _above(per_class: dict[str, Any], target: float, key: str = "total") -> str:
    """The classes whose cold planning p50 (figure ``key``) is above ``target`` ms."""
    over = [f"{name} {v[key]:.2f}" for name, v in per_class.items() if v[key] > target]
    return f"; above it: {', '.join(over)} ms" if over else ""


def _engine_status(per_class: dict[str, Any]) -> str:
    """The planning target's status on the ``Engine.prepare`` figure (a dash for a run that
    did not measure it)."""
    if not all("engine" in v for v in per_class.values()):
        return "—"
    ok = sum(v["engine"] <= PLAN_TARGET_MS for v in per_class.values())
    return (
        f"≤ {PLAN_TARGET_MS:g} ms: "
        + _status(ok, len(per_class))
        + _above(per_class, PLAN_TARGET_MS, "engine")
    )


COLD_GROUPS = (  # the columns of the README's planning table
    ("count", "filtered_count", "grouped_public_count", "sum", "private_key_group_by"),
    ("avg_grouped", "having_order_limit", "cte"),
    ("var_stddev", "expression_aggregates"),
)


def cold_row(data: dict[str, Any]) -> str:
    """The README planning table's cold row: this checkout's p50 per group of classes."""
    now = data["results"]["current"]["plan"]
    cells = [_range([now[c]["total"] for c in group], " ms") for group in COLD_GROUPS]
    return "| cold (each query planned as its first) | " + " | ".join(cells) + " |\n"


def _own_run(meta: dict[str, Any], task: str) -> str:
    """For a task whose figures were merged in from a run of their own (``meta["runs"]``, see
    :func:`merge`): that run's baseline commit, rounds and load, which the paragraph above the
    table does not describe."""
    run = meta.get("runs", {}).get(task)
    if run is None:
        return ""
    return (
        f" (a run of its own: baseline `{run['base_commit'][:7]}`, {run['rounds']} rounds, "
        f"load average {run['load_start'][0]:.1f} at the start, {run['load_end'][0]:.1f} at "
        "the end)"
    )


def merge(into: Path, source: Path, task: str) -> None:
    """Replace ``task``'s figures in ``into`` with those of the run in ``source`` (both sides),
    recording that run's baseline, rounds and load under ``meta["runs"][task]``."""
    data = json.loads(into.read_text(encoding="utf-8"))
    run = json.loads(source.read_text(encoding="utf-8"))
    for side in ("base", "current"):
        data["results"][side][task] = run["results"][side][task]
    runs = "iterations" if task == "plan" else f"{task}_runs"
    keys = ("base_commit", "rounds", runs, "load_start", "load_end", "machine")
    data["meta"].setdefault("runs", {})[task] = {k: run["meta"][k] for k in keys}
    into.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")


def readme_section(data: dict[str, Any]) -> str:
    """The README's paragraph and table on issue 21's speed targets, from ``ISSUE21.json``."""
    meta, res = data["meta"], data["results"]
    base, now = res["base"], res["current"]
    plan_b = [v["total"] for v in base["plan"].values()]
    plan_n = [v["total"] for v in now["plan"].values()]
    inner_b = [v["plan"] for v in base["plan"].values()]
    inner_n = [v["plan"] for v in now["plan"].values()]

    def ratios(side: dict[str, Any], task: str, cpu: str = "") -> list[float]:
        return [v["dpproxy" + cpu] / v["raw" + cpu] for v in side[task].values()]

    join_b, join_n = ratios(base, "join"), ratios(now, "join")
    small_b, small_n = ratios(base, "small"), ratios(now, "small")
    small_cb, small_cn = ratios(base, "small", "_cpu"), ratios(now, "small", "_cpu")
    join_cb, join_cn = ratios(base, "join", "_cpu"), ratios(now, "join", "_cpu")
    bounded_b = sum(v["bounded"] for v in base["join"].values())
    bounded_n = sum(v["bounded"] for v in now["join"].values())
    rows = [
        (
            "cold planning p50, CPU (parse → validate → plan + check → rewrite), 10 classes"
            + _own_run(meta, "plan"),
            _range(plan_b, " ms"),
            _range(plan_n, " ms"),
            f"≤ {PLAN_TARGET_MS:g} ms: "
            + _status(sum(v <= PLAN_TARGET_MS for v in plan_n), len(plan_n))
            + _above(now["plan"], PLAN_TARGET_MS),
        ),
        (
            "of which `plan_query` + check",
            _range(inner_b, " ms"),
            _range(inner_n, " ms"),
            "—",
        ),
        (
            "cold planning through `Engine.prepare`, CPU: a first query's whole path (the "
            "public-table, UNION and composition planners' looks at it, the plan cache's "
            "miss), 10 classes",
            _range_of(base["plan"], "engine"),
            _range_of(now["plan"], "engine"),
            _engine_status(now["plan"]),
        ),
        (
            "cold planning as above with every memo emptied (numbers-keyed ones too: a "
            "query's first plan at its bounds and budget in a fresh process)",
            _range_of(base["plan"], "empty"),
            _range_of(now["plan"], "empty"),
            "—",
        ),
        (
            f"join of two tables on a unit that is the PRIMARY KEY of both, "
            f"{meta['join_rows']:,} rows each, {len(join_n)} queries: dpproxy / raw",
            _range(join_b, "×") + f" (bounding in {bounded_b} of {len(join_b)})",
            _range(join_n, "×") + f" (bounding in {bounded_n} of {len(join_n)})",
            f"≤ {JOIN_TARGET:g}×: " + _status(sum(r <= JOIN_TARGET for r in join_n), len(join_n)),
        ),
        (
            "the same, CPU time of the process",
            _range(join_cb, "×"),
            _range(join_cn, "×"),
            "—",
        ),
        (
            "1,000 rows (unit a PRIMARY KEY), 10 classes: dpproxy / raw" + _own_run(meta, "small"),
            _range(small_b, "×"),
            _range(small_n, "×"),
            f"≤ {SMALL_TARGET:g}×: "
            + _status(sum(r <= SMALL_TARGET for r in small_n), len(small_n)),
        ),
        (
            "the same, CPU time of the process",
            _range(small_cb, "×"),
            _range(small_cn, "×"),
            f"≤ {SMALL_TARGET:g}×: "
            + _status(sum(r <= SMALL_TARGET for r in small_cn), len(small_cn)),
        ),
    ]
    lines = [
        f"**Issue 21's speed targets** (`bench_issue21.py`: the baseline commit "
        f"`{meta['base_commit'][:7]}` in a git worktree against this checkout, each in child "
        f"processes alternating round by round; median over {meta['rounds']} rounds of each "
        f"p50 (wall time unless marked CPU); load average {meta['load_start'][0]:.1f} at the "
        "start, "
        f"{meta['load_end'][0]:.1f} at the end; figures in `benchmarks/ISSUE21.json`):",
        "",
        "| | baseline | now | target |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="a checkout of the baseline commit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=200, help="plan: per class and round")
    ap.add_argument("--join-rows", type=int, default=1_000_000)
    ap.add_argument("--join-runs", type=int, default=5)
    ap.add_argument("--small-runs", type=int, default=40)
    ap.add_argument("--tasks", default="plan,small,join")
    ap.add_argument("--readme", action="store_true", help="print the README section")
    ap.add_argument("--cold-row", action="store_true", help="print the README's cold row")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the JSON to write or read")
    ap.add_argument("--child", choices=("plan", "join", "small"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--merge",
        nargs=2,
        metavar=("TASK", "RUN_JSON"),
        help="put TASK's figures of another run (its --results file) into --results",
    )
    args = ap.parse_args()
    if args.merge:
        merge(args.results, Path(args.merge[1]), args.merge[0])
        return
    if args.readme or args.cold_row:
        data = json.loads(args.results.read_text(encoding="utf-8"))
        print((readme_section if args.readme else cold_row)(data), end="")
        return
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
    args.results.write_text(
        json.dumps({"meta": meta, "results": results}, indent=1, default=str) + "\n",
        encoding="utf-8",
    )
    for task in tasks:
        print(f"\n### {task} (ms, p50, median over {args.rounds} rounds)\n")
        print(table(results, task))


if __name__ == "__main__":
    main()
