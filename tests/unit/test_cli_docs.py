"""README's "Command line" paragraph and docs/cli-conventions.md say what the commands do: the
exit-code tables, the config keys, the --format choices and the logging switches are read
from the code here (the behaviour itself: tests/integration/test_cli_conventions.py)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from dpproxy import output
from dpproxy.cli import main
from dpproxy.config import TARGETS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOC = (ROOT / "docs" / "cli-conventions.md").read_text(encoding="utf-8")


def _command(*path: str) -> click.Command:
    cmd: click.Command = main
    for part in path:
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(click.Context(cmd), part)  # lazily imported ones too
        assert sub is not None, part
        cmd = sub
    return cmd


def _exit_table(text: str, header: str) -> dict[int, str]:
    start = text.index(header)
    rows = re.findall(r"^\| (\d) \| (.+?) \|$", text[start : start + 1500], re.M)
    return {int(code): meaning for code, meaning in rows}


def test_the_exit_code_tables_match_the_code() -> None:
    for text, header in ((README, "| exit status | meaning |"), (DOC, "| status | meaning |")):
        table = _exit_table(text, header)
        assert sorted(table) == [output.EXIT_OK, output.EXIT_ERROR, output.EXIT_USAGE]
        assert table[output.EXIT_OK] == "success"
        assert "SQLSTATE" in table[output.EXIT_ERROR]
        assert "cannot be parsed" in table[output.EXIT_USAGE]
    assert "[docs/cli-conventions.md](docs/cli-conventions.md)" in README


def test_the_documented_config_keys_are_the_code_s() -> None:
    m = re.search(r"The keys are (.+?)\. Their values", " ".join(DOC.split()))
    assert m
    assert re.findall(r"`(\w+)`", m.group(1)) == sorted(TARGETS)
    for key in TARGETS:
        assert f"{key} = " in DOC  # the example shows every key


def test_every_command_named_offers_the_same_formats() -> None:
    m = re.search(r"offered by (.+?), the commands that print data\.", " ".join(DOC.split()))
    assert m
    named = re.findall(r"`([a-z ]+)`", m.group(1))
    assert len(named) == 7
    for name in named:
        (fmt,) = [p for p in _command(*name.split()).params if p.name == "fmt"]
        assert isinstance(fmt.type, click.Choice)
        assert tuple(fmt.type.choices) == output.FORMATS == ("table", "csv", "json")
    assert set(named) == set(_with_format(main, ())), "every command with --format is named"


def _with_format(cmd: click.Command, path: tuple[str, ...]) -> list[str]:
    """The commands (space-joined paths) that have a --format option, the whole tree."""
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        return [
            found
            for name in cmd.list_commands(ctx)
            if (sub := cmd.get_command(ctx, name)) is not None
            for found in _with_format(sub, (*path, name))
        ]
    return [" ".join(path)] if any(p.name == "fmt" for p in cmd.params) else []


def test_log_level_is_an_option_and_an_environment_variable() -> None:
    (level,) = [p for p in _command("serve").params if p.name == "log_level"]
    assert isinstance(level, click.Option) and level.envvar == "DPPROXY_LOG_LEVEL"
    assert "`--log-level` (or `DPPROXY_LOG_LEVEL`)" in README
    assert "`--log-level debug|info|warning|error`" in DOC


def test_the_files_the_doc_names_exist() -> None:
    for path in re.findall(r"`((?:tests|dpproxy)/[\w/.-]+\.py)`", DOC):
        assert (ROOT / path).is_file(), path


def test_the_readme_cost_lines_are_the_code_s() -> None:
    """The README's transcripts show the cost line as ``report_answer`` prints it for the
    default ledger (in the home directory, shown with ``~``)."""
    from fractions import Fraction

    from dpproxy.values import Cost

    default = Path.home() / ".local" / "share" / "dpproxy" / "ledger.sqlite"
    assert output.ledger_label(str(default)) == "~/.local/share/dpproxy/ledger.sqlite"
    left = Cost(Fraction(9), Fraction(1e-5))  # the demo schema's δ, a YAML float
    line = f"privacy cost: {output.cost_text(Cost(Fraction(1), Fraction(0)))}; " + (
        output.budget_line("analyst", str(default), left)
    )
    text = " ".join(README.split())
    assert line in text
    assert text.count("budget left for 'analyst': ") == 0  # the old form, no ledger named
