"""CPU of one ``dpproxy query`` over a CSV file read in place (``--database people.csv``) and
over its ``dpproxy data copy`` (without and with ``--primary-key id``): README "Your own data".

A 1,000,000-row CSV of id,age,sex,income (about 20 MB) is written to a temporary directory and
copied twice; each round runs the same GROUP BY query on the three, interleaved, as separate
``dpproxy query --ledger memory`` processes, and takes each child's CPU time (user + system,
DuckDB's threads included) from ``getrusage``. Prints the medians and the load average.

    python benchmarks/bench_data_copy.py --rounds 7
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
from pathlib import Path

SCHEMA = """version: 1
dataset: people
privacy:
  epsilon: 1.0
  delta: 1.0e-6
  budget: {epsilon: 1000, delta: 1.0e-5}
tables:
  people:
    private: true
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      id: {type: integer}
      age: {type: integer, lower: 0, upper: 120}
      sex: {type: text, domain: [F, M]}
      income: {type: float, lower: 0, upper: 200000}
"""
QUERY = "SELECT sex, COUNT(*) AS n, AVG(age) AS a, SUM(income) AS s FROM people GROUP BY sex"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        duckdb.connect().execute(
            "COPY (SELECT range + 1 AS id, (18 + range * 7919 % 73)::BIGINT AS age, "
            "CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex, "
            "round((range * 104729 % 110000) + 10000.5, 2) AS income "
            f"FROM range({args.rows})) TO '{d / 'people.csv'}' (HEADER)"
        )
        (d / "people.yaml").write_text(SCHEMA)
        for extra, name in (([], "people.duckdb"), (["--primary-key", "id"], "people_pk.duckdb")):
            subprocess.run(
                ["dpproxy", "data", "copy", "people.csv", "--to", name, *extra],
                cwd=d,
                check=True,
                capture_output=True,
            )
        size = (d / "people.csv").stat().st_size
        dbs = ["people.csv", "people.duckdb", "people_pk.duckdb"]
        cpu: dict[str, list[float]] = {db: [] for db in dbs}
        for _ in range(args.rounds):
            for db in dbs:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(
                    [
                        "dpproxy",
                        "query",
                        "--ledger",
                        "memory",
                        "-d",
                        db,
                        "-s",
                        "people.yaml",
                        QUERY,
                    ],
                    cwd=d,
                    check=True,
                    capture_output=True,
                )
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[db].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(f"{args.rows:,} rows, {size / 1e6:.1f} MB CSV; load average {os.getloadavg()}")
    for db in dbs:
        print(f"{db:18} median CPU {statistics.median(cpu[db]):.3f} s  {sorted(cpu[db])}")


if __name__ == "__main__":
    main()
