"""Backends run planner-produced SQL and nothing else; one interface, chosen by the database
argument: a ``postgresql://`` (or ``postgres://``) DSN, a Spark address (``spark+local[N]``,
``spark://HOST:PORT``, ``sc://HOST:PORT``; ``backends/spark.py``), or the path of a DuckDB file."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from dpproxy.catalog.model import Catalog
from dpproxy.dsn import is_postgres_url, is_spark_url
from dpproxy.errors import CanceledBeforeStart
from dpproxy.release.noise import ExactResult


class CancelToken:
    """Cancels one query from another thread (a client's CancelRequest).

    The backend registers how to interrupt the query it runs (``on_cancel``); ``cancel`` calls
    it, at once if the query runs, or as soon as it starts. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._action: Callable[[], None] | None = None
        self.cancelled = False

    def on_cancel(self, action: Callable[[], None] | None) -> None:
        with self._lock:
            self._action = action
            fire = action is not None and self.cancelled
        if fire and action is not None:
            action()

    def check(self) -> None:
        """Raise QueryCanceled if the query was cancelled before it started: an interrupt sent
        to a connection that is not running a query yet is lost on both engines."""
        if self.cancelled:
            raise CanceledBeforeStart("canceling statement due to user request")

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            action = self._action
        if action is not None:
            action()


class Backend(Protocol):
    """What the engine needs from a database."""

    dialect: str  # the sqlglot dialect the rewrite is printed in
    portable_hash: bool  # rewrite/dialect.py: md5 row hash, identical on every engine

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        """Run one rewritten query and return its exact rows (``QueryCanceled`` if ``cancel``
        fires while it runs).

        Raises ``BackendUnavailable`` only when the query provably never reached the database
        (its budget is then refunded); every other failure is charged.
        """
        ...

    def attach_catalog(self, catalog: Catalog) -> Catalog:
        """Check the schema fits the database (its tables and columns exist; on DuckDB and
        PostgreSQL, of the schema's types: ``backends/fit.py``); mark unit columns the database
        proves unique. Every engine calls it once, when it is built."""
        ...

    def close(self) -> None: ...


def open_backend(
    database: str, *, portable_hash: bool = False, statement_timeout: float | None = None
) -> Backend:
    """The backend for a database argument (see the module docstring).

    ``statement_timeout`` (seconds) applies to PostgreSQL and Spark; an embedded DuckDB query
    runs in this process and is not timed out.
    """
    if is_spark_url(database):
        from dpproxy.backends.spark import DEFAULT_STATEMENT_TIMEOUT_S as SPARK_TIMEOUT_S
        from dpproxy.backends.spark import SparkBackend

        return SparkBackend(
            database,
            portable_hash=portable_hash,
            statement_timeout=statement_timeout or SPARK_TIMEOUT_S,
        )
    if is_postgres_url(database):
        from dpproxy.backends.postgres import DEFAULT_STATEMENT_TIMEOUT_S, PostgresBackend

        return PostgresBackend(
            database,
            portable_hash=portable_hash,
            statement_timeout=statement_timeout or DEFAULT_STATEMENT_TIMEOUT_S,
        )
    from dpproxy.backends.duckdb import DuckDBBackend

    return DuckDBBackend(database, portable_hash=portable_hash)
