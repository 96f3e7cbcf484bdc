"""``dpproxy budget``: administer the durable budget ledger (show, grant, reset, member, log,
verify).

Everything here goes through :class:`dpproxy.accounting.ledger.Ledger`, so every change is a
hash-chained log entry written in the same transaction as the account it changes. Amounts are
read and shown exactly: ``--epsilon 0.1`` is the fraction 1/10, never a float.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from dpproxy.accounting.ledger import MEMORY, Account, Ledger, LogEntry, ledger_setting
from dpproxy.errors import DPProxyError, InvalidParameter, LedgerTampered, PrivacyParameterError
from dpproxy.output import exact_text, fail, format_option, print_records, table_text
from dpproxy.values import Cost, parse_privacy_number

# --------------------------------------------------------------------------- errors and output


def _fail(err: DPProxyError) -> NoReturn:
    """Print an error as every dpproxy command does (``dpproxy.output.fail``): JSON on
    standard output under ``--format json``, else message, SQLSTATE and hint on stderr."""
    ctx = click.get_current_context(silent=True)
    fmt = ctx.params.get("fmt", "table") if ctx is not None else "table"
    fail(err, fmt)


_table = table_text
_exact = exact_text  # a decimal, the double a YAML float was, else 17 digits rounded up (or down)


def _short(f: Fraction) -> str:
    """An amount for a table: exact up to 10 significant digits, no exponent above 1e-6."""
    if f == 0:
        return "0"
    d = Decimal(f"{float(f):.10g}")
    text = format(d, "f") if d >= Decimal("0.000001") else format(d, "g")
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def _iso(t: float, *, ms: bool = False) -> str:
    """A Unix time as ISO 8601 in UTC (``2025-01-31T12:00:00Z``)."""
    spec = "milliseconds" if ms else "seconds"
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec=spec).replace("+00:00", "Z")


_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(\d+)\s*([wdhms])")


def parse_duration(text: str) -> int | None:
    """``30d``, ``12h``, ``90m``, ``3600s``, ``1w`` → seconds; ``none`` → no renewal."""
    hint = "a whole number and a unit: 3600s, 90m, 12h, 30d or 1w; `none` stops renewing"
    t = text.strip().lower()
    if t == "none":
        return None
    m = _DURATION.fullmatch(t)
    if m is None:
        raise InvalidParameter(f"invalid renewal period {text!r}", hint=hint)
    seconds = int(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise InvalidParameter(f"invalid renewal period {text!r}: it must be positive", hint=hint)
    return seconds


def format_duration(seconds: int | None) -> str:
    """Seconds in the largest unit that divides them (``2592000`` → ``30d``)."""
    if not seconds:
        return "none"
    for unit, size in _UNITS.items():
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"  # pragma: no cover (s divides everything)


# --------------------------------------------------------------------------- opening the ledger


@dataclass
class _Settings:
    ledger: str
    schema: str | None


class _LedgerOption(click.Option):
    """``--ledger``: its default is worked out when used, so help shows the file in force."""

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return ledger_setting(None, durable=True)


@contextmanager
def _reported(where: str) -> Iterator[None]:
    """Errors of the ledger as the house style; a damaged file is never a traceback."""
    try:
        yield
    except DPProxyError as err:
        _fail(err)
    except sqlite3.Error as err:
        _fail(
            InvalidParameter(
                f"cannot use the ledger {where}: {err}",
                hint="--ledger must name a dpproxy ledger (a SQLite file)",
            )
        )
    except (ValueError, KeyError, TypeError) as err:  # unreadable amounts or log entries
        _fail(
            LedgerTampered(
                f"the ledger {where} is damaged: {type(err).__name__}: {err}",
                hint="run `dpproxy budget verify`; restore the file from a backup",
            )
        )


def _settings(ctx: click.Context) -> _Settings:
    settings = ctx.find_object(_Settings)
    if settings is None:  # a command run outside the `budget` group
        raise click.UsageError("run this command as `dpproxy budget ...`")
    return settings


def _open(ctx: click.Context, *, create: bool = False) -> Ledger:
    """The ledger of ``--ledger`` for the dataset of ``--schema`` (closed with the command)."""
    settings = _settings(ctx)
    where = settings.ledger
    if where == MEMORY:
        _fail(
            InvalidParameter(
                "the ledger is `memory`: budgets kept inside one process leave nothing to "
                "administer",
                hint="give a ledger file: dpproxy budget --ledger FILE ... (or set "
                "$DPPROXY_LEDGER to one)",
            )
        )
    path = Path(where)
    if not create and not path.exists():
        _fail(
            InvalidParameter(
                f"there is no ledger at {path}",
                hint="the first `dpproxy query`, `dpproxy serve` or `dpproxy budget grant` "
                "creates it; check --ledger, $DPPROXY_LEDGER and the ledger key of dpproxy.toml",
            )
        )
    if path.is_dir():
        _fail(InvalidParameter(f"the ledger {path} is a directory, not a file"))
    from dpproxy.catalog.load import load_catalog
    from dpproxy.demo import demo_schema_path

    with _reported(where):
        catalog = load_catalog(settings.schema or demo_schema_path())
        ledger = Ledger(path, catalog.dataset, catalog.policy.budget)
    ctx.call_on_close(ledger.close)
    return ledger


def _other_datasets(ledger: Ledger, what: str) -> None:
    """On standard error, when this dataset has no ``what`` in the ledger but others have
    accounts: which, and how to see them (``budget show`` after a query on your own data would
    otherwise print an empty table of the demo's dataset)."""
    uri = f"{ledger.path.resolve().as_uri()}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
        try:
            rows = con.execute(
                "SELECT DISTINCT dataset FROM accounts WHERE dataset <> ? ORDER BY dataset",
                (ledger.dataset,),
            ).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return
    if rows:
        names = ", ".join(r[0] for r in rows)
        click.echo(
            f"note: no {what} of dataset {ledger.dataset} in this ledger; it has accounts of "
            f"dataset(s) {names}: pass the schema whose `dataset:` names one "
            "(dpproxy budget show --schema FILE.yaml, or schema = in dpproxy.toml)",
            err=True,
        )


# --------------------------------------------------------------------------- views


def _cost(c: Cost, *, rho: bool = False, up: bool = True) -> dict[str, str]:
    """JSON amounts: spent or reserved rounded up where rounded, granted or left (``up=False``)
    rounded down (``output.exact_text``)."""
    out = {"epsilon": _exact(c.epsilon, up=up), "delta": _exact(c.delta, up=up)}
    if rho:
        out["rho"] = _exact(c.rho, up=up)
    return out


def _renewed(a: Account, now: float) -> tuple[Account, bool]:
    """The account as its owner sees it now: a period that has run out starts afresh. (The
    ledger records the renewal at the account's next use; showing it writes nothing.)"""
    if not a.period_seconds:
        return a, False
    periods = int((now - a.period_start) // a.period_seconds)
    if periods <= 0:
        return a, False
    start = a.period_start + periods * a.period_seconds
    return Account(
        a.principal, a.kind, a.total, Cost.zero(), a.reserved, a.period_seconds, start
    ), True


def _membership(ledger: Ledger) -> dict[str, list[str]]:
    """Group → its analysts, from the log's join and leave entries."""
    groups: dict[str, set[str]] = {}
    for e in ledger.entries():
        if e.kind == "join":
            groups.setdefault(e.body["group"], set()).add(e.principal)
        elif e.kind == "leave":
            groups.setdefault(e.body["group"], set()).discard(e.principal)
    return {g: sorted(members) for g, members in groups.items()}


@dataclass(frozen=True)
class _View:
    account: Account
    opened: bool  # False: an analyst the ledger has not seen (the default budget, unspent)
    renewal_pending: bool
    members: list[str]  # a group's analysts
    groups: list[str]  # an analyst's groups
    can_spend: Cost | None = None  # an analyst's: the least remaining of theirs and their groups'

    def json(self) -> dict[str, Any]:
        a = self.account
        out: dict[str, Any] = {
            "principal": a.principal,
            "kind": a.kind,
            "opened": self.opened,
            "total": _cost(a.total, up=False),
            "spent": _cost(a.spent, rho=True),
            "reserved": _cost(a.reserved, rho=True),
            "remaining": _cost(a.remaining, up=False),
            "period": format_duration(a.period_seconds) if a.period_seconds else None,
            "period_seconds": a.period_seconds,
            "period_start": _iso(a.period_start, ms=True),
            "renewal_pending": self.renewal_pending,
        }
        if a.kind == "group":
            out["members"] = self.members
        else:
            out["groups"] = self.groups
            out["can_spend"] = _cost(self.can_spend or a.remaining, up=False)
        return out

    def row(self) -> list[str]:
        a = self.account
        return [
            a.principal,
            a.kind,
            _short(a.total.epsilon),
            _short(a.total.delta),
            _short(a.spent.epsilon),
            _short(a.spent.delta),
            _short(a.reserved.epsilon),
            _short(a.reserved.delta),
            _short(a.remaining.epsilon),
            _short(a.remaining.delta),
            format_duration(a.period_seconds) + ("*" if self.renewal_pending else ""),
            _iso(a.period_start),
        ]


_COLUMNS = [
    "principal",
    "kind",
    "total ε",
    "total δ",
    "spent ε",
    "spent δ",
    "reserved ε",
    "reserved δ",
    "remaining ε",
    "remaining δ",
    "period",
    "period start",
]


def _view(a: Account, now: float, membership: dict[str, list[str]], opened: bool = True) -> _View:
    shown, pending = _renewed(a, now)
    mine = sorted(g for g, analysts in membership.items() if a.principal in analysts)
    members = membership.get(a.principal, []) if a.kind == "group" else []
    return _View(shown, opened, pending, members, mine if a.kind == "analyst" else [])


def _limited(v: _View, ledger: Ledger, now: float) -> _View:
    """An analyst's view with what they can spend: every group of theirs must pay too."""
    if v.account.kind != "analyst":
        return v
    left = v.account.remaining
    for g in v.groups:
        ga = ledger.account(g, group=True)
        if ga is not None:
            r = _renewed(ga, now)[0].remaining
            left = Cost(min(left.epsilon, r.epsilon), min(left.delta, r.delta))
    return dataclasses.replace(v, can_spend=left)


def _print_views(views: list[_View], fmt: str, ledger: Ledger) -> None:
    import json

    if fmt == "json":
        click.echo(json.dumps([v.json() for v in views], indent=2, ensure_ascii=False))
        return
    if fmt == "csv":
        print_records(_COLUMNS, [v.row() for v in views], fmt)
        return
    click.echo(f"ledger {ledger.path} (dataset {ledger.dataset})")
    click.echo(_table(_COLUMNS, [v.row() for v in views]))
    if any(v.renewal_pending for v in views):
        click.echo("* a new period has begun: the ledger records it at the account's next use")
    for v in views:
        a = v.account
        if a.kind == "group" and v.members:
            click.echo(f'group "{a.principal}": {", ".join(v.members)}')


_FORMAT = format_option(
    "Output format (json gives every amount exactly, as a decimal string, or n/d for an amount "
    "such as 1/30 that no decimal of at most 100 places writes)."
)


_F = TypeVar("_F", bound=Callable[..., Any])


def _relocate(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``budget show --ledger F``: the group's options, accepted after the subcommand too."""
    settings = ctx.find_object(_Settings)
    if value is not None and settings is not None and param.name is not None:
        setattr(settings, param.name, value)


def _located(f: _F) -> _F:
    """Give a budget subcommand the group's --ledger and --schema (they override the group's)."""
    f = click.option(
        "--schema",
        "-s",
        metavar="FILE",
        expose_value=False,
        callback=_relocate,
        help="As `dpproxy budget --schema FILE`.",
    )(f)
    return click.option(
        "--ledger",
        metavar="FILE",
        expose_value=False,
        callback=_relocate,
        is_eager=True,
        help="As `dpproxy budget --ledger FILE`.",
    )(f)


_GROUP = click.option("--group", is_flag=True, help="NAME is a group of analysts, not an analyst.")


# --------------------------------------------------------------------------- the commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--ledger",
    "ledger_file",
    cls=_LedgerOption,
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
    ctx.obj = _Settings(ledger_file, schema)


@budget.command("show")
@_located
@click.argument("name", required=False)
@_GROUP
@_FORMAT
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
    ledger = _open(ctx)
    now = time.time()
    with _reported(str(ledger.path)):
        membership = _membership(ledger)
        if name is None:
            views = [_view(a, now, membership) for a in ledger.accounts()]
        else:
            found = ledger.account(name, group=group)
            if found is None and group:
                _fail(
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
            views = [_view(found, now, membership, opened)]
            if not group:
                for g in views[0].groups:
                    ga = ledger.account(g, group=True)
                    if ga is not None:
                        views.append(_view(ga, now, membership))
        views = [_limited(v, ledger, now) for v in views]
    if name is not None and not views[0].opened and fmt == "table":
        click.echo(
            f'analyst "{name}" has not used this ledger yet: on first use they get the '
            f"default budget, {ledger.default_budget}"
        )
    _print_views(views, fmt, ledger)
    if not views and fmt != "json":
        _other_datasets(ledger, "accounts")
    if name is not None and not group and len(views) > 1 and fmt == "table":
        left = views[0].can_spend
        click.echo(f'analyst "{name}" can still spend {left} (the least of every account)')


@budget.command("grant")
@_located
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
@_GROUP
@click.option(
    "--period",
    metavar="DURATION",
    help="Renew the budget (spending back to zero) every DURATION: 3600s, 90m, 12h, 30d, 1w; "
    "`none` stops renewing (default: unchanged).",
)
@_FORMAT
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
        _fail(err)
    ledger = _open(ctx, create=True)
    with _reported(str(ledger.path)):
        current = ledger.account(name, group=group)
        if new_delta is None:
            new_delta = current.total.delta if current else ledger.default_budget.delta
        if period is None:
            seconds = current.period_seconds if current else None
        granted = ledger.grant(name, Cost(eps, new_delta), group=group, period_seconds=seconds)
        now = time.time()
        view = _limited(_view(granted, now, _membership(ledger)), ledger, now)
    if fmt == "table":
        renew = f", renewing every {format_duration(seconds)}" if seconds else ""
        kind = "group" if group else "analyst"
        click.echo(f'granted {kind} "{name}" {granted.total}{renew}')
    _print_views([view], fmt, ledger)


def _interactive() -> bool:
    """Whether someone can answer a confirmation prompt."""
    return sys.stdin.isatty()


@budget.command("reset")
@_located
@click.argument("name")
@_GROUP
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def budget_reset(ctx: click.Context, name: str, group: bool, yes: bool) -> None:
    """Forget what analyst NAME (or group NAME) has spent: a new budget period, by hand.
    The reset is logged. Asks for confirmation unless --yes; without a terminal, --yes is
    required.

    \b
        dpproxy budget reset ana --yes
    """
    ledger = _open(ctx)
    kind = "group" if group else "analyst"
    with _reported(str(ledger.path)):
        current = ledger.account(name, group=group)
    if current is None:
        _fail(InvalidParameter(f'there is no {kind} "{name}" in the ledger'))
    if not yes:
        if not _interactive():
            _fail(
                InvalidParameter(
                    f'refusing to reset {kind} "{name}" without confirmation: standard input '
                    "is not a terminal",
                    hint="pass --yes",
                )
            )
        click.confirm(f'Forget everything {kind} "{name}" has spent ({current.spent})?', abort=True)
    with _reported(str(ledger.path)):
        after = ledger.reset(name, group=group)
    click.echo(f'reset {kind} "{name}": spent {current.spent} forgotten; {after.remaining} left')


@budget.group("member")
def member() -> None:
    """Put analysts into budget groups or take them out: a query is charged to the analyst
    and to every group of theirs, and must fit in all of them."""


@member.command("add")
@_located
@click.argument("group_name", metavar="GROUP")
@click.argument("analyst")
@click.pass_context
def member_add(ctx: click.Context, group_name: str, analyst: str) -> None:
    """Add ANALYST to GROUP (created beforehand with `dpproxy budget grant --group`).

    \b
        dpproxy budget member add team ana
    """
    ledger = _open(ctx)
    with _reported(str(ledger.path)):
        if analyst in _membership(ledger).get(group_name, []):
            click.echo(f'analyst "{analyst}" is already in group "{group_name}"')
            return
        ledger.add_member(group_name, analyst)
    click.echo(f'added analyst "{analyst}" to group "{group_name}"')


@member.command("remove")
@_located
@click.argument("group_name", metavar="GROUP")
@click.argument("analyst")
@click.pass_context
def member_remove(ctx: click.Context, group_name: str, analyst: str) -> None:
    """Remove ANALYST from GROUP: their later queries are no longer charged to it.

    \b
        dpproxy budget member remove team ana
    """
    ledger = _open(ctx)
    with _reported(str(ledger.path)):
        if analyst not in _membership(ledger).get(group_name, []):
            _fail(InvalidParameter(f'analyst "{analyst}" is not in group "{group_name}"'))
        ledger.remove_member(group_name, analyst)
    click.echo(f'removed analyst "{analyst}" from group "{group_name}"')


def _about(e: LogEntry, name: str) -> bool:
    """Whether a log entry concerns analyst or group ``name``."""
    b = e.body
    return e.principal == name or name in b.get("groups", ()) or b.get("group") == name


def _entry_json(e: LogEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": e.seq,
        "time": _iso(e.time, ms=True),
        "kind": e.kind,
        "principal": e.principal,
    }
    for key, value in sorted(e.body.items()):
        if key in ("eps", "delta", "rho"):
            # what an account was granted or opened with: down; what was spent: up
            up = e.kind not in ("grant", "open", "renew")
            out[{"eps": "epsilon"}.get(key, key)] = _exact(Fraction(value), up=up)
        elif key == "token":
            out["reservation"] = value
        elif key == "kind":  # the kind of account a grant, reset or renewal is about
            out["account_kind"] = value
        elif key == "period_start":
            out[key] = _iso(float(value), ms=True)
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
        parts.append(f"new {b['kind']} period from {_iso(float(b['period_start']))}")
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
@_located
@click.argument("name", required=False)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1),
    metavar="N",
    help="Only the last N entries (default: all).",
)
@_FORMAT
@click.pass_context
def budget_log(ctx: click.Context, name: str | None, limit: int | None, fmt: str) -> None:
    """Print the release log, oldest first: sequence number, time (UTC), kind, principal,
    ε and δ, and for each release the normalised query, its plan and its mechanism. The log
    holds no released value. With NAME, only the entries about that analyst or group.

    \b
        dpproxy budget log ana --limit 20
    """
    import json

    ledger = _open(ctx)
    with _reported(str(ledger.path)):
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
            eps = _short(Fraction(b["eps"])) if "eps" in b else ""
            delta = _short(Fraction(b["delta"])) if "delta" in b else ""
            rows.append([str(e.seq), _iso(e.time), e.kind, e.principal, eps, delta, _detail(e)])
    print_records(["seq", "time", "kind", "principal", "ε", "δ", "detail"], rows, fmt)
    if not rows and name is None:
        _other_datasets(ledger, "log entries")


@budget.command("verify")
@_located
@click.pass_context
def budget_verify(ctx: click.Context) -> None:
    """Recompute the log's hash chain over the whole file and replay the log against the
    accounts: an edited, inserted or deleted entry, or an account changed behind the log's
    back, is reported (SQLSTATE ZD006, exit status 1).

    \b
        dpproxy budget verify
    """
    ledger = _open(ctx)
    where = str(ledger.path)
    try:
        result = ledger.verify()
    except (ValueError, KeyError, TypeError) as err:  # an entry too damaged to replay
        _fail(
            LedgerTampered(
                f"ledger {where} failed verification",
                problems=(f"the log cannot be replayed: {type(err).__name__}: {err}",),
                hint="restore the ledger from a backup",
            )
        )
    except (DPProxyError, sqlite3.Error) as err:
        with _reported(where):
            raise err
    if not result.ok:
        n = len(result.problems)
        _fail(
            LedgerTampered(
                f"ledger {where} failed verification: {n} problem{'s' if n != 1 else ''} "
                f"in {result.entries} entries",
                problems=result.problems,
                hint="the ledger was changed outside dpproxy: restore it from a backup",
            )
        )
    click.echo(f"ledger OK: {result.entries} entries")
    click.echo(f"head: {result.head} (keep it to detect a truncated log later)")
