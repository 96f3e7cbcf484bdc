"""Issue 20, items 2 and 3, through the real ``python -m dpproxy``: one ledger for every command,
options after the subcommand, ``--format table|csv|json`` with cost and structured errors,
decimal amounts, exit codes, ``-f FILE``, ``dpproxy.toml`` profiles, JSON logs of ``serve``
and the steward's hint (docs/cli-conventions.md, README "Command line")."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

from dpproxy.demo import demo_schema_path

Run = Callable[..., subprocess.CompletedProcess[str]]
COUNT = "SELECT COUNT(*) FROM adult"
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture()
def home(tmp_path: Path, demo_db: Path, demo_cache_dir: Path) -> Path:
    """A working directory with its own data and config homes and no $DPPROXY_LEDGER: the
    default ledger is <home>/data/dpproxy/ledger.sqlite."""
    (tmp_path / "work").mkdir()
    return tmp_path


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DPPROXY_LEDGER", "DPPROXY_CONFIG", "DPPROXY_PROFILE", "DPPROXY_USERS")
    }
    env.update(XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "cfg"))
    env.update(extra)
    return env


@pytest.fixture()
def run(home: Path) -> Run:
    def go(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dpproxy", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=home / "work",
            env=_env(home, **env),
            timeout=120,
            check=False,
        )

    return go


def _ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return proc


# ----------------------------------------------------------------------- one budget story


def test_every_command_reads_the_same_ledger_by_default(run: Run, home: Path) -> None:
    ledger = home / "data" / "dpproxy" / "ledger.sqlite"
    first = _ok(run("query", COUNT))
    assert f"budget left for 'analyst' in ledger {ledger}: ε=9, δ=0.00001" in first.stderr
    assert ledger.is_file()
    # budget show reads the account query charged: spent 1, remaining 9
    shown = json.loads(_ok(run("budget", "show", "analyst", "--format", "json")).stdout)
    assert shown[0]["spent"]["epsilon"] == "1" and shown[0]["remaining"]["epsilon"] == "9"
    # explain -a reads it too
    avg = "SELECT AVG(age) FROM adult"
    explained = json.loads(_ok(run("explain", "-a", "analyst", "--format", "json", avg)).stdout)
    assert explained["budget"]["remaining"]["epsilon"] == 9
    # a second query is charged to the same account
    second = _ok(run("query", "SELECT SUM(age) FROM adult"))
    assert "ε=8, δ=0.00001" in second.stderr


def test_budget_show_of_the_demo_names_the_other_datasets_of_the_ledger(
    run: Run, home: Path, demo_db: Path
) -> None:
    """After queries on your own data (another dataset), `budget show` and `budget log` without
    --schema show the demo's dataset: an empty table, and a note naming the datasets the ledger
    has and how to see them."""
    mine = home / "work" / "mine.yaml"
    text = demo_schema_path().read_text(encoding="utf-8")
    mine.write_text(text.replace("dataset: adult", "dataset: mine", 1), encoding="utf-8")
    _ok(run("query", "--database", str(demo_db), "--schema", str(mine), COUNT))
    for command in (("budget", "show"), ("budget", "log")):
        shown = _ok(run(*command))
        assert "(0 rows)" in shown.stdout
        assert "note: no accounts of dataset adult" in shown.stderr or command[1] == "log"
        assert "dataset(s) mine" in shown.stderr and "--schema FILE.yaml" in shown.stderr
    assert "note:" not in _ok(run("budget", "show", "--format", "json")).stderr
    mine_shown = _ok(run("budget", "show", "--schema", str(mine)))
    assert "analyst" in mine_shown.stdout and "note:" not in mine_shown.stderr
    _ok(run("query", COUNT))
    assert "note:" not in _ok(run("budget", "show")).stderr


def test_an_exhausted_budget_names_the_ledger_and_the_commands(run: Run, home: Path) -> None:
    ledger = home / "data" / "dpproxy" / "ledger.sqlite"
    _ok(run("query", "--epsilon", "10", COUNT))
    proc = run("query", COUNT)
    assert proc.returncode == 1 and "(SQLSTATE ZD001)" in proc.stderr
    assert f"in ledger {ledger}" in proc.stderr
    assert "`dpproxy budget grant analyst --epsilon E`" in proc.stderr
    _ok(run("budget", "grant", "analyst", "--epsilon", "20"))
    _ok(run("query", "SELECT SUM(age) FROM adult"))


def test_on_the_command_line_the_delta_hint_names_the_option(
    run: Run, home: Path, demo_db: Path
) -> None:
    zero = home / "zero.yaml"
    zero.write_text(demo_schema_path().read_text().replace("delta: 1.0e-6", "delta: 0", 1))
    sql = "SELECT fnlwgt, COUNT(*) FROM adult GROUP BY fnlwgt"
    base = ("query", "-d", str(demo_db), "-s", str(zero), "--ledger", "memory")
    proc = run(*base, sql)
    assert proc.returncode == 1 and "(SQLSTATE ZD003)" in proc.stderr
    assert "HINT:  pass --delta (e.g. --delta 1e-6)" in proc.stderr
    _ok(run(*base, "--delta", "1e-6", sql))  # the hint works


def test_the_per_process_budget_is_an_explicit_ledger_memory(run: Run, home: Path) -> None:
    for _ in range(2):  # each run starts from the full budget, and says so
        proc = _ok(run("query", "--ledger", "memory", COUNT))
        assert (
            "budget left for 'analyst' in memory (this process only: --ledger memory): ε=9"
            in proc.stderr
        )
    assert not (home / "data" / "dpproxy" / "ledger.sqlite").exists()


# ----------------------------------------------------------------------- conventions


def test_options_after_the_subcommand(run: Run, home: Path) -> None:
    ledger = str(home / "elsewhere.sqlite")
    _ok(run("query", "--ledger", ledger, COUNT))
    after = _ok(run("budget", "show", "--ledger", ledger, "--format", "csv"))
    before = _ok(run("budget", "--ledger", ledger, "show", "--format", "csv"))
    assert after.stdout == before.stdout
    rows = list(csv.DictReader(io.StringIO(after.stdout)))
    assert [(r["principal"], r["spent ε"]) for r in rows] == [("analyst", "1")]
    _ok(run("budget", "log", "analyst", "--ledger", ledger))
    _ok(run("budget", "verify", "--ledger", ledger))
    users = str(home / "users.json")
    _ok(run("user", "add", "ana", "--password-stdin", "--users", users, stdin="secret\n"))
    _ok(run("user", "--users", users, "add", "bo", "--password-stdin", stdin="secret\n"))
    assert _ok(run("user", "list", "--users", users)).stdout == "ana\nbo\n"
    listed = json.loads(_ok(run("user", "list", "--users", users, "--format", "json")).stdout)
    assert listed == {"users": [{"name": "ana"}, {"name": "bo"}]}


@pytest.mark.parametrize(
    "command",
    [
        ["query"],
        ["explain"],
        ["budget", "show"],
        ["budget", "log"],
        ["budget", "grant"],
        ["user", "list"],
    ],
)
def test_format_offers_the_same_choices_everywhere(run: Run, command: list[str]) -> None:
    out = _ok(run(*command, "--help")).stdout
    assert "[table|csv|json]" in out.replace("\n", " ").replace("  ", " "), out


def test_json_carries_the_cost_the_budget_and_structured_errors(run: Run, home: Path) -> None:
    doc = json.loads(_ok(run("query", "--format", "json", COUNT)).stdout)
    assert set(doc) >= {"columns", "rows", "privacy_cost", "budget_left", "ledger", "analyst"}
    assert doc["privacy_cost"] == {"epsilon": "1", "delta": "0"}
    assert doc["budget_left"] == {"epsilon": "9", "delta": "0.00001"}
    assert doc["ledger"] == str(home / "data" / "dpproxy" / "ledger.sqlite")
    refused = run("query", "--format", "json", "SELECT * FROM adult")
    assert refused.returncode == 1 and refused.stderr == ""
    err = json.loads(refused.stdout)["error"]
    assert err["sqlstate"] == "42501" and "row-level" in err["message"] and "hint" in err
    missing = run("budget", "show", "--ledger", str(home / "none.sqlite"), "--format", "json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"]["sqlstate"] == "22023"


def test_delta_is_printed_as_a_decimal(run: Run) -> None:
    """The schema's budget δ is the YAML float 1.0e-5, exactly a binary fraction; no output
    shows it as n/d."""
    _ok(run("query", COUNT))
    for fmt in ("table", "csv", "json"):
        out = _ok(run("budget", "show", "--format", fmt)).stdout
        assert "0.00001" in out and not re.search(r"\d+/\d{6,}", out), out
    grant = _ok(run("budget", "grant", "ana", "--epsilon", "3", "--format", "json")).stdout
    assert json.loads(grant)[0]["total"] == {"epsilon": "3", "delta": "0.00001"}


def test_the_delta_left_after_a_delta_spend_is_a_decimal(run: Run) -> None:
    """What is left of the budget's δ (the double 1.0e-5) after a query spends δ = 1e-6 ends in
    the 72nd decimal place: JSON writes it in full, as a decimal, never as n/d; the budget
    table rounds it."""
    gauss = ("--mechanism", "gaussian", "--delta", "1e-6", COUNT)
    doc = json.loads(_ok(run("query", "--format", "json", *gauss)).stdout)
    assert doc["privacy_cost"]["delta"] == "0.000001"
    left = doc["budget_left"]["delta"]
    assert re.fullmatch(r"0\.0000090{15}\d+", left), left
    assert Fraction(left) == Fraction(1.0e-5) - Fraction(1, 10**6)
    (account,) = json.loads(_ok(run("budget", "show", "--format", "json")).stdout)
    assert account["remaining"]["delta"] == account["can_spend"]["delta"] == left
    table = _ok(run("budget", "show")).stdout
    assert re.search(r"\|\s+0\.000009 \|", table) and not re.search(r"\d+/\d{6,}", table), table


def test_a_gaussian_epsilon_is_a_short_decimal_rounded_up(run: Run) -> None:
    """The Gaussian's ε (converted from zCDP: an exact fraction of hundreds of digits) is
    written in JSON to 17 significant digits, rounded up as a cost and down as a budget left;
    docs/cli-conventions.md says which amounts are rounded which way."""
    import dpproxy

    gauss = ("--mechanism", "gaussian", "--delta", "1e-6", COUNT)
    doc = json.loads(_ok(run("query", "--format", "json", *gauss)).stdout)
    # the same conversion, exactly (the fraction the ledger keeps)
    with dpproxy.connect(mechanism="gaussian", delta="1e-6") as con:
        cur = con.cursor()
        cur.execute(COUNT)
        exact = cur.privacy_cost.epsilon
    assert len(str(exact.denominator)) > 100  # not a short decimal
    cost, left = doc["privacy_cost"]["epsilon"], doc["budget_left"]["epsilon"]
    for text in (cost, left):
        assert re.fullmatch(r"\d+\.\d+", text) and len(text.replace(".", "").lstrip("0")) <= 17
    assert Fraction(cost) >= exact and Fraction(cost) - exact < Fraction(1, 10**15)
    assert Fraction(left) <= 10 - exact and 10 - exact - Fraction(left) < Fraction(1, 10**15)
    (account,) = json.loads(_ok(run("budget", "show", "--format", "json")).stdout)
    assert account["spent"]["epsilon"] == cost and account["remaining"]["epsilon"] == left
    (entry,) = [
        e
        for e in json.loads(_ok(run("budget", "log", "--format", "json")).stdout)
        if e["kind"] == "release"
    ]
    assert entry["epsilon"] == cost
    text = " ".join((DOCS / "cli-conventions.md").read_text(encoding="utf-8").split())
    assert "rounded to 17 significant digits: up for an amount spent" in text


def test_explain_json_gives_numbers_and_query_json_decimal_strings(run: Run) -> None:
    """docs/cli-conventions.md: query's amounts are decimal strings; explain's are numbers."""
    asked = json.loads(_ok(run("query", "--format", "json", COUNT)).stdout)
    assert asked["privacy_cost"] == {"epsilon": "1", "delta": "0"}
    plan = json.loads(_ok(run("explain", "-a", "analyst", "--format", "json", COUNT)).stdout)
    assert plan["cost"] == {"epsilon": 1.0, "delta": 0.0}
    assert plan["budget"]["remaining"] == {"epsilon": 9.0, "delta": 1e-05}
    # ... and query's decimal strings beside them
    assert plan["privacy_cost"] == asked["privacy_cost"]
    assert plan["budget_left"] == {"epsilon": "9", "delta": "0.00001"} == asked["budget_left"]
    gauss = ("--mechanism", "gaussian", "--delta", "1e-6", COUNT)
    plan = json.loads(_ok(run("explain", "--format", "json", *gauss)).stdout)
    assert "budget_left" not in plan  # without --analyst there is no budget
    asked = json.loads(_ok(run("query", "--format", "json", *gauss)).stdout)
    assert plan["privacy_cost"] == asked["privacy_cost"]
    doc = " ".join((DOCS / "cli-conventions.md").read_text(encoding="utf-8").split())
    assert "adds `query`'s decimal strings beside them: `privacy_cost`, and with" in doc


def test_exit_codes(run: Run) -> None:
    assert run("query", COUNT).returncode == 0
    assert run("query", "SELECT * FROM adult").returncode == 1  # refused: SQLSTATE 42501
    assert run("query", "--no-such-option", COUNT).returncode == 2  # usage
    assert run("query").returncode == 2  # no SQL
    assert run("budget", "show", "--ledger", "memory").returncode == 1


def test_sql_from_a_file_or_standard_input(run: Run, home: Path) -> None:
    sql = home / "work" / "q.sql"
    sql.write_text("-- the count\nSELECT COUNT(*) FROM adult\n")
    out = _ok(run("query", "-f", str(sql), "--format", "csv")).stdout
    assert out.splitlines()[0] == "count"
    out = _ok(run("query", "--file", "-", "--format", "csv", stdin=sql.read_text())).stdout
    assert out.splitlines()[0] == "count"
    assert "rewritten SQL" in _ok(run("explain", "-f", str(sql))).stdout
    assert run("query", "-f", str(sql), COUNT).returncode == 2
    gone = run("query", "-f", str(home / "missing.sql"))
    assert gone.returncode == 2 and "cannot read -f" in gone.stderr


def test_query_log_is_json_at_its_level(run: Run, home: Path) -> None:
    log = home / "query.log"
    _ok(run("query", "--log", str(log), COUNT))  # default level warning: a release is not logged
    assert not log.exists() or log.read_text() == ""
    _ok(run("query", "--log", str(log), "--log-level", "info", "SELECT SUM(age) FROM adult"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["level"] for r in records] == ["info"] and "released" in records[0]["msg"]
    assert records[0]["msg"] == "released 1 rows for analyst at ε=1"
    # serve's release fields (docs/cli-conventions.md), without serve's ms, direct, linger, pid
    assert {k: v for k, v in records[0].items() if k not in ("time", "msg")} == {
        "level": "info",
        "event": "release",
        "user": "analyst",
        "rows": 1,
        "cost": "ε=1",
    }


# ----------------------------------------------------------------------- dpproxy.toml


def test_a_config_file_leaves_only_the_sql(run: Run, home: Path, demo_db: Path) -> None:
    (home / "work" / "dpproxy.toml").write_text(
        f'database = "{demo_db}"\nschema = "{demo_schema_path()}"\nledger = "team.sqlite"\n'
        'user = "ana"\n\n[profile.solo]\nuser = "bo"\nledger = "memory"\n'
    )
    ledger = home / "work" / "team.sqlite"  # relative to the file's directory
    proc = _ok(run("query", COUNT))
    assert f"budget left for 'ana' in ledger {ledger}: ε=9" in proc.stderr
    assert _ok(run("budget", "show", "ana", "--format", "csv")).stdout.count("\nana,") == 1
    # a profile overrides the top level, before or after the subcommand
    for args in (["--profile", "solo", "query", COUNT], ["query", COUNT, "--profile=solo"]):
        assert "for 'bo' in memory" in _ok(run(*args)).stderr
    assert "for 'bo' in memory" in _ok(run("query", COUNT, DPPROXY_PROFILE="solo")).stderr
    # $DPPROXY_LEDGER outranks the file's ledger; the command line outranks both
    assert "for 'ana' in memory" in _ok(run("query", COUNT, DPPROXY_LEDGER="memory")).stderr
    assert "for 'cy' in memory" in _ok(run("query", "-a", "cy", "--ledger", "memory", COUNT)).stderr


def test_a_config_file_serves_and_checks_without_options(
    run: Run, home: Path, demo_db: Path
) -> None:
    (home / "work" / "dpproxy.toml").write_text(
        f'database = "{demo_db}"\nschema = "{demo_schema_path()}"\nledger = "memory"\n'
        'listen = "127.0.0.1:0"\n'
    )
    assert ": ok (dataset adult" in _ok(run("schema", "check")).stdout
    proc, log, port = _serve(home, listen=False)
    try:
        with psycopg.connect(f"postgresql://ana@127.0.0.1:{port}/dpproxy", autocommit=True) as c:
            assert c.execute(COUNT).fetchall()
    finally:
        _stop(proc)
    assert json.loads(log.read_text().splitlines()[0])["ledger"] == "memory"


def test_config_found_in_the_user_directory_or_named(run: Run, home: Path) -> None:
    cfg = home / "cfg" / "dpproxy"
    cfg.mkdir(parents=True)
    (cfg / "dpproxy.toml").write_text('ledger = "memory"\nuser = "from-home"\n')
    assert "for 'from-home' in memory" in _ok(run("query", COUNT)).stderr
    named = home / "other.toml"
    named.write_text('ledger = "memory"\nuser = "named"\n')
    assert "for 'named' in memory" in _ok(run("query", COUNT, "--config", str(named))).stderr
    assert "for 'named' in memory" in _ok(run("query", COUNT, DPPROXY_CONFIG=str(named))).stderr


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ('databse = "x.duckdb"\n', [], "unknown key 'databse'"),
        ('[profile.p]\nlisten_on = "1"\n', [], "unknown key 'listen_on' in [profile.p]"),
        ("user = 3\n", [], "key 'user'"),
        ('user = "a"\n', ["--profile", "nope"], "there is no profile 'nope'"),
        ("user = \n", [], "is not valid TOML"),
    ],
)
def test_a_bad_config_file_is_an_error_naming_the_key(
    run: Run, home: Path, text: str, args: list[str], expected: str
) -> None:
    (home / "work" / "dpproxy.toml").write_text(text)
    proc = run(*args, "query", COUNT)
    assert proc.returncode == 1 and expected in proc.stderr, proc.stderr
    assert "SQLSTATE 22023" in proc.stderr and "Traceback" not in proc.stderr


def test_config_missing_file_is_an_error(run: Run, home: Path) -> None:
    proc = run("--config", str(home / "nope.toml"), "query", COUNT)
    assert proc.returncode == 1 and "does not exist" in proc.stderr


# ----------------------------------------------------------------------- serve: logs, hint


def _serve(
    home: Path, *args: str, listen: bool = True, **env: str
) -> tuple[subprocess.Popen[str], Path, int]:
    log = home / "serve.log"
    where = ["--listen", "127.0.0.1:0"] if listen else []
    with log.open("w") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "dpproxy", "serve", "--trust", *where, *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            cwd=home / "work",
            env=_env(home, **env),
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"dpproxy serving on \('127\.0\.0\.1', (\d+)\)", log.read_text())
        if m:
            return proc, log, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("serve did not start:\n" + log.read_text())


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


def test_serve_logs_json_lines_and_each_release_once(home: Path, demo_db: Path) -> None:
    proc, log, port = _serve(home)
    try:
        with psycopg.connect(f"postgresql://ana@127.0.0.1:{port}/dpproxy", autocommit=True) as c:
            c.execute(COUNT).fetchall()
            c.execute("SELECT AVG(age) FROM adult").fetchall()
    finally:
        _stop(proc)
    records = [json.loads(line) for line in log.read_text().splitlines()]  # every line is JSON
    first, second = records[0], records[1]
    assert first["event"] == "ledger" and first["ledger"].endswith("ledger.sqlite")
    assert second["event"] == "listen" and second["address"] == f"127.0.0.1:{port}"
    releases = [r for r in records if "released" in r["msg"]]
    assert len(releases) == 2 and all(r["event"] == "release" for r in releases)


def test_an_error_that_keeps_serve_from_starting_is_an_error_not_a_log_line(
    run: Run, home: Path, demo_db: Path
) -> None:
    bad = home / "work" / "bad.yaml"
    bad.write_text("version: 1\n", encoding="utf-8")
    db = ("--database", str(demo_db), "--schema", str(bad))
    proc = run("serve", "--trust", "--listen", "127.0.0.1:0", *db)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("ERROR:  the privacy schema ") and "(SQLSTATE ZD004)" in lines[0]
    assert lines[-1].startswith("HINT:  ") and not any(ln.startswith("{") for ln in lines)


def test_serve_log_level(home: Path, demo_db: Path) -> None:
    proc, log, _ = _serve(home, "--ledger", "memory", DPPROXY_LOG_LEVEL="debug")
    _stop(proc)
    assert json.loads(log.read_text().splitlines()[0])["level"] == "warning"  # --ledger memory
    proc = subprocess.run(
        [sys.executable, "-m", "dpproxy", "serve", "--log-level", "loud"],
        capture_output=True,
        text=True,
        env=_env(home),
        check=False,
    )
    assert proc.returncode == 2 and "debug" in proc.stderr
    # at level error the lifecycle lines (ledger, address, shutdown) are still written
    proc, log, _ = _serve(home, "--log-level", "error")
    _stop(proc)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records] == ["ledger", "listen", "stopping", "shutdown"]
    assert {r["level"] for r in records} == {"info"}


def test_the_hint_names_the_steward_when_the_schema_allows_no_delta(
    home: Path, demo_db: Path
) -> None:
    text = demo_schema_path().read_text()
    zero = home / "zero.yaml"
    zero.write_text(text.replace("delta: 1.0e-6", "delta: 0", 1))
    proc, _, port = _serve(home, "--database", str(demo_db), "--schema", str(zero))
    try:
        with psycopg.connect(f"postgresql://ana@127.0.0.1:{port}/dpproxy", autocommit=True) as c:
            with pytest.raises(psycopg.Error) as grouped:
                c.execute("SELECT fnlwgt, COUNT(*) FROM adult GROUP BY fnlwgt")
            diag = grouped.value.diag
            assert diag.sqlstate == "ZD003"
            assert diag.message_hint is not None and "data steward" in diag.message_hint
            assert "domain" in diag.message_hint and "privacy.delta" in diag.message_hint
            with pytest.raises(psycopg.Error) as raised:  # the circle the old hint sent to
                c.execute("SET dpproxy.delta = 0.000001")
            assert raised.value.diag.sqlstate == "42501"
    finally:
        _stop(proc)
