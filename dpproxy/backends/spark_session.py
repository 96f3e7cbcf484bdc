"""Spark sessions for the Spark backend (``backends/spark.py``): classic and Spark Connect.

A process has one classic SparkContext (one JVM driver), so the classic session of a master is
made once and shared: each backend works on a ``newSession()`` of it. When its context was
stopped (by Spark, or discarded after its cluster was unreachable) the next backend or query
makes a new one. A Spark Connect backend has a session of its own on the server.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from dpproxy.errors import BackendUnavailable

CONNECT_TIMEOUT_S = 5.0
# Session settings of every backend: ANSI semantics (errors, never silent wraps), UTC dates.
SESSION_CONF = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.caseSensitive": "false",
}

_BASE_LOCK = threading.Lock()
_BASES: dict[str, tuple[Any, int]] = {}  # master → (the process's SparkSession, users)


def base_session(master: str) -> Any:
    """The process's classic SparkSession for a master, shared (Spark allows one per JVM);
    each backend works on a ``newSession()`` of it, with views and settings of its own."""
    from pyspark.sql import SparkSession

    with _BASE_LOCK:
        found = _BASES.get(master)
        if found is not None and stopped(found[0]):  # the cluster ended it: start anew
            del _BASES[master]
            found = None
        if found is not None:
            _BASES[master] = (found[0], found[1] + 1)
            return found[0]
        builder = SparkSession.builder.master(master).appName("dpproxy")
        # Spark local has this machine's cores: 8 shuffle partitions, not Spark's 200. A cluster
        # keeps its own (spark-defaults.conf): 8 would leave 10^8 rows to each task at 10^9.
        local = {"spark.sql.shuffle.partitions": "8"} if master.startswith("local") else {}
        for key, value in {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            **local,
            **SESSION_CONF,
        }.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        running = session.sparkContext.master
        if running != master:  # one SparkContext per JVM: it would run on that one
            raise BackendUnavailable(
                f"this process already runs Spark with master {running}",
                hint="one dpproxy process drives one Spark master; use another process (or "
                "Spark Connect, sc://HOST:PORT) for another cluster",
            )
        session.sparkContext.setLogLevel("FATAL")  # Spark logs failing SQL with its values
        _BASES[master] = (session, 1)
        return session


def stopped(session: Any) -> bool:
    """Whether a classic session's SparkContext was stopped (by ``stop()`` or by Spark itself,
    e.g. when a standalone master gave the application up)."""
    jsc = session.sparkContext._jsc
    return jsc is None or bool(jsc.sc().isStopped())


def connect_session(remote: str) -> Any:
    """A new Spark Connect session of its own (its views and settings are the server's state
    for this session only). Made directly, not through ``SparkSession.builder``, which marks the
    whole process as Connect-only (``SPARK_CONNECT_MODE_ENABLED``) so that no classic session
    could start in it afterwards. Retries of an unanswered call stop after about 3 s (PySpark's
    default waits up to 10 minutes): a server that is down is reported, not waited for."""
    import warnings

    with warnings.catch_warnings():  # PySpark 4.3 warns that pandas 3 is newer than it knows
        warnings.simplefilter("ignore", FutureWarning)
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    # After the session module: imported first, it runs into PySpark's import cycle.
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session = ConnectSession.builder.remote(remote).create()
    session.client.set_retry_policies(
        [DefaultPolicy(max_retries=4, initial_backoff=100, max_backoff=1000, jitter=100)]
    )
    return session


def release_base(master: str) -> None:
    with _BASE_LOCK:
        found = _BASES.get(master)
        if found is None:
            return
        session, users = found
        if users > 1:
            _BASES[master] = (session, users - 1)
            return
        del _BASES[master]
    session.stop()


def reachable(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def discard_base(master: str) -> None:
    """Forget (and stop) the shared session of ``master`` whatever its users: its cluster was
    unreachable, and a standalone master that comes back does not know the application any
    more (its executors are gone with the workers), so every backend on it starts anew."""
    with _BASE_LOCK:
        found = _BASES.pop(master, None)
    if found is not None:
        try:
            found[0].stop()
        except Exception:  # already stopped, or the JVM is gone: nothing to release
            pass
