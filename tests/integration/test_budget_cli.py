"""``dpproxy budget``: the ledger administered from real CLI processes.

Every test has a ledger file of its own in ``tmp_path`` and passes it with ``--ledger``
(the session sets ``DPPROXY_LEDGER=memory``, which the budget commands refuse). Queries that
spend are real ``dpproxy query --ledger FILE`` processes over the demo; the file is read back
with the :class:`Ledger` API, and tampered with through plain ``sqlite3``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpproxy.accounting import budget_cli
from dpproxy.accounting.budget_cli import budget as budget_group
from dpproxy.accounting.budget_cli import format_duration, parse_duration
from dpproxy.accounting.ledger import Ledger, ReleaseRecord
from dpproxy.catalog.model import Catalog
from dpproxy.errors import InvalidParameter
from dpproxy.values import Cost
from tests.commands import dpproxy_command

_ERROR = re.compile(r"^ERROR:\s+(?P<message>.+?)\s+\(SQLSTATE (?P<code>[0-9A-Z]{5})\)$", re.M)
Proc = subprocess.CompletedProcess[str]


def _run(*args: str, env: dict[str, str] | None = None) -> Proc:
    return subprocess.run(
        [*dpproxy_command(), *args],
        stdin=subprocess.DEVNULL,  # never a terminal: nothing may wait for an answer
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def budget(ledger: Path | str, *args: str) -> Proc:
    return _run("budget", "--ledger", str(ledger), *args)


def query(ledger: Path, sql: str, *args: str) -> Proc:
    return _run("query", "--ledger", str(ledger), *args, sql)


def ok(p: Proc) -> Proc:
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    return p


def error_code(p: Proc) -> str:
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    match = _ERROR.search(p.stderr)
    assert match, p.stderr
    return match.group("code")


def shown(ledger: Path, *args: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(
        ok(budget(ledger, "show", *args, "--format", "json")).stdout
    )
    return out


def logged(ledger: Path, *args: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(
        ok(budget(ledger, "log", *args, "--format", "json")).stdout
    )
    return out


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "state" / "ledger.sqlite"


def open_ledger(path: Path, catalog: Catalog) -> Ledger:
    return Ledger(path, catalog.dataset, catalog.policy.budget)


def spend(path: Path, catalog: Catalog, analyst: str, eps: str, sql: str = "SELECT 1") -> None:
    """A release committed in this process, as an engine would (reserve, then commit)."""
    led = open_ledger(path, catalog)
    try:
        r = led.reserve(analyst, Cost(Fraction(eps)), ReleaseRecord(sql, "count(*):gs", "laplace"))
        led.commit(r)
    finally:
        led.close()


# ------------------------------------------------------------------------- grant and show


def test_grant_then_show_exact_values(ledger: Path, demo_catalog: Catalog) -> None:
    granted = ok(
        budget(ledger, "grant", "ana", "--epsilon", "2.5", "--delta", "1e-6", "--period", "30d")
    )
    assert 'granted analyst "ana" ε=2.5, δ=1e-06, renewing every 30d' in granted.stdout
    assert re.search(r"^ana +\| analyst \| +2\.5 \| 0\.000001 \| +0 \|", granted.stdout, re.M)

    [ana] = shown(ledger, "ana")
    assert ana["principal"] == "ana" and ana["kind"] == "analyst" and ana["opened"]
    assert ana["total"] == {"epsilon": "2.5", "delta": "0.000001"}
    assert ana["spent"] == {"epsilon": "0", "delta": "0", "rho": "0"}
    assert ana["remaining"] == {"epsilon": "2.5", "delta": "0.000001"}
    assert (ana["period"], ana["period_seconds"]) == ("30d", 30 * 86400)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ana["period_start"])
    assert ana["groups"] == [] and not ana["renewal_pending"]

    # Omitted --delta and --period keep the account's; amounts are exact fractions.
    ok(budget(ledger, "grant", "ana", "--epsilon", "0.1"))
    spend(ledger, demo_catalog, "ana", "1/30")
    [ana] = shown(ledger, "ana")
    assert ana["total"] == {"epsilon": "0.1", "delta": "0.000001"}
    # no short decimal: 17 significant digits, spent rounded up, what is left rounded down
    assert ana["spent"]["epsilon"] == "0.033333333333333334"
    assert ana["remaining"]["epsilon"] == "0.066666666666666666"
    assert ana["period"] == "30d"
    led = open_ledger(ledger, demo_catalog)
    account = led.account("ana")
    assert account is not None and account.total == Cost(Fraction(1, 10), Fraction(1, 10**6))
    led.close()

    ok(budget(ledger, "grant", "ana", "--epsilon", "3", "--period", "none"))
    [ana] = shown(ledger, "ana")
    assert (ana["period"], ana["period_seconds"]) == (None, None)
    assert ana["spent"]["epsilon"] == "0.033333333333333334"  # a grant never forgets spending

    everyone = ok(budget(ledger, "show")).stdout
    assert f"ledger {ledger} (dataset adult)" in everyone
    assert "(1 row)" in everyone


def test_unknown_analyst_is_shown_with_the_default_budget(
    ledger: Path, demo_catalog: Catalog, multi_db: Any
) -> None:
    missing = budget(ledger, "show")
    assert error_code(missing) == "22023"
    assert f"there is no ledger at {ledger}" in missing.stderr
    assert not ledger.exists()

    ok(budget(ledger, "grant", "ana", "--epsilon", "1"))
    table = ok(budget(ledger, "show", "bob")).stdout
    assert 'analyst "bob" has not used this ledger yet' in table
    assert "default budget, ε=10, δ=1e-05" in table
    [bob] = shown(ledger, "bob")
    assert not bob["opened"]
    assert bob["total"]["epsilon"] == "10"
    assert bob["spent"]["epsilon"] == "0" and bob["remaining"]["epsilon"] == "10"
    led = open_ledger(ledger, demo_catalog)
    assert led.account("bob") is None  # showing opens nothing
    led.close()

    nope = budget(ledger, "show", "nope", "--group")
    assert error_code(nope) == "22023"
    assert 'no group "nope"' in nope.stderr and "grant --group" in nope.stderr

    # Another schema: another dataset (no accounts yet) and its own default budget.
    other = ["--schema", str(multi_db.schemas["visits_rows"])]
    assert json.loads(ok(budget(ledger, *other, "show", "--format", "json")).stdout) == []
    visits = json.loads(ok(budget(ledger, *other, "show", "bob", "--format", "json")).stdout)
    assert visits[0]["total"]["epsilon"] == "10"
    assert "(dataset visits)" in ok(budget(ledger, *other, "show")).stdout


def test_memory_is_refused(ledger: Path) -> None:
    explicit = budget("memory", "show")
    assert error_code(explicit) == "22023"
    assert "memory" in explicit.stderr and "--ledger FILE" in explicit.stderr
    # The session's DPPROXY_LEDGER=memory is the default here: refused the same way.
    implicit = _run("budget", "grant", "ana", "--epsilon", "1")
    assert error_code(implicit) == "22023" and "memory" in implicit.stderr
    assert ok(_run("budget", "show", "--help")).stdout.startswith("Usage: dpproxy budget show")


@pytest.mark.parametrize("period", ["0s", "30", "3x", "-1d", "1.5h", "d", ""])
def test_bad_durations_are_refused(ledger: Path, period: str) -> None:
    p = budget(ledger, "grant", "ana", "--epsilon", "1", "--period", period)
    assert error_code(p) == "22023"
    assert "renewal period" in p.stderr and "30d" in p.stderr
    assert not ledger.exists()  # refused before anything was opened


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--epsilon", "abc"], "epsilon must be a finite number"),
        (["--epsilon", "-1"], "epsilon must be non-negative"),
        (["--epsilon", "1", "--delta", "1"], "delta must be below 1"),
        (["--epsilon", "inf"], "epsilon must be a finite number"),
    ],
)
def test_bad_amounts_are_refused(ledger: Path, args: list[str], problem: str) -> None:
    p = budget(ledger, "grant", "ana", *args)
    assert error_code(p) == "ZD003"
    assert problem in p.stderr


def test_durations() -> None:
    assert [parse_duration(t) for t in ("30d", "12h", "3600s", "1w", "90m", "NONE", " 2D ")] == [
        2592000,
        43200,
        3600,
        604800,
        5400,
        None,
        172800,
    ]
    assert [format_duration(s) for s in (2592000, 43200, 3600, 604800, 5400, 61, None)] == [
        "30d",
        "12h",
        "1h",
        "1w",
        "90m",
        "61s",
        "none",
    ]
    with pytest.raises(InvalidParameter):
        parse_duration("1y")


# ----------------------------------------------------------------- spending through the ledger


def test_a_query_spends_through_the_same_ledger(ledger: Path, demo_db: Path) -> None:
    first = ok(query(ledger, "SELECT COUNT(*) FROM adult"))
    released = first.stdout.splitlines()[2].strip()
    assert "privacy cost: ε=1;" in first.stderr

    [analyst] = shown(ledger)
    assert analyst["principal"] == "analyst" and analyst["opened"]
    assert analyst["spent"]["epsilon"] == "1" and analyst["remaining"]["epsilon"] == "9"

    [release] = [e for e in logged(ledger) if e["kind"] == "release"]
    assert release["principal"] == "analyst"
    assert release["query"] == "SELECT COUNT(*) FROM adult"
    assert release["plan"].startswith("count(*):gs")
    assert release["mechanism"] == "laplace"
    assert (release["epsilon"], release["delta"]) == ("1", "0")
    assert set(release) == {
        "seq",
        "time",
        "kind",
        "principal",
        "epsilon",
        "delta",
        "rho",
        "groups",
        "reservation",
        "query",
        "plan",
        "mechanism",
        "answer",  # the answer cache's key (a hash; the steward console shows that answer)
    }  # what was asked and how: never a value
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", release["time"])

    again = ok(query(ledger, "select count(*)  from adult"))  # the same query, normalised
    assert "from the cache" in again.stderr and "privacy cost: ε=0" in again.stderr
    assert again.stdout.splitlines()[2].strip() == released
    assert shown(ledger)[0]["spent"]["epsilon"] == "1"
    assert [e["kind"] for e in logged(ledger)] == ["open", "reserve", "release"]

    table = ok(budget(ledger, "log", "analyst", "--limit", "1")).stdout
    assert "| release | analyst   |" in table and "SELECT COUNT(*) FROM adult" in table
    assert "(1 row)" in table and released not in table
    assert ok(budget(ledger, "verify")).stdout.startswith("ledger OK: 3 entries\nhead: ")


def test_a_group_caps_its_analysts(ledger: Path, demo_db: Path) -> None:
    missing = budget(ledger, "member", "add", "team", "ana")
    assert error_code(missing) == "22023"  # no ledger yet
    ok(budget(ledger, "grant", "team", "--group", "--epsilon", "1.5"))
    assert error_code(budget(ledger, "member", "add", "other", "ana")) == "22023"
    added = ok(budget(ledger, "member", "add", "team", "ana"))
    assert added.stdout == 'added analyst "ana" to group "team"\n'
    assert "already" in ok(budget(ledger, "member", "add", "team", "ana")).stdout

    ok(query(ledger, "SELECT COUNT(*) FROM adult", "--analyst", "ana"))
    refused = query(ledger, "SELECT COUNT(*) FROM adult WHERE age > 30", "--analyst", "ana")
    assert error_code(refused) == "ZD001"
    assert "group 'team'" in refused.stderr and "dpproxy budget grant" in refused.stderr

    [team] = shown(ledger, "team", "--group")
    assert team["members"] == ["ana"]
    assert team["spent"]["epsilon"] == "1" and team["remaining"]["epsilon"] == "0.5"
    ana, group = shown(ledger, "ana")
    assert ana["groups"] == ["team"] and group["principal"] == "team"
    assert ana["can_spend"]["epsilon"] == "0.5"
    assert ana["spent"]["epsilon"] == "1" and ana["remaining"]["epsilon"] == "9"
    table = ok(budget(ledger, "show", "ana")).stdout
    assert 'analyst "ana" can still spend ε=0.5' in table

    team_log = logged(ledger, "team")  # the group's own entries and what was charged to it
    assert [e["kind"] for e in team_log] == ["grant", "join", "reserve", "release"]

    removed = ok(budget(ledger, "member", "remove", "team", "ana"))
    assert removed.stdout == 'removed analyst "ana" from group "team"\n'
    not_in = budget(ledger, "member", "remove", "team", "ana")
    assert error_code(not_in) == "22023" and "is not in group" in not_in.stderr
    ok(query(ledger, "SELECT COUNT(*) FROM adult WHERE age > 30", "--analyst", "ana"))
    assert shown(ledger, "team", "--group")[0]["spent"]["epsilon"] == "1"
    assert ok(budget(ledger, "verify")).stdout.startswith("ledger OK: ")


def test_a_renewing_budget_starts_afresh(
    ledger: Path, demo_db: Path, demo_catalog: Catalog
) -> None:
    ok(budget(ledger, "grant", "ana", "--epsilon", "1", "--period", "1s"))
    ok(query(ledger, "SELECT COUNT(*) FROM adult", "--analyst", "ana"))  # all of ε=1
    led = open_ledger(ledger, demo_catalog)
    account = led.account("ana")  # the stored row: a renewal is written only at a use
    led.close()
    assert account is not None
    time.sleep(max(0.0, account.period_start + 1.05 - time.time()))  # once, ≤ 1.05 s

    before = logged(ledger)
    [ana] = shown(ledger, "ana")  # shown as renewed, without writing anything
    assert ana["renewal_pending"] and ana["spent"]["epsilon"] == "0"
    assert ana["remaining"]["epsilon"] == "1"
    assert "* a new period has begun" in ok(budget(ledger, "show", "ana")).stdout
    assert logged(ledger) == before

    # Another ε=1 query fits only in a new period: the reservation renews the account first.
    ok(query(ledger, "SELECT COUNT(*) FROM adult WHERE age > 30", "--analyst", "ana"))
    kinds = [e["kind"] for e in logged(ledger, "ana")][len(before) :]
    assert kinds[:3] == ["renew", "reserve", "release"]  # (a later period may begin after)
    assert ok(budget(ledger, "verify")).stdout.startswith("ledger OK: ")


# --------------------------------------------------------------------------------- reset


def test_reset_needs_yes_without_a_terminal(ledger: Path, demo_catalog: Catalog) -> None:
    ok(budget(ledger, "grant", "ana", "--epsilon", "5"))
    spend(ledger, demo_catalog, "ana", "2")

    refused = budget(ledger, "reset", "ana")
    assert error_code(refused) == "22023"
    assert "not a terminal" in refused.stderr and "--yes" in refused.stderr
    assert shown(ledger, "ana")[0]["spent"]["epsilon"] == "2"

    done = ok(budget(ledger, "reset", "ana", "--yes"))
    assert 'reset analyst "ana": spent ε=2 forgotten; ε=5' in done.stdout
    assert shown(ledger, "ana")[0]["spent"]["epsilon"] == "0"
    assert logged(ledger, "ana", "--limit", "1")[0]["kind"] == "reset"

    unknown = budget(ledger, "reset", "bob", "--yes")
    assert error_code(unknown) == "22023" and 'no analyst "bob"' in unknown.stderr
    assert error_code(budget(ledger, "reset", "ana", "--group", "--yes")) == "22023"
    assert ok(budget(ledger, "verify")).stdout.startswith("ledger OK: ")


def test_reset_asks_at_a_terminal(
    ledger: Path, demo_catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget_cli, "_interactive", lambda: True)
    ok(budget(ledger, "grant", "ana", "--epsilon", "5"))
    spend(ledger, demo_catalog, "ana", "2")
    args = ["--ledger", str(ledger), "reset", "ana"]

    no = CliRunner().invoke(budget_group, args, input="n\n")
    assert no.exit_code == 1 and 'Forget everything analyst "ana" has spent' in no.output
    assert shown(ledger, "ana")[0]["spent"]["epsilon"] == "2"

    yes = CliRunner().invoke(budget_group, args, input="y\n")
    assert yes.exit_code == 0, yes.output
    assert shown(ledger, "ana")[0]["spent"]["epsilon"] == "0"


# -------------------------------------------------------------------------------- verify


def _build(path: Path, catalog: Catalog) -> None:
    """A ledger of 8 entries: grant, open, two reserve/release pairs, a group and a join."""
    led = open_ledger(path, catalog)
    try:
        led.grant("ana", Cost(Fraction(5)))
        led.grant("team", Cost(Fraction(3)), group=True)
        led.add_member("team", "ana")
        for sql in ("SELECT COUNT(*) FROM adult", "SELECT AVG(age) FROM adult"):
            r = led.reserve("ana", Cost(Fraction(1)), ReleaseRecord(sql, "gs", "laplace"))
            led.commit(r)
        led.remaining("bob")  # opens bob's account
    finally:
        led.close()


def _tamper(path: Path, *statements: str) -> None:
    con = sqlite3.connect(path)
    with con:
        for s in statements:
            con.execute(s)
    con.close()


def _edited_body(path: Path, seq: int) -> str:
    con = sqlite3.connect(path)
    body = json.loads(con.execute("SELECT body FROM log WHERE seq = ?", (seq,)).fetchone()[0])
    con.close()
    body["eps"] = "1/10"
    return json.dumps(body, sort_keys=True).replace("'", "''")


@pytest.mark.parametrize(
    ("tamper", "problems"),
    [
        (
            lambda p: ["UPDATE accounts SET spent_eps = '0/1' WHERE principal = 'ana'"],
            ["analyst 'ana': spent ε=0 but the log says ε=2"],
        ),
        (
            lambda p: ["DELETE FROM log WHERE seq = 5"],
            ["entry 5 is missing (next is 6)", "entry 6: the link to the previous entry is broken"],
        ),
        (
            lambda p: [f"UPDATE log SET body = '{_edited_body(p, 6)}' WHERE seq = 6"],
            ["entry 6: its contents do not match its hash", "spent ε=2 but the log says ε=1.1"],
        ),
        (
            lambda p: ["UPDATE log SET body = 'not json' WHERE seq = 7"],
            ["entry 7: its contents do not match its hash", "entry 7: its body cannot be read"],
        ),
    ],
    ids=["account-edited", "entry-deleted", "body-edited", "body-garbled"],
)
def test_verify_names_every_problem(
    ledger: Path, demo_catalog: Catalog, tamper: Any, problems: list[str]
) -> None:
    _build(ledger, demo_catalog)
    assert ok(budget(ledger, "verify")).stdout.startswith("ledger OK: 8 entries\nhead: ")
    _tamper(ledger, *tamper(ledger))
    p = budget(ledger, "verify")
    assert error_code(p) == "ZD006"
    assert f"ledger {ledger} failed verification" in p.stderr
    for problem in problems:
        assert problem in p.stderr
    assert "HINT:" in p.stderr and p.stdout == ""


def test_a_damaged_account_is_an_error_not_a_traceback(ledger: Path, demo_catalog: Catalog) -> None:
    _build(ledger, demo_catalog)
    _tamper(ledger, "UPDATE accounts SET total_eps = 'lots' WHERE principal = 'ana'")
    p = budget(ledger, "show")
    assert error_code(p) == "ZD006"
    assert "is damaged" in p.stderr and "budget verify" in p.stderr
    not_a_ledger = ledger.parent / "notes.txt"
    not_a_ledger.write_text("hello " * 1000)
    assert error_code(budget(not_a_ledger, "show")) == "22023"


# ---------------------------------------------------------------------------------- help

SUBCOMMANDS = ["show", "grant", "reset", "member add", "member remove", "log", "verify"]


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help_with_an_example(command: str) -> None:
    p = ok(_run("budget", *command.split(), "--help"))
    assert p.stdout.startswith(f"Usage: dpproxy budget {command}")
    assert f"    dpproxy budget {command.split()[0]}" in p.stdout  # the example, verbatim


def test_every_option_has_help() -> None:
    def walk(group: Any) -> list[Any]:
        found = []
        for cmd in group.commands.values():
            found += walk(cmd) if hasattr(cmd, "commands") else [cmd]
        return found

    for command in [budget_group, *walk(budget_group)]:
        assert command.help and len(command.help) > 20, command.name
        for param in command.params:
            if param.param_type_name == "option":
                assert getattr(param, "help", None), (command.name, param.name)
