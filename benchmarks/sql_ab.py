"""The SQL two checkouts send for the 1,000-row classes, timed side by side on one connection.

For each class of ``bench_embedded.SYNTH_QUERIES`` on the 1,000-row ``people`` table (the
``small`` task of ``bench_issue21.py``; ``--rows N`` for another size), this checkout and
the one in ``--base DIR`` (a ``git worktree``) each print the SQL their engine prepares for
it (``engine.prepare(query).sql``, in a child process with that checkout on
``PYTHONPATH``). The three statements — the raw
query, the base's SQL and this checkout's SQL — then run interleaved, run by run, on one
read-only DuckDB connection, each parsed once beforehand as dpproxy's backend keeps a
repeated statement (``backends/duckdb._parsed``; the raw query is sent as text, as a user
would). p50 over ``--runs`` runs after 20 warm-up runs (3 above 100,000 rows), in ms of
wall time. Only the SQL differs: no planning, noise or accounting is timed, so a change to
the rewrite is measured without the rest of dpproxy's (noisier) time around it. Classes
whose SQL is the same in both checkouts are timed too, as a check of the method (their
ratio should be about 1).

    python benchmarks/sql_ab.py --base /tmp/wt-base [--runs 400] [--rows 1000]
        [--dsn postgresql://…/dpproxy_bench] [--out benchmarks/X.json]

``--dsn``: the statements run on PostgreSQL instead, in a database that holds the rows
(``bench_postgres.py --rows N --keep`` loads it), each checkout preparing its PostgreSQL SQL.

Progress on stderr, a markdown table on stdout.
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

from _common import REPO, machine, progress

_PRINT = """
import json, sys
sys.path.insert(0, {bench!r})
from bench_embedded import SYNTH_QUERIES, dataset
import dpproxy
db, schema = dataset({rows})
dp = dpproxy.connect({dsn!r} or str(db), schema=str(schema), budget_epsilon=10**9,
                     budget_delta="0.5", cache="off")
out = {{c: dp.engine.prepare(q.replace("FROM events", "FROM people")).sql
        for c, q in SYNTH_QUERIES.items()}}
dp.close()
print(json.dumps({{"dpproxy": dpproxy.__file__, "sql": out}}))
"""


def prepared_sql(checkout: Path, rows: int = 1000, dsn: str = "") -> dict[str, str]:
    """{class: the SQL ``checkout``'s engine prepares for it}, from a child process (for
    PostgreSQL at ``dsn`` when given)."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    code = _PRINT.format(bench=str(REPO / "benchmarks"), rows=rows, dsn=dsn)
    # From /tmp: ``python -c`` puts the working directory first on sys.path.
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd="/tmp"
    )
    if done.returncode != 0:
        raise SystemExit(f"the SQL of {checkout} could not be prepared:\n{done.stderr[-2000:]}")
    payload = json.loads(done.stdout.strip().splitlines()[-1])
    where = Path(payload["dpproxy"]).resolve()
    if not where.is_relative_to(checkout.resolve()):
        raise SystemExit(f"the child imported {where}, not the dpproxy of {checkout}")
    sql: dict[str, str] = payload["sql"]
    return sql


def commit_of(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip()


def _postgres(dsn: str) -> Any:
    """A connection to the benchmark database at ``dsn``, which must hold ``people``."""
    import psycopg

    try:
        con = psycopg.connect(dsn, autocommit=True)
        con.execute("SELECT 1 FROM people LIMIT 1")
    except psycopg.Error as e:
        raise SystemExit(
            f"--dsn {dsn}: no table people there ({e}); load it first with "
            "python benchmarks/bench_postgres.py --rows N --keep"
        ) from None
    return con


def measure(
    base: dict[str, str], now: dict[str, str], runs: int, rows: int = 1000, dsn: str = ""
) -> dict[str, Any]:
    import duckdb
    from bench_embedded import SYNTH_QUERIES, dataset

    db, _ = dataset(rows)
    con = _postgres(dsn) if dsn else duckdb.connect(str(db), read_only=True)
    out: dict[str, Any] = {}
    try:
        for name, query in SYNTH_QUERIES.items():
            raw = query.replace("FROM events", "FROM people")
            statements: dict[str, Any] = {"raw": raw, "base": base[name], "now": now[name]}
            if not dsn:  # parsed once, as dpproxy's DuckDB backend keeps a repeated statement
                statements["base"] = con.extract_statements(base[name])[0]
                statements["now"] = con.extract_statements(now[name])[0]
            times: dict[str, list[float]] = {k: [] for k in statements}
            warmup = 20 if rows <= 100_000 else 3
            for i in range(runs + warmup):
                for k, statement in statements.items():
                    t = time.perf_counter()
                    con.execute(statement).fetchall()
                    if i >= warmup:
                        times[k].append(time.perf_counter() - t)
            r = {k: statistics.median(v) * 1000 for k, v in times.items()}
            r["same_sql"] = base[name] == now[name]
            out[name] = r
            progress(
                f"sql_ab: {name} base {r['base']:.3f} now {r['now']:.3f} raw {r['raw']:.3f} ms"
            )
    finally:
        con.close()
    return out


def table(rows: dict[str, Any]) -> str:
    lines = [
        "| class | raw ms | base SQL ms | now SQL ms | now / base | base / raw | now / raw |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        same = " (same SQL)" if r["same_sql"] else ""
        lines.append(
            f"| {name}{same} | {r['raw']:.3f} | {r['base']:.3f} | {r['now']:.3f} | "
            f"{r['now'] / r['base']:.2f} | {r['base'] / r['raw']:.2f}× | "
            f"{r['now'] / r['raw']:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="a git worktree of the baseline")
    ap.add_argument("--runs", type=int, default=400, help="timed runs per statement (p50)")
    ap.add_argument("--rows", type=int, default=1000, help="rows of the synthetic table")
    ap.add_argument(
        "--dsn",
        default="",
        help="run on PostgreSQL: a database holding the rows (bench_postgres.py --keep)",
    )
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args()
    if not (args.base / "dpproxy").is_dir():
        ap.error(f"--base {args.base} is not a dpproxy checkout (no dpproxy/ in it)")
    started = time.perf_counter()
    if args.rows < 1:
        ap.error("--rows must be at least 1")
    if args.dsn:
        _postgres(args.dsn).close()  # the rows are there before any checkout plans for them
    base_sql = prepared_sql(args.base, args.rows, args.dsn)
    now_sql = prepared_sql(REPO, args.rows, args.dsn)
    rows = measure(base_sql, now_sql, args.runs, args.rows, args.dsn)
    data = {
        "meta": {
            "machine": machine(),
            "runs": args.runs,
            "rows": args.rows,
            "engine": "postgres" if args.dsn else "duckdb",
            "base_commit": commit_of(args.base),
            "commit": commit_of(REPO),
            "minutes": (time.perf_counter() - started) / 60,
        },
        "classes": rows,
        "sql": {"base": base_sql, "now": now_sql},
    }
    if args.out:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(table(rows))


if __name__ == "__main__":
    main()
