"""Planning latency per query class: parse → validate → plan + check → rewrite, cold and warm.

COLD calls the pure functions of each stage directly, so nothing is cached (except what
sqlglot itself caches); WARM calls ``Engine.prepare``, whose plan cache (per SQL text) and
cache of secret-free rewrites make a repeated query cheap.

On the demo catalog the privacy unit ``person_id`` is a PRIMARY KEY, so no query needs
contribution bounding and a warm ``prepare`` is two cache hits. To show the cost of a query
that does need bounding (a fresh secret, so a fresh rewrite, on every call), the script also
builds ``out/adult_nopk.duckdb`` (the demo data without the key) and times
``prepare`` and the rewrite there.

    python benchmarks/bench_plan.py [--iterations 1000] [--warmup 50]

Writes ``benchmarks/out/plan.json``, prints a markdown table, and refreshes
``benchmarks/RESULTS.md`` and the figures (``report.py``).
"""

from __future__ import annotations

import argparse
import gc
import secrets
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb
from _common import (
    OUT,
    fmt_ms,
    loadavg,
    machine,
    progress,
    summary,
    write_json,
)

from dpproxy.demo import demo_database_path, demo_schema_path
from dpproxy.engine import open_engine
from dpproxy.planning.check import check_plan
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import Cost

# One representative query per class, on the Adult demo table.
QUERIES: dict[str, str] = {
    "count": "SELECT COUNT(*) FROM adult",
    "filtered_count": "SELECT COUNT(*) FROM adult WHERE age >= 40 AND sex = 'Female'",
    "grouped_public_count": "SELECT education, COUNT(*) FROM adult GROUP BY education",
    "sum": "SELECT SUM(capital_gain) FROM adult",
    "avg_grouped": "SELECT sex, race, AVG(hours_per_week) FROM adult GROUP BY sex, race",
    "var_stddev": "SELECT VARIANCE(age), STDDEV(hours_per_week) FROM adult",
    "having_order_limit": (
        "SELECT occupation, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY occupation "
        "HAVING COUNT(*) > 100 ORDER BY n DESC LIMIT 5"
    ),
    "cte": (
        "WITH older AS (SELECT age, hours_per_week, sex FROM adult WHERE age > 50) "
        "SELECT sex, AVG(hours_per_week) FROM older GROUP BY sex"
    ),
    "private_key_group_by": "SELECT age, COUNT(*) FROM adult GROUP BY age",
    "expression_aggregates": (
        "SELECT SUM(capital_gain - capital_loss), AVG(hours_per_week * 52), "
        "COUNT(*) FILTER (WHERE income_class = '>50K') FROM adult"
    ),
}

STAGES = ("parse", "validate", "plan_check", "rewrite", "total")
BIG_BUDGET = Cost(Fraction(10**9), Fraction(1, 2))


def nopk_copy() -> Path:
    """``out/adult_nopk.duckdb``: the demo table without its PRIMARY KEY (so bounding is on)."""
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / "adult_nopk.duckdb"
    if target.is_file():
        return target
    tmp = target.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute(f"ATTACH '{demo_database_path()}' AS demo (READ_ONLY)")
        con.execute("CREATE TABLE adult AS SELECT * FROM demo.adult")
        con.execute("DETACH demo")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    tmp.replace(target)
    return target


def bench_class(name: str, sql: str, engine, engine_b, iterations: int, warmup: int) -> dict:
    catalog = engine.catalog
    policy = catalog.policy
    samples: dict[str, list[float]] = {s: [] for s in STAGES}
    rewrite_bounded: list[float] = []
    pc = time.perf_counter
    # The same query where the unit is not unique, so the plan needs contribution bounding.
    plan_b = plan_query(validate(parse(sql), engine_b.catalog, sql), engine_b.catalog.policy)
    check_plan(plan_b)
    assert plan_b.needs_bounding
    for i in range(warmup + iterations):
        t0 = pc()
        tree = parse(sql)
        t1 = pc()
        query = validate(tree, catalog, sql)
        t2 = pc()
        plan = plan_query(query, policy)
        check_plan(plan)
        t3 = pc()
        rewrite(plan, secrets.randbits(62), "duckdb")
        t4 = pc()
        rewrite(plan_b, secrets.randbits(62), "duckdb")
        t5 = pc()
        if i >= warmup:
            samples["parse"].append(t1 - t0)
            samples["validate"].append(t2 - t1)
            samples["plan_check"].append(t3 - t2)
            samples["rewrite"].append(t4 - t3)
            samples["total"].append(t4 - t0)
            rewrite_bounded.append(t5 - t4)
    warm: list[float] = []
    warm_b: list[float] = []
    for i in range(warmup + iterations):
        t0 = pc()
        engine.prepare(sql)
        t1 = pc()
        engine_b.prepare(sql)
        t2 = pc()
        if i >= warmup:
            warm.append(t1 - t0)
            warm_b.append(t2 - t1)
    out = {s: summary(v) for s, v in samples.items()}
    out["rewrite_bounded"] = summary(rewrite_bounded)
    out["warm_prepare"] = summary(warm)
    out["warm_prepare_bounded"] = summary(warm_b)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=1000, help="timed iterations per class")
    ap.add_argument("--warmup", type=int, default=50, help="untimed iterations first")
    ap.add_argument("--no-report", action="store_true", help="do not refresh RESULTS.md")
    args = ap.parse_args(argv)

    info = machine()
    engine = open_engine(budget=BIG_BUDGET, cache="off")
    engine_b = open_engine(
        str(nopk_copy()), str(demo_schema_path()), budget=BIG_BUDGET, cache="off"
    )
    results: dict = {
        "machine": info,
        "iterations": args.iterations,
        "warmup": args.warmup,
        "queries": QUERIES,
        "classes": {},
    }
    gc.collect()
    for i, (name, sql) in enumerate(QUERIES.items(), 1):
        t = time.perf_counter()
        results["classes"][name] = bench_class(
            name, sql, engine, engine_b, args.iterations, args.warmup
        )
        r = results["classes"][name]
        progress(
            f"[{i}/{len(QUERIES)}] {name}: cold p50 {fmt_ms(r['total']['p50'])} ms, "
            f"warm p50 {fmt_ms(r['warm_prepare']['p50'])} ms "
            f"({time.perf_counter() - t:.1f} s)"
        )
    info["loadavg_end"] = loadavg()
    engine.close()
    engine_b.close()
    path = write_json("plan.json", results)
    from report import plan_table

    print(plan_table(results))
    progress(f"wrote {path}")
    if not args.no_report:
        import report

        report.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
