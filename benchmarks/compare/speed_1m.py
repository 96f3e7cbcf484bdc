"""dpproxy against raw DuckDB on the comparison workload at 1 M rows (issue 21), dpproxy only.

The data is the compare workload's ``synthetic_1m`` table (``data.py``: the same generator and
seed; ``--rows`` makes it smaller), loaded the way the dpproxy adapter loads it
(``adapters/dpproxy.py``: typed columns, ``pid`` the PRIMARY KEY, so there is no contribution
bounding; its privacy schema with ``public_rows`` = the row count). For every query Q01–Q16 of
``workload.py``, interleaved run by run (the order rotates) after ``--warmup`` untimed runs:

* **raw**: the query's SQL on a plain DuckDB connection to a copy of the file
  (``cursor.execute`` + ``fetchall``);
* **dpproxy**: the same SQL through dpproxy's DB-API (``dpproxy.connect``, ``cache="off"``,
  ``cursor.execute`` + ``fetchall``): parse, plan, rewrite, the database, noise, accounting;
* **sql**: only the SQL dpproxy sends for it (``engine.prepare``, done once before the timed
  runs), on dpproxy's own backend connection: the difference to *dpproxy* is dpproxy's own
  work, the difference to *raw* what the private query asks of the database.

Each figure is the p50 over ``--runs`` runs, in ms: wall time (the target's measure), and in
the JSON also the CPU time of the whole process (``*_cpu``: DuckDB's threads included), which
a loaded machine disturbs less. ``met`` is dpproxy / raw ≤ 1.5 in wall time.

``--checks`` measures the same rows in a table that also declares the privacy schema's bounds
of its integer columns as CHECK constraints (``CHECK (age BETWEEN 0 AND 100)``, …: files
``speed_checks.duckdb`` and its raw copy), which DuckDB enforces on every row and which lets
dpproxy leave those columns' clamps out of its SQL (``backends/checks.py``); the raw query runs
on a copy of that file too. The JSON says which table was measured (``checks``).

``--base DIR`` (a ``git worktree`` of an earlier commit) measures that checkout's dpproxy too:
every round runs one child process per checkout (``PYTHONPATH``), alternating, so that load
hits both alike; the figures are the medians over ``--rounds`` rounds of each child's p50s.

    python benchmarks/compare/speed_1m.py [--rows 1000000] [--runs 15] [--out /tmp/s.json]
    python benchmarks/compare/speed_1m.py --base /tmp/wt-base --rounds 3 --out /tmp/s.json

Progress on stderr, the table on stdout, the JSON in ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import data  # noqa: E402
import workload  # noqa: E402

TARGET = 1.5  # dpproxy / raw DuckDB
SYSTEMS = ("raw", "dpproxy", "sql")


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _adapter() -> Any:
    """``adapters/dpproxy.py`` (named like the package: loaded by path)."""
    spec = importlib.util.spec_from_file_location(
        "compare_dpproxy_adapter", HERE / "adapters" / "dpproxy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path  # the adapter edits sys.path for its own process
    return module


def prepare_data(data_dir: Path, rows: int) -> tuple[Path, Path, Path]:
    """(dpproxy's DuckDB file, the raw baseline's copy, the privacy schema) for ``rows`` rows,
    kept in ``data_dir`` (rebuilt when the CSV is newer)."""
    adapter = _adapter()
    data_dir.mkdir(parents=True, exist_ok=True)
    csv_path = data.write_synthetic(data_dir, rows)
    db, raw, schema = (
        data_dir / "speed.duckdb",
        data_dir / "speed_raw.duckdb",
        data_dir / "speed.yaml",
    )
    if not db.is_file() or db.stat().st_mtime < csv_path.stat().st_mtime:
        started = time.perf_counter()
        tmp = data_dir / "speed.tmp.duckdb"
        tmp.unlink(missing_ok=True)
        adapter.build_database(csv_path, tmp)
        tmp.replace(db)
        shutil.copy(db, raw)
        progress(f"speed_1m: built {db} ({rows:,} rows) in {time.perf_counter() - started:.1f} s")
    schema.write_text(adapter.schema_yaml("synthetic_1m", rows, workload.DELTA), encoding="utf-8")
    return db, raw, schema


def with_checks(db: Path, schema: Path, data_dir: Path) -> tuple[Path, Path]:
    """(a copy of ``db`` whose table declares the schema's integer bounds as CHECK
    constraints, its raw copy), built next to ``db`` when missing or older than it."""
    import duckdb
    import yaml

    checked, raw = data_dir / "speed_checks.duckdb", data_dir / "speed_checks_raw.duckdb"
    if checked.is_file() and checked.stat().st_mtime >= db.stat().st_mtime:
        return checked, raw
    doc = yaml.safe_load(schema.read_text(encoding="utf-8"))
    spec = doc["tables"][workload.TABLE]["columns"]
    types = {"int": "BIGINT", "text": "VARCHAR"}
    cols = [
        f"{c.name} {types[c.type]} NOT NULL" + (" PRIMARY KEY" if c.name == workload.UNIT else "")
        for c in workload.COLUMNS
    ]
    for name, col in spec.items():
        if col.get("type") == "integer" and "lower" in col and "upper" in col:
            cols.append(f"CHECK ({name} BETWEEN {int(col['lower'])} AND {int(col['upper'])})")
    tmp = data_dir / "speed_checks.tmp.duckdb"
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute(f"CREATE TABLE {workload.TABLE} ({', '.join(cols)})")
        con.execute(f"ATTACH '{db}' AS src (READ_ONLY)")
        names = ", ".join(c.name for c in workload.COLUMNS)
        con.execute(f"INSERT INTO {workload.TABLE} SELECT {names} FROM src.{workload.TABLE}")
        con.execute("DETACH src")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    tmp.replace(checked)
    shutil.copy(checked, raw)
    progress(f"speed_1m: built {checked} with CHECK constraints")
    return checked, raw


def _fetch(con: Any, sql: str) -> None:
    """``sql`` executed and fetched on a cursor of ``con`` (DuckDB's or dpproxy's DB-API)."""
    cur = con.cursor()
    try:
        cur.execute(sql)
        cur.fetchall()
    finally:
        cur.close()


def measure(
    db: Path, raw_db: Path, schema: Path, ids: list[str], runs: int, warmup: int
) -> dict[str, Any]:
    """{query id: {raw, dpproxy, sql (p50 ms)}} in this process's dpproxy."""
    from fractions import Fraction

    import duckdb

    import dpproxy

    raw = duckdb.connect(str(raw_db), read_only=True)
    dp = dpproxy.connect(
        str(db), schema=str(schema), budget_epsilon=10**12, budget_delta="0.999", cache="off"
    )
    engine = dp.engine
    eps, delta = Fraction(str(workload.EPSILON)), Fraction(str(workload.DELTA))
    out: dict[str, Any] = {}
    for qid in ids:
        sql = workload.BY_ID[qid].sql
        prepared = engine.prepare(sql, epsilon=eps, delta=delta)
        statements = ([prepared.sql] if prepared.sql else []) + list(
            dict.fromkeys(st for _, st in prepared.extra)
        )

        def run_raw(sql: str = sql) -> None:
            _fetch(raw, sql)

        def run_dp(sql: str = sql) -> None:
            _fetch(dp, sql)

        def run_sql(statements: list[str] = statements) -> None:
            for st in statements:
                engine.backend.execute(st)

        fns = {"raw": run_raw, "dpproxy": run_dp, "sql": run_sql}
        for _ in range(warmup):
            for fn in fns.values():
                fn()
        times: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        cpu: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        for i in range(runs):
            k = i % len(SYSTEMS)
            for s in SYSTEMS[k:] + SYSTEMS[:k]:
                t, c = time.perf_counter(), time.process_time()
                fns[s]()
                times[s].append(time.perf_counter() - t)
                cpu[s].append(time.process_time() - c)
        out[qid] = {s: statistics.median(v) * 1000 for s, v in times.items()}
        out[qid].update({f"{s}_cpu": statistics.median(v) * 1000 for s, v in cpu.items()})
        out[qid]["statements"] = statements
        progress(
            f"speed_1m: {qid} raw {out[qid]['raw']:.2f} ms, dpproxy "
            f"{out[qid]['dpproxy']:.2f} ms, sql {out[qid]['sql']:.2f} ms"
        )
    dp.close()
    raw.close()
    return {"dpproxy": dpproxy.__file__, "queries": out}


def rows_of(per_query: dict[str, Any]) -> dict[str, Any]:
    """Ratios and the target's verdict added to each query's p50s."""
    out = {}
    for qid, m in per_query.items():
        ratio = m["dpproxy"] / m["raw"]
        out[qid] = {
            **m,
            "ratio": ratio,
            "sql_ratio": m["sql"] / m["raw"],
            "overhead_ms": m["dpproxy"] - m["sql"],
            "met": ratio <= TARGET,
            "cpu_ratio": m["dpproxy_cpu"] / m["raw_cpu"] if m["raw_cpu"] else None,
        }
    return out


def summarise(rows: dict[str, Any]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rows.values()]
    cpu = [r["cpu_ratio"] for r in rows.values()]
    return {
        "met": sum(r["met"] for r in rows.values()),
        "queries": len(rows),
        "geomean_ratio": statistics.geometric_mean(ratios) if ratios else None,
        "geomean_cpu_ratio": statistics.geometric_mean(cpu) if cpu and all(cpu) else None,
        "max_ratio": max(ratios) if ratios else None,
    }


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per query and system, the median over rounds of the p50s."""
    first = rounds[0]
    return {
        qid: {
            **{
                k: statistics.median(r[qid][k] for r in rounds)
                for k in first[qid]
                if k != "statements"
            },
            "statements": first[qid]["statements"],
        }
        for qid in first
    }


def table(results: dict[str, Any]) -> str:
    checkouts = [c for c in ("base", "current") if c in results["checkouts"]]
    head = (
        "| query | raw ms | "
        + " | ".join(
            f"{c} dpproxy ms | {c} ratio | {c} SQL-alone ratio | {c} CPU ratio | {c} met"
            for c in checkouts
        )
        + " |"
    )
    lines = [head, "|---|---:|" + "---:|---:|---:|---:|---|" * len(checkouts)]
    cur = results["checkouts"][checkouts[-1]]["rows"]
    for qid in cur:
        raw = statistics.median(results["checkouts"][c]["rows"][qid]["raw"] for c in checkouts)
        cells = [f"{qid}", f"{raw:.2f}"]
        for c in checkouts:
            r = results["checkouts"][c]["rows"][qid]
            cells += [
                f"{r['dpproxy']:.2f}",
                f"{r['ratio']:.2f}×",
                f"{r['sql_ratio']:.2f}×",
                f"{r['cpu_ratio']:.2f}×" if r["cpu_ratio"] else "–",
                "met" if r["met"] else "not met",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    for c in checkouts:
        s = results["checkouts"][c]["summary"]
        lines.append(
            f"\n{c}: {s['met']}/{s['queries']} ≤ {TARGET}× raw, geometric mean "
            f"{s['geomean_ratio']:.2f}×, max {s['max_ratio']:.2f}×"
            + (
                f"; CPU time: geometric mean {s['geomean_cpu_ratio']:.2f}×"
                if s["geomean_cpu_ratio"]
                else ""
            )
        )
    return "\n".join(lines)


def _child(
    root: Path | None, args: argparse.Namespace, paths: tuple[Path, Path, Path]
) -> dict[str, Any]:
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--runs",
        str(args.runs),
        "--warmup",
        str(args.warmup),
        "--queries",
        ",".join(args.ids),
        "--paths",
        *map(str, paths),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/tmp")
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"speed_1m: the child of {root or 'this checkout'} failed")
    payload = json.loads(done.stdout.strip().splitlines()[-1])
    if root is not None and not Path(payload["dpproxy"]).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"speed_1m: the child imported {payload['dpproxy']}, not {root}'s")
    return payload


def _commit(root: Path) -> str | None:
    """The commit checked out at ``root``, "+dirty" when its tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "-uno"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def loadavg() -> list[float]:
    return list(os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    p.add_argument("--rows", type=int, default=workload.DATASETS["synthetic_1m"])
    p.add_argument("--runs", type=int, default=15, help="timed runs per query and system")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    p.add_argument("--queries", default="", help="comma-separated ids (default: Q01–Q16)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the CSV and DuckDB files are kept "
        "(default: work/data/speed_<rows>, git-ignored)",
    )
    p.add_argument(
        "--base",
        type=Path,
        default=None,
        help="a checkout of an earlier commit to measure too, in child processes",
    )
    p.add_argument("--rounds", type=int, default=1, help="with --base: rounds of both children")
    p.add_argument("--out", type=Path, default=None, help="write the JSON here")
    p.add_argument(
        "--checks",
        action="store_true",
        help="the table declares the schema's integer bounds as CHECK constraints",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--paths", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    all_ids = [q.id for q in workload.queries_for("synthetic_1m")]
    args.ids = [s.strip() for s in args.queries.split(",") if s.strip()] or all_ids
    unknown = [q for q in args.ids if q not in all_ids]
    if unknown:
        p.error(f"unknown queries {unknown}: one of {', '.join(all_ids)}")
    if args.child:
        print(json.dumps(measure(*args.paths, args.ids, args.runs, args.warmup)))
        return 0
    data_dir = args.data_dir or data.DATA_DIR / f"speed_{args.rows}"
    paths = prepare_data(data_dir, args.rows)
    if args.checks:
        checked, raw = with_checks(paths[0], paths[2], data_dir)
        paths = (checked, raw, paths[2])
    load_before = loadavg()
    rounds: dict[str, list[dict[str, Any]]] = {}
    where: dict[str, str] = {}
    if args.base is None:
        res = measure(*paths, args.ids, args.runs, args.warmup)
        rounds["current"] = [res["queries"]]
        where["current"] = res["dpproxy"]
    else:
        for i in range(args.rounds):
            progress(f"speed_1m: round {i + 1} of {args.rounds}")
            order = [("base", args.base), ("current", HERE.parents[1])]
            for name, root in order if i % 2 == 0 else order[::-1]:
                progress(f"speed_1m: {name} ({root})")
                res = _child(root, args, paths)
                rounds.setdefault(name, []).append(res["queries"])
                where[name] = res["dpproxy"]
    checkouts = {}
    for name, rs in rounds.items():
        rows = rows_of(combine(rs))
        checkouts[name] = {
            "dpproxy": where[name],
            "commit": _commit(Path(where[name]).resolve().parents[1]),
            "rounds": len(rs),
            "rows": rows,
            "summary": summarise(rows),
        }
    results = {
        "rows": args.rows,
        "runs": args.runs,
        "warmup": args.warmup,
        "target": TARGET,
        "checks": args.checks,
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "checkouts": checkouts,
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        progress(f"speed_1m: wrote {args.out}")
    print(table(results))
    print(f"\nload average {load_before[0]:.2f} → {results['loadavg_after'][0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
