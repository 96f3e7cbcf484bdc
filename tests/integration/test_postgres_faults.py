"""Faults of a real PostgreSQL server (a throwaway cluster this test stops and restarts).

What the client sees and what the budget does:

* server down before the query → ``BackendUnavailable`` (08001), nothing charged;
* server restarted between queries → the next query simply works (the pool reconnects);
* connection lost while the query runs → charged, and shown as the one fixed error of a
  private query that failed once its SQL was sent (``engine.PrivateQueryFailed``, XX000): a
  backend that crashes on one person's row must look like any other failure;
* statement timeout → ``QueryCanceled`` (57014), charged;
* server down when dpproxy starts → ``BackendUnavailable`` with a hint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.postgres import PostgresBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine, PrivateQueryFailed, open_engine
from dpproxy.errors import BackendUnavailable, QueryCanceled
from dpproxy.values import Cost
from tests.pg import TemporaryCluster

ROWS = 300_000
SCHEMA = """\
version: 1
dataset: faults
privacy:
  neighbouring: add_remove
  epsilon: 1
  delta: 1e-5
  budget: {epsilon: 100, delta: 1e-3}
tables:
  events:
    privacy_unit: uid
    max_rows_per_unit: 5
    columns:
      uid: {type: integer}
      amount: {type: float, lower: 0, upper: 1000}
"""
QUERY = "SELECT COUNT(*), SUM(amount) FROM events"  # bounding: a sort of every row
BUDGET = Cost(Fraction(100), Fraction(1, 1000))


@pytest.fixture
def cluster(pg_cluster: TemporaryCluster) -> Iterator[TemporaryCluster]:
    """The throwaway cluster with ``events`` (ROWS rows, ~10 per unit) in database ``postgres``."""
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as con:
        con.execute("CREATE TABLE events (uid integer NOT NULL, amount double precision)")
        con.execute(
            "INSERT INTO events SELECT g / 10, (g::bigint * 7919) %% 1000 "
            "FROM generate_series(1, %s) g",
            (ROWS,),
        )
        con.execute("ANALYZE events")
    yield pg_cluster


@pytest.fixture
def catalog() -> Catalog:
    return parse_catalog(SCHEMA, source="faults.yaml")


def _engine(catalog: Catalog, dsn: str, **backend: float) -> Engine:
    backend.setdefault("connect_timeout", 2)
    return Engine(
        catalog,
        PostgresBackend(dsn, **backend),  # type: ignore[arg-type]
        # no answer cache: these tests repeat one query and need it to reach the server
        accountant=MemoryAccountant(BUDGET, cache="off"),
    )


def _spent(engine: Engine) -> Fraction:
    return BUDGET.epsilon - engine.remaining("a").epsilon


def test_restart_between_queries_reconnects_by_itself(
    cluster: TemporaryCluster, catalog: Catalog
) -> None:
    # A generous connect timeout: reconnecting must not be mistaken for an outage on a
    # loaded machine.
    engine = _engine(catalog, cluster.dsn(), connect_timeout=20)
    try:
        engine.run(QUERY, analyst="a")
        cluster.restart()  # every pooled connection is now broken
        answer = engine.run(QUERY, analyst="a")
        assert answer.released.rows
        assert _spent(engine) == 2  # both answered, both charged
    finally:
        engine.close()


def test_server_down_refuses_cleanly_refunds_and_recovers(
    cluster: TemporaryCluster, catalog: Catalog
) -> None:
    engine = _engine(catalog, cluster.dsn())
    try:
        engine.run(QUERY, analyst="a")
        cluster.stop()
        with pytest.raises(BackendUnavailable) as err:
            engine.run(QUERY, analyst="a")
        assert err.value.sqlstate == "08001"
        assert "nothing was charged" in (err.value.hint or "")
        assert _spent(engine) == 1  # the refused query never reached the data
        cluster.start()
        deadline = time.monotonic() + 30
        while True:  # the pool reconnects in the background, with back-off
            try:
                engine.run(QUERY, analyst="a")
                break
            except BackendUnavailable:
                if time.monotonic() > deadline:
                    raise
        assert _spent(engine) == 2
    finally:
        engine.close()


def test_connection_lost_during_a_query_is_the_fixed_error_and_charged(
    cluster: TemporaryCluster, catalog: Catalog
) -> None:
    engine = _engine(catalog, cluster.dsn())
    errors: list[BaseException] = []
    started = threading.Event()

    def slow_query() -> None:
        started.set()
        try:
            # Run it several times: the restart must land while one of them runs.
            for _ in range(50):
                engine.run(QUERY, analyst="a")
        except BaseException as e:
            errors.append(e)

    try:
        engine.run(QUERY, analyst="a")  # warm: the pool is open and the plan cached
        before = _spent(engine)
        worker = threading.Thread(target=slow_query)
        worker.start()
        started.wait()
        _wait_for_active_query(cluster)  # the server is running one of dpproxy's queries
        cluster.stop(mode="immediate")
        worker.join(timeout=60)
        assert not worker.is_alive()
        assert len(errors) == 1, errors
        err = errors[0]
        # Lost while running (charged), or, if the stop landed between two queries, refused
        # before it ran (refunded): both are the right answer for their moment.
        if isinstance(err, PrivateQueryFailed):
            assert (err.sqlstate, err.message) == ("XX000", PrivateQueryFailed.MESSAGE)
            answered = _spent(engine) - before - 1
        else:
            assert isinstance(err, BackendUnavailable), err
            answered = _spent(engine) - before
        assert answered >= 0
        cluster.start()
    finally:
        engine.close()


def _wait_for_active_query(cluster: TemporaryCluster) -> None:
    """Until pg_stat_activity shows a statement of dpproxy's running (readiness, not a sleep)."""
    deadline = time.monotonic() + 30
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = 'dpproxy' AND state = 'active'"
            ).fetchone()
            if row and row[0]:
                return
    raise AssertionError("no dpproxy query became active within 30 s")


def test_statement_timeout_is_57014_and_charged(
    cluster: TemporaryCluster, catalog: Catalog
) -> None:
    engine = _engine(catalog, cluster.dsn(), statement_timeout=0.001)
    try:
        with pytest.raises(QueryCanceled) as err:
            engine.run(QUERY, analyst="a")
        assert err.value.sqlstate == "57014"
        assert _spent(engine) == 1  # it reached the data: charged
        # The session is still usable: the timeout cancelled one statement, not the pool.
        with pytest.raises(QueryCanceled):
            engine.run(QUERY, analyst="a")
    finally:
        engine.close()


def test_server_down_at_start_is_a_clear_error(cluster: TemporaryCluster, tmp_path: Path) -> None:
    cluster.stop()
    schema = tmp_path / "faults.yaml"
    schema.write_text(SCHEMA, encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as err:
        open_engine(cluster.dsn(), str(schema))
    assert err.value.sqlstate == "08001"
    assert "cannot connect" in err.value.message
    assert err.value.hint
    assert time.monotonic() - started < 60  # bounded by the connect timeout, not hanging
    cluster.start()


def test_passwords_never_appear_in_errors(cluster: TemporaryCluster) -> None:
    dsn = f"postgresql://postgres:s3cret-pw@127.0.0.1:{cluster.port}/postgres"
    cluster.stop()
    with pytest.raises(BackendUnavailable) as err:
        PostgresBackend(dsn, connect_timeout=1)
    text = f"{err.value.message} {err.value.hint}"
    assert "s3cret-pw" not in text
    assert f"127.0.0.1:{cluster.port}" in text
    cluster.start()
