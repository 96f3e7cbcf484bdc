"""The PostgreSQL backend end to end: the issue's query through the CLI and the DB-API on a
real server, the metadata it reads, and the refusals it gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import dpproxy
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.demo import demo_schema_path, load_demo_postgres
from dpproxy.errors import BackendUnavailable, InvalidParameter, UndefinedTable

QUERY = "SELECT sex, AVG(age) FROM adult GROUP BY sex"


@pytest.fixture(scope="module")
def demo_pg(pg_session_dsn: str) -> str:
    """The Adult demo loaded once into the session's PostgreSQL database."""
    load_demo_postgres(pg_session_dsn, replace=True)
    return pg_session_dsn


def _url(dsn: str, user: str | None = None) -> str:
    """A postgresql:// URL for a DSN that may be in key=value form."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    user = user or str(info.get("user", "postgres"))
    host, port = info.get("host", "127.0.0.1"), info.get("port", 5432)
    return f"postgresql://{user}@{host}:{port}/{info['dbname']}"


def test_the_issue_query_through_the_cli(demo_pg: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpproxy",
            "query",
            "--database",
            _url(demo_pg),
            "--schema",
            str(demo_schema_path()),
            "--format",
            "csv",
            QUERY,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "sex,avg"
    values = dict(line.split(",") for line in lines[1:])
    assert set(values) == {"Female", "Male"}
    assert 30 < float(values["Female"]) < 45 and 30 < float(values["Male"]) < 45
    assert "privacy cost: ε=1" in out.stderr


def test_dbapi_on_postgres_reads_the_primary_key(demo_pg: str) -> None:
    with dpproxy.connect(_url(demo_pg), schema=str(demo_schema_path())) as con:
        cur = con.cursor()
        cur.execute("SELECT COUNT(*) FROM adult WHERE age > %s", (40,))
        (n,) = cur.fetchone()  # type: ignore[misc]
        assert 12_000 < n < 15_000
        plan = cur.explain("SELECT COUNT(*) FROM adult")
        assert "unit column is unique" in plan  # read from the PRIMARY KEY, no bounding


def test_statement_timeout_must_be_positive() -> None:
    with pytest.raises(InvalidParameter):
        dpproxy.connect("postgresql://x@127.0.0.1:1/x", schema="s.yaml", statement_timeout=0)


def test_a_schema_table_missing_from_the_database_is_refused(pg_dsn: str) -> None:
    backend = PostgresBackend(_url(pg_dsn))
    try:
        with pytest.raises(UndefinedTable) as err:
            backend.attach_catalog(load_catalog(demo_schema_path()))
        # every missing table at once, as open_engine reports them (backends/fit.py)
        assert "schema check --database" in (err.value.hint or "")
        assert "adult" in str(err.value)
    finally:
        backend.close()


def test_a_role_without_select_is_refused_at_start(demo_pg: str, tmp_path: Path) -> None:
    role = f"dpproxy_noselect_{tmp_path.name[-6:].lower()}".replace("-", "_")
    admin = psycopg.connect(demo_pg, autocommit=True)
    try:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        url = _url(demo_pg, user=role)
        with pytest.raises(BackendUnavailable) as err:
            dpproxy.connect(url, schema=str(demo_schema_path()))
        assert "cannot SELECT" in err.value.message
        assert "GRANT SELECT" in (err.value.hint or "")
        admin.execute(f"GRANT SELECT ON adult TO {role}")
        with dpproxy.connect(url, schema=str(demo_schema_path())) as con:
            assert con.cursor().execute("SELECT COUNT(*) FROM adult").fetchone()
    finally:
        admin.execute(f"REVOKE ALL ON adult FROM {role}")
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()


def test_only_read_only_sql_reaches_the_server(demo_pg: str) -> None:
    """Even a statement the planner would never produce cannot write: the transaction is
    READ ONLY (defence in depth behind the planner)."""
    backend = PostgresBackend(_url(demo_pg))
    try:
        with pytest.raises(Exception) as err:
            backend.execute("CREATE TABLE should_not_exist (x int)")
        assert getattr(err.value, "sqlstate", None) == "XX000"
    finally:
        backend.close()
    with psycopg.connect(demo_pg) as con:
        exists = con.execute("SELECT to_regclass('should_not_exist')").fetchone()
    assert exists == (None,)
