"""Named attack: an ``Engine(catalog, backend)`` built directly skipped the schema's type fit.

``open_engine`` (``dpproxy.connect``, ``dpproxy serve``, ``dpproxy query``) refused a column
whose database type the schema's number type cannot read (42804:
``tests/attacks/test_wide_numeric.py``), but the check ran there only, before the engine was
built. An ``Engine`` over a DuckDB ``UHUGEINT`` column declared ``integer`` opened, and
``SELECT COUNT(*) FROM t WHERE x = -1`` failed (XX000, charged) on the database where one
unit held 2^128 - 1 and was answered on its neighbour without that unit: one exact bit about
that unit. Likewise a PostgreSQL ``numeric`` without a precision holding 1e400 (since
2026-11-29 read as DOUBLE through a total conversion instead: ``sql/widenum.py``). The fit is now
checked by the backends' ``attach_catalog`` (``backends/fit.py``), which every engine calls:
the direct engine is refused at construction with open_engine's SQLSTATE, on every database
alike.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine, open_engine
from dpproxy.errors import DPProxyError
from tests.noise import NoNoise

SCHEMA = """\
version: 1
dataset: wide
privacy:
  epsilon: 1.0
  delta: 1.0e-6
  budget: {epsilon: 1000000000, delta: 0.5}
tables:
  t:
    private: true
    privacy_unit: uid
    max_rows_per_unit: 3
    columns:
      uid: {type: integer}
      x: {type: TYPE, nullable: true}
"""
SQL = {
    "duckdb": "SELECT COUNT(*) FROM t WHERE x = -1",
    "postgres": "SELECT COUNT(*) FROM t WHERE x + 1 > 0",
}


def direct(
    schema: str, backend: DuckDBBackend | PostgresBackend, sql: str
) -> tuple[str, str | None]:
    """("refused", SQLSTATE) when the engine is refused at construction or the query before
    the data, ("failed", SQLSTATE) when the query ran and failed, ("answered", None)."""
    try:
        try:
            engine = Engine(parse_catalog(schema, source="wide.yaml"), backend, noise=NoNoise())
        except DPProxyError as e:
            return ("refused", e.sqlstate)
        try:
            engine.prepare(sql)
        except DPProxyError as e:
            return ("refused", e.sqlstate)
        try:
            engine.run(sql, analyst="mallory")
        except DPProxyError as e:
            return ("failed", e.sqlstate)
        return ("answered", None)
    finally:
        backend.close()


def opened(database: str, schema: Path) -> str | None:
    """open_engine's SQLSTATE, or None when it opens."""
    try:
        open_engine(database, str(schema), noise=NoNoise()).close()
    except DPProxyError as e:
        return e.sqlstate
    return None


def duck_file(tmp: Path, column_type: str, rows: list[tuple[int, str]]) -> Path:
    path = tmp / f"wide{len(list(tmp.glob('*.duckdb')))}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t (uid INTEGER NOT NULL, x {column_type})")
    for uid, value in rows:
        con.execute(f"INSERT INTO t VALUES (?, CAST(? AS {column_type}))", [uid, value])
    con.close()
    return path


@pytest.mark.parametrize(
    ("column_type", "value"), [("UHUGEINT", str(2**128 - 1)), ("HUGEINT", str(-(2**127)))]
)
def test_a_direct_duckdb_engine_over_a_wide_column_is_refused(
    tmp_path: Path, column_type: str, value: str
) -> None:
    schema = SCHEMA.replace("TYPE", "integer")
    (tmp_path / "wide.yaml").write_text(schema)
    got = []
    for rows in ([(1, "1"), (2, "2"), (30, value)], [(1, "1"), (2, "2")]):
        path = duck_file(tmp_path, column_type, rows)
        assert opened(str(path), tmp_path / "wide.yaml") == "42804"
        got.append(direct(schema, DuckDBBackend(path), SQL["duckdb"]))
    assert got[0] == got[1] == ("refused", "42804"), got


def test_a_direct_duckdb_engine_that_fits_still_opens(tmp_path: Path) -> None:
    schema = SCHEMA.replace("TYPE", "integer")
    (tmp_path / "wide.yaml").write_text(schema)
    path = duck_file(tmp_path, "BIGINT", [(1, "1"), (30, "-1")])
    assert opened(str(path), tmp_path / "wide.yaml") is None
    assert direct(schema, DuckDBBackend(path), SQL["duckdb"]) == ("answered", None)


def _url(pg_dsn: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)  # dpproxy takes postgresql:// URLs
    user, host = info.get("user", "postgres"), info.get("host", "127.0.0.1")
    return f"postgresql://{user}@{host}:{info.get('port') or 5432}/{info['dbname']}"


def load(dsn: str, column_type: str, rows: list[tuple[int, str]]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS t")
        conn.execute(f"CREATE TABLE t (uid integer NOT NULL, x {column_type})")  # type: ignore[arg-type]
        for r in rows:
            conn.execute("INSERT INTO t VALUES (%s, %s::numeric)", r)


@pytest.mark.parametrize("column_type", ["numeric", "numeric(1000, 500)"])
def test_a_direct_postgres_engine_reads_a_wide_numeric_as_a_double(
    pg_dsn: str, tmp_path: Path, column_type: str
) -> None:
    """Refused (42804) until 2026-11-29; now read as DOUBLE through a total conversion
    (sql/widenum.py), answered on the database and its neighbour alike."""
    dsn = _url(pg_dsn)
    schema = SCHEMA.replace("TYPE", "float")
    (tmp_path / "wide.yaml").write_text(schema)
    got = []
    for rows in ([(1, "1.5"), (2, "2.5"), (3, "1e400")], [(1, "1.5"), (2, "2.5")]):
        load(dsn, column_type, rows)
        assert opened(dsn, tmp_path / "wide.yaml") is None
        got.append(direct(schema, PostgresBackend(dsn), SQL["postgres"]))
    assert got[0] == got[1] == ("answered", None), got


def test_a_direct_postgres_engine_that_fits_still_opens(pg_dsn: str, tmp_path: Path) -> None:
    dsn = _url(pg_dsn)
    schema = SCHEMA.replace("TYPE", "float")
    (tmp_path / "wide.yaml").write_text(schema)
    load(dsn, "numeric(20, 2)", [(1, "1.5"), (3, "1e17")])
    assert opened(dsn, tmp_path / "wide.yaml") is None
    assert direct(schema, PostgresBackend(dsn), SQL["postgres"]) == ("answered", None)
