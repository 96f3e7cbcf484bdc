"""What exact fixed-point sums cost: dpproxy's SUM on a grid against the DOUBLE sum it replaced.

Every noisy SUM primitive is summed as BIGINTs on a grid 2^-k (``dpproxy/rewrite/fixed.py``),
exact and order-independent; before, the database added clamped DOUBLEs. This script times the
two SQL shapes side by side, interleaved round by round, on the synthetic ``people`` table of
``bench_embedded.py`` (same generator and seed; ``uid`` is its PRIMARY KEY, so no contribution
bounding is needed and the summation is most of the statement):

* *double*: the rewrite with the summand of the pre-grid rewrite (re-created here,
  :func:`double_summand`: the measure column, centred and squared as planned, clamped in DOUBLE
  unless it provably stays in its interval), the same statement otherwise;
* *grid*: dpproxy's rewrite as it is.

Both are the statements dpproxy itself would send (``pipeline.rewrite``, fixed secret), on
DuckDB at N rows (default 1,000,000 and 10,000,000) and on PostgreSQL at 1,000,000 rows (copied
into a database of its own, default ``dpproxy_bench_sums``, with ``bench_postgres.load``). Each
pair's answers are compared: the grid's total scaled back exactly, against the DOUBLE sum.

    python benchmarks/bench_sums.py [--rows 1000000,10000000] [--pg-rows 1000000] [--runs 9]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--database dpproxy_bench_sums]
        [--keep] [--no-postgres]

Writes ``benchmarks/out/sums.json`` and the generated ``benchmarks/SUMS.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import duckdb  # noqa: E402
import psycopg  # noqa: E402
from _common import (  # noqa: E402
    OUT,
    fmt_ms,
    loadavg,
    machine,
    machine_line,
    md_table,
    progress,
    summary,
)
from bench_embedded import SECRET, dataset, measure  # noqa: E402
from bench_postgres import database_url, load  # noqa: E402
from sqlglot import exp  # noqa: E402

import dpproxy.rewrite.aggregate as aggregate  # noqa: E402
import dpproxy.rewrite.pipeline as pipeline  # noqa: E402
from dpproxy.backends.duckdb import DuckDBBackend  # noqa: E402
from dpproxy.catalog.load import load_catalog  # noqa: E402
from dpproxy.catalog.model import Table  # noqa: E402
from dpproxy.engine import Engine  # noqa: E402
from dpproxy.planning.plan import Primitive, QueryPlan  # noqa: E402
from dpproxy.rewrite.clamps import clamp  # noqa: E402
from dpproxy.rewrite.fixed import computed_range, sum_grids, unscale  # noqa: E402
from dpproxy.rewrite.nodes import number  # noqa: E402

QUERIES: dict[str, str] = {
    "sum": "SELECT SUM(amount) FROM people",
    "sum_expression": "SELECT SUM(amount / 100 + age) FROM people",
    "sum_integer": "SELECT SUM(age) FROM people",
    "avg": "SELECT AVG(amount) FROM people",
    "avg_grouped": "SELECT grp, AVG(amount) FROM people GROUP BY grp",
    "var": "SELECT VAR_POP(amount) FROM people",
}
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def double_summand(p: Primitive, column: str, table: Table, **_: Any) -> exp.Expression:
    """The pre-grid rewrite's summand: a DOUBLE, clamped to the planned interval unless the
    measure is a clamped column or its centred value provably stays inside it (the grid's
    keyword arguments, dialect and centring, are not read: this rewrite had neither)."""
    assert p.values is not None and p.values.lo is not None and p.values.hi is not None

    def value() -> exp.Expression:
        base: exp.Expression = exp.column(column)
        if p.center:
            base = exp.Sub(this=base, expression=number(p.center))
        if p.squared:
            return exp.Mul(this=exp.Paren(this=base), expression=exp.Paren(this=base.copy()))
        return base

    if isinstance(p.measure, exp.Column) and not p.center and not p.squared:
        return value()
    span = computed_range(p, table)
    if span is not None and p.values.lo <= span[0] and span[1] <= p.values.hi:
        return value()
    return clamp(value, p.values.lo, p.values.hi)


@contextmanager
def double_sums() -> Iterator[None]:
    """The rewrite with the pre-grid summand, where ``rewrite/aggregate.py`` looks it up; the
    pre-grid rewrite summed whole numbers as DOUBLEs too (not ``rewrite/wholesum.py``) and did
    not write measures centred in ``__rows`` (``rewrite/fixed.centred_measures``)."""
    saved = aggregate.summand, pipeline.whole_measures, pipeline.centred_measures
    aggregate.summand = double_summand  # type: ignore[assignment]
    pipeline.whole_measures = lambda *_: set()  # type: ignore[assignment]
    pipeline.centred_measures = lambda *_: {}  # type: ignore[assignment]
    try:
        yield
    finally:
        aggregate.summand, pipeline.whole_measures, pipeline.centred_measures = saved


def plan_of(engine: Engine, sql: str) -> QueryPlan:
    """The plan dpproxy makes on DuckDB (the backend proves ``uid`` unique: no bounding)."""
    plan = engine.prepare(sql, secret=SECRET).plan
    assert not plan.needs_bounding
    return plan


def statements(plan: QueryPlan, dialect: str) -> dict[str, str]:
    grid = pipeline.rewrite(plan, SECRET, dialect)
    with double_sums():
        double = pipeline.rewrite(plan, SECRET, dialect)
    assert grid != double
    return {"double": double, "grid": grid}


def _values(plan: QueryPlan, cols: list[str], rows: list[tuple[Any, ...]], grid: bool) -> list:
    grids = sum_grids(plan) if grid else {}
    out = []
    for row in sorted(rows, key=lambda r: tuple(str(v) for v in r)):
        out.append(
            tuple(
                unscale(v, grids[c]) if c in grids else (Fraction(v) if v is not None else None)
                for c, v in zip(cols, row, strict=True)
                if not c.startswith("__key_")
            )
        )
    return out


def compare(plan: QueryPlan, run: Callable[[str], tuple[list[str], list]], sql: dict) -> float:
    """The largest relative difference between the DOUBLE sums and the grid's exact sums."""
    d_cols, d_rows = run(sql["double"])
    g_cols, g_rows = run(sql["grid"])
    worst = 0.0
    for a, b in zip(_values(plan, d_cols, d_rows, False), _values(plan, g_cols, g_rows, True),
                    strict=True):
        for x, y in zip(a, b, strict=True):
            if x != y:
                worst = max(worst, float(abs(x - y) / max(abs(x), abs(y))))
    return worst


def bench_engine(
    label: str, planner: Engine, run: Callable[[str], tuple[list[str], list]], dialect: str,
    runs: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, query in QUERIES.items():
        plan = plan_of(planner, query)
        sql = statements(plan, dialect)
        worst = compare(plan, run, sql)
        samples = measure({k: (lambda s=s: run(s)) for k, s in sql.items()}, runs, 1)
        stats = {k: summary(v) for k, v in samples.items()}
        ratio = stats["grid"]["p50"] / stats["double"]["p50"]
        out[name] = {"query": query, "sql": sql, "seconds": stats, "ratio": ratio,
                     "max_relative_difference": worst}
        progress(f"  {label} {name}: double {fmt_ms(stats['double']['p50'])} ms, grid "
                 f"{fmt_ms(stats['grid']['p50'])} ms ({ratio:.2f}×), answers differ by "
                 f"{worst:.1e} relative")
    return out


def duck_runner(db: Path) -> tuple[duckdb.DuckDBPyConnection, Callable]:
    con = duckdb.connect(str(db), read_only=True)

    def run(sql: str) -> tuple[list[str], list]:
        cur = con.execute(sql)
        rows = cur.fetchall()
        return [d[0] for d in cur.description or ()], rows

    return con, run


def pg_runner(url: str) -> tuple[psycopg.Connection, Callable]:
    con = psycopg.connect(url, autocommit=True)

    def run(sql: str) -> tuple[list[str], list]:
        cur = con.execute(sql)
        rows = cur.fetchall()
        return [d.name for d in cur.description or ()], rows

    return con, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000000,10000000", help="DuckDB table sizes")
    ap.add_argument("--pg-rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=9, help="timed rounds per variant")
    ap.add_argument("--dsn", default=DEFAULT_DSN, help="admin DSN of the PostgreSQL server")
    ap.add_argument("--database", default="dpproxy_bench_sums")
    ap.add_argument("--keep", action="store_true", help="reuse a loaded PostgreSQL database")
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args(argv)
    meta = machine()
    results: dict[str, Any] = {}
    for n in (int(r) for r in args.rows.split(",")):
        db, schema = dataset(n)
        progress(f"DuckDB, {n:,} rows")
        planner = Engine(load_catalog(schema), DuckDBBackend(db))
        con, run = duck_runner(db)
        try:
            results[f"duckdb_{n}"] = bench_engine(f"DuckDB {n:,}", planner, run, "duckdb",
                                                  args.runs)
        finally:
            con.close()
            planner.close()
    if not args.no_postgres:
        n = args.pg_rows
        db, schema = dataset(n)
        info = load(args.dsn, args.database, db, n, args.keep)
        progress(f"PostgreSQL, {n:,} rows")
        planner = Engine(load_catalog(schema), DuckDBBackend(db))
        pg, run = pg_runner(database_url(args.dsn, args.database))
        try:
            version = pg.execute("SHOW server_version").fetchone()
            meta["postgres"] = version[0] if version else "?"
            meta["postgres_load"] = info
            results[f"postgres_{n}"] = bench_engine(f"PostgreSQL {n:,}", planner, run,
                                                    "postgres", args.runs)
        finally:
            pg.close()
            planner.close()
    meta["loadavg_end"] = loadavg()
    data = {"machine": meta, "runs": args.runs, "results": results}
    OUT.mkdir(exist_ok=True)
    (OUT / "sums.json").write_text(json.dumps(data, indent=1, default=str) + "\n",
                                   encoding="utf-8")
    (HERE / "SUMS.md").write_text(report(data), encoding="utf-8")
    progress(f"wrote {OUT / 'sums.json'} and {HERE / 'SUMS.md'}")
    return 0


def _engine_name(key: str) -> str:
    engine, n = key.split("_")
    return f"{'DuckDB' if engine == 'duckdb' else 'PostgreSQL'}, {int(n):,} rows"


def report(data: dict[str, Any]) -> str:
    m, res = data["machine"], data["results"]
    keys = list(res)
    header = ["query", *(f"{_engine_name(k)}: double → grid (ms)" for k in keys)]
    rows = []
    for name, query in QUERIES.items():
        cells = [f"`{query}`"]
        for k in keys:
            r = res[k][name]
            s = r["seconds"]
            cells.append(f"{fmt_ms(s['double']['p50'])} → {fmt_ms(s['grid']['p50'])} "
                         f"({r['ratio']:.2f}×)")
        rows.append(cells)
    worst = max(r["max_relative_difference"] for k in keys for r in res[k].values())
    pg = f", PostgreSQL {m['postgres']}" if "postgres" in m else ""
    lines = [
        "# Exact fixed-point sums: cost against DOUBLE sums",
        "",
        "_Generated by `benchmarks/bench_sums.py`; do not edit by hand._ Rerun with "
        f"`python benchmarks/bench_sums.py --runs {data['runs']}`.",
        "",
        f"Measured on {machine_line(m)}{pg}",
        "",
        "Median of the rewritten statement alone (execute + fetch), the two shapes interleaved "
        "round by round, on the synthetic `people` table (`uid` is its PRIMARY KEY: no "
        "contribution bounding). *double*: the pre-grid rewrite's DOUBLE sum of clamped values; "
        "*grid*: BIGINTs on the grid 2^-k summed as HUGEINT (DuckDB) / NUMERIC (PostgreSQL) "
        "(`dpproxy/rewrite/fixed.py`). The ratio is grid / double.",
        "",
        md_table(header, rows, "l" + "r" * len(keys)),
        "",
        f"The largest relative difference between the two shapes' answers was {worst:.1e}: "
        "the DOUBLE sums' own rounding, and the grid's half a step per row (2^-(k+1) < "
        "max|x|·2^-52; none for integer measures).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
