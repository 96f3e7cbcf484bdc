"""``dpproxy budget``: administer the durable budget ledger (show, grant, reset, member, log,
verify).

Everything here goes through :class:`dpproxy.accounting.ledger.Ledger`, so every change is a
hash-chained log entry written in the same transaction as the account it changes. Amounts are
read and shown exactly: ``--epsilon 0.1`` is the fraction 1/10, never a float.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from fractions import Fraction
from typing import Any

import click

from dpproxy.accounting.budget_support import (
    FORMAT_OPTION,
    GROUP_OPTION,
    LedgerOption,
    Settings,
    account_view,
    exact_amount,
    fail_command,
    format_duration,
    group_members,
    iso_time,
    located,
    open_ledger,
    other_datasets,
    parse_duration,
    print_views,
    reported_at,
    short_amount,
    within_groups,
)
from dpproxy.accounting.ledger import Account, LogEntry
from dpproxy.errors import DPProxyError, InvalidParameter, LedgerTampered, PrivacyParameterError
from dpproxy.output import print_records
from dpproxy.values import Cost, parse_privacy_number

# --------------------------------------------------------------------------- the commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--ledger",
    "ledger_file",
    cls=LedgerOption,
    metavar="FILE",
    show_default=True,
    help="The SQLite budget ledger ($DPPROXY_LEDGER, else "
    "~/.local/share/dpproxy/ledger.sqlite); `memory` is refused.",
)
@click.option(
    "--schema",
    "-s",
    metavar="FILE",
    help="The privacy schema: its dataset names the accounts and its privacy.budget is the "
    "default budget (default: the bundled demo schema, dataset adult).",
)
@click.pass_context
def budget(ctx: click.Context, ledger_file: str, schema: str | None) -> None:
    """Administer the durable privacy-budget ledger that `dpproxy query`, `explain -a` and
    `serve` share: show accounts, grant and reset budgets, manage groups, read the release log
    and verify its hash chain. --ledger and --schema go before or after the subcommand.

    \b
        dpproxy budget show --ledger /srv/dpproxy/ledger.sqlite
    """
    ctx.obj = Settings(ledger_file, schema)


@budget.command("show")
@located
@click.argument("name", required=False)
@GROUP_OPTION
@FORMAT_OPTION
@click.pass_context
def budget_show(ctx: click.Context, name: str | None, group: bool, fmt: str) -> None:
    """Show the accounts: total, spent, reserved and remaining ε and δ, the renewal period
    and when the current period began. With NAME, only that analyst (and their groups) or,
    with --group, that group. An analyst never seen is shown with the default budget they
    would get on first use.

    \b
        dpproxy budget show
        dpproxy budget show ana --format json
    """
    ledger = open_ledger(ctx)
    now = time.time()
    with reported_at(str(ledger.path)):
        membership = group_members(ledger)
        if name is None:
            views = [account_view(a, now, membership) for a in ledger.accounts()]
        else:
            found = ledger.account(name, group=group)
            if found is None and group:
                fail_command(
                    InvalidParameter(
                        f'there is no group "{name}" in the ledger',
                        hint="create it with `dpproxy budget grant --group NAME --epsilon E`",
                    )
                )
            opened = found is not None
            if found is None:
                found = Account(
                    name, "analyst", ledger.default_budget, Cost.zero(), Cost.zero(), None, now
                )
            views = [account_view(found, now, membership, opened)]
            if not group:
                for g in views[0].groups:
                    ga = ledger.account(g, group=True)
                    if ga is not None:
                        views.append(account_view(ga, now, membership))
        views = [within_groups(v, ledger, now) for v in views]
    if name is not None and not views[0].opened and fmt == "table":
        click.echo(
            f'analyst "{name}" has not used this ledger yet: on first use they get the '
            f"default budget, {ledger.default_budget}"
        )
    print_views(views, fmt, ledger)
    if not views and fmt != "json":
        other_datasets(ledger, "accounts")
    if name is not None and not group and len(views) > 1 and fmt == "table":
        left = views[0].can_spend
        click.echo(f'analyst "{name}" can still spend {left} (the least of every account)')


@budget.command("grant")
@located
@click.argument("name")
@click.option(
    "--epsilon",
    "-e",
    required=True,
    metavar="EPS",
    help="The total ε (exact: 2.5 is 5/2); spending so far is kept. 0 freezes the account.",
)
@click.option(
    "--delta",
    metavar="DELTA",
    help="The total δ, below 1 (default: the account's current δ, else the schema's "
    "privacy.budget δ).",
)
@GROUP_OPTION
@click.option(
    "--period",
    metavar="DURATION",
    help="Renew the budget (spending back to zero) every DURATION: 3600s, 90m, 12h, 30d, 1w; "
    "`none` stops renewing (default: unchanged).",
)
@FORMAT_OPTION
@click.pass_context
def budget_grant(
    ctx: click.Context,
    name: str,
    epsilon: str,
    delta: str | None,
    group: bool,
    period: str | None,
    fmt: str,
) -> None:
    """Set the total budget of analyst NAME (or, with --group, of group NAME), creating the
    account if needed, and print it. What was spent stays spent: use reset to forget it.

    \b
        dpproxy budget grant ana --epsilon 5 --delta 1e-6 --period 30d
        dpproxy budget grant team --group --epsilon 20
    """
    try:
        eps = parse_privacy_number(epsilon, "epsilon", allow_zero=True)
        new_delta = None if delta is None else parse_privacy_number(delta, "delta", allow_zero=True)
        if new_delta is not None and new_delta >= 1:
            raise PrivacyParameterError(f"delta must be below 1, got {delta!r}")
        seconds = None if period is None else parse_duration(period)
    except DPProxyError as err:
        fail_command(err)
    ledger = open_ledger(ctx, create=True)
    with reported_at(str(ledger.path)):
        current = ledger.account(name, group=group)
        if new_delta is None:
            new_delta = current.total.delta if current else ledger.default_budget.delta
        if period is None:
            seconds = current.period_seconds if current else None
        granted = ledger.grant(name, Cost(eps, new_delta), group=group, period_seconds=seconds)
        now = time.time()
        view = within_groups(account_view(granted, now, group_members(ledger)), ledger, now)
    if fmt == "table":
        renew = f", renewing every {format_duration(seconds)}" if seconds else ""
        kind = "group" if group else "analyst"
        click.echo(f'granted {kind} "{name}" {granted.total}{renew}')
    print_views([view], fmt, ledger)


def _interactive() -> bool:
    """Whether someone can answer a confirmation prompt."""
    return sys.stdin.isatty()


@budget.command("reset")
@located
@click.argument("name")
@GROUP_OPTION
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def budget_reset(ctx: click.Context, name: str, group: bool, yes: bool) -> None:
    """Forget what analyst NAME (or group NAME) has spent: a new budget period, by hand.
    The reset is logged. Asks for confirmation unless --yes; without a terminal, --yes is
    required.

    \b
        dpproxy budget reset ana --yes
    """
    ledger = open_ledger(ctx)
    kind = "group" if group else "analyst"
    with reported_at(str(ledger.path)):
        current = ledger.account(name, group=group)
    if current is None:
        fail_command(InvalidParameter(f'there is no {kind} "{name}" in the ledger'))
    if not yes:
        if not _interactive():
            fail_command(
                InvalidParameter(
                    f'refusing to reset {kind} "{name}" without confirmation: standard input '
                    "is not a terminal",
                    hint="pass --yes",
                )
            )
        click.confirm(f'Forget everything {kind} "{name}" has spent ({current.spent})?', abort=True)
    with reported_at(str(ledger.path)):
        after = ledger.reset(name, group=group)
    click.echo(f'reset {kind} "{name}": spent {current.spent} forgotten; {after.remaining} left')


@budget.group("member")
def member() -> None:
    """Put analysts into budget groups or take them out: a query is charged to the analyst
    and to every group of theirs, and must fit in all of them."""


@member.command("add")
@located
@click.argument("group_name", metavar="GROUP")
@click.argument("analyst")
@click.pass_context
def member_add(ctx: click.Context, group_name: str, analyst: str) -> None:
    """Add ANALYST to GROUP (created beforehand with `dpproxy budget grant --group`).

    \b
        dpproxy budget member add team ana
    """
    ledger = open_ledger(ctx)
    with reported_at(str(ledger.path)):
        if analyst in group_members(ledger).get(group_name, []):
            click.echo(f'analyst "{analyst}" is already in group "{group_name}"')
            return
        ledger.add_member(group_name, analyst)
    click.echo(f'added analyst "{analyst}" to group "{group_name}"')


@member.command("remove")
@located
@click.argument("group_name", metavar="GROUP")
@click.argument("analyst")
@click.pass_context
def member_remove(ctx: click.Context, group_name: str, analyst: str) -> None:
    """Remove ANALYST from GROUP: their later queries are no longer charged to it.

    \b
        dpproxy budget member remove team ana
    """
    ledger = open_ledger(ctx)
    with reported_at(str(ledger.path)):
        if analyst not in group_members(ledger).get(group_name, []):
            fail_command(InvalidParameter(f'analyst "{analyst}" is not in group "{group_name}"'))
        ledger.remove_member(group_name, analyst)
    click.echo(f'removed analyst "{analyst}" from group "{group_name}"')


def _about(e: LogEntry, name: str) -> bool:
    """Whether a log entry concerns analyst or group ``name``."""
    b = e.body
    return e.principal == name or name in b.get("groups", ()) or b.get("group") == name


def _entry_json(e: LogEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": e.seq,
        "time": iso_time(e.time, ms=True),
        "kind": e.kind,
        "principal": e.principal,
    }
    for key, value in sorted(e.body.items()):
        if key in ("eps", "delta", "rho"):
            # what an account was granted or opened with: down; what was spent: up
            up = e.kind not in ("grant", "open", "renew")
            out[{"eps": "epsilon"}.get(key, key)] = exact_amount(Fraction(value), up=up)
        elif key == "token":
            out["reservation"] = value
        elif key == "kind":  # the kind of account a grant, reset or renewal is about
            out["account_kind"] = value
        elif key == "period_start":
            out[key] = iso_time(float(value), ms=True)
        else:
            out[key] = value
    return out


def _detail(e: LogEntry) -> str:
    b = e.body
    parts: list[str] = []
    if e.kind == "release":
        if "query" in b:
            parts.append(f"{b['query']}  [plan {b.get('plan')}; {b.get('mechanism')}]")
        if "failed" in b:
            parts.append(f"failed with {b['failed']}: charged, nothing released")
        parts.append(f"reservation {str(b.get('token', ''))[:8]}")
    elif e.kind == "grant":
        parts.append(f"total ({b['kind']})")
        if b.get("period_seconds"):
            parts.append(f"renewing every {format_duration(b['period_seconds'])}")
    elif e.kind == "open":
        parts.append("account opened with the default budget")
    elif e.kind in ("join", "leave"):
        parts.append(f"group {b['group']}")
    elif e.kind == "renew":
        parts.append(f"new {b['kind']} period from {iso_time(float(b['period_start']))}")
    elif e.kind == "reset":
        parts.append(f"{b['kind']} spending forgotten")
    elif e.kind == "expire":
        parts.append("its process had gone: counted as spent")
    elif e.kind in ("reserve", "rollback"):
        parts.append(f"reservation {str(b.get('token', ''))[:8]}")
    if b.get("groups"):
        parts.append(f"groups {', '.join(b['groups'])}")
    return "; ".join(parts)


@budget.command("log")
@located
@click.argument("name", required=False)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1),
    metavar="N",
    help="Only the last N entries (default: all).",
)
@FORMAT_OPTION
@click.pass_context
def budget_log(ctx: click.Context, name: str | None, limit: int | None, fmt: str) -> None:
    """Print the release log, oldest first: sequence number, time (UTC), kind, principal,
    ε and δ, and for each release the normalised query, its plan and its mechanism. The log
    holds no released value. With NAME, only the entries about that analyst or group.

    \b
        dpproxy budget log ana --limit 20
    """
    import json

    ledger = open_ledger(ctx)
    with reported_at(str(ledger.path)):
        entries = ledger.entries()
        if name is not None:
            entries = [e for e in entries if _about(e, name)]
        if limit is not None:
            entries = entries[-limit:]
        if fmt == "json":
            click.echo(json.dumps([_entry_json(e) for e in entries], indent=2, ensure_ascii=False))
            return
        rows = []
        for e in entries:
            b = e.body
            eps = short_amount(Fraction(b["eps"])) if "eps" in b else ""
            delta = short_amount(Fraction(b["delta"])) if "delta" in b else ""
            rows.append([str(e.seq), iso_time(e.time), e.kind, e.principal, eps, delta, _detail(e)])
    print_records(["seq", "time", "kind", "principal", "ε", "δ", "detail"], rows, fmt)
    if not rows and name is None:
        other_datasets(ledger, "log entries")


@budget.command("verify")
@located
@click.pass_context
def budget_verify(ctx: click.Context) -> None:
    """Recompute the log's hash chain over the whole file and replay the log against the
    accounts: an edited, inserted or deleted entry, or an account changed behind the log's
    back, is reported (SQLSTATE ZD006, exit status 1).

    \b
        dpproxy budget verify
    """
    ledger = open_ledger(ctx)
    where = str(ledger.path)
    try:
        result = ledger.verify()
    except (ValueError, KeyError, TypeError) as err:  # an entry too damaged to replay
        fail_command(
            LedgerTampered(
                f"ledger {where} failed verification",
                problems=(f"the log cannot be replayed: {type(err).__name__}: {err}",),
                hint="restore the ledger from a backup",
            )
        )
    except (DPProxyError, sqlite3.Error) as err:
        with reported_at(where):
            raise err
    if not result.ok:
        n = len(result.problems)
        fail_command(
            LedgerTampered(
                f"ledger {where} failed verification: {n} problem{'s' if n != 1 else ''} "
                f"in {result.entries} entries",
                problems=result.problems,
                hint="the ledger was changed outside dpproxy: restore it from a backup",
            )
        )
    click.echo(f"ledger OK: {result.entries} entries")
    click.echo(f"head: {result.head} (keep it to detect a truncated log later)")
