"""The BI tools of ``tests/bi``: pinned virtual environments, cached between runs, and servers.

Apache Superset and pgAdmin 4 come from PyPI into virtual environments of their own (their
dependencies conflict with dpproxy's and with each other's), under
``$DPPROXY_BI_CACHE`` (default ``~/.cache/dpproxy-bi``) in a directory named by a hash of the
pins and the Python version: the first run builds it (Superset also migrates and initialises a
template metadata database there, the slow part), later runs only copy the template. A build
happens under a file lock, and an
interrupted build is never mistaken for a finished one (a marker file is written last).

Nothing is mocked: each test starts the real Superset (``superset run``) or pgAdmin
(``pgAdmin4.py``, desktop mode) as a subprocess on a free port of 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from tests.pg import skip_or_fail

SUPERSET_PINS = (
    "apache-superset==6.1.0",
    "psycopg2-binary==2.9.13",
    "rich==15.0.0",
    "cachetools==8.0.2",
    "flask-caching==2.3.1",  # 2.5.1 breaks Superset 6.1.0 (TypeError: ... 'timeout')
)
PGADMIN_PINS = ("pgadmin4==9.18",)

SUPERSET_ADMIN = ("admin", "admin-password")  # user name and password of the template's admin
PGADMIN_DESKTOP_USER = "pgadmin4@pgadmin.org"  # desktop mode's single user
BUILD_TIMEOUT = 1800  # seconds, for one pip install or superset command
START_TIMEOUT = 180  # seconds, until a tool answers HTTP

SUPERSET_CONFIG = '''\
"""Superset for dpproxy's tests/bi: SQLite metadata (path from the environment), SimpleCache."""
import os

SECRET_KEY = "dpproxy-tests-bi-not-a-secret"
SQLALCHEMY_DATABASE_URI = "sqlite:///" + os.environ["DPPROXY_BI_SUPERSET_DB"]
CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache", "CACHE_DEFAULT_TIMEOUT": 300}
DATA_CACHE_CONFIG = CACHE_CONFIG
FILTER_STATE_CACHE_CONFIG = CACHE_CONFIG
EXPLORE_FORM_DATA_CACHE_CONFIG = CACHE_CONFIG
WTF_CSRF_ENABLED = False
TALISMAN_ENABLED = False
RATELIMIT_ENABLED = False
SQLLAB_ASYNC_TIME_LIMIT_SEC = 120
SUPERSET_WEBSERVER_TIMEOUT = 120
FEATURE_FLAGS = {"ALERT_REPORTS": False}
'''

PGADMIN_CONFIG = '''\
"""pgAdmin for dpproxy's tests/bi: desktop mode, all state under DPPROXY_BI_PGADMIN_DATA."""
import os

SERVER_MODE = False
MASTER_PASSWORD_REQUIRED = False
UPGRADE_CHECK_ENABLED = False
ENHANCED_COOKIE_PROTECTION = False
DATA_DIR = os.environ.get("DPPROXY_BI_PGADMIN_DATA", os.path.expanduser("~/.pgadmin"))
LOG_FILE = os.path.join(DATA_DIR, "pgadmin4.log")
SQLITE_PATH = os.path.join(DATA_DIR, "pgadmin4.db")
SESSION_DB_PATH = os.path.join(DATA_DIR, "sessions")
STORAGE_DIR = os.path.join(DATA_DIR, "storage")
AZURE_CREDENTIAL_CACHE_DIR = os.path.join(DATA_DIR, "azurecredentialcache")
KERBEROS_CCACHE_DIR = os.path.join(DATA_DIR, "krbccache")
DEFAULT_SERVER = "127.0.0.1"
DEFAULT_SERVER_PORT = int(os.environ.get("DPPROXY_BI_PGADMIN_PORT", "5050"))
CONSOLE_LOG_LEVEL = 20
FILE_LOG_LEVEL = 10  # every query pgAdmin sends, and every error, in pgadmin4.log
'''


class ToolUnavailable(Exception):
    """A BI tool's environment could not be built or the tool did not start."""


def cache_root() -> Path:
    return Path(os.environ.get("DPPROXY_BI_CACHE", "~/.cache/dpproxy-bi")).expanduser()


def env_key(name: str, pins: Sequence[str], extra: str = "") -> str:
    """``<name>-<12 hex>``: the hash of the pins, the Python version and ``extra``."""
    text = "\n".join([*pins, sys.version.split()[0], extra])
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: Sequence[str], what: str, **kw: object) -> str:
    try:
        proc = subprocess.run(
            list(cmd),
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            **kw,  # type: ignore[call-overload]
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolUnavailable(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise ToolUnavailable(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _make_venv(where: Path, pins: Sequence[str]) -> Path:
    _run([sys.executable, "-m", "venv", str(where)], f"python -m venv {where}")
    pip = [str(where / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "install", "--quiet", "--upgrade", "pip"], "pip install --upgrade pip")
    _run([*pip, "install", "--quiet", *pins], f"pip install {' '.join(pins)}")
    return where / "bin"


def ensure_env(name: str, pins: Sequence[str], build_rest: object = None) -> Path:
    """The cached environment directory for ``pins``, built now if missing."""
    root = cache_root()
    final = root / env_key(name, pins)
    if (final / "COMPLETE").exists():
        return final
    with _locked(root / f"{name}.lock"):
        if (final / "COMPLETE").exists():
            return final
        # Built in place (a venv's scripts name their interpreter by absolute path); the
        # COMPLETE marker is written last, so a half-built directory is rebuilt.
        shutil.rmtree(final, ignore_errors=True)
        final.mkdir(parents=True)
        t0 = time.monotonic()
        _make_venv(final / "venv", pins)
        if callable(build_rest):
            build_rest(final)
        (final / "COMPLETE").write_text(f"built in {time.monotonic() - t0:.0f} s\n")
        return final


# ------------------------------------------------------------------------------- Superset


def _superset_env(env_dir: Path, db: Path) -> dict[str, str]:
    return dict(
        os.environ,
        SUPERSET_CONFIG_PATH=str(env_dir / "superset_config.py"),
        DPPROXY_BI_SUPERSET_DB=str(db),
        FLASK_APP="superset",
        PYTHONWARNINGS="ignore",
        SUPERSET_LOAD_EXAMPLES="no",
    )


def _superset_template(building: Path) -> None:
    (building / "superset_config.py").write_text(SUPERSET_CONFIG)
    py = str(building / "venv" / "bin" / "python")
    env = _superset_env(building, building / "template.db")
    superset = [py, "-c", "from superset.cli.main import superset; superset()"]
    _run([*superset, "db", "upgrade"], "superset db upgrade", env=env, cwd=building)
    user, password = SUPERSET_ADMIN
    _run(
        [
            *superset,
            "fab",
            "create-admin",
            "--username",
            user,
            "--firstname",
            "Ada",
            "--lastname",
            "Admin",
            "--email",
            "admin@example.invalid",
            "--password",
            password,
        ],
        "superset fab create-admin",
        env=env,
        cwd=building,
    )
    _run([*superset, "init"], "superset init", env=env, cwd=building)


def superset_env() -> Path:
    """The Superset environment (venv, config, migrated template metadata database)."""
    return ensure_env("superset", SUPERSET_PINS, _superset_template)


def _pgadmin_package(py: Path) -> Path:
    """The directory of pgAdmin4.py and setup.py (``pgadmin4`` is a namespace package)."""
    code = (
        "import importlib.util as u; print(u.find_spec('pgadmin4').submodule_search_locations[0])"
    )
    return Path(_run([str(py), "-c", code], "locate the pgadmin4 package").strip())


def pgadmin_env() -> Path:
    """The pgAdmin environment (venv with config_local.py in its pgadmin4 package)."""

    def configure(building: Path) -> None:
        py = building / "venv" / "bin" / "python"
        (_pgadmin_package(py) / "config_local.py").write_text(PGADMIN_CONFIG)

    return ensure_env("pgadmin", PGADMIN_PINS, configure)


@dataclass
class WebTool:
    """A running web tool: its base URL, process and log file."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


def _start(cmd: Sequence[str], env: dict[str, str], cwd: Path, probe: str) -> WebTool:
    log = cwd / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(cmd),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    tool = WebTool(probe.rsplit("/", 1)[0] if probe.count("/") > 2 else probe, proc, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ToolUnavailable(f"{cmd[0]} exited ({proc.returncode}):\n{tool.log_tail()}")
        try:
            with urllib.request.urlopen(probe, timeout=5) as resp:
                if resp.status < 500:
                    return tool
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return tool
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(1)
    tool.stop()
    raise ToolUnavailable(f"{cmd} did not answer {probe} in {START_TIMEOUT} s:\n{tool.log_tail()}")


def start_superset(work: Path) -> WebTool:
    env_dir = superset_env()
    db = work / "superset.db"
    shutil.copyfile(env_dir / "template.db", db)
    port = free_port()
    py = str(env_dir / "venv" / "bin" / "python")
    cmd = [
        py,
        "-c",
        "from superset.cli.main import superset; superset()",
        "run",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--with-threads",
    ]
    tool = _start(cmd, _superset_env(env_dir, db), work, f"http://127.0.0.1:{port}/health")
    tool.url = f"http://127.0.0.1:{port}"
    return tool


def start_pgadmin(work: Path, servers_json: Path) -> WebTool:
    env_dir = pgadmin_env()
    py = str(env_dir / "venv" / "bin" / "python")
    pkg = _pgadmin_package(Path(py))
    (pkg / "config_local.py").write_text(PGADMIN_CONFIG)  # always the current settings
    data = work / "pgadmin-data"
    data.mkdir(exist_ok=True)
    port = free_port()
    env = dict(
        os.environ,
        DPPROXY_BI_PGADMIN_DATA=str(data),
        DPPROXY_BI_PGADMIN_PORT=str(port),
        PYTHONWARNINGS="ignore",
    )
    env.pop("PGADMIN_INT_KEY", None)
    _run(
        [py, str(pkg / "setup.py"), "setup-db"],
        "pgadmin setup.py setup-db",
        env=env,
        cwd=work,
    )
    _run(
        [
            py,
            str(pkg / "setup.py"),
            "load-servers",
            str(servers_json),
            "--user",
            PGADMIN_DESKTOP_USER,
        ],
        "pgadmin setup.py load-servers",
        env=env,
        cwd=work,
    )
    tool = _start([py, str(pkg / "pgAdmin4.py")], env, work, f"http://127.0.0.1:{port}/misc/ping")
    tool.url = f"http://127.0.0.1:{port}"
    return tool


# ------------------------------------------------------------------------- shared helpers

CHROMIUM = Path(os.environ.get("DPPROXY_BI_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
USER = "ana"
PASSWORD = "bi-tools-password"  # URL-safe: it goes into SQLAlchemy URIs
DATABASE = "dpproxy"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def missing(what: str) -> NoReturn:
    """Skip, or fail under CI: a missing BI tool must never pass CI silently."""
    skip_or_fail(f"{what} (CI installs it: see .ci/run)")


@contextlib.contextmanager
def headless_chromium() -> Iterator[Any]:
    """Debian's chromium, headless, driven by Playwright (a missing piece: :func:`missing`)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        missing(f"playwright is not installed ({exc}): pip install '.[test]'")
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"no chromium at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Proxy:
    host: str
    port: int
    proc: subprocess.Popen[str]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def screenshot(page: Any, tmp_path: Path, name: str, keep: bool = False) -> Path:
    """Save ``name``.png in the test's tmp dir; with ``keep`` and
    ``DPPROXY_UPDATE_SCREENSHOTS=1``, also in docs/screenshots/ (the README's copies)."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    if keep and os.environ.get("DPPROXY_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / f"{name}.png")
    return path
