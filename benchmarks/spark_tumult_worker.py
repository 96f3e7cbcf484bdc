"""Tumult Analytics on Spark local over bench_spark.py's Parquet: a worker driven line by line.

Run with the Tumult venv of the comparison harness (``benchmarks/compare/envs.py``: its own
PySpark, which differs from dpproxy's), by ``bench_spark.py --tumult``, never by hand:

    <tumult venv>/bin/python benchmarks/spark_tumult_worker.py DATA_DIR THREADS

It starts Spark local[THREADS], reads ``DATA_DIR/people.parquet`` (not cached: each query reads
the files, as raw Spark and dpproxy do) and builds two Sessions with a large total budget:

* ``rows``: ``AddOneRow()``: one row is one person, taken on trust (no truncation): what
  dpproxy does after checking ``unit_unique``;
* ``ids``: ``AddRowsWithID("person_id")`` with ``enforce(MaxRowsPerID(1))`` in each query:
  Tumult truncates each person to one row: what dpproxy does without ``unit_unique``.

Each stdin line ``VARIANT QUERY`` runs one of ``QUERIES`` at ε = 1 (``PureDPBudget(1)``, Laplace
noise as dpproxy's schema asks) and prints one JSON line: ``{"seconds": wall time of evaluate +
toPandas, "rows": [[key, value], ...]}``. The first line printed is ``{"ready": setup seconds,
"pyspark": version, "tmlt": version}``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from importlib.metadata import version
from typing import Any

KEYS = ["Female", "Male"]


def main() -> None:
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit("usage: <tumult venv>/bin/python spark_tumult_worker.py DATA_DIR THREADS "
                 "(started by bench_spark.py --tumult, not by hand)")
    data, threads = sys.argv[1], sys.argv[2]
    started = time.perf_counter()
    # Tumult Core runs Python functions on the workers: they must import tmlt too.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{threads}]")
        .appName("bench-spark-tumult")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # Tumult's temporary tables: under /tmp, not a spark-warehouse/ in the working directory
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="bench-spark-tumult-"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    import tmlt.analytics as t

    frame = spark.read.parquet(f"{data}/people.parquet")
    sessions = {
        name: t.Session.from_dataframe(
            privacy_budget=t.PureDPBudget(1e9),
            source_id="people",
            dataframe=frame,
            protected_change=change,
        )
        for name, change in (
            ("rows", t.AddOneRow()),
            ("ids", t.AddRowsWithID("person_id")),
        )
    }
    keys = t.KeySet.from_dict({"sex": KEYS})

    def query(variant: str, name: str) -> Any:
        q = t.QueryBuilder("people")
        if variant == "ids":
            q = q.enforce(t.MaxRowsPerID(1))
        if name == "count by sex":
            return q.groupby(keys).count()
        if name == "avg age by sex":
            return q.groupby(keys).average("age", 17, 90)
        if name == "sum income":
            return q.sum("income", 0, 100000)
        raise ValueError(name)

    ready = {
        "ready": time.perf_counter() - started,
        "pyspark": version("pyspark"),
        "tmlt": version("tmlt.analytics"),
    }
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        variant, _, name = line.strip().partition(" ")
        t0 = time.perf_counter()
        answer = sessions[variant].evaluate(query(variant, name), t.PureDPBudget(1)).toPandas()
        seconds = time.perf_counter() - t0
        rows = [[str(v) if isinstance(v, str) else float(v) for v in r] for r in answer.values]
        print(json.dumps({"seconds": seconds, "rows": rows}), flush=True)


if __name__ == "__main__":
    main()
