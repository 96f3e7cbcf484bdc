"""``dpproxy user`` and the users file: real CLI runs, real files, real SCRAM checks.

A verifier in the file is checked the only way that matters: a SCRAM client with the password
authenticates against it, and one with another password does not.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import scramp  # test extra: a SCRAM client independent of ours
from click.testing import CliRunner, Result

from dpproxy.server.scram import AuthenticationFailed, ScramExchange, Verifier
from dpproxy.server.users import UsersFileError, UserStore, default_users_path
from dpproxy.server.users_cli import user
from tests.commands import dpproxy_command

_ERROR = re.compile(r"^ERROR:\s+(?P<message>.+?)\s+\(SQLSTATE (?P<code>[0-9A-Z]{5})\)$", re.M)


def run(path: Path, *args: str, input: str | None = None, **kw: Any) -> Result:
    return CliRunner().invoke(user, ["--users", str(path), *args], input=input, **kw)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def error_code(result: Result) -> str:
    assert result.exit_code == 1, result.output
    match = _ERROR.search(result.stderr)
    assert match, result.stderr
    assert "Traceback" not in result.output
    return match.group("code")


def authenticates(verifier: Verifier | None, password: str) -> bool:
    """Whether a scramp client with ``password`` passes a ScramExchange against ``verifier``."""
    exchange = ScramExchange(verifier, user="u")
    client = scramp.ScramClient(["SCRAM-SHA-256"], "u", password)
    client.set_server_first(exchange.server_first(client.get_client_first().encode()).decode())
    try:
        final = exchange.server_final(client.get_client_final().encode())
    except AuthenticationFailed:
        return False
    client.set_server_final(final.decode())
    return exchange.authenticated


def load(path: Path) -> UserStore:
    return UserStore(path).load()


@pytest.fixture
def users(tmp_path: Path) -> Path:
    return tmp_path / "conf" / "users.json"


# --------------------------------------------------------------------------- round trip


def test_add_list_remove_round_trip(users: Path) -> None:
    ok(run(users, "add", "ana", "--password-stdin", input="s3cret ana\n"))
    ok(run(users, "add", "bob", "--password-stdin", input="hunter2\n"))
    listed = ok(run(users, "list"))
    assert listed.stdout.splitlines() == ["ana", "bob"]
    assert "SCRAM" not in listed.output  # names only, never verifiers

    store = load(users)
    assert authenticates(store.verifier("ana"), "s3cret ana")  # spaces kept, newline not
    assert not authenticates(store.verifier("ana"), "hunter2")
    assert authenticates(store.verifier("bob"), "hunter2")

    removed = ok(run(users, "remove", "ana"))
    assert "ana" in removed.stdout
    assert ok(run(users, "list")).stdout.splitlines() == ["bob"]
    assert load(users).verifier("ana") is None


def test_the_file_is_0600_in_a_0700_directory_and_holds_no_password(users: Path) -> None:
    old_umask = os.umask(0)  # even with a permissive umask
    try:
        ok(run(users, "add", "ana", "--password-stdin", input="Pa55-w0rd!\n"))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    assert stat.S_IMODE(users.parent.stat().st_mode) == 0o700
    raw = users.read_bytes()
    assert b"Pa55-w0rd!" not in raw
    data = json.loads(raw)
    assert data["version"] == 1
    entry = data["users"]["ana"]
    assert set(entry) == {"verifier", "created"}
    assert entry["verifier"].startswith("SCRAM-SHA-256$4096:")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", entry["created"])


def test_interactive_prompt_with_confirmation(users: Path) -> None:
    result = ok(run(users, "add", "ana", input="typed pw\ntyped pw\n"))
    assert "typed pw" not in result.output  # hidden input is not echoed
    assert authenticates(load(users).verifier("ana"), "typed pw")


def test_prompt_mismatch_writes_nothing(users: Path) -> None:
    result = run(users, "add", "ana", input="one\ntwo\n")
    assert result.exit_code != 0
    assert "do not match" in result.output
    assert not users.exists()


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(["--password-stdin"], "\n"), (["--password-stdin"], ""), ([], "\n\n")],
    ids=["stdin-empty-line", "stdin-eof", "prompt-empty"],
)
def test_empty_password_is_refused(users: Path, args: list[str], stdin: str) -> None:
    result = run(users, "add", "ana", *args, input=stdin)
    assert error_code(result) == "22023"
    assert "password cannot be empty" in result.stderr
    assert not users.exists()


def test_existing_user_needs_replace(users: Path) -> None:
    ok(run(users, "add", "ana", "--password-stdin", input="first\n"))
    before = users.read_bytes()
    created = json.loads(before)["users"]["ana"]["created"]

    refused = run(users, "add", "ana", "--password-stdin", input="second\n")
    assert error_code(refused) == "22023"
    assert "already exists" in refused.stderr and "--replace" in refused.stderr
    assert users.read_bytes() == before

    changed = ok(run(users, "add", "ana", "--replace", "--password-stdin", input="second\n"))
    assert "changed the password" in changed.stdout
    store = load(users)
    assert authenticates(store.verifier("ana"), "second")
    assert not authenticates(store.verifier("ana"), "first")
    assert json.loads(users.read_bytes())["users"]["ana"]["created"] == created
    assert store.names() == ["ana"]


def test_replace_of_a_new_user_adds_it(users: Path) -> None:
    ok(run(users, "add", "ana", "--replace", "--password-stdin", input="pw\n"))
    assert authenticates(load(users).verifier("ana"), "pw")


def test_remove_unknown_user(users: Path) -> None:
    result = run(users, "remove", "ghost")
    assert error_code(result) == "22023"
    assert 'user "ghost" does not exist' in result.stderr
    assert not users.exists()


def test_list_of_a_missing_file_is_empty(users: Path) -> None:
    assert ok(run(users, "list")).stdout == ""
    assert not users.exists()


@pytest.mark.parametrize("name", ["", "x" * 64, "a\0b", "   "])
def test_bad_user_names_are_refused(users: Path, name: str) -> None:
    result = run(users, "add", name, "--password-stdin", input="pw\n")
    assert error_code(result) == "22023"
    assert not users.exists()


def test_longest_name(users: Path) -> None:
    ok(run(users, "add", "x" * 63, "--password-stdin", input="pw\n"))
    assert load(users).names() == ["x" * 63]


def test_unicode_names_and_passwords(users: Path) -> None:
    ok(run(users, "add", "zoë", "--password-stdin", input="\u2168 café\n"))
    verifier = load(users).verifier("zoë")
    assert authenticates(verifier, "\u2168 café")
    assert authenticates(verifier, "IX café")  # SASLprep: NFKC on both sides


# --------------------------------------------------------------------------- corruption


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON (line 1"),
        ("[]", "expected a JSON object"),
        ('{"version": 2, "users": {}}', "unsupported version 2"),
        ('{"version": 1}', '"users" must be an object'),
        ('{"version": 1, "users": {"ana": "plaintext"}}', "users.'ana'"),
        ('{"version": 1, "users": {"ana": {"verifier": "SCRAM-SHA-256$1:x$y:z"}}}', "verifier"),
        ('{"version": 1, "users": {"": {"verifier": "x"}}}', "cannot be empty"),
    ],
)
def test_corrupt_file_is_a_clear_error(users: Path, content: str, problem: str) -> None:
    users.parent.mkdir()
    users.write_text(content)
    for args in (["list"], ["add", "bob", "--password-stdin"], ["remove", "ana"]):
        result = run(users, *args, input="pw\n")
        assert error_code(result) == "F0000"
        assert str(users) in result.stderr
        assert problem in result.stderr
    assert users.read_text() == content  # never overwritten


def test_unreadable_file_is_a_clear_error(users: Path) -> None:
    users.parent.mkdir()
    users.write_bytes(b'{"version": 1, "users": {"\xff": {}}}')  # not UTF-8
    result = run(users, "list")
    assert error_code(result) == "F0000"
    assert str(users) in result.stderr and "cannot read it" in result.stderr


def test_a_directory_is_not_a_users_file(users: Path) -> None:
    users.mkdir(parents=True)
    result = run(users, "list")
    assert result.exit_code == 2  # click's usage error, naming the path
    assert str(users) in result.output and "is a directory" in result.output


# ------------------------------------------------------------------------ atomic writes


def test_save_replaces_the_file_atomically(users: Path) -> None:
    ok(run(users, "add", "ana", "--password-stdin", input="pw\n"))
    with users.open("rb") as old:
        inode = os.fstat(old.fileno()).st_ino
        ok(run(users, "add", "bob", "--password-stdin", input="pw\n"))
        # The old file was replaced, not rewritten: a reader holding it sees it whole.
        assert json.loads(old.read())["users"].keys() == {"ana"}
    assert users.stat().st_ino != inode
    assert load(users).names() == ["ana", "bob"]
    assert [p.name for p in users.parent.iterdir()] == ["users.json"]  # no temp files left


def test_failed_save_leaves_the_old_file_and_no_temp_file(
    users: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(run(users, "add", "ana", "--password-stdin", input="pw\n"))
    before = users.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpproxy.server.users.os.replace", broken_replace)
    result = run(users, "add", "bob", "--password-stdin", input="pw\n")
    assert error_code(result) == "F0000"
    assert "cannot write" in result.stderr and str(users) in result.stderr
    assert users.read_bytes() == before
    assert [p.name for p in users.parent.iterdir()] == ["users.json"]


def test_store_api(users: Path) -> None:
    store = UserStore(users).load()
    assert store.names() == [] and store.verifier("ana") is None
    store.add("ana", "pw")
    assert not users.exists()  # only save() writes
    store.save()
    assert authenticates(UserStore(users).load().verifier("ana"), "pw")
    store.remove("ana")
    store.save()
    assert UserStore(users).load().names() == []
    users.write_text("{")
    with pytest.raises(UsersFileError) as info:
        UserStore(users).load()
    assert info.value.sqlstate == "F0000" and str(users) in info.value.message


# ------------------------------------------------------------------------- default path


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DPPROXY_USERS", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert default_users_path() == tmp_path / "home" / ".config" / "dpproxy" / "users.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    assert default_users_path() == tmp_path / "home" / ".config" / "dpproxy" / "users.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_users_path() == tmp_path / "xdg" / "dpproxy" / "users.json"
    monkeypatch.setenv("DPPROXY_USERS", str(tmp_path / "explicit.json"))
    assert default_users_path() == tmp_path / "explicit.json"


def test_cli_uses_and_shows_the_default_path(tmp_path: Path) -> None:
    target = tmp_path / "from-env.json"
    env = {"DPPROXY_USERS": str(target)}
    runner = CliRunner()
    help_text = runner.invoke(user, ["--help"], env=env).output
    assert f"[default:{target}]" in "".join(help_text.split())  # however it is wrapped
    ok(runner.invoke(user, ["add", "ana", "--password-stdin"], input="pw\n", env=env))
    assert load(target).names() == ["ana"]


def test_every_command_has_help() -> None:
    assert user.help
    for name, command in user.commands.items():
        assert command.help, name
        for param in command.params:
            if param.param_type_name == "option":
                assert getattr(param, "help", None), (name, param.name)


# --------------------------------------------------------------------------- subprocess


def _command() -> list[str]:
    """``dpproxy user``, the real command."""
    return [*dpproxy_command(), "user"]


def test_real_process_round_trip(users: Path) -> None:
    env = {**os.environ, "DPPROXY_USERS": str(users)}

    def go(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*_command(), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    added = go("add", "ana", "--password-stdin", stdin="from a pipe\n")
    assert added.returncode == 0, added.stderr
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    assert b"from a pipe" not in users.read_bytes()
    assert authenticates(load(users).verifier("ana"), "from a pipe")
    listed = go("list")
    assert (listed.returncode, listed.stdout) == (0, "ana\n")
    again = go("add", "ana", "--password-stdin", stdin="x\n")
    assert again.returncode == 1
    assert "(SQLSTATE 22023)" in again.stderr and "Traceback" not in again.stderr
