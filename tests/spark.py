"""Spark for the tests: one local session per test session, and tables as Parquet files.

``spark_master`` (``tests/conftest.py``) starts Spark local once (≈ 5-15 s) and keeps it for the
session: every :class:`~dpproxy.backends.spark.SparkBackend` of the session works on a
``newSession()`` of it. Without PySpark or Java the Spark tests skip, except under CI, where a
missing Spark is a failure (``tests/pg.skip_or_fail``'s rule).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb

from tests.pg import skip_or_fail

MASTER = "spark+local[2]"
# For the tests' tables of a few thousand rows: adaptive execution re-plans every stage (about
# half of a small query's time on this machine) and 8 shuffle partitions are 6 too many.
SMALL_DATA_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "2"}


# Expressions evaluated by the interpreter instead of generated Java, and one shuffle partition:
# on the fixtures' tables (at most 60,000 rows) compiling a query's generated code costs more
# than running it. 64 statements of the differential corpus replayed, interleaved (load ~9):
# 138 s with code generation and 2 partitions, 96 s interpreted, 86 s interpreted with 1
# partition; the tables cached in memory on top gained nothing (114 s).
INTERPRETED_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "1",
}


def small_data(backend: Any, *, interpreted: bool = False) -> Any:
    """``backend`` (a SparkBackend) tuned for tiny tables, without code generation when
    ``interpreted`` (with it again when not); its session only."""
    conf = backend._spark.conf
    for key in INTERPRETED_CONF:
        conf.unset(key)
    for key, value in {**SMALL_DATA_CONF, **(INTERPRETED_CONF if interpreted else {})}.items():
        conf.set(key, value)
    return backend


def require_spark() -> None:
    """Skip (fail under CI) unless PySpark and a Java runtime are installed."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        skip_or_fail("PySpark is not installed (pip install 'dpproxy[spark]')")
    if shutil.which("java") is None:
        skip_or_fail("no Java runtime for Spark local (apt-get install default-jdk-headless)")


def export_parquet(database: Path, directory: Path) -> Path:
    """Every table of a DuckDB file as ``directory/NAME.parquet``, rows in table order."""
    directory.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(database), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        for name in names:
            target = directory / f"{name}.parquet"
            con.execute(f"COPY {name} TO '{target}' (FORMAT parquet)")
    finally:
        con.close()
    return directory


def duckdb_from_parquet(directory: Path, path: Path) -> Path:
    """A DuckDB file with one table per Parquet file of ``directory`` and no constraints: the
    facts Spark has about the same tables (it enforces no PRIMARY KEY)."""
    con = duckdb.connect(str(path))
    try:
        for f in sorted(directory.glob("*.parquet")):
            con.execute(f"CREATE TABLE {f.stem} AS SELECT * FROM read_parquet('{f}')")
    finally:
        con.close()
    return path
