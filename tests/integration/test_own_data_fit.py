"""A schema that does not fit its database is refused when the database is opened, with every
problem at once: on a DuckDB database file and on PostgreSQL (CSV and Parquet files:
test_own_data.py), through ``dpproxy query``/``explain``/``serve`` and ``dpproxy.connect``.
And ``dpproxy schema check --format json|csv``, and the README's rows for 58P01 and 22P04.

Real DuckDB files, the real PostgreSQL (``DPPROXY_TEST_DSN``), the real CLI.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import shlex
from pathlib import Path

import duckdb
import psycopg
import pytest

import dpproxy
from dpproxy import errors
from tests.integration.test_own_data import README, ok, run, sqlstate


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A user with an empty home (no ledger, users file or config of the machine's user)."""
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("DPPROXY_")}
    e.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CONFIG_HOME=str(home / ".config"),
    )
    return e


# The DuckDB table and the PostgreSQL one have the same columns (in each engine's types).
DUCKDB_TABLE = (
    "CREATE TABLE people (id INTEGER PRIMARY KEY, age BIGINT, sex VARCHAR, income DOUBLE)"
)
PG_TABLE = (
    "CREATE TABLE people (id integer PRIMARY KEY, age bigint, sex varchar(1), "
    "income double precision)"
)
FITS = """version: 1
dataset: people
tables:
  people:
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      id: integer
      age: {type: integer, lower: 0, upper: 120, nullable: true}
      sex: {type: text, nullable: true}
      income: {type: float, lower: 0, upper: 200000, nullable: true}
"""
# income: integer over a double (42804), zip: not in the data (42703), age: text over a
# bigint (42804), visits: no such table (42P01): four problems, in schema order.
MISFITS = """version: 1
dataset: people
tables:
  people:
    privacy_unit: id
    columns:
      id: integer
      income: {type: integer, lower: 0, upper: 10}
      zip: text
      age: text
  visits:
    privacy_unit: id
    columns:
      id: integer
"""
EXPECTED = [
    ("tables.people.columns.income.type", "42804"),
    ("tables.people.columns.zip", "42703"),
    ("tables.people.columns.age.type", "42804"),
    ("tables.visits", "42P01"),
]
COUNT = "'SELECT COUNT(*) FROM people'"


SECTION = " ".join(README.split("\n## Your own data\n", 1)[1].split("\n## ", 1)[0].split())


def _found(lines: str) -> list[tuple[str, str]]:
    return re.findall(r"(tables\.[\w.]+): .*\(SQLSTATE (\w{5})\)", lines)


@pytest.fixture
def duck(tmp_path: Path) -> Path:
    db = tmp_path / "people.duckdb"
    con = duckdb.connect(str(db))
    con.execute(DUCKDB_TABLE)
    con.execute("INSERT INTO people SELECT i, 20 + i % 50, 'F', i * 10.5 FROM range(200) t(i)")
    con.close()
    (tmp_path / "fits.yaml").write_text(FITS)
    (tmp_path / "misfits.yaml").write_text(MISFITS)
    return db


@pytest.fixture
def pg_url(pg_dsn: str, tmp_path: Path) -> str:
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(PG_TABLE)
        con.execute(
            "INSERT INTO people SELECT i, 20 + i % 50, 'F', i * 10.5 FROM generate_series(0, 199) i"
        )
    (tmp_path / "fits.yaml").write_text(FITS)
    (tmp_path / "misfits.yaml").write_text(MISFITS)
    parts = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    return f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"


def _refused_at_open(database: str, tmp_path: Path, env: dict[str, str]) -> None:
    for cmd in (
        f"dpproxy query -d {database} -s misfits.yaml {COUNT}",
        f"dpproxy explain -d {database} -s misfits.yaml {COUNT}",
        f"dpproxy serve -d {database} -s misfits.yaml --trust --listen 127.0.0.1:0",
    ):
        p = run(cmd, tmp_path, env)
        assert sqlstate(p) == "42804", (cmd, p.stderr)  # the first problem's SQLSTATE
        assert "(and 3 more)" in p.stderr, p.stderr
        listed = "\n".join(ln for ln in p.stderr.splitlines() if ln.startswith("  "))
        assert _found(listed) == EXPECTED, p.stderr  # every problem, listed at once
        assert f"schema check --database {shlex.quote(database)} misfits.yaml`" in p.stderr
        assert "Traceback" not in p.stderr
    p = run(f"dpproxy query -d {database} -s misfits.yaml --format json {COUNT}", tmp_path, env)
    assert p.returncode == 1
    body = json.loads(p.stdout)["error"]
    assert body["sqlstate"] == "42804"
    assert [tuple(_found(x)[0]) for x in body["problems"]] == EXPECTED
    with pytest.raises(errors.DatatypeMismatch) as caught:
        dpproxy.connect(database, schema=str(tmp_path / "misfits.yaml"), ledger="memory")
    assert isinstance(caught.value, dpproxy.ProgrammingError)  # PEP 249: class 42
    assert _found("\n".join(caught.value.problems)) == EXPECTED  # type: ignore[attr-defined]


def _fitting_schema_answers(database: str, tmp_path: Path, env: dict[str, str]) -> None:
    out = ok(run(f"dpproxy query -d {database} -s fits.yaml --format json {COUNT}", tmp_path, env))
    rows = json.loads(out.stdout)["rows"]
    assert abs(next(iter(rows[0].values())) - 200) <= 40


def test_readme_says_what_these_tests_check() -> None:
    assert (
        "`query`, `explain`, `serve` and `dpproxy.connect` refuse such a schema before reading "
        "any row, over a DuckDB file or PostgreSQL too, with every problem listed (in JSON, the "
        "error's `problems`); so does an `Engine` built directly over a backend." in SECTION
    )
    assert (
        "exits 1 on a problem (`--format json`: each file's problems with their SQLSTATEs, and "
        "its TODOs)." in SECTION
    )
    row = next(ln for ln in README.splitlines() if ln.startswith("| `dpproxy schema check"))
    assert row.endswith("`--format table\\|csv\\|json` |")


def test_a_duckdb_file_that_does_not_fit_is_refused_at_open(
    duck: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    _refused_at_open(str(duck), tmp_path, env)
    _fitting_schema_answers(str(duck), tmp_path, env)


def test_a_postgresql_database_that_does_not_fit_is_refused_at_open(
    pg_url: str, tmp_path: Path, env: dict[str, str]
) -> None:
    _refused_at_open(pg_url, tmp_path, env)
    _fitting_schema_answers(pg_url, tmp_path, env)


def test_schema_check_json_lists_problems_and_todos_per_file(
    duck: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    (tmp_path / "todo.yaml").write_text(
        FITS.replace("privacy_unit: id", "privacy_unit: TODO   # the column naming one person")
        + "    # TODO max_rows_per_unit: the most rows one person has\n"
    )
    p = run(
        f"dpproxy schema check -d {duck} --format json fits.yaml misfits.yaml todo.yaml "
        "missing.yaml",
        tmp_path,
        env,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc["ok"] is False and doc["database"] == str(duck)
    fits, misfits, todo, missing = doc["files"]
    assert fits == {
        "file": "fits.yaml",
        "ok": True,
        "problems": [],
        "todos": [],
        "dataset": "people",
        "tables": 1,
        "columns": 4,
    }
    assert misfits["ok"] is False
    assert [(_found(x["message"])[0][0], x["sqlstate"]) for x in misfits["problems"]] == EXPECTED
    assert [x["sqlstate"] for x in todo["problems"]] == ["ZD004"]  # privacy_unit: TODO
    assert "tables.people.privacy_unit: TODO" in todo["problems"][0]["message"]
    assert any("max_rows_per_unit" in t for t in todo["todos"])
    assert [x["sqlstate"] for x in missing["problems"]] == ["58P01"]
    assert p.stderr == ""  # JSON carries everything
    # All fit: exit 0. A database that cannot be opened: the shared JSON error shape.
    good = ok(run(f"dpproxy schema check -d {duck} --format json fits.yaml", tmp_path, env))
    assert json.loads(good.stdout)["ok"] is True
    bad = run("dpproxy schema check -d nothing.csv --format json fits.yaml", tmp_path, env)
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["error"]["sqlstate"] == "58P01"
    # CSV: one row per finding.
    p = run(f"dpproxy schema check -d {duck} --format csv misfits.yaml", tmp_path, env)
    assert p.returncode == 1
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0] == ["file", "kind", "sqlstate", "message"]
    assert [(r[1], r[2]) for r in rows[1:] if r[1] == "problem"] == [
        ("problem", c) for _, c in EXPECTED
    ]
    # then the notes: here a column misfits.yaml says holds no NULL, which the table allows
    assert {r[1] for r in rows[1:]} == {"problem", "todo"}


def test_readme_lists_58P01_and_22P04_as_the_errors_say() -> None:
    # the README's "Refusals and SQLSTATEs" section is in docs/sqlstates.md
    sqlstates = (Path(__file__).resolve().parents[2] / "docs" / "sqlstates.md").read_text("utf-8")
    section = sqlstates.split("\n## Refusals and SQLSTATEs\n", 1)[1].split("\n## ", 1)[0]
    row = next(ln for ln in section.splitlines() if ln.startswith("| `58P01` / `22P04` |"))
    assert "a data file that does not exist or a glob that matches no file" in row
    assert "a data file DuckDB cannot read as its format" in row and "or an empty one" in row
    assert errors.UndefinedFile.sqlstate == "58P01" and errors.BadFileFormat.sqlstate == "22P04"
    assert errors.dbapi_category("58P01") is errors.OperationalError
    assert errors.dbapi_category("22P04") is errors.DataError
    assert issubclass(errors.UndefinedFile, errors.OperationalError)
    assert issubclass(errors.BadFileFormat, errors.DataError)
    # Each case of the row is run through the CLI by
    # test_own_data.py::test_every_bad_input_is_a_clear_error (missing file, empty glob,
    # unreadable Parquet, empty CSV); a DuckDB database file that is not one: below.
    docs = (Path(__file__).resolve().parents[2] / "docs" / "sqlstates.md").read_text()
    assert row in docs  # the docs site's page carries the same row


def test_the_hint_never_shows_the_password(pg_url: str, tmp_path: Path) -> None:
    role = f"fit_reader_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN PASSWORD 's3cret-Pw'")
        con.execute(f"GRANT SELECT ON people TO {role}")
    try:
        user = psycopg.conninfo.conninfo_to_dict(pg_url)["user"]
        url = pg_url.replace(f"://{user}@", f"://{role}:s3cret-Pw@", 1)
        assert "s3cret-Pw" in url
        with pytest.raises(errors.DatatypeMismatch) as caught:
            dpproxy.connect(url, schema=str(tmp_path / "misfits.yaml"), ledger="memory")
        assert "s3cret-Pw" not in str(caught.value) and f"{role}@" in (caught.value.hint or "")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as con:
            con.execute(f"DROP OWNED BY {role}")
            con.execute(f"DROP ROLE {role}")


def test_a_file_that_is_not_a_duckdb_database_is_22P04(tmp_path: Path) -> None:
    from dpproxy.backends.opener import describe

    bad = tmp_path / "broken.duckdb"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(errors.BadFileFormat):
        describe(str(bad))
    with pytest.raises(errors.UndefinedFile):
        describe(str(tmp_path / "absent.duckdb"))
