"""Apache Spark backend: planner-produced Spark SQL on a local session, a cluster or Spark Connect.

The ``--database`` argument names where Spark runs (:func:`parse_spark_url`):

=================================  ==========================================================
``spark+local[N]``                 Spark in this process with N worker threads (``local[*]``:
                                   one per core); needs Java 17 and ``pip install
                                   'dpproxy[spark]'``
``spark://HOST:7077``              a standalone cluster's master (the driver runs here)
``sc://HOST:15002``                a Spark Connect server
=================================  ==========================================================

Any of them takes ``?parquet_dir=/path``: every ``NAME.parquet`` (a file or a directory of
files) under it is the table ``NAME``, a temporary view of this backend's session. Without it
the schema's tables are read from the session catalog (the Hive metastore or the default
database of the cluster).

Every session runs with ``spark.sql.ansi.enabled=true``: an integer overflow, a division by
zero or a failing cast raises instead of giving NULL or a wrapped value, so the guards of the
rewrite (``rewrite/spark.py``) are what make an accepted query total here too, exactly as on
PostgreSQL. Failures are sorted as the PostgreSQL backend sorts them: the cluster not reachable
before the query was sent → ``BackendUnavailable`` (08001, refunded); lost while it ran →
``ConnectionLost`` (08006, charged); cancelled or timed out → ``QueryCanceled`` (57014); any
other error → ``InternalError`` (XX000), with Spark's message only in ``log_detail``.

Each query runs in a job group of its own (on Spark Connect: under a job tag); a client's
cancel and the statement timeout cancel that group's jobs only, interrupting their tasks.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from dpproxy.backends import CancelToken
from dpproxy.backends.spark_session import (
    SESSION_CONF,
    base_session,
    connect_session,
    discard_base,
    reachable,
    release_base,
    stopped,
)
from dpproxy.backends.spark_unique import FileGuard, check_unique, local_files
from dpproxy.catalog.model import Catalog
from dpproxy.errors import (
    BackendUnavailable,
    ConnectionLost,
    DPProxyError,
    InternalError,
    InvalidParameter,
    QueryCanceled,
    UndefinedTable,
)
from dpproxy.release.noise import ExactResult

log = logging.getLogger("dpproxy.spark")

DEFAULT_STATEMENT_TIMEOUT_S = 300.0
_LOCAL = re.compile(r"^spark\+local(\[(\d+|\*)\])?$")
_REMOTE = re.compile(r"^(spark|sc)://([A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})/?$")


@dataclass(frozen=True, slots=True)
class SparkTarget:
    """Where Spark runs: a ``master`` URL (local or standalone) or a Spark Connect ``remote``."""

    master: str | None
    remote: str | None
    parquet_dir: Path | None

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, port) of a cluster or Connect server; None for local mode."""
        url = self.remote or self.master or ""
        m = _REMOTE.match(url)
        return (m.group(2).strip("[]"), int(m.group(3))) if m else None


def parse_spark_url(database: str) -> SparkTarget:
    """Read a Spark ``--database`` argument (see the module docstring).

    >>> parse_spark_url("spark+local[2]?parquet_dir=/data")
    SparkTarget(master='local[2]', remote=None, parquet_dir=PosixPath('/data'))
    >>> parse_spark_url("sc://10.0.0.5:15002").address
    ('10.0.0.5', 15002)
    """
    base, _, query = database.partition("?")
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"parquet_dir"})
    hint = "use spark+local[N], spark://HOST:7077 or sc://HOST:15002, optionally ?parquet_dir=DIR"
    if unknown:
        raise InvalidParameter(f"unknown Spark option {unknown[0]!r}", hint=hint)
    parquet = options.get("parquet_dir", [""])[-1]
    parquet_dir = Path(parquet) if parquet else None
    local = _LOCAL.match(base.lower())
    if local:
        return SparkTarget(f"local[{local.group(2) or '*'}]", None, parquet_dir)
    remote = _REMOTE.match(base)
    if remote is None:
        raise InvalidParameter(f"cannot read the Spark address {base!r}", hint=hint)
    if remote.group(1) == "sc":
        return SparkTarget(None, base.rstrip("/"), parquet_dir)
    return SparkTarget(base.rstrip("/"), None, parquet_dir)


def _plain(v: Any) -> Any:
    """Spark's DECIMAL sums → int or float, dates → ISO text as the other backends give them."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() and v.is_finite() else float(v)
    return v


class SparkBackend:
    """One Spark session (local, standalone cluster or Spark Connect) running dpproxy's SQL."""

    dialect = "spark"

    def __init__(
        self,
        database: str,
        *,
        portable_hash: bool = False,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT_S,
    ) -> None:
        # rewrite/dialect.py: xxhash64 keyed by the secret, or the portable md5 hash.
        self.portable_hash = portable_hash
        self.statement_timeout = statement_timeout
        self.target = parse_spark_url(database)
        self.name = database.partition("?")[0]
        address = self.target.address
        if address is not None and not reachable(address):
            raise BackendUnavailable(
                f"Spark at {self.name} is not reachable",
                hint="check that the cluster's master (or the Spark Connect server) runs and "
                "that HOST:PORT is right",
            )
        try:
            import pyspark  # noqa: F401
        except ImportError as e:
            raise BackendUnavailable(
                "the Spark backend needs PySpark",
                hint="pip install 'dpproxy[spark]' (and Java 17 for local mode)",
            ) from e
        self._owns_base = self.target.remote is None
        self._closed = False
        try:
            if self.target.remote is not None:
                self._spark = connect_session(self.target.remote)
                for key, value in SESSION_CONF.items():
                    self._spark.conf.set(key, value)
            else:
                self._spark = base_session(self.target.master or "").newSession()
                for key, value in SESSION_CONF.items():
                    self._spark.conf.set(key, value)
        except DPProxyError:
            raise
        except Exception as e:
            raise BackendUnavailable(
                f"cannot start Spark at {self.name}",
                hint="local mode needs Java 17 (JAVA_HOME or java on PATH); a cluster must be "
                "reachable",
                log_detail=f"{type(e).__name__}: {e}",
            ) from e
        self._lock = threading.Lock()
        self._broken = False  # the cluster was unreachable: a new session before the next query
        self._reopen_lock = threading.Lock()
        self._guard = FileGuard({})  # tables whose unit_unique was checked (spark_unique.py)
        try:
            self.views = self._register_parquet()
        except BaseException:
            self.close()
            raise

    def _register_parquet(self) -> tuple[str, ...]:
        directory = self.target.parquet_dir
        if directory is None:
            return ()
        if not directory.is_dir():
            raise BackendUnavailable(
                f"parquet_dir {directory} is not a directory",
                hint="point ?parquet_dir= at a directory holding NAME.parquet per table",
            )
        names = []
        for path in sorted(directory.glob("*.parquet")):
            try:
                self._spark.read.parquet(str(path)).createOrReplaceTempView(path.stem)
            except Exception as e:
                raise BackendUnavailable(
                    f"cannot read the Parquet table {path}", log_detail=f"{type(e).__name__}: {e}"
                ) from e
            names.append(path.stem)
        return tuple(names)

    def _ensure_live(self) -> None:
        """Before a query: refuse it (08001, refunded: nothing ran) while the cluster or the
        Connect server does not answer, and once it answers again continue on a new session
        (a Connect server that restarted lost the old one and its views; a standalone master
        that restarted does not know the old application, whose executors are gone)."""
        address = self.target.address
        with self._reopen_lock:
            if address is not None and not reachable(address):
                self._broken = True
                raise self._unreachable(ConnectionError(f"{address} does not answer"))
            classic_stopped = self.target.remote is None and stopped(self._spark)
            if not (self._broken or classic_stopped):
                return
            try:
                self._reopen()
            except DPProxyError:
                raise
            except Exception as e:
                raise self._unreachable(e) from e
            self._broken = False

    def _reopen(self) -> None:
        old = self._spark
        if self.target.remote is not None:
            try:
                old.stop()
            except Exception:  # the server that held it is gone
                log.debug("stopping the lost Spark Connect session failed", exc_info=True)
            self._spark = connect_session(self.target.remote)
        else:
            assert self.target.master is not None
            discard_base(self.target.master)
            self._spark = base_session(self.target.master).newSession()
        for key, value in SESSION_CONF.items():
            self._spark.conf.set(key, value)
        views = self._register_parquet()
        if views != self.views:
            raise self._unreachable(RuntimeError(f"tables {views} instead of {self.views}"))
        for table, sig in self._guard.files.items():  # the checked files and no others
            if local_files(self._spark.table(table)) != tuple(p for p, _, _ in sig):
                raise BackendUnavailable(
                    f'the Parquet files of table "{table}" changed since unit_unique was checked',
                    hint="open the backend again: its unit column is checked anew",
                )
        log.info("Spark at %s answers again: a new session", self.name)

    def execute(self, sql: str, cancel: CancelToken | None = None) -> ExactResult:
        self._ensure_live()
        tag = f"dpproxy-{uuid.uuid4().hex}"
        stop, done, timed_out = threading.Event(), threading.Event(), threading.Event()

        classic = self.target.remote is None

        def interrupt_until_done() -> None:
            # An interrupt reaches only the jobs running at that moment: one sent while Spark
            # still plans the query would be lost, so it is repeated until the query ends.
            if not stop.wait(self.statement_timeout):
                timed_out.set()
            while not done.is_set():
                try:
                    if classic:  # a job group: interruptTag cancelled nothing here (4.3)
                        self._spark.sparkContext.cancelJobGroup(tag)
                    else:
                        self._spark.interruptTag(tag)
                except Exception:  # the session is gone: nothing left to interrupt
                    log.debug("interrupting %s failed", tag, exc_info=True)
                done.wait(0.2)

        try:
            if classic:  # thread-local: this thread's jobs, interrupted when cancelled
                self._spark.sparkContext.setJobGroup(tag, "dpproxy", interruptOnCancel=True)
            else:
                self._spark.addTag(tag)
        except Exception as e:
            raise self._unreachable(e) from e
        watcher = threading.Thread(target=interrupt_until_done, daemon=True)
        try:
            if cancel is not None:
                cancel.on_cancel(stop.set)
                cancel.check()
            watcher.start()
            if self._guard.files:
                self._guard.check(ran=False)
            frame = self._spark.sql(sql)
            rows = frame.collect()
            cols = tuple(frame.columns)
            if self._guard.files:
                self._guard.check(ran=True)
        except Exception as e:
            cancelled = cancel is not None and cancel.cancelled
            if _is_connection_error(e):
                self._broken = True
            raise self._translate(e, cancelled=cancelled, timed_out=timed_out.is_set()) from e
        finally:
            done.set()
            stop.set()
            if cancel is not None:
                cancel.on_cancel(None)
            try:
                if classic:
                    # None removes the property.
                    self._spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
                else:
                    self._spark.removeTag(tag)
            except Exception:
                log.debug("removing tag %s failed", tag, exc_info=True)
        return ExactResult(cols, tuple(tuple(_plain(v) for v in r) for r in rows))

    def _unreachable(self, e: Exception) -> BackendUnavailable:
        return BackendUnavailable(
            f"Spark at {self.name} is not reachable",
            hint="the query was not run and nothing was charged; try again when the cluster is "
            "back",
            log_detail=f"{type(e).__name__}: {e}",
        )

    def _translate(self, e: Exception, *, cancelled: bool, timed_out: bool) -> Exception:
        if isinstance(e, DPProxyError):
            return e
        detail = f"{type(e).__name__}: {e}"
        if cancelled:
            return QueryCanceled("canceling statement due to user request")
        if timed_out:
            return QueryCanceled(
                "the query was cancelled (statement timeout)",
                hint=f"the limit is {self.statement_timeout:g} s; its budget was charged",
            )
        if _is_connection_error(e):
            return ConnectionLost(
                f"the connection to Spark at {self.name} was lost during the query",
                hint="its budget was charged",
                log_detail=detail,
            )
        # Spark's message can quote a value: log_detail only (engine.PrivateQueryFailed).
        return InternalError("the database failed to run the query", log_detail=detail)

    def attach_catalog(self, catalog: Catalog) -> Catalog:
        """Check every schema table and column exists (metadata only). Spark enforces no
        PRIMARY KEY or UNIQUE constraint: a unit column is taken as unique only when the schema
        states it (``unit_unique``) and the data of a ``?parquet_dir=`` table bears it out
        (``spark_unique.py``, one query per such table)."""
        tables = []
        for t in catalog.tables:
            try:
                with self._lock:
                    present = {f.name.lower() for f in self._spark.table(t.name).schema.fields}
            except Exception as e:
                if _is_connection_error(e):
                    raise self._unreachable(e) from e
                raise UndefinedTable(
                    f'table "{t.name}" of the schema is not in the Spark catalog of {self.name}',
                    hint="check that --schema and --database belong together; with "
                    "?parquet_dir=DIR the table is DIR/NAME.parquet",
                    log_detail=f"{type(e).__name__}: {e}",
                ) from e
            missing = [c.name for c in t.columns if c.name.lower() not in present]
            if missing:
                raise UndefinedTable(
                    f'columns {", ".join(missing)} of table "{t.name}" are not in the database',
                    hint="check that --schema and --database belong together",
                )
            unique = False
            # Only in local mode are the files Spark reads the files this process checks.
            local = self.target.address is None
            if (
                local
                and t.unit_declared_unique
                and t.name.lower() in {v.lower() for v in self.views}
            ):
                try:
                    with self._lock:
                        sig = check_unique(self._spark, t)
                except DPProxyError:
                    raise
                except Exception as e:
                    raise self._translate(e, cancelled=False, timed_out=False) from e
                if sig is not None:
                    self._guard.files[t.name] = sig
                    unique = True
            tables.append(replace(t, unit_is_unique=unique))
        return replace(catalog, tables=tuple(tables))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        spark = self._spark
        if self.target.remote is not None:
            try:
                spark.stop()
            except Exception:
                log.debug("stopping the Spark Connect session failed", exc_info=True)
        elif self.target.master is not None and self._owns_base:
            for view in getattr(self, "views", ()):
                try:
                    spark.catalog.dropTempView(view)
                except Exception:
                    log.debug("dropping view %s failed", view, exc_info=True)
            release_base(self.target.master)


def _is_connection_error(e: Exception) -> bool:
    """A lost or refused connection; on Spark Connect, where every server error is a
    ``SparkConnectGrpcException``, only an unanswered call (gRPC UNAVAILABLE or DEADLINE_EXCEEDED)
    or a session the server no longer has (it restarted)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {"Py4JNetworkError", "OSError"}:
        return True
    if "SparkConnectGrpcException" not in names:
        return False
    code = getattr(getattr(e, "getGrpcStatusCode", lambda: None)(), "name", "")
    condition = str(getattr(e, "getCondition", lambda: "")() or "")
    return code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") or condition.startswith("INVALID_HANDLE")
