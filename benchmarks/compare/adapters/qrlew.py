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

TPC-H (``--dataset tpch``: T01, T03; scale 1). Not loaded here: the data step (``data.py``) puts
the eight tables into schema ``compare_tpch`` (``workload.TPCH_PG_SCHEMA``) of the database that
``--pg-url``/``$QRLEW_PG_URL`` names (``postgres`` when it names none); a missing table stops
the adapter with that message (``load_s`` null). For pums and synthetic_1m only the server part
of that URL is used, as before. Set-up (``setup_s``): ``Dataset.from_database`` on that schema
(reflection and a ``COUNT(*)`` per table, ``lineitem``'s 6 M rows included), ``with_range`` for
``workload.TPCH_BOUNDS`` (l_quantity 1..50, l_extendedprice 0..104950, l_discount 0..0.10) and
``with_possible_values`` for ``workload.TPCH_DOMAINS`` (l_returnflag, l_linestatus,
o_orderpriority, c_mktsegment). The privacy unit is the customer, given to Qrlew as its own
privacy-unit paths through foreign keys (``workload.TPCH_UNIT_PATHS``, one entry per table,
each ending on ``customer.c_custkey``)::

    [("customer", [], "c_custkey"),
     ("orders", [("o_custkey", "customer", "c_custkey")], "c_custkey"),
     ("lineitem", [("l_orderkey", "orders", "o_orderkey"),
                   ("o_custkey", "customer", "c_custkey")], "c_custkey")]

Qrlew follows each path with joins in the SQL it writes (``lineitem`` → ``orders`` →
``customer``), so that every row of a private table carries its customer (``_PRIVACY_UNIT_``, an
MD5 of ``c_custkey``, Qrlew's default), and adds "same customer" to the condition of each join
of the query. Keys with a public domain get every combination of their values, with no
tau-thresholding (Qrlew LEFT JOINs the list of combinations with the rows before summing, so a
combination without rows is released as noise alone, clamped at 0): T01 releases 3 × 2
``(l_returnflag, l_linestatus)`` groups, where the data has 4 (A/O and R/O are noise); T03 the
5 priorities.

``max_multiplicity = workload.TPCH_GUESS_ROWS`` (100 rows per customer; Qrlew's default too, set
explicitly). Qrlew never counts, samples or drops a customer's rows by it: it is a factor of the
per-unit contribution bound. Every aggregate becomes sums (COUNT: of a 1 per row, AVG: a sum
and a count, SUM: the column); for each sum Qrlew adds up each customer's rows per group, takes
the L2 norm of that customer's vector over the groups and scales the vector down to at most
``C = max(|lower|, |upper|) × min(max_multiplicity, max_multiplicity_share × N)`` (the column's
range bound; N is Qrlew's bound on the query's input size, so the share, 0.1 by default, does
not bind), then adds Gaussian noise of σ = C·√(2 ln(1.25/δ'))/ε' (ε', δ': the budget split
evenly among the sums of the query) and clamps the result to the sum's range. So the noise is
that of 100 rows per customer at the bound (count: C = 100; revenue: C = 10,495,000), and only a
customer whose per-group sums have an L2 norm above C (e.g. more than 100 line items in one
group) is scaled down. T01 has 5 sums (ε' = 0.2, δ' = 2e-6: σ 2,583 for the count, 2.7e8 for
the revenue), T03 2 (ε' = 0.5: σ 997 and 1.05e8). (Qrlew's ``dp_event`` lists one Gaussian
per sum with the noise multiplier of the whole (ε, δ), 4.84; the SQL uses the split budget.)
``max_privacy_unit_groups`` (the groups a customer may contribute to; only tau-thresholding
uses it, for keys without a public domain) is the number of key combinations when every key
has a public domain, else TPCH_GUESS_ROWS.

Cost (2 shared cores, PostgreSQL 15): set-up 1.3–2 s; the rewritten T01 (one pass over the 6 M
line items joined to orders and customer, an MD5 per row, then a GROUP BY per customer and
group for the norms) takes 35–55 s per run, T03 about 5 s; Qrlew's rewriting itself < 0.2 s.

Dialect (TPC-H): the date literals ``DATE 'YYYY-MM-DD'`` are sent as the bare strings
``'YYYY-MM-DD'``: Qrlew's parser has no case for a typed literal (``todo!()``, also for
``TIMESTAMP '…'``) and its type system cannot cast to a date (``CAST('…' AS DATE)``:
``todo!()``), but it accepts a date column compared with a string and writes the comparison as
it is, which PostgreSQL evaluates as a date comparison (the literal takes the column's type):
the same rows as the workload's SQL.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import adapter_kit as kit  # noqa: E402
import workload  # noqa: E402

SYSTEM = "qrlew"
DB_NAME = "qrlew_bench"
PRIVACY_UNIT = [(workload.TABLE, [], workload.UNIT)]
TPCH = "tpch"
TPCH_SCHEMA = getattr(workload, "TPCH_PG_SCHEMA", "compare_tpch")
TPCH_DEFAULT_DB = "postgres"  # when --pg-url names no database
DIALECT = (
    (re.compile(r"\bVAR_SAMP\s*\(", re.I), "VARIANCE("),
    (re.compile(r"\bSTDDEV_SAMP\s*\(", re.I), "STDDEV("),
    # Qrlew parses no typed literal (DATE '…': a todo!()) and cannot cast to a date; compared
    # with a DATE column, PostgreSQL reads the bare string literal as that date.
    (re.compile(r"\bDATE\s*('\d{4}-\d{2}-\d{2}')", re.I), r"\1"),
)
PG_TYPES = {"int": "INTEGER", "text": "TEXT"}


def translate(sql: str) -> str:
    for pattern, repl in DIALECT:
        sql = pattern.sub(repl, sql)
    return sql


def url_database(url: str) -> str | None:
    return urlsplit(url).path.strip("/") or None


def sqlalchemy_url(url: str) -> str:
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql+psycopg2://", url, count=1)


def shown_url(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


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
    admin = psycopg2.connect(kit.with_database(pg_url, "postgres"))
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
    conn = psycopg2.connect(kit.with_database(pg_url, DB_NAME))
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


def tpch_privacy_unit() -> list[tuple[str, list[tuple[str, str, str]], str]]:
    """Qrlew's privacy unit for TPC-H: each private table's foreign-key path to the customer."""
    unit_table, unit_column = workload.TPCH_UNIT
    unit = []
    for table, path in workload.TPCH_UNIT_PATHS.items():
        steps = [(str(a), str(b), str(c)) for a, b, c in path]
        if (steps[-1][1] if steps else table) != unit_table:
            raise SystemExit(f"qrlew: the unit path of {table} does not end on {unit_table}")
        unit.append((table, steps, unit_column))
    return unit


def build_tpch_dataset(engine: Any, schema: str, shown: str) -> Any:
    """The TPC-H tables of ``schema`` with the public bounds and domains of the workload."""
    import sqlalchemy as sa
    from pyqrlew import Dataset

    inspector = sa.inspect(engine)
    tables = set(inspector.get_table_names(schema=schema))
    missing = [t for t in workload.TPCH_UNIT_PATHS if t not in tables]
    if missing:
        raise SystemExit(
            f"qrlew: no table {', '.join(missing)} in schema {schema} of {shown}: "
            "load TPC-H first (python benchmarks/compare/data.py --datasets tpch)"
        )
    table_of = {
        c["name"]: t for t in sorted(tables) for c in inspector.get_columns(t, schema=schema)
    }
    unknown = [c for c in [*workload.TPCH_BOUNDS, *workload.TPCH_DOMAINS] if c not in table_of]
    if unknown:
        raise SystemExit(f"qrlew: no column {', '.join(unknown)} in schema {schema} of {shown}")
    ds = Dataset.from_database(name=TPCH, engine=engine, schema_name=schema)
    for col, (lo, hi) in workload.TPCH_BOUNDS.items():
        ds = ds.with_range(schema, table_of[col], col, float(lo), float(hi))
    for col, values in workload.TPCH_DOMAINS.items():
        ds = ds.with_possible_values(schema, table_of[col], col, [str(v) for v in values])
    return ds


def tpch_max_groups(keys: list[str]) -> int:
    """The groups a customer may be in: every key combination when all keys have a public
    domain, else the bound on a customer's rows."""
    if any(k not in workload.TPCH_DOMAINS for k in keys):
        return int(workload.TPCH_GUESS_ROWS)
    return max(1, math.prod(len(workload.TPCH_DOMAINS[k]) for k in keys))


def main() -> None:
    p = kit.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--pg-url",
        default=kit.DEFAULT_PG,
        help="server URL; a database in it is used for tpch only (else postgres)",
    )
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()
    if not args.debug:
        os.environ["RUST_BACKTRACE"] = "0"  # a Rust panic is one line on stderr, not 40

    from importlib.metadata import version

    import sqlalchemy as sa

    queries = kit.queries(args)
    qr_version = version("pyqrlew")
    server = kit.with_database(args.pg_url, None)

    load_s: float | None
    if args.dataset == TPCH:  # loaded by the data step
        load_s, loaded = None, False
        started = time.perf_counter()
        tpch_url = kit.with_database(args.pg_url, url_database(args.pg_url) or TPCH_DEFAULT_DB)
        engine = sa.create_engine(sqlalchemy_url(tpch_url), isolation_level="AUTOCOMMIT")
        dataset = build_tpch_dataset(engine, TPCH_SCHEMA, shown_url(tpch_url))
        privacy_unit: Any = tpch_privacy_unit()
        max_multiplicity = float(workload.TPCH_GUESS_ROWS)
    else:
        schema = schema_name(args.dataset)
        load_s, loaded = ensure_loaded(server, args.data_dir / f"{args.dataset}.csv", schema)
        started = time.perf_counter()
        url = sqlalchemy_url(kit.with_database(server, DB_NAME))
        engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        dataset = build_dataset(engine, schema)
        privacy_unit = PRIVACY_UNIT
        max_multiplicity = 1.0
    conn = engine.connect()
    setup_s = time.perf_counter() - started
    with conn.exec_driver_sql("SHOW server_version") as res:
        pg_version = res.scalar()

    budget = {"epsilon": args.epsilon, "delta": args.delta}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for q in queries:
            sql = translate(q.sql)
            rec = kit.record(
                SYSTEM, qr_version, args, q.id, setup_s,
                load_s=load_s,
                loaded=loaded,
                database=f"PostgreSQL {pg_version}",
                sql_sent=sql,
                dp_event=None,
            )
            keys = kit.group_keys(q.sql)
            max_groups = tpch_max_groups(keys) if args.dataset == TPCH else 1
            rec["max_multiplicity"] = max_multiplicity
            rec["max_privacy_unit_groups"] = max_groups
            dp_event: list[Any] = []

            def once(
                sql: str = sql, dp_event: list[Any] = dp_event, max_groups: int = max_groups
            ) -> tuple[list[str], list[Any], float]:
                t = time.perf_counter()
                relation = dataset.relation(sql)
                rewritten = relation.rewrite_with_differential_privacy(
                    dataset,
                    privacy_unit,
                    budget,
                    max_multiplicity=max_multiplicity,
                    max_privacy_unit_groups=max_groups,
                )
                dp_sql = rewritten.relation().to_query()
                rewrite_s = time.perf_counter() - t
                if not dp_event:
                    dp_event.append(rewritten.dp_event().to_dict())
                with conn.exec_driver_sql(dp_sql) as res:
                    cols = list(res.keys())
                    rows = res.fetchall()
                return cols, rows, rewrite_s

            def describe(
                res: tuple[list[str], list[Any], float], _s: float,
                rec: dict[str, Any] = rec, keys: list[str] = keys,
            ) -> tuple[dict[str, Any], list[list[Any]]]:
                cols, rows, rewrite_s = res
                rec["columns"], norm = kit.normalise(cols, rows, keys)
                return {"rewrite_s": rewrite_s}, norm

            try:
                rec["runs"] = kit.timed_runs(args, once, describe)
                rec["dp_event"] = dp_event[0] if dp_event else None
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # pyo3's PanicException is a BaseException
                kit.refuse(rec, e, debug=args.debug)
                try:  # a failed statement must not poison the next query
                    conn.rollback()
                except Exception:
                    pass
            kit.write(out, rec)
    conn.close()
    engine.dispose()


if __name__ == "__main__":
    main()
