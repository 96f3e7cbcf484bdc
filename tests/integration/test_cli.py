"""The ``dpproxy`` console script, run as a real subprocess over the demo database."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import click
import pytest

import dpproxy
from dpproxy.cli import main as cli_main
from dpproxy.mechanisms.base import Laplace
from tests.commands import dpproxy_command

ADULT_ROWS = 32561
REPO = Path(__file__).resolve().parents[2]


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def run(demo_db: Path, demo_cache_dir: Path) -> Run:
    """Run ``dpproxy ARGS`` with the session's demo cache; returns the completed process."""
    env = {**os.environ, "DPPROXY_CACHE_DIR": str(demo_cache_dir)}
    base = dpproxy_command()

    def go(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    return go


def _ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stderr
    return proc


_ERROR = re.compile(r"^ERROR:\s+(?P<message>.+?)\s+\(SQLSTATE (?P<code>[0-9A-Z]{5})\)$", re.M)


def _error_code(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    match = _ERROR.search(proc.stderr)
    assert match, proc.stderr
    assert "Traceback" not in proc.stderr
    return match.group("code")


# ------------------------------------------------------------------------------- query


def test_version(run: Run) -> None:
    out = _ok(run("--version")).stdout
    assert out.strip() == f"dpproxy, version {dpproxy.__version__}"


def _all_commands() -> list[list[str]]:
    paths: list[list[str]] = [[]]

    def walk(group: click.Group, prefix: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):  # the lazily imported subcommands included
            cmd = group.get_command(ctx, name)
            assert cmd is not None, name
            paths.append([*prefix, name])
            if isinstance(cmd, click.Group):
                walk(cmd, [*prefix, name])

    walk(cli_main, [])
    return paths


def test_the_command_tree_is_complete() -> None:
    names = {" ".join(p) for p in _all_commands()}
    assert {"query", "explain", "schema", "schema check"} <= names


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p) or "dpproxy")
def test_help_works_for_every_command(path: list[str], run: Run) -> None:
    out = _ok(run(*path, "--help")).stdout
    assert out.startswith("Usage: dpproxy" + "".join(f" {p}" for p in path))
    assert "--help" in out
    short = _ok(run(*path, "-h")).stdout
    assert short == out


def test_query_table_format(run: Run) -> None:
    proc = _ok(run("query", "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex"))
    lines = proc.stdout.splitlines()
    assert [c.strip() for c in lines[0].split("|")] == ["sex", "n"]
    assert set(lines[1]) <= {"-", "+"}
    cells = [[c.strip() for c in line.split("|")] for line in lines[2:4]]
    assert [c[0] for c in cells] == ["Female", "Male"]
    assert abs(int(cells[0][1]) - 10771) <= 50 and abs(int(cells[1][1]) - 21790) <= 50
    assert lines[4] == "(2 rows)"
    assert "privacy cost: ε=1" in proc.stderr and "budget left" in proc.stderr


def test_query_csv_format(run: Run) -> None:
    proc = _ok(run("query", "--format", "csv", "SELECT COUNT(*) FROM adult"))
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["count"]
    assert len(rows) == 2
    assert abs(int(rows[1][0]) - ADULT_ROWS) <= 50  # Laplace(b=1) at ε=1


def test_query_csv_with_errors(run: Run) -> None:
    proc = _ok(
        run(
            "query",
            "--format",
            "csv",
            "--errors",
            "SELECT race, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY race",
        )
    )
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 5
    assert set(rows[0]) == {"race", "n", "a", "race_error95", "n_error95", "a_error95"}
    for r in rows:
        assert 17 <= float(r["a"]) <= 90
        assert float(r["n_error95"]) > 0


def test_query_json_format(run: Run) -> None:
    proc = _ok(
        run(
            "query",
            "--format",
            "json",
            "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY sex",
        )
    )
    records = json.loads(proc.stdout)["rows"]
    assert [r["sex"] for r in records] == ["Female", "Male"]
    assert all(set(r) == {"sex", "n", "mean_age"} for r in records)
    by_sex = {r["sex"]: r for r in records}
    assert abs(by_sex["Female"]["n"] - 10771) <= 50
    assert abs(by_sex["Male"]["mean_age"] - 39.43) < 2


def test_query_json_with_errors_and_epsilon(run: Run) -> None:
    proc = _ok(
        run(
            "query",
            "--format",
            "json",
            "--errors",
            "--epsilon",
            "0.5",
            "SELECT COUNT(*) FROM adult",
        )
    )
    doc = json.loads(proc.stdout)
    (record,) = doc["rows"]
    assert abs(record["count"] - ADULT_ROWS) <= 100
    # ε = 0.5 on a count of sensitivity 1: discrete Laplace of scale 2, exact 95% tail bound
    assert record["_error95"]["count"] == Laplace(Fraction(2)).half_width(0.05, integer=True)
    assert doc["privacy_cost"] == {"epsilon": "0.5", "delta": "0"}


def test_query_reads_standard_input(run: Run) -> None:
    proc = _ok(run("query", "--format", "csv", "-", stdin="SELECT COUNT(*) FROM adult\n"))
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["count"] and abs(int(rows[1][0]) - ADULT_ROWS) <= 50


def test_query_over_another_database(run: Run, multi_db: Any) -> None:
    proc = _ok(
        run(
            "query",
            "--format",
            "json",
            "--database",
            str(multi_db.path),
            "--schema",
            str(multi_db.schemas["visits_rows"]),
            "--epsilon",
            "5",
            "SELECT day_of_week, COUNT(*) FROM visits GROUP BY day_of_week",
        )
    )
    records = json.loads(proc.stdout)["rows"]
    assert [r["day_of_week"] for r in records] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert sum(r["count"] for r in records) == pytest.approx(160, abs=40)


# ----------------------------------------------------------------------------- explain


def test_explain_text(run: Run) -> None:
    proc = _ok(run("explain", "SELECT sex, AVG(age) FROM adult GROUP BY sex"))
    out = proc.stdout
    for needle in (
        "query:",
        "cost:",
        "noisy primitives:",
        "Laplace",
        "rewritten SQL",
        "AS __p1 FROM adult GROUP BY sex",  # the rewritten SQL (rewrite/inline.py: flattened)
    ):
        assert needle in out
    assert "budget left" not in proc.stderr  # explaining spends nothing


def test_explain_json(run: Run) -> None:
    proc = _ok(
        run(
            "explain",
            "--format",
            "json",
            "--epsilon",
            "0.25",
            "SELECT education, COUNT(*) FROM adult WHERE age > 40 GROUP BY education",
        )
    )
    plan = json.loads(proc.stdout)
    assert plan["cost"]["epsilon"] == 0.25
    assert plan["cost"]["delta"] == 0
    # the rows written in place (rewrite/inline.py): every column read once
    assert plan["rewritten_sql"].startswith("SELECT education AS __key_0, COUNT(*) AS __p0 FROM ")
    assert "age > 40" in plan["rewritten_sql"]
    assert "budget left" not in proc.stderr and "privacy cost" not in proc.stderr


def test_explain_refuses_like_query(run: Run) -> None:
    assert _error_code(run("explain", "SELECT * FROM adult")) == "42501"
    mode = "SELECT MODE() WITHIN GROUP (ORDER BY age) FROM adult"
    refused = run("explain", "--format", "json", mode)
    assert refused.returncode == 1 and refused.stderr == ""
    assert json.loads(refused.stdout)["error"]["sqlstate"] == "0A000"


def test_explain_lists_the_candidate_plans_of_avg(run: Run) -> None:
    """The issue's acceptance command: GS, joint, PTR, smooth and SAA with predicted errors."""
    out = _ok(run("explain", "SELECT AVG(age) FROM adult")).stdout
    assert "aggregate plans (predicted 95% error; * = chosen):" in out
    lines = out.splitlines()
    start = lines.index("aggregate plans (predicted 95% error; * = chosen):")
    block = lines[start + 1 : start + 7]
    assert block[0].strip().startswith("avg(age): joint")
    methods = [
        line.split()[1] if line.strip().startswith("*") else line.split()[0] for line in block[1:6]
    ]
    assert methods == ["gs", "joint", "ptr", "smooth", "saa"]
    assert all("±" in line for line in block[1:6])
    forced = _ok(run("explain", "--plan", "smooth", "SELECT AVG(age) FROM adult")).stdout
    assert "avg(age): smooth — forced" in forced


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "sql,code",
    [
        ("SELECT * FROM adult", "42501"),
        ("SELECT age FROM adult", "42501"),
        ("DROP TABLE adult", "42501"),
        ("SELECT COUNT(*) FROM people", "42P01"),
        ("SELECT SUM(person_id) FROM adult", "ZD002"),
        ("SELECT MODE() WITHIN GROUP (ORDER BY age) FROM adult", "0A000"),
        ("SELECT COUNT(*) FROM adult; SELECT 1", "0A000"),
    ],
)
def test_refusals_print_error_and_sqlstate(sql: str, code: str, run: Run) -> None:
    proc = run("query", sql)
    assert _error_code(proc) == code
    assert proc.stdout == ""


def test_syntax_error_reports_the_position(run: Run) -> None:
    proc = run("query", "SELEC COUNT(*) FROM adult")
    assert _error_code(proc) == "42601"
    assert re.search(r"^POSITION:\s+\d+$", proc.stderr, re.M)


@pytest.mark.parametrize(
    "args,code",
    [
        (["--epsilon", "0"], "ZD003"),
        (["--epsilon", "abc"], "ZD003"),
        (["--delta", "2"], "ZD003"),
        (["--database", "/nonexistent.duckdb"], "22023"),
    ],
)
def test_bad_options(args: list[str], code: str, run: Run) -> None:
    assert _error_code(run("query", *args, "SELECT COUNT(*) FROM adult")) == code


def test_unknown_mechanism_is_a_usage_error(run: Run) -> None:
    proc = run("query", "--mechanism", "cauchy", "SELECT COUNT(*) FROM adult")
    assert proc.returncode == 2
    assert "cauchy" in proc.stderr


# ------------------------------------------------------------------------- schema check


def test_schema_check_ok(run: Run) -> None:
    proc = _ok(run("schema", "check", str(REPO / "schemas" / "adult.yaml")))
    assert re.search(
        r"adult\.yaml: ok \(dataset adult: 1 table\(s\), 16 column\(s\)\)", proc.stdout
    )


BAD_SCHEMA = """\
version: 1
dataset: shop
privacy:
  epsilon: -1
  mechanism: gaussian
  delta: 0
tables:
  people:
    private: true
    privacy_unit: id
    max_rows_per_unit: 1
    columns:
      pid: {type: integer}
      age: {type: integer, lower: 90, upper: 17}
      sex: {type: text, lower: 0, upper: 1}
      colour: {type: text, domain: [red, red]}
      extra: {type: integer, bogus: 1}
"""

BAD_PROBLEMS = (
    "privacy.epsilon",
    "privacy.delta",
    "tables.people.columns.age.upper",
    "tables.people.columns.sex",
    "tables.people.columns.colour.domain",
    "tables.people.columns.extra.bogus",
    "tables.people.privacy_unit",
)


def test_schema_check_reports_every_problem(run: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_SCHEMA, encoding="utf-8")
    good = REPO / "schemas" / "adult.yaml"
    proc = run("schema", "check", str(bad), str(good))
    assert proc.returncode == 1
    assert f"{good}: ok" in proc.stdout  # the valid file is still checked and reported
    lines = proc.stderr.splitlines()
    assert lines[0] == f"{bad}: {len(BAD_PROBLEMS)} problem(s)"
    problem_lines = [line.strip() for line in lines[1:]]
    assert len(problem_lines) == len(BAD_PROBLEMS)
    for key in BAD_PROBLEMS:
        assert any(line.startswith(f"{bad}: {key}: ") for line in problem_lines), key


def test_schema_check_invalid_yaml_and_missing_file(run: Run, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("tables: [unclosed\n", encoding="utf-8")
    proc = run("schema", "check", str(broken), str(tmp_path / "missing.yaml"))
    assert proc.returncode == 1
    assert re.search(rf"^\s*{re.escape(str(broken))}: line \d+: ", proc.stderr, re.M)
    assert f"{tmp_path / 'missing.yaml'}: " in proc.stderr


def test_schema_check_needs_a_file(run: Run) -> None:
    proc = run("schema", "check")
    assert proc.returncode == 2
    assert "Usage:" in proc.stderr


def test_a_ledger_keeps_budgets_and_answers_across_runs(run: Run, tmp_path: Path) -> None:
    """Two `dpproxy query` processes on one ledger: the second sees the first's spending, an
    identical query is answered again identically at no cost, and explain says so."""
    ledger = str(tmp_path / "ledger.sqlite")
    sql = "SELECT AVG(age) FROM adult"
    first = _ok(run("query", "--ledger", ledger, sql))
    assert f"budget left for 'analyst' in ledger {ledger}: ε=9" in first.stderr
    again = _ok(run("query", "--ledger", ledger, "select avg(AGE) from adult"))
    assert again.stdout == first.stdout
    assert "ε=0 (the answer released before, from the cache)" in again.stderr
    third = json.loads(_ok(run("query", "--ledger", ledger, "--format", "json", sql)).stdout)
    assert third["cached"] and third["privacy_cost"]["epsilon"] == "0"
    assert third["budget_left"]["epsilon"] == "9" and third["ledger"] == ledger
    explained = _ok(run("explain", "--ledger", ledger, "--analyst", "analyst", sql)).stdout
    assert "answered before: asking again returns that answer and costs nothing" in explained
    other = _ok(run("explain", "--ledger", ledger, "-a", "analyst", "--format", "json",
                    "SELECT COUNT(*) FROM adult"))
    budget = json.loads(other.stdout)["budget"]
    assert budget["remaining"]["epsilon"] == 9 and not budget["cached"]
    assert budget["affordable"] is True
