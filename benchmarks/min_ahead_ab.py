"""How many noise values are worth drawing ahead: ``dpproxy.prefetch.MIN_AHEAD`` at two values,
timed side by side in one process.

For each chosen 1,000-row class of ``bench_embedded.SYNTH_QUERIES`` (the ``people`` table of
``bench_issue21.py``'s ``small`` task) and, with ``--rows-1m``, each query of
``benchmarks/compare`` whose noise counts between the two values (the 1 M-row table of
``compare/speed_1m.py``, built there first), the raw query on its own DuckDB connection and
dpproxy's answer with ``MIN_AHEAD`` set to ``--low`` and to ``--high`` run interleaved, run
by run (the order reversed every other run), in one process: the setting is read when each run
starts (``Prefetcher.start``), so only it differs between the two dpproxy columns. p50 over
``--runs`` runs after 2 untimed ones, in ms of wall time.

    python benchmarks/min_ahead_ab.py [--low 4] [--high 16] [--runs 601] [--rows-1m]
                                      [--out benchmarks/MIN_AHEAD_AB.json]

Progress on stderr, a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, machine, progress

SMALL = ("var_stddev", "expression_aggregates", "sum", "count")


def _time(
    fns: dict[str, Callable[[], None]], runs: int, setting: Callable[[str], None]
) -> dict[str, Any]:
    names = list(fns)
    times: dict[str, list[float]] = {k: [] for k in names}
    for i in range(runs + 2):
        for k in names if i % 2 == 0 else names[::-1]:
            setting(k)
            t = time.perf_counter()
            fns[k]()
            if i >= 2:
                times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def _answer(cursor: Any, sql: str) -> Callable[[], None]:
    def run() -> None:
        cursor.execute(sql)
        cursor.fetchall()

    return run


def _raw(con: Any, sql: str) -> Callable[[], None]:
    def run() -> None:
        con.execute(sql).fetchall()

    return run


def _ahead_values(dp: Any, sql: str, **options: Any) -> int:
    """How many values the last run of ``sql`` asked for that may be drawn ahead."""
    from dpproxy import prefetch

    prepared = dp.engine.prepare(sql, **options)
    key = "\n".join([prepared.sql or "", *(s for _, s in prepared.extra)])
    asked = dp.engine._ahead._demands.get(key) or {}
    return sum(n for law, n in asked.items() if prefetch.drawn_ahead(law))


def measure(
    queries: dict[str, str],
    db: Path,
    raw_db: Path,
    schema: Path,
    args: argparse.Namespace,
    options: dict[str, Any],
    only_between: bool,
) -> dict[str, Any]:
    import duckdb

    import dpproxy
    from dpproxy import prefetch

    raw = duckdb.connect(str(raw_db), read_only=True)
    dp = dpproxy.connect(
        str(db), schema=str(schema), budget_epsilon=10**12, budget_delta="0.999", cache="off"
    )
    if dp.engine._ahead is None:
        raise SystemExit("this engine draws nothing ahead (not OpenDP's noise source)")
    cur = dp.cursor()
    out: dict[str, Any] = {}
    low, high = f"min_ahead_{args.low}", f"min_ahead_{args.high}"

    def setting(k: str) -> None:
        if k != "raw":
            prefetch.MIN_AHEAD = args.low if k == low else args.high

    try:
        for name, sql in queries.items():
            _answer(cur, sql)()
            n = _ahead_values(dp, sql, **options)
            if only_between and not args.low <= n < args.high:
                continue
            fns = {"raw": _raw(raw, sql), low: _answer(cur, sql), high: _answer(cur, sql)}
            r = _time(fns, args.runs, setting)
            r["values"] = n
            out[name] = r
            progress(
                f"min_ahead_ab: {name} ({n} values) raw {r['raw']:.3f}, {args.low}: "
                f"{r[low]:.3f}, {args.high}: {r[high]:.3f} ms"
            )
    finally:
        prefetch.MIN_AHEAD = args.high
        cur.close()
        dp.close()
        raw.close()
    return out


def small(args: argparse.Namespace) -> dict[str, Any]:
    from bench_embedded import SYNTH_QUERIES, dataset

    db, schema = dataset(1000)
    queries = {k: SYNTH_QUERIES[k].replace("FROM events", "FROM people") for k in SMALL}
    return measure(queries, db, db, schema, args, {}, only_between=False)


def million(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "benchmarks" / "compare"))
    import data
    import workload
    from speed_1m import prepare_data

    rows = workload.DATASETS["synthetic_1m"]
    db, raw, schema = prepare_data(data.DATA_DIR / f"speed_{rows}", rows)
    queries = {q.id: q.sql for q in workload.queries_for("synthetic_1m")}
    options = {"epsilon": Fraction(str(workload.EPSILON)), "delta": Fraction(str(workload.DELTA))}
    return measure(queries, db, raw, schema, args, options, only_between=True)


def table(rows: dict[str, Any], low: int, high: int) -> str:
    lines = [
        f"| query | values | raw ms | MIN_AHEAD {low} ms | MIN_AHEAD {high} ms | "
        f"{low} − {high} ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        a, b = r[f"min_ahead_{low}"], r[f"min_ahead_{high}"]
        lines.append(
            f"| {name} | {r['values']} | {r['raw']:.3f} | {a:.3f} | {b:.3f} | {a - b:+.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--low", type=int, default=4, help="the smaller MIN_AHEAD")
    ap.add_argument("--high", type=int, default=16, help="the larger MIN_AHEAD")
    ap.add_argument("--runs", type=int, default=601, help="timed runs per column (p50)")
    ap.add_argument(
        "--rows-1m",
        action="store_true",
        help="also the 1 M-row queries drawing from --low to --high − 1 values",
    )
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args()
    if not 1 <= args.low < args.high:
        ap.error("--low must be at least 1 and below --high")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    started = time.perf_counter()
    results = {"small": small(args)}
    if args.rows_1m:
        results["1m"] = million(args)
    data = {
        "meta": {
            "machine": machine(),
            "runs": args.runs,
            "low": args.low,
            "high": args.high,
            "minutes": (time.perf_counter() - started) / 60,
        },
        "results": results,
    }
    if args.out:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    for name, rows in results.items():
        print(f"### {name}\n\n{table(rows, args.low, args.high)}\n")


if __name__ == "__main__":
    main()
