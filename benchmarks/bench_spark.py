"""dpproxy on Spark local against the same aggregate run raw on the same Spark session.

One table ``people`` of ``--rows`` rows (default 10⁷) is written to Parquet by DuckDB:
``person_id`` (each unit owns ``--rows-per-unit`` rows, default 1), ``age`` in 17..90, ``sex``
and ``income``. For each query, in one run and alternating round by round, the wall time of

* **raw**: the analyst's SQL run directly by Spark (``spark.sql(sql).collect()``);
* **dpproxy**: ``Engine.run`` of the same SQL (parse, plan, rewrite, the rewritten Spark SQL
  with its clamping and contribution bounding, noise, ledger in memory, its answer cache off)

on one SparkSession (``spark+local[N]``, ANSI mode, ``?parquet_dir=``). Spark enforces no
PRIMARY KEY, so dpproxy bounds every unit's rows even when the schema says one row per unit:
that cost is in the dpproxy column. Medians of ``--runs`` rounds after one warm-up round.
Writes ``benchmarks/SPARK.md`` and ``benchmarks/SPARK.json``.

    python benchmarks/bench_spark.py                      # 10^7 rows, local[2], 3 runs
    python benchmarks/bench_spark.py --rows 1000000 --runs 2
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
QUERIES = {
    "count by sex": "SELECT sex, COUNT(*) FROM people GROUP BY sex",
    "avg age by sex": "SELECT sex, AVG(age) FROM people GROUP BY sex",
    "sum income": "SELECT SUM(income) FROM people",
}
SCHEMA = """version: 1
dataset: people
privacy:
  neighbouring: add_remove
  epsilon: 1.0
  delta: 1.0e-6
  mechanism: laplace
  budget: {{epsilon: 1000000, delta: 0.5}}
tables:
  people:
    private: true
    privacy_unit: person_id
    max_rows_per_unit: {per_unit}
    columns:
      person_id: {{type: integer}}
      age: {{type: integer, lower: 17, upper: 90}}
      sex: {{type: text, domain: [Female, Male]}}
      income: {{type: float, lower: 0, upper: 100000}}
"""


def write_data(directory: Path, rows: int, per_unit: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "people.parquet"
    duckdb.sql(
        f"COPY (SELECT (i // {per_unit})::INTEGER AS person_id, (17 + (i * 7919) % 74)::INTEGER "
        "AS age, CASE WHEN i % 2 = 0 THEN 'Male' ELSE 'Female' END AS sex, "
        "((i * 104729) % 100000)::DOUBLE AS income "
        f"FROM range({rows}) t(i)) TO '{target}' (FORMAT parquet)"
    )
    return directory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10**7)
    ap.add_argument("--rows-per-unit", type=int, default=1)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out-dir", type=Path, default=HERE)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)  # a failed query's cause (the operator's log)

    from dpproxy.accounting.memory import MemoryAccountant
    from dpproxy.backends.spark import SparkBackend
    from dpproxy.catalog.load import load_catalog
    from dpproxy.engine import Engine

    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    data = write_data(tmp / "data", args.rows, args.rows_per_unit)
    schema = tmp / "people.yaml"
    schema.write_text(SCHEMA.format(per_unit=args.rows_per_unit), encoding="utf-8")
    catalog = load_catalog(schema)
    backend = SparkBackend(f"spark+local[{args.threads}]?parquet_dir={data}")
    # cache="off": every run reaches Spark (an identical query is otherwise answered from the
    # ledger's cache, at no cost and without touching the data).
    accountant = MemoryAccountant(catalog.policy.budget, cache="off")
    engine = Engine(catalog, backend, accountant=accountant)
    spark = backend._spark
    times: dict[str, dict[str, list[float]]] = {q: {"raw": [], "dpproxy": []} for q in QUERIES}
    for round_ in range(args.runs + 1):
        for name, sql in QUERIES.items():
            order = ("raw", "dpproxy") if round_ % 2 == 0 else ("dpproxy", "raw")
            for side in order:
                t0 = time.perf_counter()
                if side == "raw":
                    spark.sql(sql).collect()
                else:
                    engine.run(sql, analyst="bench", epsilon=Fraction(1))
                elapsed = time.perf_counter() - t0
                if round_ > 0:  # round 0 warms up Spark's code generation and caches
                    times[name][side].append(elapsed)
            print(f"round {round_}: {name} done", flush=True)
    engine.close()
    results = {
        name: {
            "raw_s": statistics.median(t["raw"]),
            "dpproxy_s": statistics.median(t["dpproxy"]),
            "ratio": statistics.median(t["dpproxy"]) / statistics.median(t["raw"]),
        }
        for name, t in times.items()
    }
    meta = {"rows": args.rows, "rows_per_unit": args.rows_per_unit, "threads": args.threads,
            "runs": args.runs}
    (args.out_dir / "SPARK.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=2) + "\n", encoding="utf-8"
    )
    lines = [
        "# dpproxy on Spark local against raw Spark",
        "",
        f"`python benchmarks/bench_spark.py --rows {args.rows} --runs {args.runs}`: "
        f"{args.rows:,} rows of Parquet, {args.rows_per_unit} row(s) per unit, "
        f"`spark+local[{args.threads}]`, medians of {args.runs} rounds after a warm-up.",
        "",
        "| query | raw Spark (s) | dpproxy (s) | ratio |",
        "|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['raw_s']:.2f} | {r['dpproxy_s']:.2f} | {r['ratio']:.2f} |")
    (args.out_dir / "SPARK.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
