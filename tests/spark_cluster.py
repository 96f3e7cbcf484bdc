"""Real Spark services for the tests: a standalone cluster and a Spark Connect server.

Both are started from the PySpark wheel (``pyspark/bin/spark-class`` and ``spark-submit``, with
``SPARK_HOME`` the wheel's directory), on loopback and free ports, each in a process group of its
own, and stopped by killing that group. A test session starts at most one cluster (a master and
one worker with one core and 1 GB) and one Connect server (Spark local with one thread inside),
shared by every test that asks for it (``spark_cluster`` and ``spark_connect`` in
``tests/conftest.py``). Without PySpark or Java the tests skip, and fail under CI
(``tests/spark.require_spark``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 180.0
# What the JVMs this module starts need in their environment: the wheel as SPARK_HOME, and
# loopback as the address they bind and advertise (a driver's executors connect back to it).
LOOPBACK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


# Spark's settings for the drivers started here, read from SPARK_CONF_DIR as on any cluster's
# driver machine (dpproxy sets its shuffle partitions in local mode only): the tests' tables
# have 32,561 rows, and Spark's 200 shuffle partitions cost one core seconds a query.
DRIVER_DEFAULTS = "spark.sql.shuffle.partitions 2\n"
_CONF_DIR: list[Path] = []


def spark_env() -> dict[str, str]:
    """The environment of a Spark process (a service, or a driver such as ``dpproxy``)."""
    if not _CONF_DIR:
        import tempfile

        conf = Path(tempfile.mkdtemp(prefix="dpproxy-spark-conf-"))
        (conf / "spark-defaults.conf").write_text(DRIVER_DEFAULTS, encoding="utf-8")
        _CONF_DIR.append(conf)
    return dict(
        os.environ, SPARK_HOME=str(spark_home()), SPARK_CONF_DIR=str(_CONF_DIR[0]), **LOOPBACK
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Service:
    """A JVM started in a process group of its own, its output in ``log``."""

    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=spark_env(),
                start_new_session=True,
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # whatever the group still holds (spark-class's JVM child)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def _wait(ready: object, what: str, services: list[Service]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        for s in services:
            if not s.running():
                raise AssertionError(f"{what} stopped while starting:\n{s.tail()}")
        time.sleep(0.5)
    raise AssertionError(f"{what} did not start in {START_TIMEOUT_S:g} s:\n" + services[0].tail())


@dataclass
class Cluster:
    """A standalone master on 127.0.0.1 and one worker registered with it."""

    workdir: Path
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    services: list[Service] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                state = json.load(r)
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def start(self) -> Cluster:
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = Service(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
            self.workdir / "master.log",
        )
        worker = Service(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(self.workdir / "work"),
            ],
            self.workdir / "worker.log",
        )
        self.services = [master, worker]
        master.start()
        _wait(lambda: _listening(self.port), "the Spark master", [master])
        worker.start()
        _wait(lambda: self._alive_workers() >= 1, "the Spark worker", [worker, master])
        return self

    def stop(self) -> None:
        for s in reversed(self.services):
            s.stop()


@dataclass
class ConnectServer:
    """A Spark Connect server (Spark local, one thread) on 127.0.0.1."""

    workdir: Path
    port: int = field(default_factory=free_port)
    service: Service | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.service = Service(
            [
                str(spark_home() / "bin" / "spark-submit"),
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--name",
                "dpproxy tests: Spark Connect",
                "--master",
                "local[1]",
                "--conf",
                f"spark.connect.grpc.binding.port={self.port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.sql.shuffle.partitions=2",
                "--conf",
                f"spark.local.dir={self.workdir / 'tmp'}",
            ],
            self.workdir / "connect.log",
        )
        self.service.start()
        _wait(lambda: _listening(self.port), "the Spark Connect server", [self.service])
        return self

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()


QUERIES = (
    "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
    "SELECT sex, AVG(age) FROM adult GROUP BY sex",
    "SELECT COUNT(*) FROM adult WHERE age > 40",
)


def noiseless_answers(database: str, schema: Path) -> list[list[list[object]]]:
    """The released rows of :data:`QUERIES` on ``database`` with noise off (``tests/noise``),
    sorted; and, as a last answer, the Spark master or Connect URL the session runs on."""
    from fractions import Fraction

    from dpproxy.accounting.memory import MemoryAccountant
    from dpproxy.backends.spark import SparkBackend
    from dpproxy.catalog.load import load_catalog
    from dpproxy.engine import Engine
    from tests.noise import NoNoise

    catalog = load_catalog(schema)
    backend = SparkBackend(database)
    engine = Engine(
        catalog,
        backend,
        accountant=MemoryAccountant(catalog.policy.budget, cache="off"),
        noise=NoNoise(),
    )
    try:
        answers = [
            sorted(
                [list(r) for r in engine.run(q, analyst="t", epsilon=Fraction(1)).released.rows],
                key=repr,
            )
            for q in QUERIES
        ]
        spark = backend._spark
        where = spark.sparkContext.master if backend.target.remote is None else "connect"
        partitions = spark.conf.get("spark.sql.shuffle.partitions")
        return [*answers, [[where, partitions]]]
    finally:
        engine.close()


def cli_json(*args: str, cwd: Path, timeout: float = 300) -> tuple[int, dict[str, object], str]:
    """``dpproxy ARGS --format json`` as a user runs it (the console script, a driver of its
    own): (exit status, the JSON it printed, its stderr)."""
    from tests.commands import dpproxy_command

    out = subprocess.run(
        [*dpproxy_command(), *args, "--format", "json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=spark_env(),
    )
    try:
        printed = json.loads(out.stdout)
    except ValueError as e:
        raise AssertionError(f"not JSON: {out.stdout[-2000:]}\n{out.stderr[-3000:]}") from e
    return out.returncode, printed, out.stderr


if __name__ == "__main__":  # python -m tests.spark_cluster DATABASE SCHEMA: a driver of its own
    import sys

    print(json.dumps(noiseless_answers(sys.argv[1], Path(sys.argv[2]))))
