"""dpproxy on a real standalone Spark cluster (``spark://HOST:PORT``), end to end.

One cluster per test session (``spark_cluster``: a master and one worker, started from the
PySpark wheel, ``tests/spark_cluster.py``). Every dpproxy here is a process of its own, as a user
runs it: a classic Spark driver is one per process, so the cluster's driver and the test
session's Spark local (``spark_master``) cannot share a process. With noise off the cluster gives
the same released rows as Spark local; the CLI's and the server's noisy answers lie within a
few noise scales of them; the ledger charges; a cluster that is down is a clean 08001, and the
server answers again once it is back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.test_server import start_server, stop_server
from tests.spark import export_parquet
from tests.spark_cluster import QUERIES, Cluster, cli_json, noiseless_answers, spark_env

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "adult.yaml"
# Laplace noise at ε = 1 on a count of sensitivity 1 (scale ≤ 2 with selection): 50 is > 25
# scales, exceeded with probability below e^-25.
COUNT_SLACK = 50


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Path:
    return export_parquet(demo_db, tmp_path_factory.mktemp("spark-cluster-adult") / "data")


@pytest.fixture(scope="module")
def local_answers(spark_master: str, parquet_dir: Path) -> list[Any]:
    """The released rows with noise off on Spark local (this test session's Spark)."""
    return noiseless_answers(f"{spark_master}?parquet_dir={parquet_dir}", SCHEMA)


def _database(cluster: Cluster, parquet_dir: Path) -> str:
    return f"{cluster.url}?parquet_dir={parquet_dir}"


def assert_same_answers(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for g_rows, w_rows in zip(got, want, strict=True):
        assert len(g_rows) == len(w_rows)
        for g, w in zip(g_rows, w_rows, strict=True):
            assert len(g) == len(w)
            for a, b in zip(g, w, strict=True):  # sums in another order: one ulp may differ
                assert a == (pytest.approx(b, rel=1e-12) if isinstance(b, float) else b), (g, w)


def test_noise_off_the_cluster_releases_what_spark_local_releases(
    spark_cluster: Cluster, parquet_dir: Path, local_answers: list[Any], tmp_path: Path
) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.spark_cluster",
            _database(spark_cluster, parquet_dir),
            str(SCHEMA),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=spark_env(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    *answers, [[where, partitions]] = json.loads(out.stdout.splitlines()[-1])
    assert where == spark_cluster.url  # it ran on the cluster, not on a local Spark
    assert partitions == "2"  # the cluster's driver took spark-defaults.conf (SPARK_CONF_DIR)
    assert local_answers[-1][0][0] == "local[2]"
    assert_same_answers(answers, local_answers[:-1])


def test_a_second_master_in_one_process_is_refused(
    spark_cluster: Cluster, spark_master: str
) -> None:
    """This process already drives Spark local (``spark_master``): Spark would hand its
    context back for the cluster's address, and the query would run locally."""
    from dpproxy.backends.spark import SparkBackend
    from dpproxy.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable) as raised:
        SparkBackend(spark_cluster.url)
    assert raised.value.sqlstate == "08001"
    assert "already runs Spark with master local[2]" in raised.value.message


def test_query_and_explain_answer_on_the_cluster_and_the_ledger_charges(
    spark_cluster: Cluster, parquet_dir: Path, local_answers: list[Any], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    database = _database(spark_cluster, parquet_dir)
    common = ("--database", database, "--schema", str(SCHEMA), "--ledger", str(ledger))
    status, answer, stderr = cli_json("query", *common, QUERIES[0], cwd=tmp_path)
    assert status == 0, stderr[-3000:]
    exact = {sex: n for sex, n in local_answers[0]}
    got = {r["sex"]: r["count"] for r in answer["rows"]}  # type: ignore[attr-defined]
    assert got.keys() == exact.keys()
    assert all(abs(got[k] - exact[k]) <= COUNT_SLACK for k in exact)
    assert answer["privacy_cost"] == {"epsilon": "1", "delta": "0"}
    status, shown, _ = cli_json("budget", "show", "--ledger", str(ledger), cwd=tmp_path)
    assert status == 0
    (account,) = [a for a in shown if a["principal"] == "analyst"]  # type: ignore[attr-defined]
    assert account["spent"]["epsilon"] == "1"
    status, plan, stderr = cli_json("explain", *common, QUERIES[1], cwd=tmp_path)
    assert status == 0, stderr[-3000:]
    text = json.dumps(plan)
    assert "adult" in text and "GROUP BY" in text.upper()


def test_serve_answers_on_the_cluster_then_08001_while_it_is_down_then_again(
    spark_cluster: Cluster,
    parquet_dir: Path,
    local_answers: list[Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Last in this module: it stops the session's cluster and starts it again."""
    for key, value in spark_env().items():
        monkeypatch.setenv(key, value)
    ledger = tmp_path / "ledger.sqlite"
    server = start_server(
        tmp_path,
        "--database",
        _database(spark_cluster, parquet_dir),
        "--schema",
        str(SCHEMA),
        "--ledger",
        str(ledger),
    )
    exact = dict(local_answers[0])
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as con:
            rows = con.execute(QUERIES[0]).fetchall()
            assert {k for k, _ in rows} == exact.keys()
            assert all(abs(n - exact[k]) <= COUNT_SLACK for k, n in rows)
            spark_cluster.stop()
            with pytest.raises(psycopg.OperationalError) as raised:
                con.execute(QUERIES[2]).fetchall()
            assert raised.value.sqlstate == "08001"
            assert "not reachable" in str(raised.value)
            spark_cluster.start()  # the same address
            ((n,),) = con.execute(QUERIES[2]).fetchall()
            assert abs(n - local_answers[2][0][0]) <= COUNT_SLACK
    finally:
        log = stop_server(server)
    assert "Traceback" not in log
    _, shown, _ = cli_json("budget", "show", "--ledger", str(ledger), cwd=tmp_path)
    (account,) = [a for a in shown if a["principal"] == "ana"]  # type: ignore[attr-defined]
    assert account["spent"]["epsilon"] == "2"  # the refused query was refunded
