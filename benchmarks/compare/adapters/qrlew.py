"""The Qrlew adapter of the peer comparison (INTERFACE.md), run with its own venv.

Qrlew (``pyqrlew``) rewrites a SQL query into a differentially private SQL query that a database
then runs; here its usual partner, PostgreSQL (``--pg-url``, default
``postgresql://postgres@127.0.0.1:5432``, or ``$QRLEW_PG_URL``), reached through SQLAlchemy and
psycopg2 as pyqrlew's own helpers do.

Load (``load_s``, not part of ``setup_s``): database ``qrlew_bench`` (created if missing), one
schema per data set (``pums``, ``synthetic_1m``) holding table ``data`` (pid, age, income
INTEGER; the text columns TEXT), filled with ``COPY ... FROM STDIN`` and ANALYZEd. A table whose
comment records the same CSV (size and SHA-256) is kept as it is (``loaded: false``).

Set-up (``setup_s``): ``Dataset.from_database`` on that schema (SQLAlchemy reflection, and a
``COUNT(*)`` Qrlew takes as the table's size), then the bounds of ``workload.COLUMNS`` with
``with_range`` (age 0..100, income 0..500000) and the public domains with
``with_possible_values`` (sex, race, married); educ has none, so GROUP BY educ goes through
Qrlew's tau-thresholding.

Per query, timed end to end (``seconds``; ``rewrite_s`` of it is Qrlew's part):
``dataset.relation(sql)`` → ``rewrite_with_differential_privacy(dataset, [("data", [], "pid")],
{"epsilon": ε, "delta": δ}, max_multiplicity=1, max_privacy_unit_groups=1)`` → ``to_query()``
→ run on PostgreSQL → fetch. ``max_multiplicity=1`` and ``max_privacy_unit_groups=1`` state the
workload's "one row per unit" (Qrlew's defaults, 100 rows and 5 groups per unit, would scale the
noise by 100 and the thresholds by √5). No synthetic data is given, so nothing falls back to it.
ε and δ are the whole query's: Qrlew splits them among its mechanisms itself (Gaussian noise;
half of the budget to tau-thresholding when keys have no public domain).

Dialect: ``VAR_SAMP``/``STDDEV_SAMP`` are sent as their PostgreSQL synonyms ``VARIANCE``/
``STDDEV``, the only aggregate spellings Qrlew's parser knows; the rest as written (Qrlew
resolves the bare table name ``data``). What it cannot parse or rewrite (a Rust ``todo!()``
surfaces as ``PanicException``) is reported as unsupported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import workload  # noqa: E402

SYSTEM = "qrlew"
DB_NAME = "qrlew_bench"
DEFAULT_PG = os.environ.get("QRLEW_PG_URL", "postgresql://postgres@127.0.0.1:5432")
PRIVACY_UNIT = [(workload.TABLE, [], workload.UNIT)]
DIALECT = (
    (re.compile(r"\bVAR_SAMP\s*\(", re.I), "VARIANCE("),
    (re.compile(r"\bSTDDEV_SAMP\s*\(", re.I), "STDDEV("),
)
PG_TYPES = {"int": "INTEGER", "text": "TEXT"}


def translate(sql: str) -> str:
    for pattern, repl in DIALECT:
        sql = pattern.sub(repl, sql)
    return sql


def schema_name(dataset: str) -> str:
    name = re.sub(r"[^a-z0-9_]", "_", dataset.lower())
    return name if name[:1].isalpha() else f"d_{name}"


def file_tag(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"{path.stat().st_size}:{h.hexdigest()}"


def ensure_loaded(pg_url: str, csv_path: Path, schema: str) -> tuple[float, bool]:
    """The CSV in ``qrlew_bench.<schema>.data``; (seconds, whether it was (re)loaded)."""
    import psycopg2

    started = time.perf_counter()
    admin = psycopg2.connect(f"{pg_url}/postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
        if cur.fetchone() is None:
            try:
                cur.execute(f'CREATE DATABASE "{DB_NAME}"')
            except psycopg2.errors.DuplicateDatabase:  # another adapter got there first
                pass
    admin.close()

    tag = file_tag(csv_path)
    conn = psycopg2.connect(f"{pg_url}/{DB_NAME}")
    try:
        with conn.cursor() as cur:
            # Two adapters started together must not load the same table at once.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{DB_NAME}.{schema}",))
            cur.execute(
                "SELECT obj_description(to_regclass(%s), 'pg_class')",
                (f'"{schema}"."{workload.TABLE}"',),
            )
            row = cur.fetchone()
            if row is not None and row[0] == tag:
                return time.perf_counter() - started, False
            cols = ", ".join(f'"{c.name}" {PG_TYPES[c.type]}' for c in workload.COLUMNS)
            cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            cur.execute(f'DROP TABLE IF EXISTS "{schema}"."{workload.TABLE}"')
            cur.execute(f'CREATE TABLE "{schema}"."{workload.TABLE}" ({cols})')
            with csv_path.open() as f:
                header = f.readline().strip().split(",")
                if sorted(header) != sorted(c.name for c in workload.COLUMNS):
                    raise SystemExit(f"{csv_path}: columns {header}")
                f.seek(0)
                names = ", ".join(f'"{h}"' for h in header)
                cur.copy_expert(
                    f'COPY "{schema}"."{workload.TABLE}" ({names}) '
                    "FROM STDIN WITH (FORMAT csv, HEADER true)",
                    f,
                )
            cur.execute(f'COMMENT ON TABLE "{schema}"."{workload.TABLE}" IS %s', (tag,))
        conn.commit()
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'ANALYZE "{schema}"."{workload.TABLE}"')
    finally:
        conn.close()
    return time.perf_counter() - started, True


def build_dataset(engine: Any, schema: str) -> Any:
    from pyqrlew import Dataset

    ds = Dataset.from_database(name="bench", engine=engine, schema_name=schema)
    for c in workload.COLUMNS:
        if c.lower is not None and c.upper is not None:
            ds = ds.with_range(schema, workload.TABLE, c.name, float(c.lower), float(c.upper))
        if c.domain:
            ds = ds.with_possible_values(schema, workload.TABLE, c.name, list(c.domain))
    return ds


def group_keys(sql: str) -> list[str]:
    """The GROUP BY columns of a workload query (plain column names there)."""
    m = re.search(r"\bGROUP\s+BY\s+(.+?)(?:\s+HAVING\b|\s+ORDER\b|\s+LIMIT\b|$)", sql, re.I | re.S)
    return [k.strip().lower() for k in m.group(1).split(",")] if m else []


def _value(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def normalise(columns: list[str], rows: list[Any], keys: list[str]) -> tuple[list[str], list]:
    """Key columns first (as strings), then the values (floats), sorted by the keys."""
    lower = [c.lower() for c in columns]
    key_idx = [lower.index(k) for k in keys if k in lower]
    val_idx = [i for i in range(len(columns)) if i not in key_idx]
    out = [
        [None if r[i] is None else str(r[i]) for i in key_idx] + [_value(r[i]) for i in val_idx]
        for r in rows
    ]
    nk = len(key_idx)
    out.sort(key=lambda r: tuple("" if k is None else k for k in r[:nk]))
    return [columns[i] for i in key_idx + val_idx], out


def one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {' '.join(msg.split())}"[:300]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--queries", default="all")
    p.add_argument("--mode", choices=("accuracy", "latency"), default="accuracy")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--epsilon", type=float, default=workload.EPSILON)
    p.add_argument("--delta", type=float, default=workload.DELTA)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pg-url", default=DEFAULT_PG, help="server URL without a database name")
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()
    if not args.debug:
        os.environ["RUST_BACKTRACE"] = "0"  # a Rust panic is one line on stderr, not 40

    from importlib.metadata import version

    import sqlalchemy as sa

    ids = [q.id for q in workload.QUERIES] if args.queries == "all" else args.queries.split(",")
    queries = [workload.BY_ID[i] for i in ids]
    qr_version = version("pyqrlew")
    pg_url = args.pg_url.rstrip("/")
    schema = schema_name(args.dataset)

    load_s, loaded = ensure_loaded(pg_url, args.data_dir / f"{args.dataset}.csv", schema)

    started = time.perf_counter()
    url = pg_url.replace("postgresql://", "postgresql+psycopg2://", 1) + f"/{DB_NAME}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    dataset = build_dataset(engine, schema)
    conn = engine.connect()
    setup_s = time.perf_counter() - started
    with conn.exec_driver_sql("SHOW server_version") as res:
        pg_version = res.scalar()

    budget = {"epsilon": args.epsilon, "delta": args.delta}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for q in queries:
            sql = translate(q.sql)
            rec: dict[str, Any] = {
                "system": SYSTEM,
                "version": qr_version,
                "dataset": args.dataset,
                "query": q.id,
                "mode": args.mode,
                "epsilon": args.epsilon,
                "supported": True,
                "error": None,
                "columns": [],
                "runs": [],
                "setup_s": setup_s,
                "predicted_error95": None,
                "load_s": load_s,
                "loaded": loaded,
                "database": f"PostgreSQL {pg_version}",
                "sql_sent": sql,
                "dp_event": None,
            }
            keys = group_keys(q.sql)
            dp_event: list[Any] = []

            def once(
                sql: str = sql, dp_event: list[Any] = dp_event
            ) -> tuple[list[str], list[Any], float]:
                t = time.perf_counter()
                relation = dataset.relation(sql)
                rewritten = relation.rewrite_with_differential_privacy(
                    dataset, PRIVACY_UNIT, budget, max_multiplicity=1.0, max_privacy_unit_groups=1
                )
                dp_sql = rewritten.relation().to_query()
                rewrite_s = time.perf_counter() - t
                if not dp_event:
                    dp_event.append(rewritten.dp_event().to_dict())
                with conn.exec_driver_sql(dp_sql) as res:
                    cols = list(res.keys())
                    rows = res.fetchall()
                return cols, rows, rewrite_s

            try:
                runs: list[dict[str, Any]] = []
                if args.mode == "latency":
                    for _ in range(args.warmup):
                        once()
                for _ in range(args.runs):
                    t = time.perf_counter()
                    cols, rows, rewrite_s = once()
                    seconds = time.perf_counter() - t
                    columns, norm = normalise(cols, rows, keys)
                    run: dict[str, Any] = {"seconds": seconds, "rewrite_s": rewrite_s}
                    if args.mode == "accuracy":
                        run["rows"] = norm
                    runs.append(run)
                    rec["columns"] = columns
                rec["runs"] = runs
                rec["dp_event"] = dp_event[0] if dp_event else None
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # pyo3's PanicException is a BaseException
                rec.update(supported=False, error=one_line(e), runs=[])
                print(f"{SYSTEM} {q.id}: {one_line(e)}", file=sys.stderr)
                if args.debug:
                    traceback.print_exc()
                try:  # a failed statement must not poison the next query
                    conn.rollback()
                except Exception:
                    pass
            out.write(json.dumps(rec) + "\n")
            out.flush()
    conn.close()
    engine.dispose()


if __name__ == "__main__":
    main()
