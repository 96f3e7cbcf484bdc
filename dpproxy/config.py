"""``dpproxy.toml``: the settings of every command in one file, so a command needs only its SQL.

Found at ``--config FILE``, else ``$DPPROXY_CONFIG``, else ``./dpproxy.toml``, else
``$XDG_CONFIG_HOME/dpproxy/dpproxy.toml`` (``~/.config/dpproxy/dpproxy.toml``); no file is no
settings. Top-level keys apply to every command; ``[profile.NAME]`` tables add to and override
them when chosen with ``--profile NAME`` (or ``$DPPROXY_PROFILE``). An option on the command
line overrides the file. An unknown key, a value that is not a string or a missing profile is
an error naming it (SQLSTATE 22023, exit 1). Relative paths are relative to the file's
directory. ``--config`` and ``--profile`` are accepted anywhere on the command line, before or
after the subcommand.

    database = "people.duckdb"
    schema = "people.yaml"

    [profile.prod]
    database = "postgresql://dpproxy@db.internal:5432/hr"
    ledger = "/srv/dpproxy/ledger.sqlite"
    users = "/srv/dpproxy/users.json"
    listen = "0.0.0.0:6432"
    tls_cert = "/srv/dpproxy/server.crt"
    tls_key = "/srv/dpproxy/server.key"
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from dpproxy.errors import DPProxyError, InvalidParameter

CONFIG_ENV = "DPPROXY_CONFIG"
PROFILE_ENV = "DPPROXY_PROFILE"
FILE_NAME = "dpproxy.toml"

# Each key → the (command, parameter) pairs it supplies a default for.
TARGETS: dict[str, tuple[tuple[str, str], ...]] = {
    "database": (
        ("query", "database"),
        ("explain", "database"),
        ("serve", "database"),
        ("schema check", "database"),
        ("schema init", "database"),
    ),
    "schema": (
        ("query", "schema"),
        ("explain", "schema"),
        ("serve", "schema"),
        ("budget", "schema"),
        ("schema check", "files"),  # `dpproxy schema check` with no FILES checks this one
    ),
    "ledger": (
        ("query", "ledger"),
        ("explain", "ledger"),
        ("serve", "ledger"),
        ("budget", "ledger_file"),
    ),
    "users": (("serve", "users_path"), ("user", "users_file")),
    "listen": (("serve", "listen"),),
    "tls_cert": (("serve", "tls_cert"),),
    "tls_key": (("serve", "tls_key"),),
    "user": (("query", "analyst"), ("explain", "analyst")),
}
_PATHS = {"database", "schema", "ledger", "users", "tls_cert", "tls_key"}


def find_config(explicit: str | None) -> Path | None:
    """The file in force: ``explicit``, ``$DPPROXY_CONFIG``, ``./dpproxy.toml``, then the
    user's configuration directory; None when there is none (an explicit file must exist)."""
    named = explicit or os.environ.get(CONFIG_ENV)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            source = "--config" if explicit else f"${CONFIG_ENV}"
            raise InvalidParameter(
                f"configuration file {path} ({source}) does not exist",
                hint=f"create it, or unset {source}; `dpproxy --help` shows the keys",
            )
        return path
    here = Path.cwd() / FILE_NAME
    if here.is_file():
        return here
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    home = Path(base) / "dpproxy" / FILE_NAME
    return home if home.is_file() else None


def _check(table: dict[str, Any], where: str, path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in table.items():
        if key not in TARGETS:
            import difflib  # only for an unknown key's suggestion

            close = difflib.get_close_matches(key, sorted(TARGETS), n=1)
            raise InvalidParameter(
                f"unknown key {key!r} in {where} of {path}",
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + "the keys are "
                + ", ".join(sorted(TARGETS))
                + " (and [profile.NAME] tables of them)",
            )
        if not isinstance(value, str) or not value:
            raise InvalidParameter(
                f"key {key!r} in {where} of {path} must be a non-empty string",
                hint=f'write it in quotes: {key} = "..."',
            )
        if key in _PATHS and "://" not in value and value != "memory":
            value = str((path.parent / Path(value).expanduser()).resolve())
        out[key] = value
    return out


def load_settings(path: Path, profile: str | None) -> dict[str, str]:
    """The keys in force from ``path``: the top level, overridden by ``[profile.NAME]``."""
    import tomllib  # only when there is a settings file

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InvalidParameter(f"{path} is not valid TOML: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidParameter(f"cannot read the configuration file {path}: {e}") from e
    profiles = data.pop("profile", {})
    if not isinstance(profiles, dict) or not all(isinstance(p, dict) for p in profiles.values()):
        raise InvalidParameter(
            f"'profile' in {path} must hold tables", hint="write [profile.NAME] tables"
        )
    settings = _check(data, "the top level", path)
    for name, table in profiles.items():  # every profile is checked, chosen or not
        checked = _check(table, f"[profile.{name}]", path)
        if name == profile:
            settings.update(checked)
    if profile is not None and profile not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise InvalidParameter(
            f"there is no profile {profile!r} in {path}",
            hint=f"the profiles there: {known}; add a [profile.{profile}] table",
        )
    return settings


# An environment variable of dpproxy's own outranks the file (flags > environment > file).
_ENV_FIRST = {"ledger": "DPPROXY_LEDGER", "users": "DPPROXY_USERS"}


#: The subcommands of ``dpproxy``: name → ``module:attribute``.
LAZY_COMMANDS = {
    "budget": "dpproxy.accounting.budget_cli:budget",
    "console": "dpproxy.console.command:console",
    "data": "dpproxy.cli.data:data",
    "demo": "dpproxy.cli.demo:demo",
    "explain": "dpproxy.cli.query:explain",
    "query": "dpproxy.cli.query:query",
    "schema": "dpproxy.cli.schema:schema",
    "serve": "dpproxy.cli.serve:serve",
    "user": "dpproxy.server.users_cli:user",
}


def default_map(settings: dict[str, str]) -> dict[str, Any]:
    """click's ``default_map`` for the command tree: command → (subcommand →) parameter →
    value."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if os.environ.get(_ENV_FIRST.get(key, "")):
            continue
        for command, param in TARGETS[key]:
            node = out
            for part in command.split():
                node = node.setdefault(part, {})
            node[param] = [value] if param == "files" else value
    return out


def _extract(args: list[str]) -> tuple[list[str], str | None, str | None]:
    """Take ``--config F`` / ``--profile P`` (or ``=``) out of ``args`` wherever they are, up
    to a ``--``; a value that is missing is a usage error."""
    rest: list[str] = []
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        name, eq, value = a.partition("=")
        if name in ("--config", "--profile"):
            if not eq:
                if i + 1 >= len(args):
                    raise click.UsageError(f"option {name} requires an argument")
                value = args[i + 1]
                i += 1
            found[name] = value
        else:
            rest.append(a)
        i += 1
    return rest, found.get("--config"), found.get("--profile")


#: True once :meth:`ConfigGroup.main` parsed this process's own command line
#: (``dpproxy ...``, ``python -m dpproxy ...``): the process is a command's alone and ends with
#: it. False when a caller runs the command in its own process (``main([...])``, click's
#: ``CliRunner``).
OWN_PROCESS = False


def own_process() -> None:
    """Mark this process as a ``dpproxy`` command's own (:data:`OWN_PROCESS`): at its exit,
    :func:`gc.freeze` first, so the full garbage collections of the interpreter's shutdown do
    not walk every object the imports built (about 0.01 s of CPU per collection with sqlglot
    loaded). Python does not promise to finalize objects still alive at exit; the collections
    still run over nothing, and the standard streams and ``atexit`` handlers (the operator's
    log) are flushed and run as before."""
    global OWN_PROCESS
    if not OWN_PROCESS:
        OWN_PROCESS = True
        import atexit

        atexit.register(gc.freeze)


@contextmanager
def command_imports() -> Iterator[None]:
    """Around a one-shot command's imports (the engine, sqlglot, DuckDB: most of its start-up).

    No garbage collection runs while they import: the objects they build (modules, classes,
    functions, sqlglot's tables) live as long as the process, and each full collection over
    them costs about 0.01 s of CPU (benchmarks/STARTUP.md). Afterwards, in the command's own
    process (:data:`OWN_PROCESS`) they are frozen (:func:`gc.freeze`): later collections skip
    them. In a caller's process nothing is frozen, so none of its garbage is kept; only the
    collections are deferred to the first allocation after the imports. The collector's prior
    state (enabled or not) is restored.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if OWN_PROCESS:
            gc.freeze()
        if enabled:
            gc.enable()


class ConfigGroup(click.Group):
    """The ``dpproxy`` group: reads ``dpproxy.toml`` into the defaults of every command.

    Every subcommand is imported only when it runs or help lists the commands
    (:data:`LAZY_COMMANDS`), so a ``dpproxy query`` does not load the code of the others.
    """

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        if args is None:  # this process's own command line
            own_process()
        return super().main(args, *rest, **extra)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            import importlib

            module, _, attr = LAZY_COMMANDS[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args, config, profile = _extract(args)
        rest = super().parse_args(ctx, args)
        profile = profile or os.environ.get(PROFILE_ENV) or None
        try:
            path = find_config(config)
            if path is None:
                if profile is not None:
                    raise InvalidParameter(
                        f"--profile {profile}: there is no configuration file",
                        hint=f"create ./{FILE_NAME} or ~/.config/dpproxy/{FILE_NAME}, or "
                        "pass --config FILE",
                    )
                return rest
            settings = load_settings(path, profile)
        except DPProxyError as err:
            from dpproxy.output import fail

            fail(err)
        ctx.meta["dpproxy.config"] = path
        merged = default_map(settings)
        for command, params in (ctx.default_map or {}).items():
            merged.setdefault(command, {}).update(params)
        ctx.default_map = merged
        return rest
