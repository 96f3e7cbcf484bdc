"""The PostgreSQL test infrastructure (``tests/pg.py`` and the ``pg_*`` fixtures) against real
servers: throwaway clusters that start, restart and stop, the server chooser, scratch databases.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
except ImportError as exc:  # psycopg 3 is needed by every PostgreSQL test
    if pg.is_ci():
        raise
    pytest.skip(f"psycopg is not installed: {exc}", allow_module_level=True)


def _one(conn: psycopg.Connection[Any], query: str) -> tuple[Any, ...]:
    """The single row of ``query``."""
    row = conn.execute(query).fetchone()
    assert row is not None
    return tuple(row)


def _dbname(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def _postmaster_pid(cluster: pg.TemporaryCluster) -> int:
    """The postmaster's PID, from the first line of ``postmaster.pid``."""
    return int((cluster.datadir / "postmaster.pid").read_text().splitlines()[0])


def _require_binaries() -> None:
    try:
        pg.find_bindir()
    except pg.NoLocalBinaries as exc:
        pg.skip_or_fail(str(exc))


# ------------------------------------------------------------------------------------ cluster


def test_cluster_starts_and_accepts_connections(pg_cluster: pg.TemporaryCluster) -> None:
    assert pg_cluster.running
    assert pg_cluster.dsn() == f"postgresql://postgres@127.0.0.1:{pg_cluster.port}/postgres"
    assert pg_cluster.dsn("x").endswith(f":{pg_cluster.port}/x")
    assert pg_cluster.log_path.parent == pg_cluster.datadir
    assert pg_cluster.log_path.is_file()
    with psycopg.connect(pg_cluster.dsn()) as conn:
        port, user, encoding, collate, fsync = _one(
            conn,
            "SELECT current_setting('port'), current_user, current_setting('server_encoding'), "
            "current_setting('lc_collate'), current_setting('fsync')",
        )
    assert (int(port), user, encoding, collate, fsync) == (
        pg_cluster.port,
        "postgres",
        "UTF8",
        "C",
        "off",
    )


def test_restart_keeps_port_and_data_and_breaks_old_connections(
    pg_cluster: pg.TemporaryCluster,
) -> None:
    port, pid = pg_cluster.port, _postmaster_pid(pg_cluster)
    with psycopg.connect(pg_cluster.dsn()) as old:
        with old.transaction():
            old.execute("CREATE TABLE kept (x int)")
            old.execute("INSERT INTO kept VALUES (42)")
        pg_cluster.restart()
        assert pg_cluster.running
        assert pg_cluster.port == port
        assert _postmaster_pid(pg_cluster) != pid  # a new postmaster
        with pytest.raises(psycopg.OperationalError):
            old.execute("SELECT 1")
        assert old.broken
    with psycopg.connect(pg_cluster.dsn()) as new:
        assert new.execute("SELECT x FROM kept").fetchall() == [(42,)]
        assert _one(new, "SHOW port") == (str(port),)


def test_immediate_stop_then_start_recovers_committed_data(
    pg_cluster: pg.TemporaryCluster,
) -> None:
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE t AS SELECT generate_series(1, 1000) AS x")
    pg_cluster.stop(mode="immediate")  # a crash: the next start runs recovery
    assert not pg_cluster.running
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(pg_cluster.dsn(), connect_timeout=5).close()
    pg_cluster.start()
    with psycopg.connect(pg_cluster.dsn()) as conn:
        assert conn.execute("SELECT count(*), sum(x) FROM t").fetchone() == (1000, 500500)
    assert "database system was interrupted" in pg_cluster.log_path.read_text()


def test_stop_refuses_connections_and_cleanup_removes_everything(
    pg_cluster: pg.TemporaryCluster,
) -> None:
    root = pg_cluster.root
    assert root is not None and root.is_dir()
    pg_cluster.stop()
    assert not pg_cluster.running
    assert not (pg_cluster.datadir / "postmaster.pid").exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(pg_cluster.dsn(), connect_timeout=5).close()
    pg_cluster.stop()  # stopping a stopped cluster is a no-op
    pg_cluster.cleanup()
    assert pg_cluster.root is None
    assert not root.exists()
    pg_cluster.cleanup()  # idempotent (the fixture calls it again)


def test_context_manager_starts_and_cleans_up() -> None:
    _require_binaries()
    with pg.TemporaryCluster() as cluster:
        root = cluster.root
        assert root is not None
        with psycopg.connect(cluster.dsn()) as conn:
            assert conn.execute("SELECT 1 + 1").fetchone() == (2,)
    assert not cluster.running
    assert not root.exists()


def test_initdb_failure_raises_with_its_output() -> None:
    _require_binaries()
    cluster = pg.TemporaryCluster(initdb_options=["--encoding=NO_SUCH_ENCODING"])
    with pytest.raises(pg.ClusterUnavailable, match="initdb failed") as info:
        cluster.start()
    assert "NO_SUCH_ENCODING" in str(info.value)
    assert not isinstance(info.value, pg.NoLocalBinaries)  # a real failure, never a skip
    root = cluster.root
    cluster.cleanup()
    assert root is not None and not root.exists()


def test_server_start_failure_includes_the_log_tail() -> None:
    _require_binaries()
    cluster = pg.TemporaryCluster(server_options=["-c", "shared_buffers=plenty"])
    try:
        with pytest.raises(pg.ClusterUnavailable, match="pg_ctl start failed") as info:
            cluster.start()
        message = str(info.value)
        assert f"tail of {cluster.log_path}" in message
        assert "shared_buffers" in message  # the server's own complaint, from its log
        assert not cluster.running
    finally:
        cluster.cleanup()


def test_missing_binaries_are_reported(tmp_path: Path) -> None:
    cluster = pg.TemporaryCluster(bindir=tmp_path)
    with pytest.raises(pg.NoLocalBinaries, match=re.escape(str(tmp_path / "initdb"))):
        cluster.start()
    assert cluster.root is None  # nothing was created


def test_installed_bindirs_sorts_versions_numerically(tmp_path: Path) -> None:
    for version in ("9.6", "15", "10", "notes"):
        (tmp_path / version / "bin").mkdir(parents=True)
    (tmp_path / "16").mkdir()  # no bin/: not a candidate
    assert [p.parent.name for p in pg.installed_bindirs(tmp_path)] == ["15", "10", "9.6", "notes"]
    assert pg.installed_bindirs(tmp_path / "absent") == []


# ------------------------------------------------------------------------------------- server


def test_find_server_uses_the_env_dsn(
    pg_cluster: pg.TemporaryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = pg_cluster.dsn()
    monkeypatch.setenv(pg.ENV_DSN, dsn)
    server = pg.find_server()
    try:
        assert (server.source, server.admin_dsn, server.cluster) == ("env", dsn, None)
        with pg.temporary_database(server.admin_dsn) as db:
            with psycopg.connect(db) as conn:
                assert conn.execute("SELECT current_setting('port')").fetchone() == (
                    str(pg_cluster.port),
                )
    finally:
        server.close()
    assert pg_cluster.running  # closing an "env" server leaves the server alone


def test_find_server_falls_back_to_a_local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    _require_binaries()
    dead = f"postgresql://postgres@127.0.0.1:{pg.free_port()}/postgres"
    monkeypatch.setenv(pg.ENV_DSN, dead)
    server = pg.find_server()
    try:
        assert server.source == "local cluster"
        assert server.cluster is not None and server.cluster.running
        root = server.cluster.root
        (reason,) = server.reasons
        assert reason.startswith(f"{pg.ENV_DSN}=") and "cannot connect" in reason
        with psycopg.connect(server.admin_dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.close()
    assert not server.cluster.running
    assert root is not None and not root.exists()


@pytest.fixture
def nothing_available(monkeypatch: pytest.MonkeyPatch) -> None:
    """No env DSN, no local binaries, no testcontainers."""

    def no_binaries() -> Path:
        raise pg.NoLocalBinaries("no local PostgreSQL binaries (simulated)")

    monkeypatch.delenv(pg.ENV_DSN, raising=False)
    monkeypatch.setattr(pg, "find_bindir", no_binaries)
    monkeypatch.setitem(sys.modules, "testcontainers.postgres", None)  # import fails


def test_find_server_lists_every_reason(nothing_available: None) -> None:
    with pytest.raises(pg.ServerUnavailable) as info:
        pg.find_server()
    env, local, containers = info.value.reasons
    assert env == f"{pg.ENV_DSN} is not set"
    assert local == "local cluster: no local PostgreSQL binaries (simulated)"
    assert containers.startswith("testcontainers: not importable")
    for reason in info.value.reasons:
        assert reason in str(info.value)


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_missing_server_fails_under_ci(
    ci: str, nothing_available: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception) as info:
        pg.server_or_skip()
    message = str(info.value)
    for needle in (f"{pg.ENV_DSN} is not set", "(simulated)", "testcontainers: not importable"):
        assert needle in message
    with pytest.raises(pytest.fail.Exception, match=r"\(simulated\)"):
        pg.cluster_or_skip()  # what pg_cluster does


@pytest.mark.parametrize("ci", [None, "", "0", "false", "False"])
def test_missing_server_skips_outside_ci(
    ci: str | None, nothing_available: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=r"DPPROXY_TEST_DSN is not set"):
        pg.server_or_skip()
    with pytest.raises(pytest.skip.Exception, match=r"\(simulated\)"):
        pg.cluster_or_skip()


def test_pg_server_source(pg_server: pg.Server) -> None:
    assert pg_server.source in ("env", "local cluster", "testcontainers")
    if os.environ.get(pg.ENV_DSN):
        assert (pg_server.source, pg_server.admin_dsn) == ("env", os.environ[pg.ENV_DSN])
    assert pg.check_admin_dsn(pg_server.admin_dsn) is None


def test_redact_hides_the_password() -> None:
    redacted = pg.redact("postgresql://alice:s3cret@db.example:5433/x")
    assert "s3cret" not in redacted
    assert conninfo_to_dict(redacted) == {
        "user": "alice",
        "password": "***",
        "host": "db.example",
        "port": "5433",
        "dbname": "x",
    }


# ---------------------------------------------------------------------------------- databases


@pytest.fixture
def dropped(pg_server: pg.Server) -> Iterator[list[str]]:
    """Database names the test records; checked from the admin connection at teardown.

    Requested *before* ``pg_dsn``, it is set up before it and so torn down after it.
    """
    names: list[str] = []
    yield names
    assert names, "the test recorded no database"
    for name in names:
        assert not pg.database_exists(pg_server.admin_dsn, name), f"{name} was not dropped"


def test_pg_dsn_is_a_fresh_empty_database(
    dropped: list[str], pg_dsn: str, pg_session_dsn: str, pg_server: pg.Server
) -> None:
    params = conninfo_to_dict(pg_dsn)
    dbname = _dbname(pg_dsn)
    dropped.append(dbname)
    assert pg.database_exists(pg_server.admin_dsn, dbname)
    admin = conninfo_to_dict(pg_server.admin_dsn)
    assert re.fullmatch(r"dpproxy_test_[0-9a-f]{8}", dbname)
    assert dbname != _dbname(pg_session_dsn)
    assert {k: v for k, v in params.items() if k != "dbname"} == {
        k: v for k, v in admin.items() if k != "dbname"
    }
    with psycopg.connect(pg_dsn) as conn:
        assert _one(
            conn,
            "SELECT datname, pg_encoding_to_char(encoding), datcollate FROM pg_database "
            "WHERE datname = current_database()",
        ) == (dbname, "UTF8", "C")
        user_relations = _one(
            conn,
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
            "AND n.nspname NOT LIKE 'pg_toast%'",
        )
        assert user_relations == (0,)
        conn.execute("CREATE TABLE scratch (x int)")  # the tests own it
        conn.execute("INSERT INTO scratch VALUES (1)")
        assert conn.execute("SELECT * FROM scratch").fetchall() == [(1,)]


def test_pg_session_dsn_is_one_database(pg_session_dsn: str, pg_server: pg.Server) -> None:
    name = _dbname(pg_session_dsn)
    assert name.startswith(pg.DATABASE_PREFIX)
    assert pg.database_exists(pg_server.admin_dsn, name)
    with psycopg.connect(pg_session_dsn) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (name,)


def test_temporary_database_is_dropped_despite_open_connections(pg_server: pg.Server) -> None:
    with pg.temporary_database(pg_server.admin_dsn) as dsn:
        name = _dbname(dsn)
        conn = psycopg.connect(dsn)
    try:
        # The drop forced the still-open session out.
        assert not pg.database_exists(pg_server.admin_dsn, name)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
