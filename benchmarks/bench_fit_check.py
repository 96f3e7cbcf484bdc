"""What checking a schema against its database at open costs (issue 20), on the bundled demo as
a DuckDB file and loaded into PostgreSQL.

Since 2026-11-29 the check is part of the backend's ``attach_catalog`` (``backends/fit.py``,
from the metadata it reads there anyway), so that every ``Engine`` runs it; before, ``open_engine``
ran it apart (``opener.check_fit``: a second metadata read). ``FIT_CHECK.json`` holds a run
after the move (the fit inside attach: about 0.1 ms of CPU on both engines) and, under
``before``, the run before it (``check_fit``: 16.9 ms of CPU on DuckDB, 4.8 on PostgreSQL).

Each round is a fresh Python process, as a CLI call is: it loads the schema, opens the backend
(``opener.open_database``, which imports duckdb or psycopg), then times ``Engine(...)`` (the
backend's ``attach_catalog``, the fit included) and the fit's share of it (``fit.refuse_misfit``,
wrapped in a timer). For scale, the whole
``dpproxy query --ledger memory`` command on the same database is timed too (wall clock).

    DPPROXY_TEST_DSN=postgresql://postgres@127.0.0.1:5432/test \\
        python benchmarks/bench_fit_check.py --rounds 7 [--out benchmarks/FIT_CHECK.json]

The PostgreSQL database ``dpproxy_bench_fit`` is created (``dpproxy demo load``) and dropped.
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

CHILD = r"""
import json, sys, time
from dpproxy.backends import fit
from dpproxy.backends.opener import open_database
from dpproxy.catalog.load import load_catalog
from dpproxy.engine import Engine
database, schema = sys.argv[1], sys.argv[2]
catalog = load_catalog(schema)
backend = open_database(database, tables=tuple(t.name for t in catalog.tables))
seen = []
check = fit.refuse_misfit
def timed(*args):
    w, c = time.perf_counter(), time.process_time()
    check(*args)
    seen.append((time.perf_counter() - w, time.process_time() - c))
fit.refuse_misfit = timed
w, c = time.perf_counter(), time.process_time()
Engine(catalog, backend)
attach = (time.perf_counter() - w, time.process_time() - c)
print(json.dumps({"fit_wall": seen[0][0], "fit_cpu": seen[0][1], "attach_wall": attach[0],
                  "attach_cpu": attach[1]}))
"""


def _median_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 1)


def measure(database: str, schema: str, rounds: int) -> dict[str, float]:
    runs = []
    cli = []
    env = {**os.environ, "DPPROXY_LEDGER": "memory"}
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, database, schema],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(out))
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "dpproxy",
                "query",
                "--ledger",
                "memory",
                "-d",
                database,
                "-s",
                schema,
                "SELECT COUNT(*) FROM adult",
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        cli.append(time.perf_counter() - t)
    return {
        "fit_in_attach_wall_ms": _median_ms([r["fit_wall"] for r in runs]),
        "fit_in_attach_cpu_ms": _median_ms([r["fit_cpu"] for r in runs]),
        "attach_catalog_wall_ms": _median_ms([r["attach_wall"] for r in runs]),
        "query_command_wall_ms": _median_ms(cli),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from dpproxy.demo import demo_database_path, demo_schema_path

    schema = str(demo_schema_path())
    result: dict[str, object] = {"rounds": args.rounds}
    result["duckdb"] = measure(str(demo_database_path(progress=False)), schema, args.rounds)
    dsn = os.environ.get("DPPROXY_TEST_DSN")
    if dsn:
        import psycopg

        base, _, _ = dsn.rpartition("/")
        url = f"{base}/dpproxy_bench_fit"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS dpproxy_bench_fit")
            admin.execute("CREATE DATABASE dpproxy_bench_fit")
        try:
            subprocess.run(
                [sys.executable, "-m", "dpproxy", "demo", "load", "--database", url],
                check=True,
                capture_output=True,
            )
            result["postgres"] = measure(url, schema, args.rounds)
        finally:
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("DROP DATABASE IF EXISTS dpproxy_bench_fit WITH (FORCE)")
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
