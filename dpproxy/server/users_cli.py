"""``dpproxy user``: manage the users file of ``dpproxy serve`` (add, remove, list).

Passwords are read from a hidden prompt or one line of standard input, turned into salted
SCRAM-SHA-256 verifiers at once and never printed, logged or stored.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from dpproxy.errors import DPProxyError, InvalidParameter
from dpproxy.output import fail, format_option, print_records
from dpproxy.server.users import ENV_USERS, UserStore, default_users_path


def _fail(err: DPProxyError) -> NoReturn:
    """Print an error as every dpproxy command does (``dpproxy.output.fail``) and exit 1."""
    ctx = click.get_current_context(silent=True)
    fail(err, ctx.params.get("fmt", "table") if ctx is not None else "table")


def _relocate(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``user list --users F``: the group's option, accepted after the subcommand too."""
    store = ctx.find_object(UserStore)
    if value is not None and store is not None:
        ctx.find_root().meta["dpproxy.users"] = UserStore(value)


_USERS_AFTER = click.option(
    "--users",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    expose_value=False,
    callback=_relocate,
    help="As `dpproxy user --users FILE`.",
)


class _UsersPathOption(click.Option):
    """``--users``: its default is worked out when used, so help shows the path in force."""

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return str(default_users_path())


def _store(ctx: click.Context) -> UserStore:
    store = ctx.find_root().meta.get("dpproxy.users") or ctx.find_object(UserStore)
    if store is None:  # a command run outside the `user` group
        raise click.UsageError("run this command as `dpproxy user ...`")
    try:
        return store.load()
    except DPProxyError as err:
        _fail(err)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--users",
    "users_file",
    cls=_UsersPathOption,
    metavar="FILE",
    show_default=True,
    type=click.Path(dir_okay=False),
    help=f"The users file (${ENV_USERS}, else $XDG_CONFIG_HOME/dpproxy/users.json, "
    "else ~/.config/dpproxy/users.json).",
)
@click.pass_context
def user(ctx: click.Context, users_file: str) -> None:
    """Manage who may log in to `dpproxy serve` (SCRAM-SHA-256 password users).

    The users file holds salted SCRAM verifiers, never passwords, and is written
    atomically with mode 0600.
    """
    ctx.obj = UserStore(users_file)


@user.command("add")
@_USERS_AFTER
@click.argument("name")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from the first line of standard input instead of a prompt.",
)
@click.option("--replace", is_flag=True, help="Change the password of a user that already exists.")
@click.option(
    "--role",
    type=click.Choice(["analyst", "steward"]),
    default=None,
    help="analyst (the default for a new user): queries through serve; steward: also the "
    "steward console (dpproxy console). With --replace, unchanged unless given.",
)
@click.pass_context
def user_add(
    ctx: click.Context, name: str, password_stdin: bool, replace: bool, role: str | None
) -> None:
    """Add user NAME (or change its password with --replace).

    The password is asked twice at a hidden prompt, or read from standard input:

    \b
        printf '%s\\n' "$PASSWORD" | dpproxy user add ana --password-stdin
    """
    store = _store(ctx)
    if name in store and not replace:
        _fail(
            InvalidParameter(
                f'user "{name}" already exists', hint="use --replace to change its password"
            )
        )
    if password_stdin:
        line = sys.stdin.readline()
        password = line.removesuffix("\n").removesuffix("\r")
    else:
        password = click.prompt(
            "Password",
            default="",
            show_default=False,
            hide_input=True,
            confirmation_prompt=True,
        )
    if not password:
        _fail(InvalidParameter("the password cannot be empty"))
    existed = name in store
    try:
        store.add(name, password, replace=replace)
        if role is not None:
            store.set_role(name, role)
        store.save()
    except DPProxyError as err:
        _fail(err)
    verb = "changed the password of" if existed else "added"
    shown = f" ({store.role(name)})" if store.role(name) != "analyst" else ""
    click.echo(f'{verb} user "{name}"{shown} in {store.path}')


@user.command("remove")
@_USERS_AFTER
@click.argument("name")
@click.pass_context
def user_remove(ctx: click.Context, name: str) -> None:
    """Remove user NAME from the users file: it can no longer log in."""
    store = _store(ctx)
    try:
        store.remove(name)
        store.save()
    except DPProxyError as err:
        _fail(err)
    click.echo(f'removed user "{name}" from {store.path}')


@user.command("list")
@_USERS_AFTER
@format_option("Output format: the names one a line (table), CSV or JSON.")
@click.pass_context
def user_list(ctx: click.Context, fmt: str) -> None:
    """Print the user names, one a line (never their verifiers).

    \b
        dpproxy user list --users /srv/dpproxy/users.json --format json
    """
    names = list(_store(ctx).names())
    if fmt == "table":
        for name in names:
            click.echo(name)
    else:
        print_records(["name"], [[n] for n in names], fmt, key="users")
