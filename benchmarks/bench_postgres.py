"""Rewritten vs raw query time on PostgreSQL, with DuckDB side by side: bench_embedded's workload.

The synthetic ``events`` and ``people`` tables of ``bench_embedded.py`` (same generator, same
seed, same schema YAML) at N rows (default 1,000,000) are copied from the DuckDB file
``out/synth_<N>.duckdb`` into a dedicated PostgreSQL database (default ``dpproxy_bench``) with
binary ``COPY``; ``people`` gets its PRIMARY KEY after the load, then ``VACUUM ANALYZE`` runs,
so the planner has statistics and the visibility map is set, as autovacuum would leave a
loaded table. ``--keep`` reuses a database whose ``bench_meta`` row matches N, the seed and the
generator version.

For every query class of ``bench_embedded.SYNTH_QUERIES``, on ``events`` (bounded, k = 5) and
on ``people`` (unit is a PRIMARY KEY, no bounding), all of these run interleaved, round by
round, so that a change in machine load hits every variant alike:

* PostgreSQL *raw*: the analyst's SQL through psycopg, on an autocommit connection;
* PostgreSQL *dpproxy*: ``dpproxy.connect(<DSN>, schema=...)``, ``cursor.execute`` +
  ``fetchall`` (plan, rewrite with a fresh secret, execute, noise, post-processing);
* PostgreSQL *rewritten*: dpproxy's PostgreSQL SQL (fixed secret, the native
  ``hash_record_extended`` row hash) through psycopg, the same SQL with the portable md5 row
  hash, and without its ``__bounded`` layer (the cost of contribution bounding alone);
* DuckDB *raw* and *dpproxy*, as in ``bench_embedded.py``, on the same data.

Once per class, the exact result of PostgreSQL's rewritten SQL with the portable (md5) row
hash is compared with the same plan rewritten for DuckDB with that hash, and the raw answers
of the two engines with each other. A variant that fails is recorded with its error and left
out of the timing; the others still run.

    python benchmarks/bench_postgres.py [--rows 1000000] [--runs 10] [--warmup 1]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--database dpproxy_bench] [--keep]

Progress goes to stderr; results to ``out/postgres.json``; then ``report.py`` refreshes
``RESULTS.md`` and the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb
import psycopg
from _common import OUT, fmt_ms, loadavg, machine, peak_rss_mb, progress, summary, write_json
from bench_embedded import (
    BOUND,
    GENERATOR_VERSION,
    SECRET,
    SEED,
    SYNTH_QUERIES,
    _dp,
    _fetch,
    dataset,
    measure,
)
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict

import dpproxy
from dpproxy.backends.postgres import redact_dsn
from dpproxy.rewrite.pipeline import rewrite

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_DATABASE = "dpproxy_bench"
COPY_BATCH = 50_000
SETTINGS = (
    "shared_buffers",
    "work_mem",
    "max_parallel_workers_per_gather",
    "max_parallel_workers",
    "jit",
    "jit_above_cost",
    "effective_cache_size",
    "random_page_cost",
)
COLUMNS = (("uid", "int8"), ("grp", "text"), ("amount", "float8"), ("age", "int4"))


# --------------------------------------------------------------------------------------------
# The PostgreSQL database


def database_url(admin_dsn: str, dbname: str) -> str:
    """``admin_dsn`` (a URL or a libpq key=value string) as a postgresql:// URL of ``dbname``.

    dpproxy recognises a PostgreSQL database by the URL prefix, hence a URL in any case.
    """
    p = {k: str(v) for k, v in conninfo_to_dict(admin_dsn).items()}
    user = quote(p.pop("user", ""), safe="")
    password = p.pop("password", None)
    host = p.pop("host", "")
    host = f"[{host}]" if ":" in host else quote(host, safe="")
    port = p.pop("port", "")
    p.pop("dbname", None)
    auth = user + (":" + quote(password, safe="") if password else "")
    url = f"postgresql://{auth + '@' if auth else ''}{host}{':' + port if port else ''}/"
    url += quote(dbname, safe="")
    if p:
        url += "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in p.items())
    return url


def _is_loaded(conn: psycopg.Connection, n: int) -> bool:
    try:
        row = conn.execute("SELECT rows, seed, version FROM bench_meta").fetchone()
    except psycopg.errors.UndefinedTable:
        return False
    return row == (n, SEED, GENERATOR_VERSION)


def _copy_table(
    conn: psycopg.Connection, duck: duckdb.DuckDBPyConnection, table: str, n: int
) -> None:
    names = ", ".join(c for c, _ in COLUMNS)
    src = duck.execute(f"SELECT {names} FROM {table}")
    copy_sql = pgsql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        pgsql.Identifier(table), pgsql.SQL(names)
    )
    done = 0
    step = next_report = max(1, n // 10)
    t = time.perf_counter()
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        copy.set_types([ty for _, ty in COLUMNS])
        while batch := src.fetchmany(COPY_BATCH):
            for row in batch:
                copy.write_row(row)
            done += len(batch)
            if done >= next_report or done == n:
                progress(
                    f"  COPY {table}: {done:,} of {n:,} rows ({done / n:.0%}, "
                    f"{time.perf_counter() - t:.1f} s)"
                )
                next_report = (done // step + 1) * step


def load(admin_dsn: str, dbname: str, duck_path: Path, n: int, keep: bool) -> dict[str, Any]:
    """Create ``dbname`` if missing and fill it with the n-row tables (unless ``keep`` and
    they are there already). Returns how the data came to be (JSON)."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
        if exists.fetchone() is None:
            progress(f"creating database {dbname} ...")
            admin.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(dbname)))
    url = database_url(admin_dsn, dbname)
    with psycopg.connect(url, autocommit=True) as conn:
        if keep and _is_loaded(conn, n):
            progress(f"reusing {n:,} rows in {dbname} (--keep)")
            return {"reused": True}
        progress(f"loading {n:,} rows per table from {duck_path.name} into {dbname} ...")
        t = time.perf_counter()
        duck = duckdb.connect(str(duck_path), read_only=True)
        try:
            with conn.transaction():
                conn.execute("DROP TABLE IF EXISTS events, people, bench_meta")
                for table in ("events", "people"):
                    conn.execute(
                        pgsql.SQL(
                            "CREATE TABLE {} (uid bigint NOT NULL, grp text NOT NULL, "
                            "amount double precision NOT NULL, age integer NOT NULL)"
                        ).format(pgsql.Identifier(table))
                    )
                    _copy_table(conn, duck, table, n)
                conn.execute("ALTER TABLE people ADD PRIMARY KEY (uid)")
                conn.execute("CREATE TABLE bench_meta (rows bigint, seed bigint, version integer)")
                conn.execute(
                    "INSERT INTO bench_meta VALUES (%s, %s, %s)", (n, SEED, GENERATOR_VERSION)
                )
        finally:
            duck.close()
        copied = time.perf_counter() - t
        progress(f"  copied in {copied:.1f} s; VACUUM ANALYZE ...")
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE events")
        conn.execute("VACUUM ANALYZE people")
        analyzed = time.perf_counter() - t
        progress(f"  VACUUM ANALYZE in {analyzed:.1f} s")
        return {"reused": False, "copy_s": copied, "vacuum_analyze_s": analyzed}


def server_info(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SELECT version()").fetchone()[0]  # type: ignore[index]
        settings = {
            s: conn.execute("SELECT current_setting(%s)", (s,)).fetchone()[0]  # type: ignore[index]
            for s in SETTINGS
        }
        jit = conn.execute("SELECT pg_jit_available()").fetchone()[0]  # type: ignore[index]
        sizes = dict(
            conn.execute(
                "SELECT relname, pg_size_pretty(pg_total_relation_size(oid)) FROM pg_class "
                "WHERE relname IN ('events', 'people') AND relkind = 'r'"
            ).fetchall()
        )
    return {"version": version, "settings": settings, "jit_available": jit, "sizes": sizes}


# --------------------------------------------------------------------------------------------
# Measurement


def _error(e: BaseException) -> str:
    detail = getattr(e, "log_detail", None)
    return f"{type(e).__name__}: {e}" + (f" [{detail}]" if detail else "")


def _pg(conn: psycopg.Connection, sql: str) -> Callable[[], list]:
    return lambda: conn.execute(sql.encode()).fetchall()


def _plain(rows: list) -> list:
    """numeric → float, so that results of both engines compare."""
    return [tuple(float(v) if isinstance(v, Decimal) else v for v in r) for r in rows]


def _same(a: list, b: list, rel: float = 1e-9) -> bool:
    a, b = _plain(a), _plain(b)
    if len(a) != len(b):
        return False
    for ra, rb in zip(sorted(a, key=repr), sorted(b, key=repr), strict=True):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if not math.isclose(float(x or 0), float(y or 0), rel_tol=rel, abs_tol=1e-6):
                    return False
            elif x != y:
                return False
    return True


def bench_class(
    name: str,
    sql: str,
    ctx: dict[str, Any],
    runs: int,
    warmup: int,
) -> dict[str, Any]:
    """One query class on ``events`` and ``people``: every variant, interleaved."""
    pg, duck, pg_cur, duck_cur = ctx["pg"], ctx["duck"], ctx["pg_cur"], ctx["duck_cur"]
    pg_engine = ctx["pg_engine"]
    res: dict[str, Any] = {"sql": sql, "errors": {}, "checks": {}}
    plans: dict[str, Any] = {}
    fns: dict[str, Callable[[], Any]] = {}
    for suffix, table in (("", "events"), ("_pk", "people")):
        q = sql.replace("FROM events", f"FROM {table}")
        fns[f"pg_raw{suffix}"] = _pg(pg, q)
        fns[f"pg_dpproxy{suffix}"] = _dp(pg_cur, q)
        try:
            prepared = pg_engine.prepare(q, secret=SECRET)
        except Exception as e:  # recorded, not hidden
            res["errors"][f"pg_rewritten{suffix}"] = _error(e)
            prepared = None
        if prepared is not None:
            plan = prepared.plan
            res[f"bounded{suffix}"] = plan.needs_bounding
            res[f"pg_sql{suffix}"] = prepared.sql
            fns[f"pg_rewritten{suffix}"] = _pg(pg, prepared.sql)
            if plan.needs_bounding:
                unbounded = rewrite(
                    dataclasses.replace(plan, needs_bounding=False),
                    SECRET,
                    "postgres",
                    portable_hash=True,
                    schemas=pg_engine.schemas,
                )
                fns[f"pg_rewritten_unbounded{suffix}"] = _pg(pg, unbounded)
                # The portable md5 row hash (the same rows as DuckDB's portable hash) instead
                # of PostgreSQL's native hash_record_extended.
                portable = rewrite(
                    plan, SECRET, "postgres", portable_hash=True, schemas=pg_engine.schemas
                )
                res[f"pg_sql_portable{suffix}"] = portable
                fns[f"pg_rewritten_portable{suffix}"] = _pg(pg, portable)
            plans[suffix] = plan
        fns[f"duckdb_raw{suffix}"] = _fetch(duck, q)
        fns[f"duckdb_dpproxy{suffix}"] = _dp(duck_cur, q)

    # First (warm-up) run of every variant: failures are recorded and the variant dropped.
    first: dict[str, Any] = {}
    for k, f in list(fns.items()):
        try:
            first[k] = f()
        except Exception as e:  # recorded, not hidden
            res["errors"][k] = _error(e)
            del fns[k]
            progress(f"    {name}: {k} FAILED: {res['errors'][k]}")
    for suffix in ("", "_pk"):
        if f"pg_raw{suffix}" in first and f"duckdb_raw{suffix}" in first:
            res["checks"][f"raw_same{suffix}"] = _same(
                first[f"pg_raw{suffix}"], first[f"duckdb_raw{suffix}"]
            )
        key = f"pg_rewritten_portable{suffix}"
        if key not in first:
            key = f"pg_rewritten{suffix}"  # nothing to bound: the hash plays no part
        if suffix in plans and key in first:
            # The same plan and secret for DuckDB with the portable hash: the same exact rows.
            duck_sql = rewrite(plans[suffix], SECRET, "duckdb", portable_hash=True)
            try:
                res["checks"][f"exact_same{suffix}"] = _same(
                    first[key], duck.execute(duck_sql).fetchall()
                )
            except duckdb.Error as e:
                res["checks"][f"exact_same{suffix}"] = f"DuckDB failed: {e}"
    samples = measure(fns, runs, warmup - 1) if fns else {}
    for k, v in samples.items():
        res[k] = summary(v)
    return res


def bench_all(
    url: str, duck_path: Path, schema: Path, runs: int, warmup: int, rows: int
) -> dict[str, Any]:
    pg = psycopg.connect(url, autocommit=True, prepare_threshold=None)
    duck = duckdb.connect(str(duck_path), read_only=True)
    pg_dp = dpproxy.connect(
        url, schema=str(schema), budget_epsilon=10**9, budget_delta="0.5", cache="off"
    )
    duck_dp = dpproxy.connect(
        str(duck_path), schema=str(schema), budget_epsilon=10**9, budget_delta="0.5", cache="off"
    )
    ctx: dict[str, Any] = {
        "pg": pg,
        "duck": duck,
        "pg_cur": pg_dp.cursor(),
        "duck_cur": duck_dp.cursor(),
        "pg_engine": pg_dp.engine,
    }
    out: dict[str, Any] = {}
    try:
        for i, (name, sql) in enumerate(SYNTH_QUERIES.items(), 1):
            t = time.perf_counter()
            r = bench_class(name, sql, ctx, runs, warmup)
            out[name] = r

            def p50(k: str, r: dict[str, Any] = r) -> str:
                return fmt_ms(r[k]["p50"]) if k in r else "FAILED"

            progress(
                f"  [{i}/{len(SYNTH_QUERIES)}] {name} {rows:,} rows: PostgreSQL raw "
                f"{p50('pg_raw')} ms, dpproxy {p50('pg_dpproxy')} ms, rewritten "
                f"{p50('pg_rewritten')} ms; DuckDB raw {p50('duckdb_raw')} ms, dpproxy "
                f"{p50('duckdb_dpproxy')} ms ({time.perf_counter() - t:.1f} s)"
            )
    finally:
        ctx["pg_cur"].close()
        ctx["duck_cur"].close()
        pg_dp.close()
        duck_dp.close()
        pg.close()
        duck.close()
    return out


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of each synthetic table (N)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per variant and class")
    ap.add_argument(
        "--warmup", type=int, default=1, help="untimed runs first (at least 1: it checks results)"
    )
    ap.add_argument(
        "--dsn",
        default=DEFAULT_DSN,
        help="admin DSN used to create the benchmark database if missing "
        f"(URL or key=value; default {DEFAULT_DSN})",
    )
    ap.add_argument(
        "--database",
        default=DEFAULT_DATABASE,
        help=f"the benchmark database: created if missing, its tables replaced unless --keep "
        f"(default {DEFAULT_DATABASE})",
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="reuse the benchmark database if it already holds the N-row tables "
        "(bench_meta row count, seed and generator version match)",
    )
    ap.add_argument("--no-report", action="store_true", help="do not refresh RESULTS.md")
    args = ap.parse_args(argv)
    warmup = max(1, args.warmup)

    started = time.perf_counter()
    info = machine()
    duck_path, schema = dataset(args.rows)
    url = database_url(args.dsn, args.database)
    loaded = load(args.dsn, args.database, duck_path, args.rows, args.keep)
    server = server_info(url)
    progress(f"{server['version'].split(',')[0]}; {server['settings']}")
    load_after = loadavg()

    progress(f"query classes, {args.rows:,} rows, {args.runs} runs after {warmup} warm-up:")
    classes = bench_all(url, duck_path, schema, args.runs, warmup, args.rows)
    failures = {n: r["errors"] for n, r in classes.items() if r["errors"]}
    mismatches = {
        n: {k: v for k, v in r["checks"].items() if v is not True}
        for n, r in classes.items()
        if any(v is not True for v in r["checks"].values())
    }

    info["loadavg_end"] = loadavg()
    results: dict[str, Any] = {
        "machine": info,
        "postgres": {
            **server,
            "dsn": redact_dsn(url),
            "database": args.database,
            "load": loaded,
        },
        "rows": args.rows,
        "bound": BOUND,
        "runs": args.runs,
        "warmup": warmup,
        "duckdb_db": str(duck_path),
        "schema": str(schema),
        "classes": classes,
        "failures": failures,
        "mismatches": mismatches,
        "loadavg": {"after load": load_after, "at end": info["loadavg_end"]},
        "peak_rss_mb": peak_rss_mb(),
        "elapsed_s": time.perf_counter() - started,
    }
    path = write_json("postgres.json", results)
    progress(f"wrote {path} in {results['elapsed_s']:.0f} s")
    for n, errs in failures.items():
        for k, e in errs.items():
            progress(f"FAILED {n} / {k}: {e}")
    for n, m in mismatches.items():
        progress(f"MISMATCH {n}: {m}")
    if not args.no_report:
        import report

        report.main()
        progress(f"refreshed {OUT.parent / 'RESULTS.md'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
