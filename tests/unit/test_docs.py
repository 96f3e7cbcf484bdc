"""Docs are part of the feature: every CLI command has help text and is listed in the README."""

from __future__ import annotations

from pathlib import Path

import click

from dpproxy.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, cmd in group.commands.items():
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
            group = group.commands[part]
        assert group.help and len(group.help.strip()) > 20, f"{' '.join(path)} has no help text"
        assert f"dpproxy {' '.join(path)}" in README, f"{' '.join(path)} is not in README.md"
        for param in group.params:
            if isinstance(param, click.Option):
                assert param.help, f"option {param.name} of {' '.join(path)} has no help"
