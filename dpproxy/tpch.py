"""TPC-H test and benchmark data: a DuckDB file from ``tpchgen-cli``, and a copy in PostgreSQL.

The eight TPC-H tables (``customer``, ``orders``, ``lineitem``, ``nation``, ``region``, ``part``,
``supplier``, ``partsupp``) are the join workload of dpproxy's tests and benchmarks; their
privacy schema is ``schemas/tpch.yaml`` (the customer is the privacy unit).

:func:`generate_tpch` runs the ``tpchgen-cli`` executable (the PyPI package of the same name,
in the ``test`` and ``bench`` extras) to write Parquet files into a temporary directory, then
loads them into a new DuckDB file with the column types of :data:`TABLES`:

* keys and other whole numbers are ``BIGINT`` or ``INTEGER``;
* the specification's ``DECIMAL`` columns (money, quantities, discounts, taxes) are ``DOUBLE``,
  since dpproxy treats every non-integer number as a float;
* dates are ``DATE`` and strings ``VARCHAR``; every column is ``NOT NULL``;
* each table has its primary key (``lineitem``: ``(l_orderkey, l_linenumber)``; ``partsupp``:
  ``(ps_partkey, ps_suppkey)``), and there are no foreign-key constraints.

The scale factor is recorded inside the file, in a one-row table ``tpch_meta`` (not part of the
privacy schema, so dpproxy never exposes it). The file is built under a temporary name in the
target's directory and moved into place with :func:`os.replace`: a crash never leaves a partial
file under the final name. A file that already records the requested scale is reused as is; any
other file at that path (another scale, or not a TPC-H file of ours) is replaced.

:func:`load_tpch_postgres` copies the eight tables from such a DuckDB file into a PostgreSQL
schema with ``COPY``, in one transaction, then adds the same primary keys and runs ``ANALYZE``.
psycopg 3 is imported only there.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from dpproxy.dsn import redact_dsn

if TYPE_CHECKING:
    import psycopg

GENERATOR = "tpchgen-cli"
META_TABLE = "tpch_meta"
GENERATE_TIMEOUT = 3600  # seconds; scale 1 takes a few seconds, scale 100 several minutes


@dataclass(frozen=True)
class Table:
    """A TPC-H table: its columns (name, DuckDB type) in specification order, and its key."""

    name: str
    columns: tuple[tuple[str, str], ...]
    primary_key: tuple[str, ...]


# TPC-H Standard Specification, Clause 1.4.1 (table layouts) and 1.4.2 (primary keys).
TABLES: tuple[Table, ...] = (
    Table(
        "region",
        (("r_regionkey", "BIGINT"), ("r_name", "VARCHAR"), ("r_comment", "VARCHAR")),
        ("r_regionkey",),
    ),
    Table(
        "nation",
        (
            ("n_nationkey", "BIGINT"),
            ("n_name", "VARCHAR"),
            ("n_regionkey", "BIGINT"),
            ("n_comment", "VARCHAR"),
        ),
        ("n_nationkey",),
    ),
    Table(
        "part",
        (
            ("p_partkey", "BIGINT"),
            ("p_name", "VARCHAR"),
            ("p_mfgr", "VARCHAR"),
            ("p_brand", "VARCHAR"),
            ("p_type", "VARCHAR"),
            ("p_size", "INTEGER"),
            ("p_container", "VARCHAR"),
            ("p_retailprice", "DOUBLE"),
            ("p_comment", "VARCHAR"),
        ),
        ("p_partkey",),
    ),
    Table(
        "supplier",
        (
            ("s_suppkey", "BIGINT"),
            ("s_name", "VARCHAR"),
            ("s_address", "VARCHAR"),
            ("s_nationkey", "BIGINT"),
            ("s_phone", "VARCHAR"),
            ("s_acctbal", "DOUBLE"),
            ("s_comment", "VARCHAR"),
        ),
        ("s_suppkey",),
    ),
    Table(
        "partsupp",
        (
            ("ps_partkey", "BIGINT"),
            ("ps_suppkey", "BIGINT"),
            ("ps_availqty", "INTEGER"),
            ("ps_supplycost", "DOUBLE"),
            ("ps_comment", "VARCHAR"),
        ),
        ("ps_partkey", "ps_suppkey"),
    ),
    Table(
        "customer",
        (
            ("c_custkey", "BIGINT"),
            ("c_name", "VARCHAR"),
            ("c_address", "VARCHAR"),
            ("c_nationkey", "BIGINT"),
            ("c_phone", "VARCHAR"),
            ("c_acctbal", "DOUBLE"),
            ("c_mktsegment", "VARCHAR"),
            ("c_comment", "VARCHAR"),
        ),
        ("c_custkey",),
    ),
    Table(
        "orders",
        (
            ("o_orderkey", "BIGINT"),
            ("o_custkey", "BIGINT"),
            ("o_orderstatus", "VARCHAR"),
            ("o_totalprice", "DOUBLE"),
            ("o_orderdate", "DATE"),
            ("o_orderpriority", "VARCHAR"),
            ("o_clerk", "VARCHAR"),
            ("o_shippriority", "INTEGER"),
            ("o_comment", "VARCHAR"),
        ),
        ("o_orderkey",),
    ),
    Table(
        "lineitem",
        (
            ("l_orderkey", "BIGINT"),
            ("l_partkey", "BIGINT"),
            ("l_suppkey", "BIGINT"),
            ("l_linenumber", "INTEGER"),
            ("l_quantity", "DOUBLE"),
            ("l_extendedprice", "DOUBLE"),
            ("l_discount", "DOUBLE"),
            ("l_tax", "DOUBLE"),
            ("l_returnflag", "VARCHAR"),
            ("l_linestatus", "VARCHAR"),
            ("l_shipdate", "DATE"),
            ("l_commitdate", "DATE"),
            ("l_receiptdate", "DATE"),
            ("l_shipinstruct", "VARCHAR"),
            ("l_shipmode", "VARCHAR"),
            ("l_comment", "VARCHAR"),
        ),
        ("l_orderkey", "l_linenumber"),
    ),
)

TABLE_NAMES: tuple[str, ...] = tuple(t.name for t in TABLES)

# DuckDB type → PostgreSQL type.
_PG_TYPES = {
    "BIGINT": "bigint",
    "INTEGER": "integer",
    "DOUBLE": "double precision",
    "DATE": "date",
    "VARCHAR": "text",
}

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


# ------------------------------------------------------------------------------------ helpers


def _say(enabled: bool, message: str) -> None:
    if enabled:
        print(f"tpch: {message}", file=sys.stderr, flush=True)


@contextmanager
def _timed() -> Iterator[list[float]]:
    """Yields a one-element list that holds the block's duration in seconds once it ends."""
    box = [0.0]
    started = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - started


def _sql_string(text: str) -> str:
    """A SQL string literal for ``text``."""
    return "'" + text.replace("'", "''") + "'"


def _check_scale(scale: float) -> float:
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise TypeError(f"the scale factor must be a number, not {type(scale).__name__}")
    value = float(scale)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"the scale factor must be a positive number, not {scale!r}")
    return value


def find_generator() -> Path:
    """The ``tpchgen-cli`` executable: next to ``sys.executable`` (the active virtual
    environment's ``bin``), else on ``PATH``.

    Raises :class:`FileNotFoundError` saying how to install it when there is none.
    """
    beside = shutil.which(GENERATOR, path=str(Path(sys.executable).parent))
    found = beside or shutil.which(GENERATOR)
    if found is None:
        raise FileNotFoundError(
            f"{GENERATOR} was not found next to {sys.executable} nor on PATH: "
            f"pip install {GENERATOR} (it is in dpproxy's 'test' and 'bench' extras)"
        )
    return Path(found)


def _generator_version(exe: Path) -> str:
    """``tpchgen-cli --version`` (for example ``tpchgen-cli 4.0.0``), or the name alone."""
    try:
        proc = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return GENERATOR
    return proc.stdout.strip() or GENERATOR


def recorded_scale(path: Path) -> float | None:
    """The scale factor recorded in the DuckDB file ``path`` by :func:`generate_tpch`, or None
    if there is no such file or it records none."""
    if not Path(path).is_file():
        return None
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None
    try:
        row = con.execute(f"SELECT scale_factor FROM {META_TABLE}").fetchone()
    except duckdb.Error:
        return None
    finally:
        con.close()
    return float(row[0]) if row is not None and row[0] is not None else None


# ------------------------------------------------------------------------------------- DuckDB


def generate_tpch(path: Path, scale: float, *, progress: bool = False) -> Path:
    """Build the TPC-H database of scale factor ``scale`` as a DuckDB file at ``path``.

    Returns ``path``. If the file already exists and records the same scale in its
    ``tpch_meta`` table, it is returned untouched. Otherwise ``tpchgen-cli`` (see
    :func:`find_generator`) writes the eight tables as Parquet into a temporary directory beside
    ``path``; they are loaded with the types and primary keys of :data:`TABLES` into a DuckDB
    file under a temporary name, which is checkpointed and then moved onto ``path``
    atomically (replacing any file there). Temporary files are removed in every case.

    With ``progress``, lines on stderr report the generation and each table loaded (rows and
    seconds). Raises :class:`ValueError` for a scale that is not positive, or one so small that
    the specification's formula for ``ps_suppkey`` repeats a supplier of a part, so that
    partsupp's key does not hold (0.001, 0.005 or 0.012, for example). With S = 10,000 × scale
    suppliers that cannot happen once S > 228, that is from scale 0.023 on; 0.01 and 0.02 are
    also fine.
    """
    path = Path(path)
    scale = _check_scale(scale)
    if recorded_scale(path) == scale:
        _say(progress, f"{path} already holds scale {scale:g}")
        return path
    exe = find_generator()
    version = _generator_version(exe)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_db = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    with _timed() as total:
        try:
            with tempfile.TemporaryDirectory(
                prefix=f".{path.name}.parquet-", dir=path.parent
            ) as parquet_dir:
                _generate_parquet(exe, version, scale, Path(parquet_dir), progress)
                _load_duckdb(Path(parquet_dir), tmp_db, scale, version, progress)
            os.replace(tmp_db, path)
        finally:
            for leftover in (tmp_db, tmp_db.with_name(tmp_db.name + ".wal")):
                leftover.unlink(missing_ok=True)
    _say(progress, f"wrote {path} (scale {scale:g}) in {total[0]:.1f} s")
    return path


def _generate_parquet(exe: Path, version: str, scale: float, out: Path, progress: bool) -> None:
    """Run ``tpchgen-cli parquet`` for all eight tables into the directory ``out``."""
    args = [str(exe), "parquet", "--scale-factor", repr(scale), "--output-dir", str(out)]
    args += ["--quiet", "--no-progress"]
    _say(progress, f"generating scale {scale:g} with {version} …")
    with _timed() as took:
        try:
            proc = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=GENERATE_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"{GENERATOR} did not finish within {GENERATE_TIMEOUT} s: {' '.join(args)}"
            ) from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
        raise RuntimeError(f"{GENERATOR} failed (exit {proc.returncode}): {' '.join(args)}\n{tail}")
    missing = [t for t in TABLE_NAMES if not (out / f"{t}.parquet").is_file()]
    if missing:
        raise RuntimeError(f"{GENERATOR} wrote no Parquet file for {', '.join(missing)} in {out}")
    _say(progress, f"generated the Parquet files in {took[0]:.1f} s")


def _duckdb_ddl(table: Table) -> str:
    columns = [f"{name} {kind} NOT NULL" for name, kind in table.columns]
    columns.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    return f"CREATE TABLE {table.name} (\n  " + ",\n  ".join(columns) + "\n)"


def _load_duckdb(
    parquet_dir: Path, db_path: Path, scale: float, version: str, progress: bool
) -> None:
    """Create the eight tables (and ``tpch_meta``) in a new DuckDB file from the Parquet."""
    con = duckdb.connect(str(db_path))
    try:
        con.execute("SET enable_progress_bar = false")  # progress is ours to report
        for table in TABLES:
            source = _sql_string(str(parquet_dir / f"{table.name}.parquet"))
            select = ", ".join(f"CAST({name} AS {kind})" for name, kind in table.columns)
            with _timed() as took:
                con.execute(_duckdb_ddl(table))
                try:
                    con.execute(
                        f"INSERT INTO {table.name} SELECT {select} FROM read_parquet({source})"
                    )
                except duckdb.ConstraintException as e:
                    raise ValueError(
                        f"the generated {table.name} violates its primary key "
                        f"({', '.join(table.primary_key)}) at scale {scale:g}: {e}. At some "
                        "small scales the specification's formula for ps_suppkey repeats a "
                        "supplier of a part; use 0.01, 0.02, or any scale of 0.023 or more"
                    ) from None
                row = con.execute(f"SELECT count(*) FROM {table.name}").fetchone()
            rows = int(row[0]) if row is not None else 0
            _say(progress, f"loaded {table.name:<8} {rows:>10,} rows in {took[0]:6.1f} s")
        con.execute(
            f"CREATE TABLE {META_TABLE} (scale_factor DOUBLE NOT NULL, "
            "generator VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL)"
        )
        con.execute(
            f"INSERT INTO {META_TABLE} VALUES (?, ?, CAST(now() AS TIMESTAMP))", [scale, version]
        )
        con.execute("CHECKPOINT")
    finally:
        con.close()


# ---------------------------------------------------------------------------------- PostgreSQL


def load_tpch_postgres(
    duckdb_path: Path, dsn: str, *, schema: str = "public", progress: bool = False
) -> None:
    """Copy the eight TPC-H tables of the DuckDB file ``duckdb_path`` into PostgreSQL.

    ``dsn`` is a libpq URL or ``key=value`` string; ``schema`` a lower-case identifier, created
    if it does not exist. In one transaction, each table is dropped if it exists (an error if
    other objects depend on it), created with the PostgreSQL equivalents of the DuckDB types
    (``bigint``, ``integer``, ``double precision``, ``date``, ``text``; all ``NOT NULL``),
    filled with ``COPY … FROM STDIN (FORMAT csv, FREEZE)`` from a CSV export made by DuckDB,
    and given its primary key; then every table is analysed. A failure leaves the database as
    it was. The rows copied are checked against the DuckDB counts.

    With ``progress``, lines on stderr report each table copied (rows and seconds), the keys and
    ``ANALYZE``.
    """
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(
            f"invalid schema name {schema!r}: use a lower-case name of letters, digits and _"
        )
    duckdb_path = Path(duckdb_path)
    if recorded_scale(duckdb_path) is None:
        raise FileNotFoundError(f"{duckdb_path} is not a TPC-H database made by generate_tpch")
    import psycopg

    shown = redact_dsn(dsn)
    with _timed() as total:
        source = duckdb.connect(str(duckdb_path), read_only=True)
        try:
            source.execute("SET enable_progress_bar = false")
            with (
                tempfile.TemporaryDirectory(prefix="dpproxy-tpch-") as tmp,
                psycopg.connect(dsn, application_name="dpproxy tpch load") as conn,
            ):
                # The connection block commits if everything succeeded, else rolls back.
                _copy_all(source, conn, schema, Path(tmp), progress)
        finally:
            source.close()
    _say(progress, f"loaded {len(TABLES)} tables into {schema} at {shown} in {total[0]:.1f} s")


def _copy_all(
    source: duckdb.DuckDBPyConnection,
    conn: psycopg.Connection[tuple[object, ...]],
    schema: str,
    tmp: Path,
    progress: bool,
) -> None:
    from psycopg import sql

    with conn.cursor() as cur:
        cur.execute("SET LOCAL statement_timeout = 0")
        cur.execute("SET LOCAL maintenance_work_mem = '512MB'")
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        for table in TABLES:
            name = sql.Identifier(schema, table.name)
            ddl = sql.SQL(", ").join(
                sql.SQL("{} {} NOT NULL").format(sql.Identifier(column), sql.SQL(_PG_TYPES[kind]))
                for column, kind in table.columns
            )
            with _timed() as took:
                csv_path = tmp / f"{table.name}.csv"
                source.execute(
                    f"COPY (SELECT * FROM {table.name}) TO {_sql_string(str(csv_path))} "
                    "(FORMAT csv, HEADER false)"
                )
                cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
                cur.execute(sql.SQL("CREATE TABLE {} ({})").format(name, ddl))
                copy_sql = sql.SQL("COPY {} FROM STDIN (FORMAT csv, FREEZE true)").format(name)
                with cur.copy(copy_sql) as copy, csv_path.open("rb") as f:
                    while chunk := f.read(1 << 20):
                        copy.write(chunk)
                copied = cur.rowcount
                csv_path.unlink()
            row = source.execute(f"SELECT count(*) FROM {table.name}").fetchone()
            expected = int(row[0]) if row is not None else -1
            if copied != expected:
                raise RuntimeError(
                    f"COPY into {schema}.{table.name} reported {copied} rows, DuckDB has {expected}"
                )
            _say(progress, f"copied {table.name:<8} {copied:>10,} rows in {took[0]:6.1f} s")
        with _timed() as took:
            for table in TABLES:
                cur.execute(
                    sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(
                        sql.Identifier(schema, table.name),
                        sql.SQL(", ").join(sql.Identifier(c) for c in table.primary_key),
                    )
                )
        _say(progress, f"added the primary keys in {took[0]:.1f} s")
        with _timed() as took:
            for table in TABLES:
                cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table.name)))
        _say(progress, f"analysed in {took[0]:.1f} s")


# TPC-H Q1, Q3, Q5 and Q10 reduced to what dpproxy answers with the customer as the privacy unit
# (schemas/tpch.yaml): Q3 and Q10 group by nation or ship priority instead of by order or
# customer (one group per person would be refused), Q5 keeps its six-table join. The tests
# (tests/integration/test_joins.py) and the benchmark (benchmarks/bench_joins.py) run these.
Q1 = (
    "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, "
    "SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price, AVG(l_quantity) AS avg_qty, "
    "COUNT(*) AS count_order FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' "
    "GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"
)
Q3 = (
    "SELECT o_shippriority, SUM(l_extendedprice * (1 - l_discount)) AS revenue, "
    "COUNT(*) AS lines FROM customer, orders, lineitem WHERE c_mktsegment = 'BUILDING' "
    "AND c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate < DATE '1995-03-15' "
    "AND l_shipdate > DATE '1995-03-15' GROUP BY o_shippriority"
)
Q5 = (
    "SELECT n_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue FROM customer, orders, "
    "lineitem, supplier, nation, region WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey "
    "AND l_suppkey = s_suppkey AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey "
    "AND n_regionkey = r_regionkey AND r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' "
    "AND o_orderdate < DATE '1995-01-01' GROUP BY n_name"
)
Q10 = (
    "SELECT n.n_name, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue, "
    "COUNT(DISTINCT c.c_custkey) AS customers FROM customer AS c "
    "JOIN orders AS o ON c.c_custkey = o.o_custkey "
    "JOIN lineitem AS l ON l.l_orderkey = o.o_orderkey "
    "JOIN nation AS n ON c.c_nationkey = n.n_nationkey WHERE o.o_orderdate >= DATE '1993-10-01' "
    "AND o.o_orderdate < DATE '1994-01-01' AND l.l_returnflag = 'R' GROUP BY n.n_name"
)
QUERIES = {"q1": Q1, "q3": Q3, "q5": Q5, "q10": Q10}
