"""Your own data (README "Your own data"): CSV and Parquet files as ``--database``, a schema
drafted by ``dpproxy schema init`` and checked against the data by ``schema check --database``.

The README walkthrough is run as written, through the installed ``dpproxy`` command, on a CSV
and on a Parquet file; its text (the draft, the edit, the answer, the exact values) is checked
against what the commands really do. Real files, real DuckDB, real PostgreSQL, real psql.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from fractions import Fraction
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.commands import dpproxy_command
from tests.pg import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SCHEMAS_README_TEXT = " ".join((ROOT / "schemas" / "README.md").read_text().split())
SECTION = README.split("\n## Your own data\n", 1)[1].split("\n## ", 1)[0]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", SECTION, re.S)


def _commands() -> list[str]:
    lines = [ln for block in _blocks("console") for ln in block.splitlines()]
    return [ln[2:] for ln in lines if ln.startswith("$ ")]


def write_people(path: Path, rows: int = 2000) -> None:
    """The README's people.csv: 2,000 rows of id,age,sex,income (fixed seed)."""
    rng = random.Random(20)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "age", "sex", "income"])
        for i in range(1, rows + 1):
            sex = rng.choice(["F", "M"])
            age = rng.randint(18, 90)
            w.writerow([i, age, sex, round(rng.uniform(10000, 120000), 2)])


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("own")
    write_people(d / "people.csv")
    duckdb.connect().execute(
        f"COPY (SELECT * FROM read_csv('{d / 'people.csv'}')) TO '{d / 'people.parquet'}' "
        "(FORMAT parquet)"
    )
    return d


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A user with an empty home: no ledger, users file or config of the machine's user."""
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("DPPROXY_")}
    e.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CONFIG_HOME=str(home / ".config"),
    )
    return e


def run(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    args = shlex.split(line)
    assert args[0] == "dpproxy", line
    return subprocess.run(
        [*dpproxy_command(), *args[1:]],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )


def ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def sqlstate(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 1, p.stdout + p.stderr
    m = re.search(r"\(SQLSTATE (\w{5})\)", p.stderr)
    assert m, p.stderr
    assert "HINT:" in p.stderr, p.stderr  # every error says what to do next
    return m.group(1)


def apply_readme_edit(text: str) -> str:
    """Apply the README's diff block: each run of '-' lines is replaced by the '+' lines after."""
    (diff,) = _blocks("diff")
    hunks = re.findall(r"((?:^-.*\n)+)((?:^\+.*\n)+)", diff, re.M)
    assert len(hunks) == 3
    for minus, plus in hunks:
        old = "".join(ln[1:] + "\n" for ln in minus.splitlines())
        new = "".join(ln[1:] + "\n" for ln in plus.splitlines())
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def truth(path: Path) -> dict[str, tuple[int, float]]:
    rows = (
        duckdb.connect()
        .execute(f"SELECT sex, COUNT(*), AVG(age) FROM read_csv('{path}') GROUP BY sex")
        .fetchall()
    )
    return {sex: (n, avg) for sex, n, avg in rows}


def table_rows(stdout: str) -> tuple[str, dict[str, tuple[float, float]]]:
    lines = stdout.strip().splitlines()
    cells = [[c.strip() for c in ln.split("|")] for ln in lines[2:-1]]
    return lines[0], {c[0]: (float(c[1]), float(c[2])) for c in cells}


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_the_readme_walkthrough_as_written(
    kind: str, data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    shutil.copy(data / f"people.{kind}", tmp_path)
    commands = [c.replace("people.csv", f"people.{kind}") for c in _commands()]
    init, query, serve, _psql = commands
    assert init.startswith("dpproxy schema init ") and query.startswith("dpproxy query ")
    assert serve.startswith("dpproxy serve ")
    # 1. the draft: the README shows the part of it under `tables:`, as written.
    ok(run(init, tmp_path, env))
    draft = (tmp_path / "people.yaml").read_text()
    (shown,) = _blocks("yaml")
    assert shown in draft
    assert f"# Draft privacy schema for people.{kind}," in draft
    check = f"dpproxy schema check --database people.{kind} people.yaml"
    assert check.replace(f"people.{kind}", "people.csv", 1) in SECTION
    p = run(check, tmp_path, env)
    assert p.returncode == 1 and "tables.people.privacy_unit: TODO" in p.stderr
    # 2. the edit, as the README's diff shows it.
    (tmp_path / "people.yaml").write_text(apply_readme_edit(draft))
    p = ok(run(check, tmp_path, env))
    assert "fits the database" in p.stdout
    # the TODO comments left are listed with line and key path, without failing
    assert "people.yaml: line 19: tables.people.columns.income: TODO: lower, upper" in p.stderr
    # 3. the answer: the README's table has the same shape; its numbers and ours are close to
    # the exact answers, which the README states.
    answer = ok(run(query, tmp_path, env)).stdout
    block = next(b for b in _blocks("console") if "dpproxy query" in b)
    readme_header, readme_rows = table_rows(block.split("\n", 1)[1])
    header, rows = table_rows(answer)
    assert header.split() == readme_header.split() == ["sex", "|", "n", "|", "avg_age"]
    exact = truth(data / "people.csv")
    assert set(rows) == set(readme_rows) == set(exact) == {"F", "M"}
    for released in (rows, readme_rows):
        for sex, (n, avg) in released.items():
            assert abs(n - exact[sex][0]) <= 40 and abs(avg - exact[sex][1]) <= 5, released
    said = " ".join(SECTION.split())
    assert (
        f"the exact answers are {exact['F'][0]:,} and {exact['M'][0]:,} people, of mean age "
        f"{exact['F'][1]:.2f} and {exact['M'][1]:.2f}" in said
    )
    assert "2,000 rows and the columns `id,age,sex,income`" in said
    assert (data / "people.csv").read_text().splitlines()[0] == "id,age,sex,income"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readme_serve_and_psql_commands(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    if shutil.which("psql") is None:
        skip_or_fail("psql is not installed")
    shutil.copy(data / "people.csv", tmp_path)
    init, _query, serve, psql = _commands()
    ok(run(init, tmp_path, env))
    schema = tmp_path / "people.yaml"
    schema.write_text(apply_readme_edit(schema.read_text()))
    port = _free_port()
    args = [*shlex.split(serve)[1:], "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        [*dpproxy_command(), *args],
        cwd=tmp_path,
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:  # readiness: a real connection, not a sleep
            try:
                psycopg.connect(
                    f"postgresql://analyst@127.0.0.1:{port}/dpproxy", connect_timeout=5
                ).close()
                break
            except psycopg.OperationalError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "dpproxy serve did not start"
                time.sleep(0.2)
        psql_args = shlex.split(psql.replace(":6432/", f":{port}/"))
        assert psql_args[0] == "psql"
        out = subprocess.run([*psql_args, "-A", "-t"], text=True, capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert abs(float(out.stdout.strip()) - 2000) <= 40
        assert "privacy cost" in out.stderr or "NOTICE" in out.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _schema(tmp: Path, body: str) -> Path:
    path = tmp / "s.yaml"
    path.write_text("version: 1\ndataset: people\ntables:\n" + body)
    return path


PEOPLE = """  people:
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      id: integer
      age: {type: integer, lower: 0, upper: 120, nullable: true}
      sex: {type: text, nullable: true}
      income: {type: float, lower: 0, upper: 200000, nullable: true}
"""


def test_python_api_opens_a_csv(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpproxy

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    assert '`dpproxy.connect("people.csv", schema="people.yaml")`' in SECTION
    schema = _schema(tmp_path, PEOPLE)
    with dpproxy.connect(str(data / "people.csv"), schema=str(schema), ledger="memory") as con:
        cur = con.cursor()
        cur.execute("SELECT COUNT(*) FROM people WHERE age >= 65")
        exact = (
            duckdb.connect()
            .execute(f"SELECT COUNT(*) FROM read_csv('{data / 'people.csv'}') WHERE age >= 65")
            .fetchone()[0]
        )  # type: ignore[index]
        assert abs(cur.fetchone()[0] - exact) <= 40  # type: ignore[index]


MISMATCHED = """  people:
    privacy_unit: id
    columns:
      id: integer
      income: integer
      sex: integer
      zip: text
      age: text
  visits:
    privacy_unit: id
    columns:
      id: integer
"""


def test_schema_check_reports_every_mismatch_at_once(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    schema = _schema(tmp_path, MISMATCHED)
    p = run(f"dpproxy schema check --database {data / 'people.csv'} {schema}", tmp_path, env)
    assert p.returncode == 1
    found = re.findall(r"(tables\.[\w.]+): .*\(SQLSTATE (\w{5})\)", p.stderr)
    assert found == [
        ("tables.people.columns.income.type", "42804"),  # integer over DOUBLE
        ("tables.people.columns.sex.type", "42804"),  # integer over VARCHAR
        ("tables.people.columns.zip", "42703"),
        ("tables.people.columns.age.type", "42804"),  # text over BIGINT
        ("tables.visits", "42P01"),
    ], p.stderr
    assert "the schema says integer but the database column is DOUBLE; write type: float" in (
        p.stderr
    )
    # query, explain and serve refuse the schema before reading a row, with the first problem.
    for cmd in (
        f"dpproxy query -d {data / 'people.csv'} -s {schema} 'SELECT COUNT(*) FROM people'",
        f"dpproxy explain -d {data / 'people.csv'} -s {schema} 'SELECT COUNT(*) FROM people'",
        f"dpproxy serve -d {data / 'people.csv'} -s {schema} --trust --listen 127.0.0.1:0",
    ):
        p = run(cmd, tmp_path, env)
        assert sqlstate(p) == "42804", p.stderr
        assert "schema check --database" in p.stderr


@pytest.mark.parametrize(
    ("database", "code", "words"),
    [
        ("missing.csv", "58P01", "data file missing.csv does not exist"),
        ("'nothing_*.parquet'", "58P01", "no file matches 'nothing_*.parquet'"),
        ("people.xlsx", "22023", "cannot tell what kind of data people.xlsx holds"),
        ("folder", "22023", "is a directory"),
        ("broken.parquet", "22P04", "cannot read broken.parquet as Parquet"),
        ("people.csv,missing.parquet", "58P01", "data file missing.parquet does not exist"),
        ("empty.csv", "22P04", "data file empty.csv is empty"),
    ],
)
def test_every_bad_input_is_a_clear_error(
    database: str, code: str, words: str, data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    shutil.copy(data / "people.csv", tmp_path)
    shutil.copy(data / "people.csv", tmp_path / "people.xlsx")
    (tmp_path / "folder").mkdir()
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    (tmp_path / "empty.csv").write_bytes(b"")
    schema = _schema(tmp_path, PEOPLE)
    for cmd in (
        f"dpproxy query -d {database} -s {schema} 'SELECT COUNT(*) FROM people'",
        f"dpproxy schema init -d {database}",
        f"dpproxy schema check -d {database} {schema}",
    ):
        p = run(cmd, tmp_path, env)
        assert sqlstate(p) == code, (cmd, p.stderr)
        assert words in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_a_data_file_without_a_schema_says_how_to_draft_one(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    shutil.copy(data / "people.csv", tmp_path)
    p = run("dpproxy query -d people.csv 'SELECT COUNT(*) FROM people'", tmp_path, env)
    assert sqlstate(p) == "22023"
    assert "dpproxy schema init --database people.csv -o schema.yaml" in p.stderr


def test_a_draft_used_before_its_todos_are_replaced_says_what_to_run(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    """Querying the draft as written: ZD004, each problem listed once, and a hint that says what
    to run instead of the problems again."""
    shutil.copy(data / "people.csv", tmp_path)
    ok(run("dpproxy schema init -d people.csv -o people.yaml", tmp_path, env))
    p = run(
        "dpproxy query -d people.csv -s people.yaml 'SELECT COUNT(*) FROM people'", tmp_path, env
    )
    assert sqlstate(p) == "ZD004"
    assert p.stderr.count("privacy_unit: 'TODO' is not a column") == 1, p.stderr
    assert "HINT:  `dpproxy schema check FILE` lists each problem with its line" in p.stderr
    q = "dpproxy query -d people.csv -s people.yaml --format json 'SELECT COUNT(*) FROM people'"
    body = json.loads(run(q, tmp_path, env).stdout)["error"]
    assert body["sqlstate"] == "ZD004" and len(body["problems"]) == 1


def test_a_no_null_promise_the_data_does_not_declare_is_listed_and_trusted(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """schema check --database lists each column the schema says holds no NULL that a CSV (which
    declares nothing NOT NULL) may hold NULL in, with the TODOs and without failing; and the
    README's reason holds: dpproxy trusts the promise, so a COUNT(*) beside an AVG of a column
    with NULLs counts only its non-NULL rows."""
    rows = "".join(f"{i},{'' if i % 4 == 0 else 20 + i % 50}\n" for i in range(1, 2001))
    (tmp_path / "t.csv").write_text("id,age\n" + rows)
    promise = (
        "version: 1\ndataset: t\nprivacy: {epsilon: 1.0}\ntables:\n  t:\n    privacy_unit: id\n"
        "    max_rows_per_unit: 1\n    columns:\n      id: integer\n"
        "      age: {type: integer, lower: 0, upper: 100}\n"
    )
    (tmp_path / "promise.yaml").write_text(promise)
    honest = promise.replace("{type: integer,", "{type: integer, nullable: true,")
    (tmp_path / "honest.yaml").write_text(honest)
    p = ok(run("dpproxy schema check -d t.csv promise.yaml", tmp_path, env))
    assert "fits the database" in p.stdout
    assert "promise.yaml: tables.t.columns.age: TODO: nullable: the schema promises no NULL" in (
        p.stderr
    )
    assert "columns.id: TODO: nullable" in p.stderr  # the unit too: the CSV declares nothing
    p = ok(run("dpproxy schema check -d t.csv honest.yaml", tmp_path, env))
    assert "columns.age: TODO" not in p.stderr
    q = "'SELECT COUNT(*) AS n, AVG(age) AS a FROM t'"
    counts = {}
    for name in ("promise", "honest"):
        cmd = f"dpproxy query --ledger memory -e 10 -d t.csv -s {name}.yaml --format csv {q}"
        counts[name] = float(ok(run(cmd, tmp_path, env)).stdout.splitlines()[1].split(",")[0])
    assert abs(counts["promise"] - 1500) < 25 and abs(counts["honest"] - 2000) < 25, counts


def test_a_glob_is_one_table_and_commas_give_several(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    con = duckdb.connect()
    src = f"read_csv('{data / 'people.csv'}')"
    con.execute(f"COPY (SELECT * FROM {src} WHERE id <= 700) TO '{parts}/people_1.parquet'")
    con.execute(f"COPY (SELECT * FROM {src} WHERE id > 700) TO '{parts}/people_2.parquet'")
    (tmp_path / "visits.csv").write_text(
        "id,day\n" + "".join(f"{i % 50},{i}\n" for i in range(900))
    )
    schema = _schema(
        tmp_path,
        PEOPLE + "  visits:\n    privacy_unit: id\n    columns:\n"
        "      id: integer\n      day: integer\n",
    )
    db = "'parts/people_*.parquet,visits.csv'"
    p = ok(run(f"dpproxy schema check -d {db} {schema}", tmp_path, env))
    assert "fits the database" in p.stdout
    out = ok(
        run(
            f"dpproxy query -d {db} -s {schema} --format csv 'SELECT COUNT(*) AS n FROM people'",
            tmp_path,
            env,
        )
    ).stdout
    assert abs(float(out.splitlines()[1]) - 2000) <= 40  # both files of the glob
    drafted = ok(run(f"dpproxy schema init -d {db}", tmp_path, env)).stdout
    assert "\n  people:\n" in drafted and "\n  visits:\n" in drafted
    # the command it suggests quotes the glob, so that it runs as printed
    said = ok(run(f"dpproxy schema init -d {db} -o 'my draft.yaml'", tmp_path, env)).stderr
    suggested = said.split("then `", 1)[1].split("`", 1)[0]
    assert suggested == f"dpproxy schema check --database {db} 'my draft.yaml'", said
    p = run(suggested, tmp_path, env)
    assert p.returncode == 1 and "privacy_unit: TODO" in p.stderr, p.stderr


def test_one_file_answers_to_the_one_table_of_the_schema(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    shutil.copy(data / "people.csv", tmp_path / "people_2024.csv")
    schema = _schema(tmp_path, PEOPLE)
    out = ok(
        run(
            f"dpproxy query -d people_2024.csv -s {schema} --format csv "
            "'SELECT COUNT(*) AS n FROM people'",
            tmp_path,
            env,
        )
    ).stdout
    assert abs(float(out.splitlines()[1]) - 2000) <= 40


def test_the_views_read_their_files_and_no_other(data: Path) -> None:
    from dpproxy.backends.opener import open_database
    from dpproxy.errors import DPProxyError

    backend = open_database(str(data / "people.csv"))
    try:
        assert backend.execute("SELECT COUNT(*) FROM people").rows == ((2000,),)
        for sql in (
            f"SELECT COUNT(*) FROM read_csv('{data / 'people.parquet'}')",
            "SELECT COUNT(*) FROM read_csv('/etc/passwd')",
            "SET enable_external_access = true",
        ):
            with pytest.raises(DPProxyError):
                backend.execute(sql)
    finally:
        backend.close()


def test_schema_init_takes_the_primary_key_of_a_duckdb_table(
    tmp_path: Path, env: dict[str, str]
) -> None:
    db = tmp_path / "clinic.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE visits (visit_id INTEGER PRIMARY KEY, cost DECIMAL(10,2), "
        "day DATE NOT NULL, note VARCHAR, seen_at TIMESTAMP)"
    )
    con.execute(
        "INSERT INTO visits SELECT i, i / 10, DATE '2024-01-01' + i::INTEGER, 'x', NULL "
        "FROM range(300) t(i)"
    )
    con.close()
    p = ok(run(f"dpproxy schema init -d {db} --table visits -o clinic.yaml", tmp_path, env))
    assert "0 TODO(s) to replace before it loads" in p.stderr
    text = (tmp_path / "clinic.yaml").read_text()
    assert "privacy_unit: visit_id   # the primary key: one row per unit" in text
    assert "max_rows_per_unit: 1" in text
    assert "day: {type: date}" in text and "note: {type: text, nullable: true}" in text
    assert "# seen_at: left out, its type TIMESTAMP has no schema type" in text
    ok(run(f"dpproxy schema check -d {db} clinic.yaml", tmp_path, env))
    out = ok(
        run(
            f"dpproxy query -d {db} -s clinic.yaml --format csv 'SELECT COUNT(*) AS n FROM visits'",
            tmp_path,
            env,
        )
    ).stdout
    assert abs(float(out.splitlines()[1]) - 300) <= 40
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE wards (ward_id INTEGER PRIMARY KEY, beds INTEGER)")
    con.execute("CREATE TABLE staff (staff_id INTEGER PRIMARY KEY)")
    con.close()
    both = ok(run(f"dpproxy schema init -d {db} --table wards --table visits", tmp_path, env))
    assert "\n  wards:\n" in both.stdout and "\n  visits:\n" in both.stdout  # to stdout
    assert "staff" not in both.stdout
    assert "`--table NAME`, repeatable" in (SCHEMAS_README_TEXT)
    p = run(f"dpproxy schema init -d {db} --table nope", tmp_path, env)
    assert sqlstate(p) == "42P01" and "visits" in p.stderr
    p = run(f"dpproxy schema init -d {db} -o clinic.yaml", tmp_path, env)
    assert sqlstate(p) == "22023" and "--force" in p.stderr


def test_schema_init_drafts_wide_numbers_as_floats_read_as_doubles(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """HUGEINT, UHUGEINT and a DECIMAL wider than DuckDB compares exactly are read as DOUBLE
    (``sql/widenum.py``): the draft declares them ``float``, the check accepts that, and a
    SUM over one is answered once its bounds are given; a wide unit column is left out."""
    db = tmp_path / "ledger.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE entries (entry_id INTEGER PRIMARY KEY, h HUGEINT, u UHUGEINT, "
        "d DECIMAL(38, 2), w HUGEINT)"
    )
    con.execute("INSERT INTO entries SELECT i, i, i, i / 4, i FROM range(400) t(i)")
    con.execute("CREATE TABLE wide_units (k HUGEINT PRIMARY KEY, v INTEGER)")
    con.close()
    ok(run(f"dpproxy schema init -d {db} --table entries -o ledger.yaml", tmp_path, env))
    text = (tmp_path / "ledger.yaml").read_text()
    for name, sql_type in (("h", "HUGEINT"), ("u", "UHUGEINT"), ("d", "DECIMAL(38,2)")):
        line = next(x for x in text.splitlines() if x.strip().startswith(f"{name}:"))
        assert line.strip().startswith(f"{name}: {{type: float, nullable: true}}"), line
        assert f"({sql_type}: read as a double)" in line.replace(", ", ","), line
    ok(run(f"dpproxy schema check -d {db} ledger.yaml", tmp_path, env))
    bounded = text.replace("w: {type: float, nullable: true}", "w: {type: float, nullable: true,"
                           " lower: 0, upper: 400}")  # fmt: skip
    (tmp_path / "ledger.yaml").write_text(bounded)
    sql = "SELECT SUM(w) AS s FROM entries"
    out = ok(run(f"dpproxy query -d {db} -s ledger.yaml --format csv '{sql}'", tmp_path, env))
    assert abs(float(out.stdout.splitlines()[1]) - sum(range(400))) < 0.05 * sum(range(400))
    unit = ok(run(f"dpproxy schema init -d {db} --table wide_units", tmp_path, env)).stdout
    assert "# k: left out, its type HUGEINT is too wide to name a unit exactly" in unit


def test_schema_init_and_check_over_postgresql(
    pg_dsn: str, tmp_path: Path, env: dict[str, str]
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(
            "CREATE TABLE patients (patient_id bigint PRIMARY KEY, weight real, "
            "ward varchar(10) NOT NULL, admitted date, paid numeric)"
        )
    parts = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    url = f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"
    ok(run(f"dpproxy schema init -d {url} -o p.yaml", tmp_path, env))
    text = (tmp_path / "p.yaml").read_text()
    assert "privacy_unit: patient_id" in text and "ward: {type: text}" in text
    assert "weight: {type: float, nullable: true}" in text
    assert "paid: {type: float, nullable: true}" in text  # numeric: read as a double
    assert "(numeric: read as a double)" in text
    ok(run(f"dpproxy schema check -d {url} p.yaml", tmp_path, env))
    (tmp_path / "p.yaml").write_text(text.replace("weight: {type: float", "weight: {type: integer"))
    p = run(f"dpproxy schema check -d {url} p.yaml", tmp_path, env)
    assert p.returncode == 1
    assert (
        "tables.patients.columns.weight.type: the schema says integer but the database "
        "column is real; write type: float (SQLSTATE 42804)" in p.stderr
    )


def test_csv_types_come_from_every_row(tmp_path: Path, env: dict[str, str]) -> None:
    assert "round a 1.5 on row 30,001 of a column it typed integer" in " ".join(SECTION.split())
    rows = "".join(f"{i},{i % 7}\n" for i in range(30000))
    (tmp_path / "late.csv").write_text("id,x\n" + rows + "30000,1.5\n")
    draft = ok(run("dpproxy schema init -d late.csv", tmp_path, env)).stdout
    assert "x: {type: float, nullable: true}" in draft
    schema = _schema(
        tmp_path,
        "  late:\n    privacy_unit: id\n    columns:\n      id: integer\n      x: integer\n",
    )
    p = run(f"dpproxy schema check -d late.csv {schema}", tmp_path, env)
    assert p.returncode == 1 and "(SQLSTATE 42804)" in p.stderr


def test_dp_bounds_are_charged_to_the_steward_in_the_ledger(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    from dpproxy.accounting.ledger import Ledger
    from dpproxy.catalog.load import load_catalog
    from dpproxy.mechanisms.dp_bounds import candidates
    from dpproxy.values import Cost

    shutil.copy(data / "people.csv", tmp_path)
    ledger = tmp_path / "ledger.sqlite"
    cmd = f"dpproxy schema init -d people.csv --unit id --ledger {ledger} --dp-bounds"
    p = ok(run(f"{cmd} --epsilon 1 -o p.yaml", tmp_path, env))
    paid = "privacy cost: ε=1, δ=0.000001, charged to 'steward'"  # δ: the domain of sex
    assert f"{paid} in ledger {ledger}" in p.stderr
    text = (tmp_path / "p.yaml").read_text()
    assert "privacy_unit: id   # given with --unit" in text
    assert text.count("# DP bounds (ε = 1/6 each, charged to steward): check them") == 2
    catalog = load_catalog(tmp_path / "p.yaml")  # loads as drafted: the unit was given
    table = catalog.tables[0]
    for name, integer in (("age", True), ("income", False)):
        col = table.column(name)
        assert col is not None and col.lower is not None and col.upper is not None
        assert col.lower <= col.upper
        assert {col.lower, col.upper} <= set(candidates(integer=integer))
    assert not table.column("id").bounded  # type: ignore[union-attr]  # the unit: no bounds
    book = Ledger(ledger, "people", Cost(Fraction(10), Fraction(1, 10**5)))
    try:
        assert book.spent("steward") == Cost(Fraction(1), Fraction(1, 10**6))
        (entry,) = [e for e in book.entries("steward") if e.kind == "release"]
        assert entry.body["query"] == (
            "schema init --dp-bounds people(age, income; domains: sex) unit id"
        )
    finally:
        book.close()
    # the budget is enforced: 9 are left, 10 are refused, and nothing is written
    p = run(f"{cmd} --epsilon 10 -o q.yaml", tmp_path, env)
    assert sqlstate(p) == "ZD001" and not (tmp_path / "q.yaml").exists()
    # options that cannot work are refused before anything is spent
    for bad, code in (
        (f"{cmd} -o r.yaml", "22023"),  # no --epsilon
        (f"{cmd} --epsilon 0 -o r.yaml", "22023"),
        ("dpproxy schema init -d people.csv --dp-bounds --epsilon 1 -o r.yaml", "22023"),  # unit
        (f"{cmd} --epsilon 1 --ledger memory -o r.yaml", "22023"),
        ("dpproxy schema init -d people.csv --unit nobody --epsilon 1 --dp-bounds", "42703"),
    ):
        p = run(bad, tmp_path, env)
        assert sqlstate(p) == code, (bad, p.stderr)
    book = Ledger(ledger, "people", Cost(Fraction(10), Fraction(1, 10**5)))
    try:
        assert book.spent("steward") == Cost(Fraction(1), Fraction(1, 10**6))
    finally:
        book.close()


def test_dp_bounds_use_the_default_ledger_and_schemas_readme_says_so(
    data: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    from dpproxy.mechanisms.dp_bounds import candidates

    for claim in (
        "chosen from the fixed grid 0, ±1, ±2, ±5, ±10, ±20, …",
        "is charged to the account `--steward` (default `steward`) in the budget ledger "
        "(`--ledger`; by default the file `dpproxy serve` uses)",
        "if the account's budget cannot pay, no count is computed and no file is written (`ZD001`)",
    ):
        assert claim in SCHEMAS_README_TEXT, claim
    assert {0, 1, 2, 5, 10, 20, -1, -2, -5, -10, -20} <= set(candidates(integer=True))
    shutil.copy(data / "people.csv", tmp_path)
    said = " ".join(SECTION.split())
    line = "dpproxy schema init --database people.csv --unit id --dp-bounds --epsilon 1"
    assert (
        f"`{line}` chooses them and the domain of `sex` with DP and charges ε = 1 and δ = 10⁻⁶ "
        "to the account `steward`"
    ) in said
    p = ok(run(line, tmp_path, env))
    default = Path(env["XDG_DATA_HOME"]) / "dpproxy" / "ledger.sqlite"
    assert f"privacy cost: ε=1, δ=0.000001, charged to 'steward' in ledger {default}" in p.stderr
    p = ok(run("dpproxy schema init -d people.csv --unit id --dp-bounds -e 0.5", tmp_path, env))
    default = Path(env["XDG_DATA_HOME"]) / "dpproxy" / "ledger.sqlite"
    assert f"charged to 'steward' in ledger {default}" in p.stderr
    assert "lower:" in p.stdout


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@h/db", "postgres://h/db", "spark+local[4]", "spark://h:7077", "sc://h:1"],
)
def test_urls_are_not_taken_for_files(url: str) -> None:
    from dpproxy.backends.files import file_sources

    assert file_sources(url) is None  # backends.open_backend decides
