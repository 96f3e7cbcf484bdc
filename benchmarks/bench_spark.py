"""dpproxy on Spark local against the same aggregate run raw on Spark, and against Tumult.

One table ``people`` of ``--rows`` rows (default 10⁷) is written to Parquet by DuckDB:
``person_id`` (one row per person), ``age`` in 17..90, ``sex`` and ``income``. For each query,
in one run, round by round and in alternating order, the wall time of

* **raw**: the analyst's SQL run directly by Spark (``spark.sql(sql).collect()``);
* **unique**: ``Engine.run`` of the same SQL (parse, plan, rewrite, the rewritten Spark SQL with
  its clamping, noise, ledger in memory, answer cache off) with the schema's ``unit_unique:
  true``, checked once when the backend opened (``unique_check_s``), so no contribution bounding;
* **bounded**: the same without ``unit_unique``: every unit's rows bounded (the only path before
  ``unit_unique``; first ``--bounded-runs`` rounds only, it is slow);
* with ``--tumult``: **tumult rows** (``AddOneRow()``, no truncation) and **tumult ids**
  (``AddRowsWithID`` + ``MaxRowsPerID(1)``, first ``--bounded-runs`` rounds) in Tumult
  Analytics' own venv and Spark (``spark_tumult_worker.py``, a second process that idles while
  the others run), over the same Parquet files.

dpproxy's sides share one Spark local session (``spark+local[N]``). ε = 1 everywhere (Laplace);
accuracy is the median absolute error against raw Spark's exact answer over the measured rounds.
Medians of ``--runs`` rounds after one warm-up round (raw, unique, tumult rows). Each run's
figures go into ``benchmarks/SPARK.json`` under its row count (other row counts are kept), and
``benchmarks/SPARK.md`` is written from all of them.

    python benchmarks/bench_spark.py --rows 10000000 --runs 2
    python benchmarks/bench_spark.py --rows 1000000 --runs 2 --tumult
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

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
    max_rows_per_unit: 1
    unit_unique: {unique}
    columns:
      person_id: {{type: integer}}
      age: {{type: integer, lower: 17, upper: 90}}
      sex: {{type: text, domain: [Female, Male]}}
      income: {{type: float, lower: 0, upper: 100000}}
"""
SIDES = ("raw", "unique", "bounded", "tumult rows", "tumult ids")
WARMED = ("raw", "unique", "tumult rows")
SLOW = ("bounded", "tumult ids")


def write_data(directory: Path, rows: int) -> Path:
    """``directory/people.parquet`` of ``rows`` rows; one already there (a finished earlier
    write, marked by ``rows.txt``) is kept."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "people.parquet"
    marker = directory / "rows.txt"
    if target.exists() and marker.exists() and marker.read_text().strip() == str(rows):
        return directory
    duckdb.sql(
        "COPY (SELECT i::INTEGER AS person_id, (17 + (i * 7919) % 74)::INTEGER AS age, "
        "CASE WHEN i % 2 = 0 THEN 'Male' ELSE 'Female' END AS sex, "
        "((i * 104729) % 100000)::DOUBLE AS income "
        f"FROM range({rows}) t(i)) TO '{target}' (FORMAT parquet)"
    )
    marker.write_text(f"{rows}\n")
    return directory


def as_map(rows: Any) -> dict[str, float]:
    """{key: value} of a one- or two-column answer (key '' without GROUP BY)."""
    out = {}
    for r in rows:
        key, value = (str(r[0]), r[1]) if len(r) == 2 else ("", r[0])
        out[key] = float(value)
    return out


def abs_error(got: dict[str, float], exact: dict[str, float]) -> float:
    return max(abs(got.get(k, 0.0) - v) for k, v in exact.items())


class Tumult:
    """The worker process (spark_tumult_worker.py) in Tumult's venv."""

    def __init__(self, python: Path, data: Path, threads: str) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(HERE / "spark_tumult_worker.py"), str(data), threads],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Tumult worker stopped")
        return json.loads(line)

    def run(self, variant: str, query: str) -> tuple[float, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{variant} {query}\n")
        self.proc.stdin.flush()
        out = self._read()
        return out["seconds"], out["rows"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10**7)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--bounded-runs", type=int, default=1)
    ap.add_argument("--tumult", action="store_true", help="also run Tumult Analytics")
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument(
        "--data-dir",
        type=Path,
        help="where people.parquet is written and kept between runs (e.g. "
        "~/.cache/dpproxy-bench/spark-1e8; default: a new temporary directory)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)  # a failed query's cause (the operator's log)

    from dpproxy.accounting.memory import MemoryAccountant
    from dpproxy.backends.spark import SparkBackend
    from dpproxy.catalog.load import load_catalog
    from dpproxy.engine import Engine

    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    data = write_data(args.data_dir.expanduser() if args.data_dir else tmp / "data", args.rows)
    tumult = None
    if args.tumult:
        sys.path.insert(0, str(HERE / "compare"))
        from envs import venv_python

        tumult = Tumult(venv_python("tumult"), data, args.threads)
    engines, opened = {}, {}
    # The bounded engine first: Spark's start-up is in its opening time, not the check's.
    for side, unique in (("bounded", "false"), ("unique", "true")):
        schema = tmp / f"people-{side}.yaml"
        schema.write_text(SCHEMA.format(unique=unique), encoding="utf-8")
        catalog = load_catalog(schema)
        t0 = time.perf_counter()
        backend = SparkBackend(f"spark+local[{args.threads}]?parquet_dir={data}")
        # cache="off": every run reaches Spark (an identical query is otherwise answered from
        # the ledger's cache, at no cost and without touching the data).
        accountant = MemoryAccountant(catalog.policy.budget, cache="off")
        engines[side] = Engine(catalog, backend, accountant=accountant)
        opened[side] = time.perf_counter() - t0
    assert engines["unique"].catalog.tables[0].unit_is_unique
    assert not engines["bounded"].catalog.tables[0].unit_is_unique
    spark = engines["unique"].backend._spark  # type: ignore[attr-defined]
    exact = {name: as_map(spark.sql(sql).collect()) for name, sql in QUERIES.items()}
    times: dict[str, dict[str, list[float]]] = {q: {s: [] for s in SIDES} for q in QUERIES}
    errors: dict[str, dict[str, list[float]]] = {q: {s: [] for s in SIDES} for q in QUERIES}
    loads = []
    for round_ in range(args.runs + 1):
        sides = [s for s in SIDES if tumult is not None or not s.startswith("tumult")]
        sides = [s for s in sides if s in WARMED] if round_ == 0 else sides
        sides = [s for s in sides if s not in SLOW or round_ <= args.bounded_runs]
        for name, sql in QUERIES.items():
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                t0 = time.perf_counter()
                worker_s = None
                if side == "raw":
                    rows: Any = spark.sql(sql).collect()
                elif side.startswith("tumult"):
                    assert tumult is not None
                    worker_s, rows = tumult.run(side.split()[1], name)
                else:
                    answer = engines[side].run(sql, analyst="bench", epsilon=Fraction(1))
                    rows = answer.released.rows
                elapsed = time.perf_counter() - t0
                if worker_s is not None:  # the worker's own time of evaluate + toPandas
                    elapsed = worker_s
                if round_ > 0:  # round 0 warms up Spark's code generation and caches
                    times[name][side].append(elapsed)
                    if side != "raw":
                        errors[name][side].append(abs_error(as_map(rows), exact[name]))
            loads.append(os.getloadavg()[0])
            print(f"round {round_}: {name} done (load {loads[-1]:.1f})", flush=True)
    info = tumult.info if tumult is not None else {}
    if tumult is not None:
        tumult.close()
    for engine in engines.values():
        engine.close()
    results = {}
    for name in QUERIES:
        r: dict[str, Any] = {}
        for side in SIDES:
            if times[name][side]:
                key = side.replace(" ", "_")
                r[f"{key}_s"] = statistics.median(times[name][side])
                if errors[name][side]:
                    r[f"{key}_abs_error"] = statistics.median(errors[name][side])
        results[name] = r
    from importlib.metadata import version

    meta = {
        "rows": args.rows,
        "threads": args.threads,
        "runs": args.runs,
        "bounded_runs": args.bounded_runs,
        "open_unique_s": opened["unique"],
        "open_bounded_s": opened["bounded"],
        "load_average": [min(loads), max(loads)],
        "pyspark": version("pyspark"),
        "tumult_pyspark": info.get("pyspark"),
        "tmlt_analytics": info.get("tmlt"),
    }
    out = args.out_dir / "SPARK.json"
    stored = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    runs = stored.get("runs", {})
    runs[str(args.rows)] = {"meta": meta, "results": results}
    out.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    report = render(runs)
    (args.out_dir / "SPARK.md").write_text(report, encoding="utf-8")
    print(report)


def _ratio(r: dict[str, Any], a: str, b: str) -> str:
    return f"{r[a] / r[b]:.2f}" if a in r and b in r else "-"


def _cell(r: dict[str, Any], key: str, fmt: str = "{:.2f}") -> str:
    return fmt.format(r[key]) if key in r else "-"


def render(runs: dict[str, Any]) -> str:
    lines = ["# dpproxy on Spark local against raw Spark and Tumult Analytics", ""]
    for rows in sorted(runs, key=int, reverse=True):
        meta, results = runs[rows]["meta"], runs[rows]["results"]
        lo, hi = meta["load_average"]
        tumult = "--tumult" if meta.get("tmlt_analytics") else ""
        lines += [
            f"## {int(rows):,} rows",
            "",
            f"`python benchmarks/bench_spark.py --rows {rows} --runs {meta['runs']} "
            f"--bounded-runs {meta['bounded_runs']} {tumult}`".replace(" `", "`"),
            f"(`spark+local[{meta['threads']}]`, PySpark {meta['pyspark']}"
            + (
                f"; Tumult Analytics {meta['tmlt_analytics']} on its own PySpark "
                f"{meta['tumult_pyspark']}"
                if tumult
                else ""
            )
            + f"). Seconds, medians of {meta['runs']} rounds after a warm-up (bounded and "
            f"tumult ids: {meta['bounded_runs']} round(s)); 1-minute load average "
            f"{lo:.1f}-{hi:.1f} on 2 cores. Opening the backend with `unit_unique` (its check) "
            f"took {meta['open_unique_s']:.1f} s, without it (first, starting Spark) "
            f"{meta['open_bounded_s']:.1f} s.",
            "",
            "| query | raw | unique | unique/raw | bounded | bounded/raw | tumult rows "
            "| unique/tumult rows | tumult ids | bounded/tumult ids |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, r in results.items():
            ratio = functools.partial(_ratio, r)
            lines.append(
                f"| {name} | {_cell(r, 'raw_s')} | {_cell(r, 'unique_s')} "
                f"| {ratio('unique_s', 'raw_s')} | {_cell(r, 'bounded_s')} "
                f"| {ratio('bounded_s', 'raw_s')} | {_cell(r, 'tumult_rows_s')} "
                f"| {ratio('unique_s', 'tumult_rows_s')} | {_cell(r, 'tumult_ids_s')} "
                f"| {ratio('bounded_s', 'tumult_ids_s')} |"
            )
        lines += [
            "",
            "Median absolute error at ε = 1 (largest over the groups of one answer):",
            "",
            "| query | unique | bounded | tumult rows | tumult ids |",
            "|---|---|---|---|---|",
        ]
        for name, r in results.items():
            cells = [
                _cell(r, f"{s}_abs_error", "{:.3g}")
                for s in ("unique", "bounded", "tumult_rows", "tumult_ids")
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
