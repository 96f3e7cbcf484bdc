"""Contribution bounding on PostgreSQL: one ranking of every row against the split into units
under their bound (passed whole) and the others (ranked), timed side by side.

dpproxy's PostgreSQL SQL ranks every row in one window (``rewrite/bound.bounding_ctes``);
DuckDB and Spark first list the units with at most their bound of rows (``__light``) and rank
only the others. This times both forms of the same plans, with the same secret (so they keep
the same rows; checked), interleaved run by run on one connection, over the rows that
``bench_postgres.py --keep`` loaded: ``events`` (~10 rows a unit, bound 5: most units above
it) and ``people_nopk``, ``people``'s rows in a table without its key (one row a unit: every
unit under it), created here when missing. p50 in ms of wall time.

    python benchmarks/bounding_ab.py [--dsn postgresql://…/dpproxy_bench] [--rows 1000000]
        [--runs 5] [--out benchmarks/BOUNDING_AB_PG.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, machine, progress

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/dpproxy_bench"
QUERIES = {
    "count_by_group": "SELECT grp, COUNT(*) FROM {t} GROUP BY grp",
    "sum": "SELECT SUM(amount) FROM {t}",
    "avg_grouped": "SELECT grp, AVG(amount) FROM {t} GROUP BY grp",
}
TABLES = {"events": "~10 rows a unit", "people_nopk": "one row a unit"}
SECRET = 0x5EC2E7


def _schema(rows: int) -> Path:
    """The benchmark's schema with ``people_nopk`` added, bounded like ``events``."""
    from bench_embedded import dataset

    _, schema = dataset(rows)
    text = schema.read_text(encoding="utf-8")
    start = text.index("  events:")
    end = text.index("  people:")
    extra = text[start:end].replace("  events:", "  people_nopk:", 1)
    out = Path(tempfile.mkdtemp()) / "bounding_ab.yaml"
    out.write_text(text + ("" if text.endswith("\n") else "\n") + extra, encoding="utf-8")
    return out


def _prepare(con: Any) -> None:
    exists = con.execute("SELECT to_regclass('people_nopk')").fetchone()[0]
    if exists is None:
        progress("creating people_nopk (people's rows, no key) ...")
        con.execute("CREATE TABLE people_nopk AS SELECT * FROM people")
        con.execute("VACUUM ANALYZE people_nopk")


def _sql(dsn: str, schema: Path, query: str, split: bool) -> str:
    """The PostgreSQL SQL of ``query``, bounding split or not, at the fixed secret."""
    import dpproxy
    from dpproxy.rewrite import bound, pipeline

    original = pipeline.bounding_ctes
    pipeline.bounding_ctes = functools.partial(bound.bounding_ctes, split=split)  # type: ignore[assignment]
    try:
        dp = dpproxy.connect(
            dsn, schema=str(schema), budget_epsilon=10**9, budget_delta="0.5", cache="off"
        )
        try:
            return str(dp.engine.prepare(query, secret=SECRET).sql)
        finally:
            dp.close()
    finally:
        pipeline.bounding_ctes = original  # type: ignore[assignment]


def main() -> None:
    import psycopg

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=DEFAULT_DSN, help="the database bench_postgres.py loaded")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows it loaded (its --rows)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per statement (p50)")
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args()
    started = time.perf_counter()
    try:
        con = psycopg.connect(args.dsn, autocommit=True)
        con.execute("SELECT 1 FROM events, people LIMIT 1")
    except psycopg.Error as e:
        raise SystemExit(
            f"--dsn {args.dsn}: no events and people there ({e}); load them first with "
            f"python benchmarks/bench_postgres.py --rows {args.rows} --keep"
        ) from None
    _prepare(con)
    schema = _schema(args.rows)
    results: dict[str, Any] = {}
    for table, shape in TABLES.items():
        for name, template in QUERIES.items():
            query = template.format(t=table)
            forms = {
                "ranked": _sql(args.dsn, schema, query, split=False),
                "split": _sql(args.dsn, schema, query, split=True),
            }
            assert "__light" in forms["split"] and "__light" not in forms["ranked"]
            rows = {k: sorted(con.execute(v).fetchall()) for k, v in forms.items()}
            times: dict[str, list[float]] = {k: [] for k in forms}
            for _ in range(args.runs):
                for k, statement in forms.items():
                    t = time.perf_counter()
                    con.execute(statement).fetchall()
                    times[k].append(time.perf_counter() - t)
            r = {k: statistics.median(v) * 1000 for k, v in times.items()}
            r["same_rows"] = rows["ranked"] == rows["split"]
            results[f"{table}:{name}"] = {**r, "table": table, "shape": shape}
            progress(
                f"bounding_ab: {table} {name}: ranked {r['ranked']:.0f} ms, "
                f"split {r['split']:.0f} ms, same rows {r['same_rows']}"
            )
    con.close()
    data = {
        "meta": {
            "machine": machine(),
            "runs": args.runs,
            "rows": args.rows,
            "minutes": (time.perf_counter() - started) / 60,
            "repo": str(REPO),
        },
        "classes": results,
    }
    if args.out:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print("| table | class | one ranking, ms | split, ms | split / ranking | same rows |")
    print("|---|---|---:|---:|---:|---|")
    for key, r in results.items():
        print(
            f"| {r['table']} ({r['shape']}) | {key.split(':')[1]} | {r['ranked']:.0f} | "
            f"{r['split']:.0f} | {r['split'] / r['ranked']:.2f}× | {r['same_rows']} |"
        )


if __name__ == "__main__":
    main()
