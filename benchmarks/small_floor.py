"""Where dpproxy's time goes at 1,000 rows, and the floor of the 2× target (issue 21).

For each of the ten classes of ``bench_embedded.SYNTH_QUERIES`` on the 1,000-row ``people``
table (the ``small`` task of ``bench_issue21.py``), interleaved run by run after warm-up runs,
p50 over ``--runs`` runs, in ms of wall time:

* **raw**: the query on a plain read-only DuckDB connection (``execute`` + ``fetchall``);
* **sql**: the SQL dpproxy sends for it (``engine.prepare``), on dpproxy's own backend;
* **dpproxy**: the query through dpproxy's DB-API (plan cache off), end to end;
* **noise**: of *dpproxy*, the time inside OpenDP's samplers (``mechanisms/noise._call``,
  timed around each call), and ``values``, how many noisy values the query drew.

``floor`` = (sql + noise) / raw: what dpproxy would take against raw DuckDB if all of its own
Python work (parsing aside: the plan is cached, accounting, the release) cost nothing, with
the SQL it needs and OpenDP's exact samplers. A class whose floor is above 2 cannot meet the
2× target by making dpproxy's Python faster. ``per_value_us`` is OpenDP's cost per noisy
value over the whole run. The floor is that of the noise drawn after the database's answer:
dpproxy's drawing ahead (``dpproxy/prefetch.py``, which moves the draws of a statement of at
least 16 values to a worker thread while the SQL runs) is turned off here, so that every draw
is timed on the query's own thread.

    python benchmarks/small_floor.py [--runs 200] [--out benchmarks/SMALL_FLOOR.json]

Progress on stderr, a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, progress

TARGET = 2.0


def measure(runs: int) -> dict[str, Any]:
    import duckdb
    from bench_embedded import SYNTH_QUERIES, dataset

    import dpproxy
    from dpproxy.mechanisms import noise as opendp_noise

    db, schema = dataset(1000)
    raw_con = duckdb.connect(str(db), read_only=True)
    dp = dpproxy.connect(
        str(db), schema=str(schema), budget_epsilon=10**9, budget_delta="0.5", cache="off"
    )
    cur, backend = dp.cursor(), dp.engine.backend
    dp.engine._ahead = None  # every draw on this thread (the module docstring)
    drawn = {"seconds": 0.0, "values": 0}
    call = opendp_noise._call

    def timed_call(m: Any, values: Any, integer: bool) -> Any:  # OpenDP's samplers, timed
        t = time.perf_counter()
        out = call(m, values, integer)
        drawn["seconds"] += time.perf_counter() - t
        drawn["values"] += len(values)
        return out

    opendp_noise._call = timed_call
    pc = time.perf_counter
    out: dict[str, Any] = {}
    try:
        for name, query in SYNTH_QUERIES.items():
            query = query.replace("FROM events", "FROM people")
            sql = dp.engine.prepare(query).sql
            raw, alone, mine, noise, values = [], [], [], [], []
            for i in range(runs + 5):
                t0 = pc()
                raw_con.execute(query).fetchall()
                t1 = pc()
                backend.execute(sql)
                t2 = pc()
                drawn["seconds"], drawn["values"] = 0.0, 0
                cur.execute(query)
                cur.fetchall()
                t3 = pc()
                if i >= 5:
                    raw.append(t1 - t0)
                    alone.append(t2 - t1)
                    mine.append(t3 - t2)
                    noise.append(drawn["seconds"])
                    values.append(drawn["values"])
            r = {
                "raw": statistics.median(raw) * 1000,
                "sql": statistics.median(alone) * 1000,
                "dpproxy": statistics.median(mine) * 1000,
                "noise": statistics.median(noise) * 1000,
                "values": statistics.median(values),
                "per_value_us": sum(noise) / max(sum(values), 1) * 1e6,
            }
            r["ratio"] = r["dpproxy"] / r["raw"]
            r["floor"] = (r["sql"] + r["noise"]) / r["raw"]
            out[name] = r
            progress(f"small_floor: {name} ratio {r['ratio']:.2f}× floor {r['floor']:.2f}×")
    finally:
        opendp_noise._call = call
        cur.close()
        dp.close()
        raw_con.close()
    return out


def table(rows: dict[str, Any]) -> str:
    lines = [
        "| class | raw ms | SQL alone ms | OpenDP noise ms (values) | dpproxy ms | dpproxy / raw "
        "| floor (SQL + noise) / raw |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['raw']:.3f} | {r['sql']:.3f} | {r['noise']:.3f} ({r['values']:.0f})"
            f" | {r['dpproxy']:.3f} | {r['ratio']:.2f}× | {r['floor']:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="timed runs per class (p50)")
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args()
    started = time.perf_counter()
    rows = measure(args.runs)
    data = {
        "meta": {
            "machine": machine(),
            "runs": args.runs,
            "target": TARGET,
            "minutes": (time.perf_counter() - started) / 60,
        },
        "classes": rows,
    }
    print(table(rows))
    above = [k for k, r in rows.items() if r["floor"] > TARGET]
    print(f"\nfloor above {TARGET}×: {', '.join(above) or 'none'}")
    if args.out:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        progress(f"small_floor: wrote {args.out}")


if __name__ == "__main__":
    main()
