"""The dpproxy adapter of the peer comparison (INTERFACE.md), run with dpproxy's own interpreter.

Set-up (timed as ``setup_s``): the CSV is loaded into a fresh DuckDB file with typed columns
(pid, age, income BIGINT; the text columns VARCHAR) and ``PRIMARY KEY (pid)``, so dpproxy sees
that every unit has one row and needs no contribution bounding; a privacy schema is written from
``workload.COLUMNS`` (unit ``pid``, ``max_rows_per_unit: 1``, ``public_rows`` = the data set's
size, δ = 1e-5, a budget no run exhausts); then ``open_engine(..., cache="off")``: the answer
cache would hand back the very same noisy answer for a repeated query, and accuracy needs fresh
noise on every run. Each query is then ``engine.run(sql, epsilon=ε, delta=δ)``: SQL text in,
released rows out. ``predicted_error95`` comes from ``dpproxy.explain_errors.column_errors`` (no
data read).

On ``tpch`` (TPC-H scale 1, the customer as privacy unit): no database is built; the engine
opens ``DIR/tpch/tpch.duckdb`` (written by data.py) read-only with ``schemas/tpch.yaml`` as it
is (orders and line items belong to their customer through references, no
``max_rows_per_unit`` on them), the same never-exhausted budget and ``cache="off"``. The bound on
rows per customer is then chosen by dpproxy with DP at every run, from 10% of the query's ε
(README, "Joins and flat maps"): every run uses a fresh analyst name, so no bound drawn for an
earlier run is reused. The chosen bound of each run is in its ``tau``. ``explain``'s prediction
is computed at the largest candidate bound (10,000) before the bound is drawn, far above what is
drawn, so ``predicted_error95`` is null for those columns (``predicted_note`` says why). The raw
baseline opens its own link (or copy) of the same file; ``dpproxy_sql`` times dpproxy's per-unit
statement (the input of its DP choice) and its rewritten SQL at a bound drawn once before the
timed runs.

``--backend postgres`` (pums and synthetic_1m): the same, on PostgreSQL, the backend Qrlew
runs on. The CSV is loaded once into database ``dpproxy_compare``, schema ``<data set>``, table
``data`` with the same types and ``PRIMARY KEY (pid)`` (``load_s``; kept while the CSV is
unchanged, like Qrlew's copy), and the engine opens a DSN whose ``search_path`` is that schema.
Its lines are labelled ``dpproxy_pg``; the baselines ``postgres`` (the exact SQL on a plain
psycopg connection to the same database) and ``dpproxy_pg_sql`` (dpproxy's PostgreSQL rewrite
alone, on dpproxy's own connection pool). ``--pg-url`` (default ``$QRLEW_PG_URL`` or
``postgresql://postgres@127.0.0.1:5432``) names the server.

``--raw`` measures the baseline instead: the query's exact SQL on a plain read-only DuckDB
connection to the same file (``system: "duckdb"``, no privacy), in the same loop.
``--rewritten`` times only the SQL dpproxy sends for the query (its rewrite, prepared once
outside the timed loop) on a cursor of the same DuckDB database (``system: "dpproxy_sql"``): the
difference to ``dpproxy`` is dpproxy's own work (parsing, noise, post-processing, accounting),
the difference to ``duckdb`` what the private query asks of the database (clamping, the
domain filter, quantile windows).
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

HERE = Path(__file__).resolve().parent
# This file is named like the package: keep its own folder off the path so `import dpproxy`
# finds the package, and put the folder of workload.py on it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import adapter_kit as kit  # noqa: E402
import workload  # noqa: E402

BUDGET_EPSILON = Fraction(10**12)
BUDGET_DELTA = Fraction(999, 1000)
PG_DATABASE = "dpproxy_compare"
ANALYST = "bench"
REPO = HERE.parents[2]
TPCH_SCHEMA = REPO / "schemas" / "tpch.yaml"
_analysts = itertools.count(1)


def fresh_analyst() -> str:
    """A new analyst name: nothing drawn for an earlier run (the DP bound) is reused."""
    return f"bench-{next(_analysts)}"


def build_database(csv_path: Path, db_path: Path) -> None:
    import duckdb

    types = {"int": "BIGINT", "text": "VARCHAR"}
    cols = ", ".join(
        f"{c.name} {types[c.type]} NOT NULL" + (" PRIMARY KEY" if c.name == workload.UNIT else "")
        for c in workload.COLUMNS
    )
    read_types = ", ".join(f"'{c.name}': '{types[c.type]}'" for c in workload.COLUMNS)
    con = duckdb.connect(str(db_path))
    try:
        con.execute(f"CREATE TABLE {workload.TABLE} ({cols})")
        con.execute(
            f"INSERT INTO {workload.TABLE} SELECT "
            + ", ".join(c.name for c in workload.COLUMNS)
            + f" FROM read_csv('{csv_path}', header = true, types = {{{read_types}}})"
        )
        con.execute("CHECKPOINT")
    finally:
        con.close()


def load_postgres(pg_url: str, csv_path: Path, dataset: str) -> tuple[float, str, str]:
    """The CSV as ``dpproxy_compare.<dataset>.data`` (pid the primary key), loaded again only
    when the CSV changed; (seconds, the DSN with that schema as search_path, server version)."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(kit.with_database(pg_url, "postgres"), autocommit=True) as admin:
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (PG_DATABASE,)).fetchone()
        if exists is None:
            try:
                admin.execute(f'CREATE DATABASE "{PG_DATABASE}"')
            except psycopg.errors.DuplicateDatabase:  # another adapter got there first
                pass
    stat = csv_path.stat()
    tag = f"{stat.st_size}:{stat.st_mtime_ns}"
    dsn = kit.with_database(pg_url, PG_DATABASE)
    with psycopg.connect(dsn) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"dpproxy.{dataset}",))
        table = f'"{dataset}"."{workload.TABLE}"'
        row = conn.execute(
            "SELECT obj_description(to_regclass(%s), 'pg_class')", (table,)).fetchone()
        if row is None or row[0] != tag:
            types = {"int": "BIGINT", "text": "TEXT"}
            cols = ", ".join(
                f"{c.name} {types[c.type]} NOT NULL"
                + (" PRIMARY KEY" if c.name == workload.UNIT else "")
                for c in workload.COLUMNS)
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{dataset}"')
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(f"CREATE TABLE {table} ({cols})")
            with csv_path.open() as f:
                header = f.readline().strip()
                with conn.cursor().copy(
                    f"COPY {table} ({header}) FROM STDIN WITH (FORMAT csv)"
                ) as copy:
                    for block in iter(lambda: f.read(1 << 20), ""):
                        copy.write(block)
            conn.execute(f"COMMENT ON TABLE {table} IS '{tag}'")
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ANALYZE {table}")
    options = quote(f"-c search_path={dataset}")
    joiner = "&" if urlsplit(dsn).query else "?"
    return time.perf_counter() - started, f"{dsn}{joiner}options={options}", version


def schema_yaml(dataset: str, rows: int, delta: float) -> str:
    lines = [
        "version: 1",
        f"dataset: {dataset}",
        "privacy:",
        "  neighbouring: add_remove",
        "  epsilon: 1",
        f'  delta: "{delta!r}"',
        "  mechanism: laplace",
        f'  budget: {{epsilon: {BUDGET_EPSILON}, delta: "{BUDGET_DELTA}"}}',
        "tables:",
        f"  {workload.TABLE}:",
        "    private: true",
        f"    privacy_unit: {workload.UNIT}",
        "    max_rows_per_unit: 1",
        f"    public_rows: {rows}",
        # The data set's size is public here (PUMS is a published sample; the synthetic table
        # has a fixed size): the same knowledge Qrlew takes from the data when it is set up.
        f"    public_max_rows: {rows}",
        "    columns:",
    ]
    for c in workload.COLUMNS:
        if c.type == "int":
            spec = "{type: integer"
            if c.lower is not None and c.upper is not None:
                spec += f", lower: {int(c.lower)}, upper: {int(c.upper)}"
        else:
            spec = "{type: text"
            if c.domain:
                spec += ", domain: [" + ", ".join(f'"{v}"' for v in c.domain) + "]"
        lines.append(f"      {c.name}: {spec}}}")
    return "\n".join(lines) + "\n"


Once = Callable[[], tuple[list[str], int, Any]]


def main() -> None:
    p = kit.parser(__doc__.splitlines()[0], datasets=workload.DATASETS)
    p.add_argument("--raw", action="store_true", help="the exact SQL on plain DuckDB instead")
    p.add_argument("--rewritten", action="store_true",
                   help="only dpproxy's rewritten SQL on DuckDB, no noise")
    p.add_argument("--with-baselines", action="store_true",
                   help="latency: also --raw and --rewritten, interleaved run by run with "
                        "dpproxy (three lines per query), so that background load hits all "
                        "three alike")
    p.add_argument("--backend", choices=("duckdb", "postgres"), default="duckdb",
                   help="the database dpproxy (and the raw baseline) run on")
    p.add_argument("--pg-url", default=kit.DEFAULT_PG,
                   help="the PostgreSQL server for --backend postgres (its database is replaced)")
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()
    if args.backend == "postgres" and args.dataset == "tpch":
        p.error("--backend postgres: pums and synthetic_1m only")

    import duckdb

    import dpproxy
    from dpproxy.engine import open_engine
    from dpproxy.explain_errors import column_errors
    from dpproxy.values import Cost

    queries = kit.queries(args)
    tpch = args.dataset == "tpch"
    if args.with_baselines:
        systems = ["dpproxy", "duckdb", "dpproxy_sql"]
    else:
        systems = ["duckdb" if args.raw else ("dpproxy_sql" if args.rewritten else "dpproxy")]
    eps = Fraction(str(args.epsilon))
    delta = Fraction(str(args.delta))

    pg = args.backend == "postgres"
    # How each role is labelled in the results (the baselines on PostgreSQL are other systems).
    label = {"dpproxy": "dpproxy_pg", "duckdb": "postgres", "dpproxy_sql": "dpproxy_pg_sql"} if pg \
        else {s: s for s in ("dpproxy", "duckdb", "dpproxy_sql")}
    tmp = Path(tempfile.mkdtemp(prefix="dpproxy-compare-"))
    load_s: float | None = None
    pg_version: str | None = None
    try:
        if pg:
            load_s, dsn, pg_version = load_postgres(
                args.pg_url, args.data_dir / f"{args.dataset}.csv", args.dataset)
        started = time.perf_counter()
        if pg:
            db = None
        elif tpch:
            db = args.data_dir / "tpch" / "tpch.duckdb"
            if not db.is_file():
                raise SystemExit(f"{db} is missing: run benchmarks/compare/data.py first")
        else:
            db = tmp / f"{args.dataset}.duckdb"
            build_database(args.data_dir / f"{args.dataset}.csv", db)
        engine = raw = None
        if "duckdb" in systems and pg:
            import psycopg

            raw = psycopg.connect(dsn, autocommit=True)
        elif "duckdb" in systems:
            # A file of its own: a second connection to dpproxy's file would share its
            # database instance and settings. TPC-H's 570 MB are linked rather than copied
            # where the file system allows it (both sides only read).
            raw_db = tmp / f"{args.dataset}_raw.duckdb"
            try:
                if not tpch:
                    raise OSError
                os.link(db, raw_db)
            except OSError:
                shutil.copy(db, raw_db)
            raw = duckdb.connect(str(raw_db), read_only=True)
        if systems != ["duckdb"]:
            if tpch:
                schema = TPCH_SCHEMA
            else:
                schema = tmp / "schema.yaml"
                schema.write_text(
                    schema_yaml(args.dataset, workload.DATASETS[args.dataset], args.delta)
                )
            engine = open_engine(
                dsn if pg else str(db), str(schema), budget=Cost(BUDGET_EPSILON, BUDGET_DELTA),
                cache="off",
            )
        setup_s = time.perf_counter() - started
        # The tpch schema leaves the rows per customer to a DP choice at every run: a fresh
        # analyst per run, so that no earlier run's bound is reused for free.
        analyst = fresh_analyst if tpch else (lambda: ANALYST)

        taus: list[int | None] = []

        def make(system: str, sql: str) -> Once:
            if system == "dpproxy":
                assert engine is not None

                def once() -> tuple[list[str], int, Any]:
                    ans = engine.run(sql, analyst=analyst(), epsilon=eps, delta=delta)
                    rel = ans.released
                    keys = sum(1 for o in ans.plan.query.outputs if o.is_key)
                    t = ans.plan.truncation
                    taus.append(t.rows if t is not None and t.source == "dp" else None)
                    return [c.name for c in rel.columns], keys, rel.rows

                return once
            if system == "dpproxy_sql":
                assert engine is not None
                prepared = engine.prepare(sql, epsilon=eps, delta=delta)
                statements: list[str] = []
                if prepared.truncation is not None:
                    # The bound is drawn with DP at run time: its per-unit statement, then the
                    # query's SQL at a bound drawn once here (not timed).
                    statements.append(prepared.truncation)
                    drawn = engine.run(sql, analyst=fresh_analyst(), epsilon=eps, delta=delta)
                    assert drawn.plan.truncation is not None
                    hinted = sql.replace(
                        "SELECT ", f"SELECT /*+ dpproxy max_rows={drawn.plan.truncation.rows} */ ",
                        1)
                    prepared = engine.prepare(hinted, epsilon=eps, delta=delta)
                statements += ([prepared.sql] if prepared.sql else []) + list(
                    dict.fromkeys(st for _, st in prepared.extra))

                def once() -> tuple[list[str], int, Any]:
                    # The backend call dpproxy itself makes (a cursor, fetchall).
                    for st in statements:
                        res = engine.backend.execute(st)
                    return list(res.columns), 0, res.rows

                return once
            assert raw is not None

            def once() -> tuple[list[str], int, Any]:
                cur = raw.cursor()
                try:
                    cur.execute(sql)
                    rows = cur.fetchall()
                    cols = [d[0] for d in cur.description]
                finally:
                    cur.close()
                keys = sum(1 for r in rows[:1] for v in r if isinstance(v, str))
                return cols, keys, rows

            return once

        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w") as out:
            for q in queries:
                recs: dict[str, dict[str, Any]] = {}
                fns: dict[str, Once] = {}
                for system in systems:
                    version = dpproxy.__version__ if system != "duckdb" else (
                        f"PostgreSQL {pg_version}" if pg else duckdb.__version__)
                    rec = kit.record(label[system], version, args, q.id, setup_s)
                    if pg:
                        rec.update(backend="postgres", load_s=load_s)
                    recs[system] = rec
                    try:
                        fns[system] = make(system, q.sql)
                        if system == "dpproxy":
                            plan = engine.plan(q.sql, epsilon=eps, delta=delta)
                            errors = [e.value for e in column_errors(plan)]
                            t = plan.truncation
                            if t is not None and t.source == "dp" and not t.chosen:
                                # Calibrated at the largest candidate bound, not the drawn one.
                                keys = [o.is_key for o in plan.query.outputs]
                                errors = [e if k else None
                                          for e, k in zip(errors, keys, strict=True)]
                                rec["predicted_note"] = (
                                    f"rows per unit chosen with DP at run time (ε share "
                                    f"{float(t.epsilon):g}, candidates {t.grid[0]}…{t.grid[-1]}): "
                                    "explain's prediction is at the largest candidate, not given")
                            rec["predicted_error95"] = errors
                        if args.mode == "latency":
                            for _ in range(args.warmup):
                                fns[system]()
                    except Exception as e:  # not supported: say why, keep going
                        _refuse(rec, e, args.debug)
                        fns.pop(system, None)
                taus.clear()  # the bounds dpproxy's runs drew (tpch), warm-up runs excluded
                for i in range(args.runs):
                    order = list(fns)
                    k = i % len(order) if order else 0
                    for system in order[k:] + order[:k]:  # rotate who goes first
                        if recs[system]["supported"] is False:
                            continue
                        rec = recs[system]
                        try:
                            t = time.perf_counter()
                            cols, keys, rows = fns[system]()
                            seconds = time.perf_counter() - t
                        except Exception as e:
                            _refuse(rec, e, args.debug)
                            continue
                        run: dict[str, Any] = {"seconds": seconds}
                        if system == "dpproxy" and taus and taus[-1] is not None:
                            run["tau"] = taus[-1]
                        if args.mode == "accuracy":
                            run["rows"] = kit.rows_keys_first(rows, keys)
                        rec["runs"].append(run)
                        rec["columns"] = cols
                for rec in recs.values():
                    kit.write(out, rec)
        if engine is not None:
            engine.close()
        if raw is not None:
            raw.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _refuse(rec: dict[str, Any], e: BaseException, debug: bool) -> None:
    # dpproxy's errors keep their HINT lines (joined into one), and more of their text.
    kit.refuse(rec, e, debug=debug, limit=500, first_line=False)


if __name__ == "__main__":
    main()
