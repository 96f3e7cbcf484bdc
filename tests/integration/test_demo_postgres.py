"""``dpproxy demo load``: the bundled Adult demo loaded into a real PostgreSQL server.

Every test that touches PostgreSQL gets a fresh, empty database from the shared ``pg_dsn``
fixture (``tests/conftest.py``, ``tests/pg.py``: ``DPPROXY_TEST_DSN``'s server, else a
throwaway local cluster; skipped without one, a failure under CI). The loaded table is compared
row for row with the DuckDB demo that :func:`dpproxy.demo.demo_database_path` builds
(``demo_db``).
"""

from __future__ import annotations

import gzip
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import duckdb
import pytest

from dpproxy import demo
from dpproxy.demo import COLUMNS, load_demo_postgres
from dpproxy.dsn import redact_dsn
from dpproxy.errors import BackendUnavailable, DPProxyError, InvalidParameter
from tests.commands import dpproxy_command

N_ROWS = 32_561
PASSWORD = "s3cret-Pa55word"
UNREACHABLE = f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/postgres"  # nothing listens on 1
_ERROR = re.compile(r"^ERROR:\s+(?P<message>.+?)\s+\(SQLSTATE (?P<code>[0-9A-Z]{5})\)$", re.M)


# ------------------------------------------------------------------------------- helpers


def _url(dsn: str, **override: str) -> str:
    """``dsn`` (a libpq key=value string or URL) as a ``postgresql://`` URL, with overrides."""
    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    params.update(override)
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    host = params.pop("host", "")
    host = f"[{host}]" if ":" in host else quote(host, safe="")  # IPv6, or a socket directory
    port = params.pop("port", "")
    dbname = quote(params.pop("dbname", ""), safe="")
    auth = user + (":" + quote(password, safe="") if password else "")
    netloc = (auth + "@" if auth else "") + host + (":" + port if port else "")
    query = "?" + urlencode(params) if params else ""
    return f"postgresql://{netloc}/{dbname}{query}"


def _rows(dsn: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement in its own connection (closed afterwards); its rows, if it has any."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []


def _one(dsn: str, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
    (row,) = _rows(dsn, sql, params)
    return row


def _mark(dsn: str, table: str = "adult") -> None:
    """Change one row, so a later reload (or its absence) is visible."""
    _rows(dsn, f"UPDATE {table} SET age = 99 WHERE person_id = 1")


def _age_of_first(dsn: str, table: str = "adult") -> int:
    (age,) = _one(dsn, f"SELECT age FROM {table} WHERE person_id = 1")
    assert isinstance(age, int)
    return age


def _exists(dsn: str, table: str) -> bool:
    (oid,) = _one(dsn, "SELECT to_regclass(%s)", (table,))
    return oid is not None


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*dpproxy_command(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _cli_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The SQLSTATE of a failed CLI run (exit status 1, no traceback)."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    match = _ERROR.search(proc.stderr)
    assert match, proc.stderr
    return match.group("code")


# ------------------------------------------------------------------------------ the table

PG_TYPE = {"INTEGER": "integer", "VARCHAR": "text"}


def test_load_creates_the_typed_table_with_its_primary_key(pg_dsn: str) -> None:
    assert load_demo_postgres(pg_dsn) == N_ROWS
    described = _rows(
        pg_dsn,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = 'adult' ORDER BY ordinal_position",
    )
    assert described == [
        (name, PG_TYPE[kind], "YES" if nullable else "NO") for name, kind, nullable in COLUMNS
    ]
    key = _rows(
        pg_dsn,
        "SELECT a.attname FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = 'adult'::regclass AND i.indisprimary",
    )
    assert key == [("person_id",)]
    assert _one(
        pg_dsn,
        "SELECT count(*), count(DISTINCT person_id), min(person_id), max(person_id) FROM adult",
    ) == (N_ROWS, N_ROWS, 1, N_ROWS)


def test_the_rows_and_nulls_match_the_duckdb_demo(pg_dsn: str, demo_db: Path) -> None:
    load_demo_postgres(pg_dsn)
    aggregates = (
        "SELECT COUNT(*), SUM(age), SUM(fnlwgt), SUM(capital_gain), SUM(hours_per_week), "
        "COUNT(workclass), COUNT(occupation), COUNT(native_country), "
        "COUNT(DISTINCT education), COUNT(DISTINCT native_country) FROM adult"
    )
    names = ", ".join(name for name, _, _ in COLUMNS)
    everything = f"SELECT {names} FROM adult ORDER BY person_id"
    with duckdb.connect(str(demo_db), read_only=True) as con:
        want_aggregates = con.execute(aggregates).fetchone()
        want_rows = con.execute(everything).fetchall()
    got_aggregates = _one(pg_dsn, aggregates)
    assert got_aggregates == want_aggregates
    assert got_aggregates[:3] == (N_ROWS, 1_256_257, 6_179_373_392)
    nullable = {name for name, _, is_nullable in COLUMNS if is_nullable}
    assert got_aggregates[5:8] == (30_725, 30_718, 31_978)  # NULL where the source has "?"
    assert nullable == {"workclass", "occupation", "native_country"}
    got_rows = _rows(pg_dsn, everything)
    assert len(got_rows) == N_ROWS
    assert got_rows == want_rows


def test_loading_twice_fails_and_leaves_the_table_intact(pg_dsn: str) -> None:
    load_demo_postgres(pg_dsn)
    _mark(pg_dsn)
    with pytest.raises(InvalidParameter) as caught:
        load_demo_postgres(pg_dsn)
    err = caught.value
    assert err.sqlstate == "22023"
    assert "already exists" in err.message and "adult" in err.message
    assert err.hint is not None and "--replace" in err.hint
    assert _age_of_first(pg_dsn) == 99
    assert _one(pg_dsn, "SELECT count(*) FROM adult") == (N_ROWS,)


def test_replace_drops_and_loads_anew(pg_dsn: str) -> None:
    load_demo_postgres(pg_dsn)
    load_demo_postgres(pg_dsn, table="other")
    _mark(pg_dsn)
    _mark(pg_dsn, "other")
    assert load_demo_postgres(pg_dsn, replace=True) == N_ROWS
    assert _age_of_first(pg_dsn) == 39  # the first row of the CSV again
    assert _one(pg_dsn, "SELECT count(*) FROM adult") == (N_ROWS,)
    assert _age_of_first(pg_dsn, "other") == 99  # only the named table is replaced
    # --replace on a database without the table simply loads it
    assert load_demo_postgres(pg_dsn, table="fresh", replace=True) == N_ROWS


def _broken_csv(tmp_path: Path, bad_row: int) -> Path:
    """The demo CSV with a non-integer age in data row ``bad_row``: COPY fails there."""
    with gzip.open(demo.demo_csv_path(), "rt", encoding="utf-8", newline="") as src:
        lines = src.read().splitlines()
    fields = lines[bad_row].split(",")
    fields[0] = "not-a-number"
    lines[bad_row] = ",".join(fields)
    path = tmp_path / "broken.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8", newline="") as out:
        out.write("\n".join(lines) + "\n")
    return path


def test_a_failure_during_copy_leaves_nothing_behind(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _broken_csv(tmp_path, bad_row=30_000)  # after several COPY chunks were sent
    with monkeypatch.context() as m:
        m.setattr(demo, "demo_csv_path", lambda: broken)
        with pytest.raises(DPProxyError) as caught:
            load_demo_postgres(pg_dsn)
    assert "nothing was changed" in caught.value.message
    assert "not-a-number" in caught.value.message  # PostgreSQL's own reason is passed on
    assert not _exists(pg_dsn, "adult")

    load_demo_postgres(pg_dsn)
    _mark(pg_dsn)
    with monkeypatch.context() as m:
        m.setattr(demo, "demo_csv_path", lambda: broken)
        with pytest.raises(DPProxyError):
            load_demo_postgres(pg_dsn, replace=True)
    # the DROP of --replace was rolled back with the failed COPY
    assert _age_of_first(pg_dsn) == 99
    assert _one(pg_dsn, "SELECT count(*) FROM adult") == (N_ROWS,)


def test_table_names(pg_dsn: str) -> None:
    assert load_demo_postgres(pg_dsn, table="people") == N_ROWS
    assert _exists(pg_dsn, "people") and not _exists(pg_dsn, "adult")
    _rows(pg_dsn, "CREATE SCHEMA demo")
    assert load_demo_postgres(pg_dsn, table="demo.adult") == N_ROWS
    assert _one(pg_dsn, "SELECT count(*) FROM demo.adult") == (N_ROWS,)
    with pytest.raises(InvalidParameter) as caught:
        load_demo_postgres(pg_dsn, table="nowhere.adult")
    assert caught.value.hint is not None and "schema" in caught.value.hint


@pytest.mark.parametrize(
    "table", ["Adult", "adult-2", "adult; DROP TABLE people", "a.b.c", "", "1adult", "x" * 64]
)
def test_invalid_table_names_are_refused_before_connecting(table: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        load_demo_postgres(UNREACHABLE, table=table)
    assert caught.value.sqlstate == "22023"
    assert "invalid table name" in caught.value.message


def test_progress_goes_to_stderr(pg_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    load_demo_postgres(pg_dsn, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert re.fullmatch(r"loading the demo into adult at .+ … 32561 rows in \d+\.\d s\n", err)
    load_demo_postgres(pg_dsn, table="quiet")
    assert capsys.readouterr() == ("", "")


# ---------------------------------------------------------------------------- connections


@pytest.mark.parametrize(
    "dsn",
    [
        UNREACHABLE,
        f"host=127.0.0.1 port=1 user=postgres password={PASSWORD} dbname=postgres",
        f"postgres://postgres@127.0.0.1:1/postgres?password={PASSWORD}",
    ],
    ids=["url", "key-value", "password-in-query"],
)
def test_an_unreachable_server_is_backend_unavailable_without_the_password(dsn: str) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(BackendUnavailable) as caught:
        load_demo_postgres(dsn, progress=True)
    err = caught.value
    assert err.sqlstate == BackendUnavailable.sqlstate and err.sqlstate.startswith("08")
    assert "cannot connect to" in err.message and "127.0.0.1" in err.message
    assert err.hint is not None and "postgresql://" in err.hint
    for text in (str(err), err.message, err.hint, repr(err.args)):
        assert PASSWORD not in text


def test_a_missing_database_is_backend_unavailable(pg_dsn: str) -> None:
    url = _url(pg_dsn, dbname="dpproxy_no_such_database")
    with pytest.raises(BackendUnavailable) as caught:
        load_demo_postgres(url)
    err = caught.value
    assert 'database "dpproxy_no_such_database" does not exist' in err.message
    assert "3D000" in err.message
    assert err.hint is not None and "createdb" in err.hint
    assert err.hint.split(": ", 1)[1].split(" (")[0].endswith(" dpproxy_no_such_database")


def test_cli_hints_the_createdb_command_that_makes_the_load_work(pg_dsn: str) -> None:
    """The server answers 3D000 (invalid_catalog_name); the HINT's createdb, run as printed
    against the real server, creates the database, and the same load then succeeds."""
    from psycopg.conninfo import conninfo_to_dict

    name = f"{conninfo_to_dict(pg_dsn)['dbname']}_new"
    url = _url(pg_dsn, dbname=name)
    proc = _cli("demo", "load", "--database", url)
    assert _cli_error(proc) == BackendUnavailable.sqlstate
    assert f'database "{name}" does not exist (PostgreSQL error 3D000)' in proc.stderr
    hint = re.search(
        r"^HINT:\s+create it first, then run this command again: (.+?) \(or ", proc.stderr, re.M
    )
    assert hint, proc.stderr
    doc = Path(__file__).resolve().parents[2] / "docs" / "postgres.md"  # moved from README
    readme = " ".join(doc.read_text(encoding="utf-8").split())
    assert (
        "a database that does not exist names PostgreSQL's `3D000` and hints the `createdb` "
        "command to run first." in readme
    )
    createdb = shlex.split(hint.group(1))
    assert createdb[0] == "createdb" and createdb[-1] == name
    if shutil.which("createdb") is None:
        pytest.fail("createdb (postgresql-client) is not installed")
    try:
        made = subprocess.run(createdb, capture_output=True, text=True, timeout=60, check=False)
        assert made.returncode == 0, made.stderr
        loaded = _cli("demo", "load", "--database", url)
        assert loaded.returncode == 0, loaded.stderr
        assert _one(url, "SELECT count(*) FROM adult") == (N_ROWS,)
    finally:
        _rows(pg_dsn, f'DROP DATABASE IF EXISTS "{name}"')


@pytest.mark.parametrize("dsn", ["demo.duckdb", "/tmp/adult.duckdb", "", "mysql://x@y/z"])
def test_only_postgres_dsns_are_accepted(dsn: str) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(InvalidParameter) as caught:
        load_demo_postgres(dsn)
    assert caught.value.hint is not None and "dpproxy demo path" in caught.value.hint


@pytest.mark.parametrize(
    "dsn,shown",
    [
        ("postgresql://ana:pw@db:5432/demo", "postgresql://ana@db:5432/demo"),
        ("postgres://ana@db/demo", "postgres://ana@db/demo"),
        ("postgresql://db/demo", "postgresql://db/demo"),
        ("postgresql://:pw@db/demo", "postgresql://db/demo"),
        ("postgresql://ana:p%40ss@h1:5432,h2:5433/demo", "postgresql://ana@h1:5432,h2:5433/demo"),
        (
            "postgresql://ana@db/demo?sslmode=require&password=pw",
            "postgresql://ana@db/demo?sslmode=require",
        ),
        ("postgresql://[::1]:5432/demo", "postgresql://[::1]:5432/demo"),
        # libpq's reading: the user information ends at the first "@" before any "/"
        ("postgresql://ana:pa#ss?w@db/demo", "postgresql://ana@db/demo"),
        (
            "postgresql://ana:pw@db/demo?pass%77ord=pw&sslmode=disable",
            "postgresql://ana@db/demo?sslmode=disable",
        ),
        ("postgresql://@db/demo", "postgresql://db/demo"),
        ("postgresql://", "postgresql://"),
    ],
)
def test_redact_dsn(dsn: str, shown: str) -> None:
    assert redact_dsn(dsn) == shown


def test_psycopg_is_imported_only_when_loading() -> None:
    code = (
        "import sys, dpproxy, dpproxy.cli, dpproxy.demo\n"
        "dpproxy.dsn.redact_dsn('postgresql://a:b@c/d')\n"
        "assert not [m for m in sys.modules if m.startswith('psycopg')], 'psycopg imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------------------------ CLI


def test_cli_loads_replaces_and_refuses_a_second_load(pg_dsn: str) -> None:
    url = _url(pg_dsn)
    proc = _cli("demo", "load", "--database", url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"loaded {N_ROWS} rows into adult at {redact_dsn(url)}\n"
    assert f"{N_ROWS} rows in " in proc.stderr
    assert _one(pg_dsn, "SELECT count(*), sum(age) FROM adult") == (N_ROWS, 1_256_257)

    _mark(pg_dsn)
    again = _cli("demo", "load", "-d", url)
    assert _cli_error(again) == "22023"
    assert re.search(r"^HINT:\s+pass --replace", again.stderr, re.M)
    assert again.stdout == ""
    assert _age_of_first(pg_dsn) == 99

    replaced = _cli("demo", "load", "-d", url, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert _age_of_first(pg_dsn) == 39

    other = _cli("demo", "load", "-d", url, "--table", "people", "--no-replace")
    assert other.returncode == 0, other.stderr
    assert other.stdout.startswith(f"loaded {N_ROWS} rows into people at ")


def test_cli_never_prints_the_password(pg_dsn: str) -> None:
    down = _cli("demo", "load", "--database", UNREACHABLE)
    assert _cli_error(down) == BackendUnavailable.sqlstate
    assert PASSWORD not in down.stdout + down.stderr
    assert "postgresql://postgres@127.0.0.1:1/postgres" in down.stderr

    # with a password the server accepts (trust authentication ignores it), on success too
    from psycopg.conninfo import conninfo_to_dict

    password = str(conninfo_to_dict(pg_dsn).get("password") or PASSWORD)
    url = _url(pg_dsn, password=password)
    try:
        _one(url, "SELECT 1")
    except Exception:
        pytest.skip("the test server does not accept an arbitrary password")
    ok = _cli("demo", "load", "--database", url)
    assert ok.returncode == 0, ok.stderr
    assert password not in ok.stdout + ok.stderr
    assert ok.stdout == f"loaded {N_ROWS} rows into adult at {redact_dsn(url)}\n"


@pytest.mark.parametrize("database", ["demo.duckdb", "host=127.0.0.1 dbname=demo"])
def test_cli_refuses_anything_but_a_postgres_url(database: str) -> None:
    proc = _cli("demo", "load", "--database", database)
    assert _cli_error(proc) == "22023"
    assert "dpproxy demo path" in proc.stderr
    assert proc.stdout == ""


def test_cli_needs_a_database() -> None:
    proc = _cli("demo", "load")
    assert proc.returncode == 2
    assert "--database" in proc.stderr
