"""``dpproxy data copy`` (README "Your own data"): CSV and Parquet files copied into a DuckDB
file only when asked, with the types the views give them and a PRIMARY KEY only when declared.
Real files, real DuckDB, the installed ``dpproxy`` command."""

from __future__ import annotations

import datetime
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.file_views import connect_sources, duckdb_shapes
from dpproxy.backends.files import file_sources
from tests.integration.test_own_data import README, SECTION, env, ok, run, sqlstate, write_people

__all__ = ["env"]  # the fixture, imported for pytest


@pytest.fixture
def people(tmp_path: Path) -> Path:
    write_people(tmp_path / "people.csv")
    return tmp_path


def _tables(path: Path) -> dict[str, list[tuple[str, str, bool]]]:
    with duckdb.connect(str(path), read_only=True) as c:
        return {
            s.name: [(col.name, col.sql_type, col.nullable) for col in s.columns]
            for s in duckdb_shapes(c)
        }


def test_copy_keeps_view_types_rows_and_declared_key(people: Path, env: dict[str, str]) -> None:
    p = ok(run("dpproxy data copy people.csv --to people.duckdb --primary-key id", people, env))
    assert p.stdout == ""
    assert "copying people.csv (" in p.stderr and "into table people" in p.stderr
    assert "wrote table people to people.duckdb: 2,000 rows, PRIMARY KEY (id)" in p.stderr
    view = connect_sources(file_sources(str(people / "people.csv")) or ())
    try:
        (shape,) = duckdb_shapes(view)
        want = view.execute("SELECT * FROM people ORDER BY id").fetchall()
    finally:
        view.close()
    with duckdb.connect(str(people / "people.duckdb"), read_only=True) as c:
        (copied,) = duckdb_shapes(c)
        assert c.execute("SELECT * FROM people ORDER BY id").fetchall() == want
    assert [(x.name, x.sql_type) for x in copied.columns] == [
        (x.name, x.sql_type) for x in shape.columns
    ]
    assert copied.primary_key == "id" and shape.primary_key is None
    assert not list(people.glob(".people.duckdb*"))  # no temporary file left
    draft = ok(run("dpproxy schema init --database people.duckdb", people, env)).stdout
    assert "privacy_unit: id   # the primary key" in draft
    assert "max_rows_per_unit: 1" in draft
    # the declared key spares queries the contribution bounding (README); the file does not
    schema = draft.replace(
        "income: {type: float, nullable: true}",
        "income: {type: float, nullable: true, lower: 0, upper: 200000}",
    )
    (people / "people.yaml").write_text(schema)
    sql = "'SELECT SUM(income) FROM people'"
    copy = ok(run(f"dpproxy explain -d people.duckdb -s people.yaml {sql}", people, env)).stdout
    assert "unit column is unique: no bounding needed" in copy and "ROW_NUMBER" not in copy
    file = ok(run(f"dpproxy explain -d people.csv -s people.yaml {sql}", people, env)).stdout
    assert "no bounding needed" not in file and "ROW_NUMBER" in file


def test_no_key_unless_declared_and_copy_answers_queries(people: Path, env: dict[str, str]) -> None:
    ok(run("dpproxy data copy people.csv --to people.duckdb", people, env))
    with duckdb.connect(str(people / "people.duckdb"), read_only=True) as c:
        (shape,) = duckdb_shapes(c)
    assert shape.primary_key is None
    draft = ok(run("dpproxy schema init --database people.duckdb", people, env)).stdout
    assert "privacy_unit: TODO" in draft
    schema = draft.replace("privacy_unit: TODO", "privacy_unit: id")
    (people / "people.yaml").write_text(schema)
    q = ok(
        run(
            "dpproxy query --ledger memory --database people.duckdb --schema people.yaml "
            "--format json 'SELECT COUNT(*) AS n FROM people'",
            people,
            env,
        )
    )
    assert '"n":' in q.stdout


def test_existing_target_refused_unless_force(people: Path, env: dict[str, str]) -> None:
    (people / "people.duckdb").write_bytes(b"keep me")
    p = run("dpproxy data copy people.csv --to people.duckdb", people, env)
    assert sqlstate(p) == "22023" and "--force" in p.stderr
    assert (people / "people.duckdb").read_bytes() == b"keep me"
    ok(run("dpproxy data copy people.csv --to people.duckdb --force", people, env))
    assert set(_tables(people / "people.duckdb")) == {"people"}


@pytest.mark.parametrize(
    ("rows", "state"),
    [("id,age\n1,30\n2,40\n1,50\n", "23505"), ("id,age\n1,30\n,40\n", "23502")],
)
def test_declared_key_checked_on_every_row(
    tmp_path: Path, env: dict[str, str], rows: str, state: str
) -> None:
    (tmp_path / "visits.csv").write_text(rows)
    p = run("dpproxy data copy visits.csv --to visits.duckdb --primary-key id", tmp_path, env)
    assert sqlstate(p) == state
    assert "--primary-key id" in p.stderr
    assert not (tmp_path / "visits.duckdb").exists()
    assert not list(tmp_path.glob(".visits.duckdb*"))
    # the same data copies without a declared key
    ok(run("dpproxy data copy visits.csv --to visits.duckdb", tmp_path, env))


def test_declared_not_null_columns_are_checked_and_share_one_count(
    people: Path, env: dict[str, str]
) -> None:
    """``--not-null``: DuckDB checks every row; ``schema init`` drafts those columns without
    ``nullable: true``; their counts are one COUNT(*), released once (five noisy values for a
    VARIANCE and a STDDEV, six from the copy without the constraint)."""
    p = ok(
        run(
            "dpproxy data copy people.csv --to people.duckdb --primary-key id "
            "--not-null age,SEX --not-null age",
            people,
            env,
        )
    )
    assert "2,000 rows, PRIMARY KEY (id), NOT NULL (age, sex)" in p.stderr
    assert [c for c in _tables(people / "people.duckdb")["people"]] == [
        ("id", "BIGINT", False),
        ("age", "BIGINT", False),
        ("sex", "VARCHAR", False),
        ("income", "DOUBLE", True),
    ]
    draft = ok(run("dpproxy schema init --database people.duckdb", people, env)).stdout
    assert "age: {type: integer}" in draft and "income: {type: float, nullable: true}" in draft
    ok(run("dpproxy data copy people.csv --to plain.duckdb --primary-key id", people, env))
    schema = draft.replace(
        "age: {type: integer}", "age: {type: integer, lower: 0, upper: 100}"
    ).replace("income: {type: float, nullable: true}", "income: {type: float, nullable: false}")
    (people / "people.yaml").write_text(schema)
    sql = "'SELECT VARIANCE(age), STDDEV(age), COUNT(sex) FROM people'"
    for db, counts in (
        ("people.duckdb", ["count *"]),
        ("plain.duckdb", ["count age", "count sex"]),
    ):
        shown = ok(run(f"dpproxy explain -d {db} -s people.yaml {sql}", people, env)).stdout
        lines = [
            ln.split(":")[0].split(maxsplit=1)[1] for ln in shown.splitlines() if " count " in ln
        ]
        assert sorted(lines) == counts, shown
        # README: "draws three noisy values, not four"
        assert sum(ln.startswith("  __p") for ln in shown.splitlines()) == len(counts) + 2


@pytest.mark.parametrize(
    ("option", "state", "said"),
    [
        ("--not-null age", "23502", "--not-null age: the column is NULL on some row"),
        ("--primary-key id --not-null age", "23502", "--not-null age: the column is NULL"),
        ("--not-null nope", "42703", "--not-null nope: no such column"),
    ],
)
def test_a_not_null_column_with_a_null_or_unknown_refuses_the_copy(
    tmp_path: Path, env: dict[str, str], option: str, state: str, said: str
) -> None:
    (tmp_path / "visits.csv").write_text("id,age\n1,30\n2,\n")
    p = run(f"dpproxy data copy visits.csv --to visits.duckdb {option}", tmp_path, env)
    assert sqlstate(p) == state and said in p.stderr, p.stderr
    assert not (tmp_path / "visits.duckdb").exists()
    assert not list(tmp_path.glob(".visits.duckdb*"))


def test_unknown_key_column_and_bad_table_options(people: Path, env: dict[str, str]) -> None:
    p = run("dpproxy data copy people.csv --to x.duckdb --primary-key nope", people, env)
    assert sqlstate(p) == "42703" and "id, age, sex, income" in p.stderr
    (people / "more.csv").write_text("a\n1\n")
    p = run("dpproxy data copy people.csv,more.csv --to x.duckdb --table t", people, env)
    assert sqlstate(p) == "22023"
    p = run("dpproxy data copy people.csv --to x.duckdb --table 'a b'", people, env)
    assert sqlstate(p) == "22023"
    p = run("dpproxy data copy people.duckdb --to x.duckdb", people, env)
    assert sqlstate(p) == "22023"
    assert sqlstate(run("dpproxy data copy missing.csv --to x.duckdb", people, env)) == "58P01"
    assert not (people / "x.duckdb").exists()
    assert run("dpproxy data copy people.csv", people, env).returncode == 2  # --to missing


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs a directory nothing can write")
def test_a_target_that_cannot_be_written_is_an_error_with_a_hint(
    people: Path, env: dict[str, str]
) -> None:
    p = run("dpproxy data copy people.csv --to /proc/people.duckdb", people, env)
    assert sqlstate(p) == "22023" and "cannot write /proc/people.duckdb" in p.stderr
    assert "Traceback" not in p.stderr


def test_glob_of_parquet_is_one_table_with_its_types(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "sales").mkdir()
    with duckdb.connect() as c:
        for i in (1, 2):
            c.execute(
                f"COPY (SELECT {i} AS shop, DATE '2026-0{i}-01' AS day, {i}.5::DOUBLE AS amount, "
                f"'x{i}' AS note) TO '{tmp_path}/sales/sales_{i}.parquet' (FORMAT parquet)"
            )
    ok(
        run(
            "dpproxy data copy 'sales/sales_*.parquet' --to s.duckdb --table sales_all",
            tmp_path,
            env,
        )
    )
    assert _tables(tmp_path / "s.duckdb") == {
        "sales_all": [
            ("shop", "INTEGER", True),
            ("day", "DATE", True),
            ("amount", "DOUBLE", True),
            ("note", "VARCHAR", True),
        ]
    }
    with duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True) as c:
        assert c.execute("SELECT day FROM sales_all ORDER BY day").fetchall() == [
            (datetime.date(2026, 1, 1),),
            (datetime.date(2026, 2, 1),),
        ]


def test_schemas_readme_names_the_copy_with_a_key() -> None:
    text = " ".join(
        (Path(__file__).resolve().parents[2] / "schemas" / "README.md").read_text().split()
    )
    assert "(`dpproxy data copy people.csv --to people.duckdb --primary-key id`, checked" in text


def test_readme_says_how_to_ask_for_a_copy() -> None:
    text = " ".join(SECTION.split())
    assert "Nothing is copied unless you ask" in text
    assert "`dpproxy data copy people.csv --to people.duckdb --primary-key id`" in text
    assert "`23505`" in text
    assert README.count("```console") >= 1
