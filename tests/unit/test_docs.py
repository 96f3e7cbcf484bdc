"""Docs are part of the feature: every CLI command has help text and is written about in the
README or a page of docs/;
SECURITY.md names a test for every invariant, and every file it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import click

from dpproxy.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECURITY = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
# README.md and the hand-written pages of the docs site (docs/cli.md's reference is generated
# from the commands, so it would list every command whatever the docs say).
WRITTEN = "\n".join(
    [README] + [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))]
)


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the lazily imported subcommands included
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        path = (*prefix, name)
        if isinstance(cmd, click.Group):
            found += _commands(cmd, path)
        else:
            found.append(path)
    return found


def test_every_command_has_help_and_a_readme_entry() -> None:
    commands = _commands(main)
    assert commands, "the CLI has no commands"
    for path in commands:
        group: click.Command = main
        for part in path:
            assert isinstance(group, click.Group)
            sub = group.get_command(click.Context(group), part)
            assert sub is not None, part
            group = sub
        assert group.help and len(group.help.strip()) > 20, f"{' '.join(path)} has no help text"
        assert f"dpproxy {' '.join(path)}" in WRITTEN, f"{' '.join(path)} is in no written doc"
        for param in group.params:
            if isinstance(param, click.Option):
                assert param.help, f"option {param.name} of {' '.join(path)} has no help"


def _paths(text: str) -> set[str]:
    """The repository files a document names in backticks (``tests/…py``, ``dpproxy/…py``)."""
    return set(re.findall(r"`((?:tests|dpproxy)/[\w/.-]+\.py)`", text))


def test_security_names_only_files_that_exist() -> None:
    named = _paths(SECURITY)
    assert len([p for p in named if p.startswith("tests/")]) >= 10
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"SECURITY.md names files that do not exist: {missing}"


def test_every_invariant_of_security_names_its_tests() -> None:
    invariants = re.findall(r"^\*\*\(([a-i])\) (.*?)(?=^\*\*\(|^## )", SECURITY, re.M | re.S)
    assert [letter for letter, _ in invariants] == list("abcdefghi")
    for letter, text in invariants:
        tested = text.split("Tested by", 1)
        assert len(tested) == 2, f"invariant ({letter}) names no test"
        assert _paths(tested[1]), f"invariant ({letter}) names no test file"


def _doc(name: str) -> str:
    return " ".join((ROOT / "docs" / name).read_text(encoding="utf-8").split())


def test_readme_states_the_invariant_and_links_security() -> None:
    """The README links SECURITY.md; the invariant moved with the threat model to
    docs/privacy.md and with the refusals to docs/sqlstates.md."""
    text = " ".join(README.split())
    assert "[SECURITY.md](SECURITY.md)" in text
    privacy, sqlstates = _doc("privacy.md"), _doc("sqlstates.md")
    for doc in (privacy, sqlstates):
        assert "rewritten SQL cannot fail on any database that satisfies the schema" in doc
    # the sentence about data-dependent errors names the property test that checks it
    for doc in (text, privacy, sqlstates):
        assert "cannot raise a data-dependent error" not in doc
    assert "`tests/property/test_totality.py` checks" in sqlstates
