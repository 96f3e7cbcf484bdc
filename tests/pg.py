"""PostgreSQL servers for the tests: throwaway clusters, server discovery, scratch databases.

Nothing here is a mock: every server is a real PostgreSQL, found in this order by
:func:`find_server`:

1. ``DPPROXY_TEST_DSN``: a libpq DSN or URL of a server and database on which the tests may
   ``CREATE DATABASE`` (``.ci/run`` sets it to the server this project's machines run);
2. a :class:`TemporaryCluster` from the local PostgreSQL binaries (``initdb``/``pg_ctl``);
3. a ``testcontainers`` PostgreSQL container, if the package is installed and Docker answers.

When none is available the fixtures skip, except under CI (``CI`` set, and not ``0``/``false``),
where a missing server is a failure (:func:`skip_or_fail`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pwd
import re
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import pytest

ENV_DSN = "DPPROXY_TEST_DSN"
DATABASE_PREFIX = "dpproxy_test_"
LIB_ROOT = Path("/usr/lib/postgresql")  # Debian/Ubuntu: /usr/lib/postgresql/<major>/bin
REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres")
SERVER_OS_USER = "postgres"  # initdb and postgres refuse to run as root
COMMAND_TIMEOUT = 120  # seconds, for initdb and pg_ctl (pg_ctl itself waits at most 60)
LOG_TAIL_LINES = 40


class ClusterUnavailable(Exception):
    """A :class:`TemporaryCluster` could not be created, started or stopped."""


class NoLocalBinaries(ClusterUnavailable):
    """No usable local PostgreSQL binaries (or, as root, no OS user to run them as)."""


class ServerUnavailable(Exception):
    """No PostgreSQL server is available; ``reasons`` says why each candidate was passed over."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        lines = "\n".join(f"  - {r}" for r in self.reasons)
        super().__init__(f"no PostgreSQL server for the tests:\n{lines}")


def is_ci() -> bool:
    """True when ``CI`` is set to anything but empty, ``0`` or ``false``."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def skip_or_fail(message: str) -> NoReturn:
    """Skip the test, or fail it under CI: a missing server must never pass CI silently."""
    if is_ci():
        pytest.fail(f"{message}\n(CI is set: a missing PostgreSQL server is a failure)")
    pytest.skip(message)


# ----------------------------------------------------------------------------------- binaries


def _has_binaries(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in REQUIRED_BINARIES)


def _version_key(path: Path) -> tuple[int, ...]:
    """``/usr/lib/postgresql/9.6/bin`` → ``(9, 6)``; unparseable versions sort first."""
    return tuple(int(p) for p in re.findall(r"\d+", path.parent.name)) or (-1,)


def installed_bindirs(lib_root: Path = LIB_ROOT) -> list[Path]:
    """``<lib_root>/*/bin`` directories, the highest major version first."""
    if not lib_root.is_dir():
        return []
    return sorted((p for p in lib_root.glob("*/bin") if p.is_dir()), key=_version_key, reverse=True)


def find_bindir() -> Path:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``.

    Tries ``pg_config --bindir``, then the highest ``/usr/lib/postgresql/*/bin``, then the
    directory of ``initdb`` on ``PATH``; raises :class:`NoLocalBinaries` listing every miss.
    """
    misses: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        misses.append("pg_config is not on PATH")
    else:
        proc = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=30, check=False
        )
        bindir = Path(proc.stdout.strip())
        if proc.returncode != 0 or not proc.stdout.strip():
            misses.append(f"{pg_config} --bindir failed: {proc.stderr.strip()}")
        elif _has_binaries(bindir):
            return bindir
        else:
            misses.append(
                f"{pg_config} --bindir is {bindir}, without {'/'.join(REQUIRED_BINARIES)}"
            )
    candidates = installed_bindirs()
    for bindir in candidates:
        if _has_binaries(bindir):
            return bindir
    misses.append(
        f"no {LIB_ROOT}/*/bin with {'/'.join(REQUIRED_BINARIES)}"
        + (f" (tried {', '.join(map(str, candidates))})" if candidates else "")
    )
    initdb = shutil.which("initdb")
    if initdb is None:
        misses.append("initdb is not on PATH")
    else:
        bindir = Path(initdb).resolve().parent
        if _has_binaries(bindir):
            return bindir
        misses.append(f"initdb on PATH is {initdb}, but {bindir} lacks pg_ctl or postgres")
    raise NoLocalBinaries("no local PostgreSQL binaries: " + "; ".join(misses))


# ------------------------------------------------------------------------------------ cluster


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _traversable_by_others(path: Path) -> bool:
    """Whether every directory from ``/`` to ``path`` can be entered by any user."""
    for p in (path, *path.parents):
        try:
            if not p.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no server log at {path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


class TemporaryCluster:
    """A throwaway PostgreSQL cluster in a temporary directory, run from the local binaries.

    ``start()`` runs ``initdb`` once (trust auth, superuser ``postgres``, UTF8, C locale) and
    starts the server on a free port of 127.0.0.1; ``stop()`` and ``restart()`` keep the port and
    the data (for fault tests); ``cleanup()`` stops it and deletes everything. As root, every
    binary runs as the ``postgres`` OS user through ``runuser``.
    """

    host = "127.0.0.1"
    user = "postgres"

    def __init__(
        self,
        bindir: Path | None = None,
        *,
        initdb_options: Sequence[str] = (),
        server_options: Sequence[str] = (),
    ) -> None:
        self._bindir = bindir
        self.initdb_options = tuple(initdb_options)
        self.server_options = tuple(server_options)  # extra postgres arguments, e.g. "-c", "x=y"
        self.port: int | None = None
        self.root: Path | None = None  # the temporary directory (also the socket directory)
        self.running = False
        self._initialized = False

    # -- paths and commands

    @property
    def datadir(self) -> Path:
        if self.root is None:
            raise ClusterUnavailable("the cluster has not been started")
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        """The server log (inside the data directory)."""
        return self.datadir / "server.log"

    def _binary(self, name: str) -> str:
        if self._bindir is None:
            self._bindir = find_bindir()
        path = self._bindir / name
        if not os.access(path, os.X_OK):
            raise NoLocalBinaries(f"{path} is missing or not executable")
        return str(path)

    def _prefix(self) -> list[str]:
        """``runuser -u postgres --`` when running as root, else nothing."""
        if os.geteuid() != 0:
            return []
        try:
            pwd.getpwnam(SERVER_OS_USER)
        except KeyError:
            raise NoLocalBinaries(
                f"running as root, and there is no {SERVER_OS_USER!r} OS user to run PostgreSQL as"
            ) from None
        runuser = shutil.which("runuser") or next(
            (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.access(p, os.X_OK)), None
        )
        if runuser is None:
            raise NoLocalBinaries("running as root, and runuser (util-linux) is not available")
        return [runuser, "-u", SERVER_OS_USER, "--"]

    def _run(self, args: list[str], what: str) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL binary (as the server's OS user); never raises on exit status."""
        assert self.root is not None
        cmd = [*self._prefix(), *args]
        try:
            return subprocess.run(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                cwd=self.root,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterUnavailable(f"{what} failed: {shlex.join(cmd)}: {exc}") from exc

    def _make_root(self) -> Path:
        base = Path(tempfile.gettempdir())
        root_user = os.geteuid() == 0
        # The socket path must fit in sun_path (~107 bytes), and as root the postgres user must
        # be able to reach the directory: fall back to /tmp otherwise.
        unsuitable = len(str(base)) > 60 or (root_user and not _traversable_by_others(base))
        if unsuitable and Path("/tmp").is_dir():
            base = Path("/tmp")
        root = Path(tempfile.mkdtemp(prefix="dpproxy-pg-", dir=base))
        if root_user:
            try:
                entry = pwd.getpwnam(SERVER_OS_USER)
            except KeyError:
                shutil.rmtree(root, ignore_errors=True)
                raise NoLocalBinaries(
                    f"running as root, and there is no {SERVER_OS_USER!r} OS user"
                ) from None
            os.chown(root, entry.pw_uid, entry.pw_gid)
        return root

    # -- lifecycle

    def start(self) -> TemporaryCluster:
        """Create the cluster (first time only) and start the server; a no-op if running."""
        if self.running:
            return self
        for name in REQUIRED_BINARIES:
            self._binary(name)
        if self.root is None:
            self.root = self._make_root()
            atexit.register(self.cleanup)
        if not self._initialized:
            self._initdb()
        fixed_port = self.port is not None
        for _attempt in range(1 if fixed_port else 5):
            if not fixed_port:
                self.port = free_port(self.host)
            proc = self._pg_ctl_start()
            if proc.returncode == 0:
                self.running = True
                return self
            log = _tail(self.log_path)
            if fixed_port or not re.search(r"could not bind|already in use", log):
                break  # only a port lost to a race is worth another try
        raise ClusterUnavailable(
            f"pg_ctl start failed (exit {proc.returncode}) on port {self.port}:\n"
            f"{proc.stdout.strip()}\n--- tail of {self.log_path} ---\n{log}"
        )

    def _initdb(self) -> None:
        args = [
            self._binary("initdb"),
            "-D",
            str(self.datadir),
            "--auth=trust",
            "-U",
            self.user,
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
            *self.initdb_options,
        ]
        proc = self._run(args, "initdb")
        if proc.returncode != 0:
            raise ClusterUnavailable(
                f"initdb failed (exit {proc.returncode}): {shlex.join(args)}\n{proc.stdout.strip()}"
            )
        self._initialized = True

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        assert self.root is not None and self.port is not None
        options = [
            "-k",
            str(self.root),
            "-c",
            f"listen_addresses={self.host}",
            "-p",
            str(self.port),
            "-c",
            "fsync=off",
            *self.server_options,
        ]
        args = [
            self._binary("pg_ctl"),
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.datadir),
            "-l",
            str(self.log_path),
            "-o",
            shlex.join(options),
        ]
        return self._run(args, "pg_ctl start")

    def _pg_ctl_status(self) -> int:
        """``pg_ctl status``: 0 running, 3 not running, 4 no data directory."""
        args = [self._binary("pg_ctl"), "status", "-D", str(self.datadir)]
        return self._run(args, "pg_ctl status").returncode

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back and disconnect clients; ``immediate``: crash)."""
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"unknown shutdown mode {mode!r}")
        if not self.running:
            return
        args = [self._binary("pg_ctl"), "stop", "-w", "-t", "60", "-D", str(self.datadir)]
        proc = self._run([*args, "-m", mode], "pg_ctl stop")
        if proc.returncode != 0 and self._pg_ctl_status() == 0:
            raise ClusterUnavailable(
                f"pg_ctl stop -m {mode} failed (exit {proc.returncode}):\n{proc.stdout.strip()}\n"
                f"--- tail of {self.log_path} ---\n{_tail(self.log_path)}"
            )
        self.running = False

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again, on the same port and data directory."""
        self.stop(mode)
        self.start()

    def cleanup(self) -> None:
        """Stop the server if it runs and delete the temporary directory."""
        if self.root is None:
            return
        try:
            if self.running:
                try:
                    self.stop("fast")
                except ClusterUnavailable:
                    self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            atexit.unregister(self.cleanup)
            self.root = None
            self.running = False
            self._initialized = False

    def dsn(self, dbname: str = "postgres") -> str:
        """``postgresql://postgres@127.0.0.1:PORT/dbname``."""
        if self.port is None:
            raise ClusterUnavailable("the cluster has not been started")
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    def __enter__(self) -> TemporaryCluster:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<TemporaryCluster {state} port={self.port} root={self.root}>"


# ------------------------------------------------------------------------------------- server


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases on."""

    admin_dsn: str
    source: str  # "env", "local cluster" or "testcontainers"
    reasons: tuple[str, ...] = ()  # why the sources before this one were passed over
    cluster: TemporaryCluster | None = None  # set when source == "local cluster"
    _close: Callable[[], None] | None = field(default=None, repr=False)

    def close(self) -> None:
        """Stop and remove what :func:`find_server` started (nothing for ``env``)."""
        close, self._close = self._close, None
        if close is not None:
            close()


def redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
    except Exception:  # an unparseable DSN, or no psycopg
        return re.sub(r"(password\s*=\s*|://[^:/@]*:)[^@\s]*", r"\1***", dsn)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


def check_admin_dsn(dsn: str) -> str | None:
    """Why the tests cannot use ``dsn`` to create databases, or None if they can."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        if "connect_timeout" not in conninfo_to_dict(dsn):
            dsn = make_conninfo(dsn, connect_timeout=5)
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
    except psycopg.Error as exc:
        return f"cannot connect: {str(exc).strip()}"
    if not (row and row[0]):
        return "the role may not CREATE DATABASE"
    return None


def _testcontainers_server(reasons: list[str]) -> Server | None:
    """A PostgreSQL container (image ``DPPROXY_TEST_PG_IMAGE``, default ``postgres:16-alpine``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from testcontainers.postgres import PostgresContainer
    except Exception as exc:  # ImportError, or a broken installation
        reasons.append(f"testcontainers: not importable ({type(exc).__name__}: {exc})")
        return None
    try:
        docker: Any = importlib.import_module("docker")  # the Docker SDK, a testcontainers dep
        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        reasons.append(f"testcontainers: no Docker engine answers ({type(exc).__name__}: {exc})")
        return None
    from psycopg.conninfo import make_conninfo

    image = os.environ.get("DPPROXY_TEST_PG_IMAGE", "postgres:16-alpine")
    container: Any = PostgresContainer(image)
    try:
        container.start()
        dsn = make_conninfo(
            host=container.get_container_host_ip(),
            port=str(container.get_exposed_port(5432)),
            user=getattr(container, "username", None) or container.POSTGRES_USER,
            password=getattr(container, "password", None) or container.POSTGRES_PASSWORD,
            dbname=getattr(container, "dbname", None) or container.POSTGRES_DB,
        )
    except Exception as exc:
        with contextlib.suppress(Exception):
            container.stop()
        reasons.append(f"testcontainers: {image} did not start ({type(exc).__name__}: {exc})")
        return None
    return Server(dsn, "testcontainers", tuple(reasons), _close=container.stop)


def find_server() -> Server:
    """The first available server: ``DPPROXY_TEST_DSN``, a local cluster, or testcontainers.

    Raises :class:`ServerUnavailable` with the reason for every miss. The caller must
    :meth:`Server.close` the result (it may be a cluster or a container this function started).
    """
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ServerUnavailable(
            [f"psycopg 3 is not installed ({exc}): pip install 'psycopg[binary]'"]
        ) from None
    reasons: list[str] = []

    dsn = os.environ.get(ENV_DSN, "").strip()
    if not dsn:
        reasons.append(f"{ENV_DSN} is not set")
    elif (problem := check_admin_dsn(dsn)) is None:
        return Server(dsn, "env")
    else:
        reasons.append(f"{ENV_DSN}={redact(dsn)}: {problem}")

    cluster = TemporaryCluster()
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        cluster.cleanup()
        reasons.append(f"local cluster: {exc}")
    else:
        return Server(cluster.dsn(), "local cluster", tuple(reasons), cluster, cluster.cleanup)

    server = _testcontainers_server(reasons)
    if server is not None:
        return server
    raise ServerUnavailable(reasons)


def server_or_skip() -> Server:
    """:func:`find_server`, or skip (fail under CI) with every reason."""
    try:
        return find_server()
    except ServerUnavailable as exc:
        skip_or_fail(str(exc))


def cluster_or_skip() -> TemporaryCluster:
    """A started :class:`TemporaryCluster`; skips (fails under CI) without local binaries.

    Other errors (initdb or the server failing on a machine that has the binaries) propagate.
    """
    cluster = TemporaryCluster()
    try:
        cluster.start()
    except NoLocalBinaries as exc:
        cluster.cleanup()
        skip_or_fail(f"no local PostgreSQL cluster: {exc}")
    except BaseException:
        cluster.cleanup()
        raise
    return cluster


# ---------------------------------------------------------------------------------- databases


def _admin_connect(admin_dsn: str) -> Any:
    import psycopg

    return psycopg.connect(admin_dsn, autocommit=True)


def database_exists(admin_dsn: str, name: str) -> bool:
    """Whether the server of ``admin_dsn`` has a database ``name``."""
    with _admin_connect(admin_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
    return bool(row and row[0])


def create_database(admin_dsn: str, prefix: str = DATABASE_PREFIX) -> tuple[str, str]:
    """Create an empty database ``<prefix><8 hex>``; returns its name and DSN.

    It is a copy of ``template0`` in UTF8 with the ``C`` collation (libc provider), so results
    that depend on sort order are the same on every server, whatever its default locale.
    """
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"{prefix}{secrets.token_hex(4)}"
    with _admin_connect(admin_dsn) as conn:
        provider = " LOCALE_PROVIDER libc" if conn.info.server_version >= 150000 else ""
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' "
                "LC_COLLATE 'C' LC_CTYPE 'C'" + provider
            ).format(sql.Identifier(name))
        )
    return name, make_conninfo(admin_dsn, dbname=name)


def drop_database(admin_dsn: str, name: str) -> None:
    """Drop ``name``, disconnecting its sessions (``WITH (FORCE)``; terminate them before 13)."""
    from psycopg import sql

    with _admin_connect(admin_dsn) as conn:
        if conn.info.server_version >= 130000:
            query = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        else:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            query = sql.SQL("DROP DATABASE IF EXISTS {}")
        conn.execute(query.format(sql.Identifier(name)))


@contextlib.contextmanager
def temporary_database(admin_dsn: str) -> Iterator[str]:
    """A fresh empty database for the ``with`` block; yields its DSN, drops it afterwards."""
    name, dsn = create_database(admin_dsn)
    try:
        yield dsn
    finally:
        drop_database(admin_dsn, name)
