"""Real PostgreSQL clients over real sockets, against a server that speaks the wire protocol v3.

Seven clients run the same scenario on ONE connection each: connect (password authentication,
SCRAM-SHA-256), ``SELECT 1``, ``SELECT version()``, a parameterised DP query
(``SELECT COUNT(*) FROM adult WHERE age > $1`` with 40), a grouped DP query
(``SELECT sex, AVG(age) FROM adult GROUP BY sex``), the client's own introspection, a row-level
read (``SELECT * FROM adult LIMIT 5``) and a working query after it on the same connection.

* psql (``\\d``, ``\\dt``, ``\\d adult``, ``\\l``), pgJDBC (``tests/clients/JdbcClient.java``,
  compiled here with javac) and node-postgres (``tests/clients/node/client.js``) run as
  subprocesses and print one JSON object (psql: sectioned text);
* psycopg 3 (text and binary, server-side parameters, a named prepared statement), asyncpg,
  pg8000 and SQLAlchemy 2 (engine connect, inspector and table reflection) run in-process.

Every test runs against each ``target`` (module-scoped, parametrized):

* ``postgres``: a throwaway PostgreSQL cluster (``tests/pg.py``) whose TCP connections must
  authenticate with SCRAM-SHA-256, a role ``ana`` and the Adult demo table. It validates the
  harness itself: there the row-level read succeeds (``expect_refusal`` is False) and every
  answer is exact.
* ``postgres-refusing``: the same cluster, as a role without the privilege to read one column
  of ``adult``, so the row-level read is refused with 42501 as on dpproxy: it validates the
  harness's ``expect_refusal`` path (error, then a working query on the same connection).
* ``dpproxy``: ``python -m dpproxy serve`` (see :func:`_dpproxy_target`); the row-level read must
  fail with SQLSTATE 42501 and the next query on the connection must work; answers are noisy.

A missing client (psql, java/javac and the pgJDBC jar, node and ``npm ci`` in
``tests/clients/node``, or a Python package) skips the test, and fails it under CI (``.ci/run``
installs them all).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from dpproxy.catalog.load import load_catalog
from dpproxy.demo import demo_schema_path, load_demo_postgres
from tests import pg

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"
JDBC_SOURCE = HERE / "JdbcClient.java"
JDBC_JAR = Path(os.environ.get("DPPROXY_TEST_JDBC_JAR", "/usr/share/java/postgresql.jar"))

ROLE = "ana"
PASSWORD = "correct horse battery staple"  # spaces and all: it must survive every client
DATABASE = "demo"
TABLE = "adult"
MIN_AGE = 40  # the parameter of the parameterised DP query
ROW_READ = f"SELECT * FROM {TABLE} LIMIT 5"
REFUSING_ROLE = "bob"  # postgres-refusing: may read every column of adult but HIDDEN_COLUMN
REFUSING_DATABASE = "demo_refusing"
HIDDEN_COLUMN = "secret"
REFUSED_SQLSTATE = "42501"  # insufficient_privilege
CLIENT_TIMEOUT = 120  # seconds, for every subprocess
CONNECT_TIMEOUT = 10


# ------------------------------------------------------------------------------------ missing


def missing(what: str, fix: str) -> NoReturn:
    """Skip the test for a missing client, or fail it under CI (``.ci/run`` installs them)."""
    message = f"{what} ({fix})"
    if pg.is_ci():
        pytest.fail(f"{message}\n(CI is set: a missing client is a failure, not a skip)")
    pytest.skip(message)


def require_tool(name: str, fix: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH", fix)
    return path


def require_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"the Python package {name} is not installed: {exc}", "pip install '.[test]'")


# ------------------------------------------------------------------------------------- target


@dataclass(frozen=True)
class Exact:
    """The exact answers of the scenario's queries on the Adult data."""

    total: int  # SELECT COUNT(*) FROM adult
    over_min_age: int  # SELECT COUNT(*) FROM adult WHERE age > 40
    avg_age_by_sex: dict[str, float]  # SELECT sex, AVG(age) FROM adult GROUP BY sex


@dataclass(frozen=True)
class Target:
    """Where the clients connect, and what they must see there."""

    kind: str  # "postgres" or "dpproxy"
    host: str
    port: int
    user: str
    password: str
    db: str
    expect_refusal: bool  # the row-level read fails with SQLSTATE 42501
    exact: Exact
    columns: frozenset[str]  # the columns introspection must list for the table adult
    extra_columns: frozenset[str] = frozenset()  # ... and those it may list besides
    count_tolerance: float = 0.0  # |answer - exact| allowed for counts
    avg_tolerance: float = 1e-9  # ... and for averages
    scram_only: bool = True  # libpq clients insist on SCRAM (require_auth, libpq >= 16)
    notes: dict[str, Any] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment of a client subprocess: no inherited ``PG*``, ``DPP_*`` set."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(
            DPP_HOST=self.host,
            DPP_PORT=str(self.port),
            DPP_USER=self.user,
            DPP_PASSWORD=self.password,
            DPP_DB=self.db,
        )
        return env

    def libpq_options(self) -> dict[str, str]:
        """``require_auth=scram-sha-256`` where libpq has it (16+): SCRAM or no connection."""
        if self.scram_only and psycopg.pq.version() >= 160000:
            return {"require_auth": "scram-sha-256"}
        return {}

    def dsn(self, **extra: Any) -> str:
        """A libpq DSN; insists on SCRAM where libpq can (:meth:`libpq_options`)."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": self.db,
            "connect_timeout": CONNECT_TIMEOUT,
            "application_name": "dpproxy-client-tests",
        }
        params.update(self.libpq_options())
        params.update(extra)
        return make_conninfo("", **params)


def _demo_columns() -> frozenset[str]:
    catalog = load_catalog(demo_schema_path())
    (table,) = (t for t in catalog.tables if t.name == TABLE)
    return frozenset(c.name for c in table.columns)


def _exact_answers(execute: Callable[[str], list[tuple[Any, ...]]]) -> Exact:
    """The exact answers, from any connection to the raw data (``execute`` returns rows)."""
    total = execute(f"SELECT COUNT(*) FROM {TABLE}")[0][0]
    over = execute(f"SELECT COUNT(*) FROM {TABLE} WHERE age > {MIN_AGE}")[0][0]
    groups = execute(f"SELECT sex, AVG(age) FROM {TABLE} GROUP BY sex")
    return Exact(int(total), int(over), {str(k): float(v) for k, v in groups})


class ScramCluster(pg.TemporaryCluster):
    """A :class:`tests.pg.TemporaryCluster` whose TCP connections must use SCRAM-SHA-256.

    Until :meth:`require_scram` every connection is trusted (``initdb --auth=trust``); after it
    only Unix-socket connections are (the :meth:`admin_dsn`), and TCP ones need a password.
    """

    def __init__(self) -> None:
        super().__init__(server_options=("-c", "password_encryption=scram-sha-256"))

    def admin_dsn(self, dbname: str = "postgres") -> str:
        """The superuser over the Unix socket in the cluster's directory (always trusted)."""
        assert self.root is not None and self.port is not None
        return make_conninfo("", host=str(self.root), port=self.port, user=self.user, dbname=dbname)

    def require_scram(self) -> None:
        """Rewrite ``pg_hba.conf`` (SCRAM for TCP, trust on the socket) and reload it."""
        hba = self.datadir / "pg_hba.conf"
        # write_text truncates the file in place: it keeps its owner (postgres) and mode
        hba.write_text(
            "# tests/clients/test_clients.py: SCRAM-SHA-256 for every TCP connection\n"
            "local all all                trust\n"
            "host  all all 127.0.0.1/32   scram-sha-256\n"
            "host  all all ::1/128        scram-sha-256\n",
            encoding="utf-8",
        )
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            errors = conn.execute(
                "SELECT line_number, error FROM pg_hba_file_rules WHERE error IS NOT NULL"
            ).fetchall()
            assert not errors, f"pg_hba.conf does not parse: {errors}"
            conn.execute("SELECT pg_reload_conf()")
        # The postmaster reloads on SIGHUP, asynchronously: wait until a TCP connection without
        # a password is turned away.
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.dsn(), connect_timeout=CONNECT_TIMEOUT).close()
            except psycopg.OperationalError as exc:
                if "password" in str(exc):
                    return
                raise
            if time.monotonic() > deadline:
                raise pg.ClusterUnavailable("pg_hba.conf was not reloaded within 30 s")
            time.sleep(0.1)


@dataclass
class PostgresSetup:
    """The SCRAM cluster of the ``postgres`` targets, and the exact answers on its data."""

    cluster: ScramCluster
    exact: Exact


def _run_ddl(conn: psycopg.Connection[Any], query: str, *identifiers: str) -> None:
    conn.execute(sql.SQL(query).format(*map(sql.Identifier, identifiers)))


@pytest.fixture(scope="module")
def scram_postgres() -> Iterator[PostgresSetup]:
    """A real PostgreSQL whose TCP connections need SCRAM-SHA-256, with the Adult demo twice:

    * database ``demo``: ``adult`` as loaded, ``SELECT`` granted to ``ana``;
    * database ``demo_refusing``: ``adult`` plus a column ``secret``; ``bob`` may read every
      column but that one, so ``SELECT *`` is refused with 42501 (insufficient_privilege) as
      dpproxy refuses it, while aggregates and the catalogs work: it checks the harness's
      ``expect_refusal`` path on a real server.
    """
    cluster = ScramCluster()
    try:
        try:
            cluster.start()
        except pg.NoLocalBinaries as exc:
            pg.skip_or_fail(f"no local PostgreSQL cluster: {exc}")
        with psycopg.connect(cluster.admin_dsn(), autocommit=True) as conn:
            for role in (ROLE, REFUSING_ROLE):
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(PASSWORD)
                    )
                )
            for db in (DATABASE, REFUSING_DATABASE):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
            stored = conn.execute(
                "SELECT rolname, rolpassword FROM pg_authid WHERE rolname IN (%s, %s)",
                (ROLE, REFUSING_ROLE),
            ).fetchall()
            assert len(stored) == 2, stored
            assert all(p.startswith("SCRAM-SHA-256$") for _, p in stored), "not SCRAM verifiers"
        load_demo_postgres(cluster.admin_dsn(DATABASE))
        with psycopg.connect(cluster.admin_dsn(DATABASE), autocommit=True) as conn:
            _run_ddl(conn, "GRANT SELECT ON {} TO {}", TABLE, ROLE)
            exact = _exact_answers(lambda q: conn.execute(q).fetchall())
        load_demo_postgres(cluster.admin_dsn(REFUSING_DATABASE))
        with psycopg.connect(cluster.admin_dsn(REFUSING_DATABASE), autocommit=True) as conn:
            _run_ddl(conn, "ALTER TABLE {} ADD COLUMN {} text", TABLE, HIDDEN_COLUMN)
            columns = sql.SQL(", ").join(map(sql.Identifier, sorted(_demo_columns())))
            conn.execute(
                sql.SQL("GRANT SELECT ({}) ON {} TO {}").format(
                    columns, sql.Identifier(TABLE), sql.Identifier(REFUSING_ROLE)
                )
            )
        cluster.require_scram()
        yield PostgresSetup(cluster, exact)
    finally:
        cluster.cleanup()


def _postgres_target(request: pytest.FixtureRequest, *, refusing: bool) -> Target:
    setup: PostgresSetup = request.getfixturevalue("scram_postgres")
    assert setup.cluster.port is not None
    return Target(
        kind="postgres",
        host=setup.cluster.host,
        port=setup.cluster.port,
        user=REFUSING_ROLE if refusing else ROLE,
        password=PASSWORD,
        db=REFUSING_DATABASE if refusing else DATABASE,
        expect_refusal=refusing,
        exact=setup.exact,
        columns=_demo_columns(),
        # information_schema lists only the columns one may read; pg_attribute lists them all
        extra_columns=frozenset({HIDDEN_COLUMN}) if refusing else frozenset(),
    )


# ============================================================================================
# HOOK for `dpproxy serve` (to be completed by whoever lands the server; written as expected)
# ============================================================================================


def _dpproxy_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """``python -m dpproxy serve`` on a free port of 127.0.0.1, over the bundled DuckDB demo.

    The commands:

    * ``python -m dpproxy user add ana --password-stdin --users FILE``: the password on stdin,
      stored as a SCRAM-SHA-256 verifier in FILE;
    * ``python -m dpproxy serve --listen 127.0.0.1:PORT --users FILE --schema SCHEMA``: serves
      the demo (no ``--database``: the bundled Adult DuckDB file) under a copy of the demo's
      privacy schema whose budget is large enough for every client's scenario (about 4 ε each,
      7 clients, both psycopg modes); accepts the database name ``demo`` (:data:`DATABASE`);
      answers ``SELECT version()`` with ``PostgreSQL <major>.<minor> ...`` (pg8000 and
      SQLAlchemy parse it) and refuses ``SELECT * FROM adult LIMIT 5`` with SQLSTATE 42501.
    """
    import duckdb

    demo_db: Path = request.getfixturevalue("demo_db")  # builds it; DPPROXY_CACHE_DIR is set
    tmp: Path = request.getfixturevalue("tmp_path_factory").mktemp("dpproxy-serve")
    users = tmp / "users"
    schema = tmp / "adult.yaml"
    text, n = re.subn(
        r"(?m)^(\s*)budget:.*$",
        r"\1budget: {epsilon: 1000, delta: 0.5}",
        demo_schema_path().read_text(encoding="utf-8"),
    )
    assert n == 1, "the demo schema has no privacy.budget line to replace"
    schema.write_text(text, encoding="utf-8")

    add = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpproxy",
            "user",
            "--users",
            str(users),
            "add",
            ROLE,
            "--password-stdin",
        ],
        input=PASSWORD + "\n",
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )
    if add.returncode != 0:
        raise RuntimeError(f"dpproxy user add failed ({add.returncode}):\n{add.stderr}")

    host, port = "127.0.0.1", pg.free_port()
    log_path = tmp / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dpproxy",
                "serve",
                "--listen",
                f"{host}:{port}",
                "--users",
                str(users),
                "--database",
                str(demo_db),
                "--schema",
                str(schema),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"dpproxy serve exited with {proc.returncode}:\n"
                    + log_path.read_text(encoding="utf-8", errors="replace")
                )
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("dpproxy serve did not listen within 60 s") from None
                time.sleep(0.1)
        con = duckdb.connect(str(demo_db), read_only=True)
        try:
            exact = _exact_answers(lambda q: con.execute(q).fetchall())
        finally:
            con.close()
        yield Target(
            kind="dpproxy",
            host=host,
            port=port,
            user=ROLE,
            password=PASSWORD,
            db=DATABASE,
            expect_refusal=True,
            exact=exact,
            columns=_demo_columns(),
            count_tolerance=200.0,  # Laplace noise at ε ≤ 1: scale a few units
            avg_tolerance=2.0,
            notes={"log": log_path},
        )
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


TARGETS = [
    pytest.param("postgres", marks=pytest.mark.postgres, id="postgres"),
    pytest.param("postgres-refusing", marks=pytest.mark.postgres, id="postgres-refusing"),
    pytest.param("dpproxy", id="dpproxy"),
]


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "dpproxy":
        yield from _dpproxy_target(request)
    else:
        yield _postgres_target(request, refusing=request.param == "postgres-refusing")


# ------------------------------------------------------------------------------- the checks

Result = dict[str, Any]


def error_of(exc: BaseException) -> dict[str, Any]:
    """``{"error": {"sqlstate", "message"}}`` from any driver's exception."""
    sqlstate = getattr(exc, "sqlstate", None)  # psycopg, asyncpg
    orig = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's
    if sqlstate is None and orig is not None:
        sqlstate = getattr(orig, "sqlstate", None)
    message = str(exc)
    args = getattr(orig if orig is not None else exc, "args", ())
    if sqlstate is None and args and isinstance(args[0], dict):  # pg8000: the fields by code
        sqlstate, message = args[0].get("C"), args[0].get("M", message)
    return {"error": {"sqlstate": sqlstate, "message": message, "type": type(exc).__name__}}


def is_error(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"error"}


def show(result: Result) -> str:
    return json.dumps(result, indent=1, default=str)


class Recorder:
    """Runs the steps of one client's scenario and records each value or error."""

    def __init__(self) -> None:
        self.result: Result = {}

    def step(self, name: str, run: Callable[[], Any]) -> Any:
        try:
            value = run()
        except Exception as exc:
            self.result[name] = error_of(exc)
            return None
        self.result[name] = value
        return value

    async def astep(self, name: str, run: Callable[[], Any]) -> Any:
        try:
            value = await run()
        except Exception as exc:
            self.result[name] = error_of(exc)
            return None
        self.result[name] = value
        return value


def scalar(cur: Any) -> Any:
    """The single value of a one-row, one-column result (a DB-API cursor)."""
    rows = cur.fetchall()
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return rows[0][0]


def value(result: Result, step: str) -> Any:
    """The value of a step that must have succeeded."""
    assert step in result, f"step {step!r} did not run:\n{show(result)}"
    got = result[step]
    assert not is_error(got), f"step {step!r} failed: {got['error']}\n{show(result)}"
    return got


def number(v: Any) -> float:
    """A numeric answer, whatever the client made of it (int, Decimal, float or str)."""
    assert not isinstance(v, bool), f"{v!r} is not a number"
    if isinstance(v, int | float | Decimal | str):
        return float(v)
    raise AssertionError(f"{v!r} ({type(v).__name__}) is not a number")


def close_to(got: Any, want: float, tolerance: float, what: str) -> None:
    g = number(got)
    assert math.isfinite(g) and abs(g - want) <= tolerance + 1e-12 * abs(want), (
        f"{what}: got {got!r}, exact answer {want!r} (tolerance {tolerance})"
    )


def check_scenario(target: Target, result: Result) -> None:
    """The steps every client runs: connect … after_refusal (not the introspection)."""
    assert value(result, "connect") is True
    assert number(value(result, "select_1")) == 1
    version = value(result, "version")
    assert isinstance(version, str) and re.match(r"PostgreSQL \d+", version), version
    exact = target.exact
    close_to(
        value(result, "param_count"),
        exact.over_min_age,
        target.count_tolerance,
        f"COUNT(*) WHERE age > {MIN_AGE}",
    )
    check_grouped(target, value(result, "grouped"), result)
    check_refusal(target, result.get("refused"), result)
    close_to(
        value(result, "after_refusal"),
        exact.total,
        target.count_tolerance,
        "COUNT(*) after the row-level read",
    )


def check_grouped(target: Target, rows: Any, result: Result) -> None:
    """``SELECT sex, AVG(age) … GROUP BY sex``: the groups, and each average."""
    want = target.exact.avg_age_by_sex
    assert all(len(row) == 2 for row in rows), show(result)
    grouped = {str(row[0]): row[1] for row in rows}
    assert len(grouped) == len(rows) and set(grouped) == set(want), (grouped, want)
    for sex, avg in want.items():
        close_to(grouped[sex], avg, target.avg_tolerance, f"AVG(age) for sex={sex}")


def check_refusal(target: Target, refused: Any, result: Result) -> None:
    if target.expect_refusal:
        assert is_error(refused), f"the row-level read was not refused:\n{show(result)}"
        assert refused["error"]["sqlstate"] == REFUSED_SQLSTATE, show(result)
    else:
        assert not is_error(refused), f"the row-level read failed:\n{show(result)}"
        assert len(refused) == 5, show(result)


def check_columns(target: Target, names: Any, result: Result, what: str) -> None:
    listed = set(names)
    assert len(listed) == len(names), f"{what}: duplicates in {names}"
    assert target.columns <= listed <= target.columns | target.extra_columns, (
        f"{what}: {sorted(names)}\n{show(result)}"
    )


# ------------------------------------------------------------------- subprocess clients


def run_client(target: Target, args: list[str], cwd: Path | None = None) -> Result:
    """Run a client program; its stdout must be one JSON object."""
    proc = subprocess.run(
        args,
        env=target.env(),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"{args[0]} exited {proc.returncode}:\n{proc.stderr}"
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not JSON ({exc}):\n{proc.stdout}\n{proc.stderr}") from None
    assert isinstance(result, dict), proc.stdout
    return result


@pytest.fixture(scope="module")
def jdbc_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``JdbcClient.class``, compiled once per module run into a temporary directory."""
    javac = require_tool("javac", "apt-get install default-jdk-headless")
    if not JDBC_JAR.is_file():
        missing(f"the pgJDBC jar {JDBC_JAR} is missing", "apt-get install libpostgresql-jdbc-java")
    out = tmp_path_factory.mktemp("jdbc")
    proc = subprocess.run(
        [javac, "-encoding", "UTF-8", "-cp", str(JDBC_JAR), "-d", str(out), str(JDBC_SOURCE)],
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}{proc.stderr}"
    return out


def test_jdbc(target: Target, jdbc_classes: Path) -> None:
    java = require_tool("java", "apt-get install default-jre-headless")
    classpath = os.pathsep.join([str(jdbc_classes), str(JDBC_JAR)])
    result = run_client(target, [java, "-cp", classpath, "JdbcClient"])
    check_scenario(target, result)
    assert "PostgreSQL JDBC Driver" in value(result, "driver")
    assert TABLE in value(result, "tables"), show(result)
    columns = value(result, "columns")
    check_columns(target, [c[0] for c in columns], result, "DatabaseMetaData.getColumns")
    assert all(c[1] for c in columns), show(result)


def test_node_postgres(target: Target) -> None:
    node = require_tool("node", "apt-get install nodejs")
    if not (NODE_DIR / "node_modules" / "pg" / "package.json").is_file():
        missing("node-postgres is not installed", f"npm ci --prefix {NODE_DIR}")
    result = run_client(target, [node, str(NODE_DIR / "client.js")], cwd=NODE_DIR)
    check_scenario(target, result)
    columns = value(result, "columns")
    check_columns(target, [c[0] for c in columns], result, "information_schema.columns")
    assert value(result, "close") is True


# ---------------------------------------------------------------------------------- psql

PSQL_STEPS: list[tuple[str, str]] = [
    ("select_1", "SELECT 1;"),
    ("version", "SELECT version();"),
    # psql's parameters are its variables, interpolated client-side (\bind needs psql 16)
    ("param_count", f"SELECT COUNT(*) FROM {TABLE} WHERE age > :min_age;"),
    ("grouped", f"SELECT sex, AVG(age) FROM {TABLE} GROUP BY sex;"),
    ("d", "\\d"),
    ("dt", "\\dt"),
    ("d_adult", f"\\d {TABLE}"),
    ("l", "\\l"),
    ("refused", ROW_READ + ";"),
    ("after_refusal", f"SELECT COUNT(*) FROM {TABLE};"),
]


def _sections(text: str) -> dict[str, list[str]]:
    """Lines of psql's output by step, split at the ``@@step`` markers."""
    sections: dict[str, list[str]] = {}
    current = "(before)"
    for line in text.splitlines():
        if line.startswith("@@"):
            current = line[2:]
            sections.setdefault(current, [])
        elif line.strip():
            sections.setdefault(current, []).append(line)
    return sections


def test_psql(target: Target, tmp_path: Path) -> None:
    psql = require_tool("psql", "apt-get install postgresql-client")
    script = ["\\set VERBOSITY verbose", f"\\set min_age {MIN_AGE}"]
    for name, command in PSQL_STEPS:
        script += [f"\\echo @@{name}", f"\\warn @@{name}", command]
    script += ["\\echo @@end", "\\warn @@end"]
    path = tmp_path / "scenario.sql"
    path.write_text("\n".join(script) + "\n", encoding="utf-8")
    env = target.env()
    env.update(PGPASSWORD=target.password, PGCONNECT_TIMEOUT=str(CONNECT_TIMEOUT))
    proc = subprocess.run(
        [
            psql,
            "-X",
            "-A",
            "-t",
            "-w",
            "-v",
            "ON_ERROR_STOP=0",
            "-h",
            target.host,
            "-p",
            str(target.port),
            "-U",
            target.user,
            "-d",
            target.db,
            "-f",
            str(path),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )
    out, err = _sections(proc.stdout), _sections(proc.stderr)
    report = f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0 and "end" in out and "end" in err, report
    # every step but the row-level read is silent on stderr, except dpproxy's NOTICE of what
    # an answer cost (psql prints it, as it should)
    for name, _ in PSQL_STEPS:
        if name != "refused":
            noise = [line for line in err.get(name, []) if "NOTICE:" not in line]
            assert not noise, f"{name}: {err.get(name)}\n{report}"
    released = [line for lines in err.values() for line in lines if "NOTICE:" in line]
    if target.kind == "dpproxy":
        assert any("dpproxy: this answer cost ε=1, δ=0; budget left" in n for n in released), report

    def one(name: str) -> str:
        lines = out.get(name, [])
        assert len(lines) == 1, f"{name}: {lines}\n{report}"
        return lines[0]

    # -A -t: unaligned, tuples only; fields separated by |
    grouped = [line.split("|") for line in out.get("grouped", [])]
    refused_lines = err.get("refused", [])
    if target.expect_refusal:
        refused: Any = {"error": {"sqlstate": None, "message": "\n".join(refused_lines)}}
        m = re.search(r"ERROR:\s+([0-9A-Z]{5}):", "\n".join(refused_lines))
        if m:
            refused["error"]["sqlstate"] = m.group(1)
        assert not out.get("refused"), report
    else:
        assert not refused_lines, report
        refused = out.get("refused", [])
    result: Result = {
        "connect": True,
        "select_1": one("select_1"),
        "version": one("version"),
        "param_count": one("param_count"),
        "grouped": grouped,
        "refused": refused,
        "after_refusal": one("after_refusal"),
    }
    check_scenario(target, result)

    def relation_rows(name: str) -> list[list[str]]:  # schema|name|type|owner
        return [line.split("|") for line in out.get(name, [])]

    for name in ("d", "dt"):
        rows = relation_rows(name)
        assert ["public", TABLE, "table"] in [r[:3] for r in rows], f"\\{name}: {rows}\n{report}"
    columns = [line.split("|") for line in out.get("d_adult", [])]
    assert all(len(c) >= 2 and c[1] for c in columns), report  # column|type|collation|…
    check_columns(target, [c[0] for c in columns], result, "\\d adult")
    databases = [line.split("|")[0] for line in out.get("l", [])]
    assert target.db in databases, f"\\l: {databases}\n{report}"


# ------------------------------------------------------------------------------- psycopg 3


def test_psycopg(target: Target) -> None:
    """Text and binary results, server-side parameters, a named prepared statement; the
    default transaction mode (BEGIN before the first statement, ROLLBACK after an error)."""
    from psycopg.pq import TransactionStatus

    rec = Recorder()
    count_sql = f"SELECT COUNT(*) FROM {TABLE} WHERE age > %s"
    with psycopg.connect(target.dsn()) as conn:
        rec.result["connect"] = True
        rec.result["server_version"] = conn.info.server_version
        rec.step("select_1", lambda: scalar(conn.execute("SELECT 1")))
        rec.step("select_1_binary", lambda: scalar(conn.execute("SELECT 1", binary=True)))
        rec.step("version", lambda: scalar(conn.execute("SELECT version()")))
        # psycopg 3 binds server-side: Parse "… age > $1", Bind 40 (text, then binary)
        rec.step("param_count", lambda: scalar(conn.execute(count_sql, (MIN_AGE,))))
        rec.step(
            "param_count_binary",
            lambda: scalar(conn.execute(count_sql, (MIN_AGE,), binary=True)),
        )
        rec.step(
            "param_count_prepared",  # a named server-side prepared statement
            lambda: scalar(conn.execute(count_sql, (MIN_AGE,), prepare=True)),
        )

        def description() -> list[Any]:
            cur = conn.execute(count_sql, (MIN_AGE,), binary=True)
            cur.fetchall()
            assert cur.description is not None
            return [[d.name, d.type_code] for d in cur.description]

        rec.step("description", description)
        grouped_sql = f"SELECT sex, AVG(age) FROM {TABLE} GROUP BY sex"
        rec.step("grouped", lambda: [list(r) for r in conn.execute(grouped_sql).fetchall()])
        rec.step(
            "grouped_binary",
            lambda: [list(r) for r in conn.execute(grouped_sql, binary=True).fetchall()],
        )
        rec.step(
            "columns",
            lambda: [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    ("public", TABLE),
                    binary=True,
                ).fetchall()
            ],
        )
        rec.step("refused", lambda: conn.execute(ROW_READ).fetchall())
        rec.result["status_after_read"] = conn.info.transaction_status.name
        rec.step("rollback", lambda: conn.rollback() or True)
        rec.step("after_refusal", lambda: scalar(conn.execute(f"SELECT COUNT(*) FROM {TABLE}")))
    result = rec.result
    check_scenario(target, result)
    assert value(result, "select_1_binary") == 1
    for step in ("param_count_binary", "param_count_prepared"):
        close_to(value(result, step), target.exact.over_min_age, target.count_tolerance, step)
    check_grouped(target, value(result, "grouped_binary"), result)
    assert len(value(result, "description")) == 1
    assert value(result, "server_version") > 0
    check_columns(target, value(result, "columns"), result, "information_schema.columns")
    want = TransactionStatus.INERROR if target.expect_refusal else TransactionStatus.INTRANS
    assert result["status_after_read"] == want.name, show(result)


def test_scram_wrong_password(target: Target) -> None:
    """The server checks the password: a wrong one is refused with SQLSTATE 28P01."""
    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect(target.dsn(password="not " + target.password)).close()
    message = str(info.value)
    assert info.value.sqlstate == "28P01" or "password authentication failed" in message, message


# --------------------------------------------------------------------------------- asyncpg


def test_asyncpg(target: Target) -> None:
    asyncpg = require_module("asyncpg")
    count_sql = f"SELECT COUNT(*) FROM {TABLE} WHERE age > $1"

    async def scenario() -> Result:
        rec = Recorder()
        conn = await rec.astep(
            "connect",
            lambda: asyncpg.connect(
                host=target.host,
                port=target.port,
                user=target.user,
                password=target.password,
                database=target.db,
                timeout=CONNECT_TIMEOUT,
                server_settings={"application_name": "dpproxy-client-tests"},
            ),
        )
        if conn is None:
            return rec.result
        rec.result["connect"] = True
        try:
            await rec.astep("select_1", lambda: conn.fetchval("SELECT 1"))
            await rec.astep("version", lambda: conn.fetchval("SELECT version()"))
            await rec.astep("param_count", lambda: conn.fetchval(count_sql, MIN_AGE))

            async def prepared() -> dict[str, Any]:
                # asyncpg's introspection: the statement's parameter and result types
                stmt = await conn.prepare(count_sql)
                return {
                    "parameters": [t.name for t in stmt.get_parameters()],
                    "attributes": [a.name for a in stmt.get_attributes()],
                    "value": await stmt.fetchval(MIN_AGE),
                }

            await rec.astep("prepared", prepared)

            async def grouped() -> list[list[Any]]:
                rows = await conn.fetch(f"SELECT sex, AVG(age) FROM {TABLE} GROUP BY sex")
                return [list(r) for r in rows]

            await rec.astep("grouped", grouped)

            async def columns() -> list[str]:
                rows = await conn.fetch(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                    "public",
                    TABLE,
                )
                return [r[0] for r in rows]

            await rec.astep("columns", columns)

            async def refused() -> list[Any]:
                return list(await conn.fetch(ROW_READ))

            await rec.astep("refused", refused)
            await rec.astep("after_refusal", lambda: conn.fetchval(f"SELECT COUNT(*) FROM {TABLE}"))
        finally:
            await conn.close(timeout=CONNECT_TIMEOUT)
        return rec.result

    result = asyncio.run(scenario())
    check_scenario(target, result)
    prepared = value(result, "prepared")
    close_to(prepared["value"], target.exact.over_min_age, target.count_tolerance, "prepared")
    assert len(prepared["parameters"]) == 1 and len(prepared["attributes"]) == 1, show(result)
    check_columns(target, value(result, "columns"), result, "information_schema.columns")


# ---------------------------------------------------------------------------------- pg8000


def test_pg8000(target: Target) -> None:
    require_module("pg8000")
    native = require_module("pg8000.native")
    count_sql = f"SELECT COUNT(*) FROM {TABLE} WHERE age > :age"
    rec = Recorder()
    conn = rec.step(
        "connect",
        lambda: native.Connection(
            target.user,
            host=target.host,
            port=target.port,
            password=target.password,
            database=target.db,
            timeout=CONNECT_TIMEOUT,
            application_name="dpproxy-client-tests",
        ),
    )
    result = rec.result
    assert conn is not None, show(result)
    result["connect"] = True
    try:
        rec.step("select_1", lambda: conn.run("SELECT 1")[0][0])
        rec.step("version", lambda: conn.run("SELECT version()")[0][0])
        rec.step("param_count", lambda: conn.run(count_sql, age=MIN_AGE)[0][0])

        def prepared() -> Any:
            ps = conn.prepare(count_sql)
            try:
                return ps.run(age=MIN_AGE)[0][0]
            finally:
                ps.close()

        rec.step("prepared", prepared)
        rec.step("grouped", lambda: conn.run(f"SELECT sex, AVG(age) FROM {TABLE} GROUP BY sex"))

        def columns() -> dict[str, Any]:
            rows = conn.run(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = :s AND table_name = :t ORDER BY ordinal_position",
                s="public",
                t=TABLE,
            )
            # pg8000's own metadata: the RowDescription of the last statement
            return {"names": [r[0] for r in rows], "description": conn.columns}

        rec.step("columns", columns)
        rec.step("refused", lambda: conn.run(ROW_READ))
        rec.step("after_refusal", lambda: conn.run(f"SELECT COUNT(*) FROM {TABLE}")[0][0])
    finally:
        conn.close()
    check_scenario(target, result)
    close_to(value(result, "prepared"), target.exact.over_min_age, target.count_tolerance, "ps")
    cols = value(result, "columns")
    check_columns(target, cols["names"], result, "information_schema.columns")
    assert [c["name"] for c in cols["description"]] == ["column_name"], show(result)


# ------------------------------------------------------------------------------ SQLAlchemy 2


def test_sqlalchemy(target: Target) -> None:
    """Engine connect (the dialect's own start-up queries), inspector and table reflection,
    Core SQL from the reflected table; the default psycopg 3 driver."""
    sa = require_module("sqlalchemy")
    url = sa.engine.URL.create(
        "postgresql+psycopg",
        username=target.user,
        password=target.password,
        host=target.host,
        port=target.port,
        database=target.db,
        query={"connect_timeout": str(CONNECT_TIMEOUT)} | target.libpq_options(),
    )
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    rec = Recorder()
    text = sa.text
    try:
        conn = rec.step("connect", engine.connect)
        result = rec.result
        assert conn is not None, show(result)
        result["connect"] = True
        with conn:
            result["server_version_info"] = list(engine.dialect.server_version_info)
            rec.step("select_1", lambda: conn.execute(text("SELECT 1")).scalar_one())
            rec.step("version", lambda: conn.execute(text("SELECT version()")).scalar_one())
            rec.step(
                "param_count",
                lambda: conn.execute(
                    text(f"SELECT COUNT(*) FROM {TABLE} WHERE age > :age"), {"age": MIN_AGE}
                ).scalar_one(),
            )
            rec.step(
                "grouped",
                lambda: [
                    list(r)
                    for r in conn.execute(text(f"SELECT sex, AVG(age) FROM {TABLE} GROUP BY sex"))
                ],
            )

            def inspector() -> dict[str, Any]:
                insp = sa.inspect(conn)
                return {
                    "tables": insp.get_table_names(),
                    "columns": [c["name"] for c in insp.get_columns(TABLE)],
                }

            rec.step("inspector", inspector)
            table = rec.step("reflect", lambda: sa.Table(TABLE, sa.MetaData(), autoload_with=conn))
            if table is not None:
                result["reflect"] = [c.name for c in table.columns]
                rec.step(
                    "core_count",  # SQL that SQLAlchemy writes: bound, cast, qualified names
                    lambda: conn.execute(
                        sa.select(sa.func.count()).select_from(table).where(table.c.age > MIN_AGE)
                    ).scalar_one(),
                )
            rec.step("refused", lambda: conn.execute(text(ROW_READ)).all())
            rec.step("rollback", lambda: conn.rollback() or True)
            rec.step(
                "after_refusal",
                lambda: conn.execute(text(f"SELECT COUNT(*) FROM {TABLE}")).scalar_one(),
            )
    finally:
        engine.dispose()
    check_scenario(target, result)
    assert result["server_version_info"][0] >= 9, show(result)
    insp = value(result, "inspector")
    assert TABLE in insp["tables"], show(result)
    check_columns(target, insp["columns"], result, "Inspector.get_columns")
    check_columns(target, value(result, "reflect"), result, "Table(autoload_with=...)")
    close_to(
        value(result, "core_count"),
        target.exact.over_min_age,
        target.count_tolerance,
        "Core select(count()).where(age > 40)",
    )
