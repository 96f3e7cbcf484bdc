"""The drivers and tools behind BI products, against ``dpproxy serve`` and PostgreSQL 15.

Each test runs one real client against both servers (``dpproxy serve`` over the bundled demo,
SCRAM-SHA-256 login; PostgreSQL 15 holding the same Adult table) and compares the answers
where the query is allowed on dpproxy (catalog answers exactly; DP answers within the noise):

* psycopg2 through SQLAlchemy (inspector) and ``pandas.read_sql`` (a DP GROUP BY);
* psqlODBC (Debian ``odbc-postgresql``, unixODBC) through pyodbc — the Tableau, Excel and
  Power BI path — with its defaults, in cursor mode (``UseDeclareFetch=1``: DECLARE/FETCH,
  cursors rolled back unread and declared again) and with ``Protocol=7.4-0``;
* asyncpg's type introspection (``set_type_codec``, array parameters);
* pgcli 4.7's ``\\dt \\dv \\di \\dm \\df \\dn``, run non-interactively (``pgcli -c``, CSV
  output);
* pgbench with a DP script (simple, extended and prepared query modes).

A missing client skips its test, and fails it under CI (``.ci/run`` installs them all).
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from dpproxy.demo import load_demo_postgres
from tests import pg
from tests.clients.test_clients import CLIENT_TIMEOUT, missing, require_module, require_tool
from tests.integration.test_server import PASSWORD, start_server, stop_server

pytestmark = pytest.mark.postgres

GROUPED = "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY sex"
COUNT_TOLERANCE = 200  # Laplace noise of a count at the demo's ε: a few units
ODBC_DRIVER = "PostgreSQL Unicode"  # Debian odbc-postgresql's psqlodbcw.so


@dataclass(frozen=True)
class Endpoint:
    kind: str  # "dpproxy" or "postgres"
    host: str
    port: int
    user: str
    password: str
    db: str

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(PGPASSWORD=self.password, HOME=str(home), XDG_CONFIG_HOME=str(home))
        return env


@pytest.fixture(scope="module")
def dpproxy(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Endpoint]:
    run = start_server(tmp_path_factory.mktemp("serve-bi-clients"))
    try:
        yield Endpoint("dpproxy", run.host, run.port, "ana", PASSWORD, "dpproxy")
    finally:
        stop_server(run)


@pytest.fixture(scope="module")
def postgres(pg_server: pg.Server) -> Iterator[Endpoint]:
    with pg.temporary_database(pg_server.admin_dsn) as dsn:
        load_demo_postgres(dsn)
        info = conninfo_to_dict(dsn)
        yield Endpoint(
            "postgres",
            str(info.get("host") or "127.0.0.1"),
            int(info.get("port") or 5432),
            str(info.get("user") or "postgres"),
            str(info.get("password") or ""),
            str(info["dbname"]),
        )


@pytest.fixture
def both(dpproxy: Endpoint, postgres: Endpoint) -> tuple[Endpoint, Endpoint]:
    return dpproxy, postgres


def close_counts(got: dict[Any, int], exact: dict[Any, int]) -> None:
    assert got.keys() == exact.keys()
    for key, value in exact.items():
        assert abs(got[key] - value) <= COUNT_TOLERANCE, (key, got[key], value)


# --------------------------------------------------------- psycopg2, SQLAlchemy, pandas


def _psycopg2_answers(ep: Endpoint) -> dict[str, Any]:
    pandas = require_module("pandas")
    require_module("psycopg2")
    sqlalchemy = require_module("sqlalchemy")
    url = sqlalchemy.engine.URL.create(
        "postgresql+psycopg2", ep.user, ep.password or None, ep.host, ep.port, ep.db
    )
    engine = sqlalchemy.create_engine(url, connect_args={"sslmode": "disable"})
    try:
        inspector = sqlalchemy.inspect(engine)
        out: dict[str, Any] = {
            "tables": inspector.get_table_names(),
            "columns": [(c["name"], str(c["type"])) for c in inspector.get_columns("adult")],
        }
        frame = pandas.read_sql(GROUPED, engine)
        out["grouped_columns"] = list(frame.columns)
        out["grouped"] = {str(s): int(n) for s, n in zip(frame["sex"], frame["n"], strict=True)}
        frame = pandas.read_sql(
            sqlalchemy.text("SELECT COUNT(*) AS n FROM adult WHERE age > :a"),
            engine,
            params={"a": 40},
        )
        out["over_40"] = int(frame["n"][0])
        with engine.connect() as conn:
            try:
                conn.exec_driver_sql("SELECT * FROM adult LIMIT 5").fetchall()
                out["row_read"] = "allowed"
            except sqlalchemy.exc.DBAPIError as e:
                out["row_read"] = getattr(e.orig, "pgcode", None)
                conn.rollback()
            out["after"] = conn.exec_driver_sql("SELECT 1").scalar()
        return out
    finally:
        engine.dispose()


def test_psycopg2_sqlalchemy_pandas(both: tuple[Endpoint, Endpoint]) -> None:
    got, real = (_psycopg2_answers(ep) for ep in both)
    assert got["tables"] == real["tables"] == ["adult"]
    assert got["columns"] == real["columns"]
    assert got["grouped_columns"] == real["grouped_columns"] == ["sex", "n"]
    close_counts(got["grouped"], real["grouped"])
    assert abs(got["over_40"] - real["over_40"]) <= COUNT_TOLERANCE
    assert (got["row_read"], real["row_read"]) == ("42501", "allowed")
    assert got["after"] == real["after"] == 1


# ----------------------------------------------------------------- psqlODBC via pyodbc

ODBC_MODES = {
    "defaults": "",
    "declare-fetch": "UseDeclareFetch=1;Fetch=1",
    "protocol-7.4": "Protocol=7.4-0;UseServerSidePrepare=1",
}


def _odbc_answers(ep: Endpoint, options: str) -> dict[str, Any]:
    pyodbc = require_module("pyodbc")
    if ODBC_DRIVER not in pyodbc.drivers():
        missing(
            f"the ODBC driver {ODBC_DRIVER!r} is not registered ({pyodbc.drivers()})",
            "apt-get install odbc-postgresql unixodbc",
        )
    dsn = (
        f"DRIVER={{{ODBC_DRIVER}}};SERVER={ep.host};PORT={ep.port};DATABASE={ep.db};"
        f"UID={ep.user};PWD={{{ep.password}}};SSLmode=disable;{options}"
    )
    con = pyodbc.connect(dsn, autocommit=False, timeout=30)
    out: dict[str, Any] = {}
    try:
        cur = con.cursor()
        out["one"] = cur.execute("SELECT 1").fetchall()[0][0]
        out["version"] = str(cur.execute("SELECT version()").fetchone()[0]).split()[:2]
        groups = []
        for _ in range(3):  # read in full, then rolled back unread twice, then again
            groups.append({str(s): int(n) for s, n in cur.execute(GROUPED).fetchall()})
            cur.execute(GROUPED).fetchone()
            con.rollback()
            cur.execute(GROUPED)
            con.rollback()
        out["grouped"] = groups
        out["over_40"] = int(cur.execute("SELECT COUNT(*) FROM adult WHERE age > ?", 40).fetchval())
        con.commit()
        # a statement handle per query: psqlODBC names its plans after the handle's address,
        # so a freed handle's name comes back and must have been DEALLOCATEd
        out["types"] = []
        for _ in range(3):
            for oid in (23, 25):
                handle = con.cursor()
                sql = "SELECT t.typname FROM pg_catalog.pg_type t WHERE t.oid = ?"
                out["types"].append(handle.execute(sql, oid).fetchval())
                handle.close()
        con.commit()
        out["tables"] = [(t.table_schem, t.table_name, t.table_type) for t in cur.tables("adult")]
        out["columns"] = [(c.column_name, c.type_name) for c in cur.columns(table="adult")]
        try:
            cur.execute("SELECT * FROM adult LIMIT 5").fetchall()
            out["row_read"] = "allowed"
        except pyodbc.Error as e:
            out["row_read"] = e.args[0]
            con.rollback()
        out["after"] = cur.execute("SELECT 2").fetchval()
        con.commit()
    finally:
        con.close()
    return out


@pytest.mark.parametrize("mode", sorted(ODBC_MODES))
def test_psqlodbc(both: tuple[Endpoint, Endpoint], mode: str) -> None:
    got, real = (_odbc_answers(ep, ODBC_MODES[mode]) for ep in both)
    assert got["one"] == real["one"] == 1
    for version in (got["version"], real["version"]):  # minor releases differ
        assert version[0] == "PostgreSQL" and version[1].startswith("15."), version
    for answer in got["grouped"]:
        close_counts(answer, real["grouped"][0])
    assert abs(got["over_40"] - real["over_40"]) <= COUNT_TOLERANCE
    assert got["types"] == real["types"] == ["int4", "text"] * 3
    assert got["tables"] == real["tables"] == [("public", "adult", "TABLE")]
    assert got["columns"] == real["columns"]
    assert (got["row_read"], real["row_read"]) == ("42501", "allowed")
    assert got["after"] == real["after"] == 2


# ------------------------------------------------------------------------------ asyncpg


async def _asyncpg_answers(ep: Endpoint) -> dict[str, Any]:
    asyncpg = require_module("asyncpg")
    con = await asyncpg.connect(
        host=ep.host, port=ep.port, user=ep.user, password=ep.password, database=ep.db, ssl=False
    )
    try:
        out: dict[str, Any] = {}
        # set_type_codec introspects the type by name, then its components by oid[]
        await con.set_type_codec("json", encoder=str, decoder=lambda s: f"json:{s}",
                                 schema="pg_catalog")  # fmt: skip
        await con.set_type_codec("numeric", encoder=str, decoder=str, schema="pg_catalog",
                                 format="text")  # fmt: skip
        out["json"] = await con.fetchval("SELECT '[1]'::json")
        rows = await con.fetch(
            "SELECT t.typname FROM pg_catalog.pg_type t WHERE t.oid::int = ANY($1::int[]) "
            "ORDER BY 1",
            [16, 23, 1700],
        )
        out["by_oid"] = [r[0] for r in rows]
        rows = await con.fetch(GROUPED)
        out["grouped"] = {str(r["sex"]): int(r["n"]) for r in rows}
        return out
    finally:
        await con.close()


def test_asyncpg_type_introspection(both: tuple[Endpoint, Endpoint]) -> None:
    got, real = (asyncio.run(_asyncpg_answers(ep)) for ep in both)
    assert got["json"] == real["json"] == "json:[1]"
    assert got["by_oid"] == real["by_oid"] == ["bool", "int4", "numeric"]
    close_counts(got["grouped"], real["grouped"])


# -------------------------------------------------------------------------------- pgcli

PGCLI_COMMANDS = ("\\dt", "\\dv", "\\di", "\\dm", "\\df", "\\dn")


def _pgcli_listings(ep: Endpoint, home: Path) -> dict[str, list[dict[str, str]]]:
    """``pgcli -c`` for each command, CSV output; the rows of each listing."""
    pgcli = require_tool("pgcli", "pip install '.[test]'")
    home.mkdir(parents=True, exist_ok=True)
    rc = home / "pgclirc"
    rc.write_text("[main]\ntable_format = csv\nless_chatty = True\nkeyring = False\n")
    args = [pgcli, "--pgclirc", str(rc), "-h", ep.host, "-p", str(ep.port), "-U", ep.user]
    args += ["-d", ep.db, "-w"]
    for command in PGCLI_COMMANDS:
        args += ["-c", command]
    done = subprocess.run(
        args,
        env=ep.env(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listings: list[list[dict[str, str]]] = []
    block: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith('"'):
            block.append(line)
        elif line.startswith("SELECT ") and block:
            rows = list(csv.DictReader(io.StringIO("\n".join(block))))
            assert len(rows) == int(line.split()[1]), line
            listings.append(rows)
            block = []
    assert len(listings) == len(PGCLI_COMMANDS), done.stdout + done.stderr
    return dict(zip(PGCLI_COMMANDS, listings, strict=True))


def test_pgcli_backslash_commands(both: tuple[Endpoint, Endpoint], tmp_path: Path) -> None:
    got, real = (_pgcli_listings(ep, tmp_path / ep.kind) for ep in both)

    def names(rows: list[dict[str, str]]) -> list[tuple[str, ...]]:
        keep = ("Schema", "Name", "Type")  # owners differ (dpproxy owns what it emulates)
        return [tuple(row[k] for k in keep if k in row) for row in rows]

    for command in ("\\dt", "\\dv", "\\dm", "\\df", "\\dn"):
        assert names(got[command]) == names(real[command]), command
    assert names(got["\\dt"]) == [("public", "adult", "table")]
    assert names(got["\\dn"]) == [("public",)]
    # the emulated catalog has no indexes; PostgreSQL lists adult's primary key
    assert set(names(got["\\di"])) <= set(names(real["\\di"]))


# ------------------------------------------------------------------------------ pgbench


def _pgbench() -> str:
    found = shutil.which("pgbench")
    if found is None:
        found = next(
            (str(d / "pgbench") for d in pg.installed_bindirs() if (d / "pgbench").is_file()),
            None,
        )
    if found is None:
        missing("pgbench is not installed", "apt-get install postgresql-15 (or -client)")
    return found


@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_pgbench_dp_script(both: tuple[Endpoint, Endpoint], tmp_path: Path, mode: str) -> None:
    script = tmp_path / "dp.sql"
    script.write_text(
        "\\set min_age 40\n"  # a parameter under -M extended/prepared, constant: cached
        "SELECT sex, COUNT(*) FROM adult GROUP BY sex;\n"
        "SELECT COUNT(*) FROM adult WHERE age > :min_age;\n"
    )
    transactions = 10
    for ep in both:
        done = subprocess.run(
            [_pgbench(), "-n", "-M", mode, "-f", str(script), "-t", str(transactions),
             "-h", ep.host, "-p", str(ep.port), "-U", ep.user, ep.db],
            env=ep.env(tmp_path),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLIENT_TIMEOUT,
            check=False,
        )  # fmt: skip
        report = done.stdout + done.stderr
        assert done.returncode == 0, (ep.kind, report)
        processed = f"number of transactions actually processed: {transactions}/{transactions}"
        assert processed in report, (ep.kind, report)
        assert "number of failed transactions: 0 " in report, (ep.kind, report)
