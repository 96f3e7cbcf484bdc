"""dpproxy on a real Spark Connect server (``sc://HOST:PORT``), end to end.

One server per test session (``spark_connect``: ``SparkConnectServer`` from the PySpark wheel,
Spark local with one thread inside, ``tests/spark_cluster.py``). A Connect session is a gRPC
client, so it shares this test process with the session's Spark local: with noise off both
release the same rows. Over Connect the tables of ``?parquet_dir=`` are views of the backend's
own server session, ANSI mode is that session's setting, a cancel or the statement timeout
interrupts the query's tag, and a server that is down is a clean 08001 from which the backend
recovers (a new session and its views) once the server is back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dpproxy.backends import CancelToken
from dpproxy.backends.spark import SparkBackend
from dpproxy.errors import InternalError, QueryCanceled
from tests.integration.test_server import start_server, stop_server
from tests.integration.test_spark_cluster import COUNT_SLACK, SCHEMA, assert_same_answers
from tests.spark import export_parquet
from tests.spark_cluster import QUERIES, ConnectServer, cli_json, noiseless_answers

SLOW = "SELECT MAX(xxhash64(id)) AS s FROM range(0, 1000000000000)"


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Path:
    return export_parquet(demo_db, tmp_path_factory.mktemp("spark-connect-adult") / "data")


@pytest.fixture(scope="module")
def local_answers(spark_master: str, parquet_dir: Path) -> list[Any]:
    """The released rows with noise off on Spark local (this test session's Spark)."""
    return noiseless_answers(f"{spark_master}?parquet_dir={parquet_dir}", SCHEMA)


@pytest.fixture(scope="module")
def backend(spark_connect: ConnectServer, parquet_dir: Path) -> Iterator[SparkBackend]:
    b = SparkBackend(f"{spark_connect.url}?parquet_dir={parquet_dir}")
    yield b
    b.close()


def test_noise_off_connect_releases_what_spark_local_releases(
    spark_connect: ConnectServer, local_answers: list[Any], parquet_dir: Path
) -> None:
    local = local_answers
    remote = noiseless_answers(f"{spark_connect.url}?parquet_dir={parquet_dir}", SCHEMA)
    assert local[-1][0][0] == "local[2]" and remote[-1][0][0] == "connect"
    assert_same_answers(remote[:-1], local[:-1])


def test_the_session_runs_in_ansi_mode_and_spark_errors_stay_internal(
    backend: SparkBackend,
) -> None:
    assert backend.target.remote is not None
    assert backend._spark.conf.get("spark.sql.ansi.enabled") == "true"
    with pytest.raises(InternalError) as raised:  # not a lost connection: the server answered
        backend.execute("SELECT CAST(2147483647 AS INT) + CAST(id AS INT) AS x FROM range(1, 2)")
    assert raised.value.message == "the database failed to run the query"
    assert "ARITHMETIC" in (raised.value.log_detail or "")
    assert backend.execute("SELECT 1 AS one").rows == ((1,),)


def test_a_cancel_and_the_statement_timeout_interrupt_the_query_tag(
    backend: SparkBackend, spark_connect: ConnectServer
) -> None:
    token = CancelToken()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            backend.execute(SLOW, token)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(3)  # the query is running (it takes hours)
    started = time.monotonic()
    token.cancel()
    thread.join(timeout=120)
    assert not thread.is_alive() and time.monotonic() - started < 60
    assert len(outcome) == 1 and isinstance(outcome[0], QueryCanceled)
    assert outcome[0].sqlstate == "57014"
    quick = SparkBackend(spark_connect.url, statement_timeout=1.0)
    try:
        with pytest.raises(QueryCanceled) as raised:
            quick.execute(SLOW)
        assert "statement timeout" in raised.value.message
    finally:
        quick.close()
    assert backend.execute("SELECT 1 AS one").rows == ((1,),)  # the session still works


def test_query_and_serve_answer_over_connect_then_08001_while_it_is_down_then_again(
    spark_connect: ConnectServer,
    local_answers: list[Any],
    parquet_dir: Path,
    tmp_path: Path,
) -> None:
    """Last in this module: it stops the session's Connect server and starts it again."""
    exact = local_answers
    database = f"{spark_connect.url}?parquet_dir={parquet_dir}"
    ledger = tmp_path / "ledger.sqlite"
    common = ("--database", database, "--schema", str(SCHEMA), "--ledger", str(ledger))
    status, answer, stderr = cli_json("query", *common, QUERIES[0], cwd=tmp_path)
    assert status == 0, stderr[-3000:]
    counts = dict(exact[0])
    got = {r["sex"]: r["count"] for r in answer["rows"]}  # type: ignore[attr-defined]
    assert got.keys() == counts.keys()
    assert all(abs(got[k] - counts[k]) <= COUNT_SLACK for k in counts)
    server = start_server(tmp_path, *common)
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as con:
            ((n,),) = con.execute(QUERIES[2]).fetchall()
            assert abs(n - exact[2][0][0]) <= COUNT_SLACK
            spark_connect.stop()
            with pytest.raises(psycopg.OperationalError) as raised:
                con.execute(QUERIES[0]).fetchall()
            assert raised.value.sqlstate == "08001"
            assert "not reachable" in str(raised.value)
            spark_connect.start()  # the same port; the old session and its views are gone
            rows = con.execute(QUERIES[0]).fetchall()
            assert {k: abs(v - counts[k]) <= COUNT_SLACK for k, v in rows} == {
                k: True for k in counts
            }
    finally:
        log = stop_server(server)
    assert "Traceback" not in log
    _, shown, _ = cli_json("budget", "show", "--ledger", str(ledger), cwd=tmp_path)
    spent = {a["principal"]: a["spent"]["epsilon"] for a in shown}  # type: ignore[attr-defined]
    assert spent["analyst"] == "1" and spent["ana"] == "2"  # the refused query was refunded
