"""The SmartNoise SQL adapter of the peer comparison (INTERFACE.md), run with its own venv.

SmartNoise SQL (``smartnoise-sql``) in its typical embedded use: a pandas DataFrame handed to
``snsql.from_connection(df, ...)``, which builds a ``PandasReader`` (the DataFrame copied into an
in-memory SQLite database through SQLAlchemy) wrapped in a ``PrivateReader``. That construction
is ``setup_s``; reading the CSV into pandas is ``load_s``.

Metadata, from ``workload.COLUMNS``: table ``PUMS.data`` (SmartNoise needs ``SCHEMA.TABLE``
names, so ``FROM data`` becomes ``FROM PUMS.data``), ``row_privacy: False`` with ``pid`` as
``private_id``, ``max_ids: 1``, the same lower/upper bounds on age and income, the text columns
as strings (SmartNoise has no notion of a public domain). The other table options keep
SmartNoise's defaults: ``censor_dims: True`` (a noisy count of distinct units per output row,
rows under the threshold tau dropped; this is its partition selection, and it runs on ungrouped
queries too), ``clamp_counts: False``, ``clamp_columns: True``, ``use_dpsu: False``. One option
is set: ``sample_max_ids: False``, SmartNoise's way to declare that no unit ever has more than
``max_ids`` rows (the workload's one row per ``pid``; dpproxy is told the same by a primary key).
Its default, ``True``, bounds each unit's rows with a ``ROW_NUMBER() OVER (PARTITION BY pid
ORDER BY RANDOM())`` reservoir sample in SQLite on every query, a no-op on this data that costs
4-7x the query time at 1M rows; ``--sample-max-ids`` restores it.

Budget: SmartNoise's ``Privacy(epsilon=...)`` is the ε of *each* noisy statistic, not of the
query: ``AVG`` is a noisy SUM and a noisy COUNT, ``VAR`` three sums, and with ``censor_dims`` the
distinct-unit count adds one more, each at the full ε (its odometer composes them). To give
every system the same ε per query, the adapter counts the query's mechanisms k once (the
rewrite, no data read; ``plan_s``) and runs it with ``Privacy(epsilon=ε/k, delta=δ)``, so the
mechanisms add up to exactly ε (δ goes to the threshold only). The AVG = SUM/COUNT rewrite
itself is SmartNoise's and is kept. ``epsilon_per_mechanism`` and ``mechanisms`` are in each
line. ``--budget per-statistic`` runs SmartNoise's literal behaviour instead (ε per statistic).

Dialect: only what SmartNoise spells differently: the table name, and ``VAR_SAMP``/
``STDDEV_SAMP`` as its ``VAR``/``STDDEV`` (which compute the population variance,
E[x²] − E[x]²). Everything else is sent as written; what it cannot parse or rewrite is reported
as unsupported with its own exception.

TPC-H (``--dataset tpch``; the customer with all their orders and line items as the unit):
SmartNoise's PandasReader takes one table only, so the three tables go into an in-memory SQLite
database (schema ``TPCH``, attached; ``snsql.from_connection(conn, engine="sqlite")``, SmartNoise's
own SQLite reader), with the columns the queries read, and a metadata that says what SmartNoise
can say about each table: ``customer`` with ``private_id`` ``c_custkey`` (its key: ``max_ids``
1), ``orders`` with ``private_id`` ``o_custkey`` (the customer's key is in the table;
``max_ids`` = ``workload.TPCH_GUESS_ROWS``, enforced by SmartNoise's reservoir sample), and
``lineitem``, whose customer is only reachable through ``l_orderkey`` → ``orders`` →
``o_custkey``: SmartNoise's metadata has no references between tables, so it gets no
``private_id`` (declaring ``l_orderkey`` would protect orders, not customers, and
``row_privacy`` single line items). Bounds and types from ``workload.TPCH_BOUNDS``; dates as
ISO strings. When SmartNoise refuses a join, the adapter also asks it (metadata only) with the
unit declared on ``customer`` alone and records that refusal as ``error_note``. Each query first
goes through SmartNoise's own rewrite (no data read, as for the other data sets); only when
SmartNoise accepts one are the tables filled from ``DIR/tpch/*.parquet`` (``load_s``; pandas
with pyarrow), so a query SmartNoise refuses costs no loading. Dialect: the bare table names
become ``TPCH.<table>``, and ``DATE '…'`` literals plain strings (SQLite compares ISO dates as
text). A refusal is reported with SmartNoise's message.
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import adapter_kit as kit  # noqa: E402
import workload  # noqa: E402

SYSTEM = "smartnoise"
SCHEMA = "PUMS"  # SmartNoise wants SCHEMA.TABLE; any schema name works
QUALIFIED = f"{SCHEMA}.{workload.TABLE}"
DIALECT = (
    (re.compile(rf"\bFROM\s+{workload.TABLE}\b", re.I), f"FROM {QUALIFIED}"),
    (re.compile(r"\bVAR_SAMP\s*\(", re.I), "VAR("),
    (re.compile(r"\bSTDDEV_SAMP\s*\(", re.I), "STDDEV("),
)


TPCH_SCHEMA = "TPCH"
TPCH_DIALECT = (
    (re.compile(r"\b(FROM|JOIN)\s+(customer|orders|lineitem)\b", re.I),
     rf"\1 {TPCH_SCHEMA}.\2"),
    (re.compile(r"\bDATE\s+('[0-9-]+')", re.I), r"\1"),
)
# The columns of the TPC-H tables that the queries read, with SmartNoise's types.
TPCH_COLUMNS: dict[str, dict[str, str]] = {
    "customer": {"c_custkey": "int", "c_mktsegment": "string"},
    "orders": {"o_orderkey": "int", "o_custkey": "int", "o_orderdate": "string",
               "o_orderpriority": "string"},
    "lineitem": {"l_orderkey": "int", "l_quantity": "float", "l_extendedprice": "float",
                 "l_discount": "float", "l_returnflag": "string", "l_linestatus": "string",
                 "l_shipdate": "string"},
}
SQLITE_TYPES = {"int": "INTEGER", "float": "REAL", "string": "TEXT"}


def translate(sql: str, dataset: str = "pums") -> str:
    for pattern, repl in TPCH_DIALECT if dataset == "tpch" else DIALECT:
        sql = pattern.sub(repl, sql)
    return sql


def tpch_metadata(orders_unit: bool = True) -> dict[str, Any]:
    """What SmartNoise's metadata can say about the three TPC-H tables (module docstring).
    ``orders_unit=False``: no ``private_id`` on orders (only to see what else SmartNoise
    objects to in a join when a single table declares the unit)."""
    unit_column = {"customer": "c_custkey", "orders": "o_custkey" if orders_unit else None,
                   "lineitem": None}
    tables: dict[str, Any] = {}
    for table, columns in TPCH_COLUMNS.items():
        cols: dict[str, Any] = {}
        for name, kind in columns.items():
            spec: dict[str, Any] = {"type": kind}
            if name == unit_column[table]:
                spec["private_id"] = True
            if name in workload.TPCH_BOUNDS:
                spec["lower"], spec["upper"] = workload.TPCH_BOUNDS[name]
            cols[name] = spec
        tables[table] = {
            "row_privacy": False,
            "max_ids": 1 if table == "customer" else workload.TPCH_GUESS_ROWS,
            "sample_max_ids": table != "customer",  # c_custkey is customer's key
            "censor_dims": True,
            "clamp_counts": False,
            "clamp_columns": True,
            "use_dpsu": False,
            **cols,
        }
    return {"": {TPCH_SCHEMA: tables}}


def tpch_connection() -> Any:
    """An in-memory SQLite database with the (still empty) TPC-H tables in schema TPCH."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.execute(f"ATTACH DATABASE ':memory:' AS {TPCH_SCHEMA}")
    for table, columns in TPCH_COLUMNS.items():
        cols = ", ".join(f"{c} {SQLITE_TYPES[k]} NOT NULL" for c, k in columns.items())
        conn.execute(f"CREATE TABLE {TPCH_SCHEMA}.{table} ({cols})")
    conn.commit()
    return conn


def tpch_load(conn: Any, data_dir: Path) -> None:
    """Fill the TPC-H tables from DIR/tpch/<table>.parquet (dates as ISO strings)."""
    import pandas as pd

    for table, columns in TPCH_COLUMNS.items():
        df = pd.read_parquet(data_dir / "tpch" / f"{table}.parquet", columns=list(columns))
        for c, kind in columns.items():
            if kind == "string":
                df[c] = df[c].astype(str)
        marks = ", ".join("?" for _ in columns)
        conn.executemany(f"INSERT INTO {TPCH_SCHEMA}.{table} VALUES ({marks})",
                         df.itertuples(index=False, name=None))
        conn.commit()
        print(f"{SYSTEM}: loaded {table} ({len(df):,} rows)", file=sys.stderr, flush=True)


def metadata(rows: int, sample_max_ids: bool = False) -> dict[str, Any]:
    cols: dict[str, Any] = {}
    for c in workload.COLUMNS:
        if c.name == workload.UNIT:
            cols[c.name] = {"type": "int", "private_id": True}
        elif c.type == "int":
            cols[c.name] = {"type": "int", "lower": int(c.lower), "upper": int(c.upper)}
        else:
            cols[c.name] = {"type": "string"}
    table = {
        "rows": rows,
        "row_privacy": False,
        "max_ids": 1,
        "censor_dims": True,
        "clamp_counts": False,
        "clamp_columns": True,
        "sample_max_ids": sample_max_ids,
        "use_dpsu": False,
        **cols,
    }
    return {"": {SCHEMA: {workload.TABLE: table}}}


def main() -> None:
    p = kit.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--budget",
        choices=("per-query", "per-statistic"),
        default="per-query",
        help="per-query: ε/k for each of the query's k mechanisms (default); "
        "per-statistic: SmartNoise's own meaning, ε for every mechanism",
    )
    p.add_argument(
        "--sample-max-ids",
        action="store_true",
        help="SmartNoise's default reservoir sampling of each unit's rows (off: one row per pid)",
    )
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()

    warnings.filterwarnings("ignore")
    from importlib.metadata import version

    import pandas as pd
    import snsql
    from snsql import Privacy

    queries = kit.queries(args)
    sn_version = version("smartnoise-sql")
    tpch = args.dataset == "tpch"

    load_s: float | None = None
    conn = None
    if tpch:
        started = time.perf_counter()
        conn = tpch_connection()
        reader = snsql.from_connection(
            conn, engine="sqlite", metadata=tpch_metadata(),
            privacy=Privacy(epsilon=args.epsilon, delta=args.delta),
        )
        setup_s = time.perf_counter() - started
    else:
        started = time.perf_counter()
        text_cols = {c.name: str for c in workload.COLUMNS if c.type == "text"}
        df = pd.read_csv(args.data_dir / f"{args.dataset}.csv", dtype=text_cols)
        df = df[[c.name for c in workload.COLUMNS]]
        for c in workload.COLUMNS:
            if c.type == "int":
                df[c.name] = df[c.name].astype("int64")
        load_s = time.perf_counter() - started

        started = time.perf_counter()
        reader = snsql.from_connection(
            df,
            metadata=metadata(len(df), sample_max_ids=args.sample_max_ids),
            privacy=Privacy(epsilon=args.epsilon, delta=args.delta),
        )
        setup_s = time.perf_counter() - started
    engine = f"{reader.engine} ({type(reader.reader).__name__}: in-memory SQLite)"

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for q in queries:
            sql = translate(q.sql, args.dataset)
            rec = kit.record(
                SYSTEM, sn_version, args, q.id, setup_s,
                load_s=load_s,
                reader=engine,
                sql_sent=sql,
                budget=args.budget,
                sample_max_ids=args.sample_max_ids,
                mechanisms=None,
                epsilon_per_mechanism=None,
                plan_s=None,
            )
            if tpch:
                rec["rows_per_unit"] = workload.TPCH_GUESS_ROWS  # orders' and lineitem's max_ids
            try:
                # The budget split: count the mechanisms of the rewritten query (no data read).
                t = time.perf_counter()
                reader.privacy = Privacy(epsilon=args.epsilon, delta=args.delta)
                costs = [c for c in reader._get_mechanism_costs(sql) if c]
                k = max(1, len(costs))
                per = args.epsilon / k if args.budget == "per-query" else args.epsilon
                reader.privacy = Privacy(epsilon=per, delta=args.delta)
                reader._get_mechanism_costs(sql)  # the scales at ε/k (raises if they fail)
                rec.update(mechanisms=k, epsilon_per_mechanism=per)
                rec["plan_s"] = time.perf_counter() - t
                if tpch and load_s is None:  # SmartNoise accepted a query: now the data
                    assert conn is not None
                    t = time.perf_counter()
                    tpch_load(conn, args.data_dir)
                    load_s = time.perf_counter() - t
                    rec["load_s"] = load_s
                keys = kit.group_keys(q.sql)

                def once(sql: str = sql) -> tuple[list[str], list[Any]]:
                    res = reader.execute(sql)
                    return list(res[0]), res[1:]

                def describe(
                    res: tuple[list[str], list[Any]], _s: float,
                    rec: dict[str, Any] = rec, keys: list[str] = keys,
                ) -> tuple[dict[str, Any], list[list[Any]]]:
                    rec["columns"], rows = kit.normalise(*res, keys)
                    return {}, rows

                rec["runs"] = kit.timed_runs(args, once, describe)
            except Exception as e:  # not supported: say why, go on
                kit.refuse(rec, e, debug=args.debug)
                if tpch and " JOIN " in sql.upper():
                    # SmartNoise refuses a query reading two tables with a private_id each;
                    # what it says with the unit declared on customer alone (no data read).
                    try:
                        alone = snsql.from_connection(
                            conn, engine="sqlite", metadata=tpch_metadata(orders_unit=False),
                            privacy=Privacy(epsilon=args.epsilon, delta=args.delta))
                        alone._get_mechanism_costs(sql)
                    except Exception as e2:
                        if kit.one_line(e2) != rec["error"]:
                            rec["error_note"] = ("with a private_id on customer only, SmartNoise "
                                                 f"says: {kit.one_line(e2)}")
            kit.write(out, rec)


if __name__ == "__main__":
    main()
