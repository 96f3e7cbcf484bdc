"""The pieces ``dpproxy budget``'s commands share (``accounting/budget_cli.py``): errors and
exact numbers as the commands print them, durations, opening the ledger a command names, and
the views of accounts that ``budget show`` prints.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from dpproxy.accounting.ledger import MEMORY, Account, Ledger, ledger_setting
from dpproxy.errors import DPProxyError, InvalidParameter, LedgerTampered
from dpproxy.output import exact_text, fail, format_option, print_records, table_text
from dpproxy.values import Cost

# --------------------------------------------------------------------------- errors and output


def fail_command(err: DPProxyError) -> NoReturn:
    """Print an error as every dpproxy command does (``dpproxy.output.fail``): JSON on
    standard output under ``--format json``, else message, SQLSTATE and hint on stderr."""
    ctx = click.get_current_context(silent=True)
    fmt = ctx.params.get("fmt", "table") if ctx is not None else "table"
    fail(err, fmt)


_table = table_text
# a decimal, the double a YAML float was, else 17 digits rounded up (or down)
exact_amount = exact_text


def short_amount(f: Fraction) -> str:
    """An amount for a table: exact up to 10 significant digits, no exponent above 1e-6."""
    if f == 0:
        return "0"
    d = Decimal(f"{float(f):.10g}")
    text = format(d, "f") if d >= Decimal("0.000001") else format(d, "g")
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def iso_time(t: float, *, ms: bool = False) -> str:
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
class Settings:
    ledger: str
    schema: str | None


class LedgerOption(click.Option):
    """``--ledger``: its default is worked out when used, so help shows the file in force."""

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return ledger_setting(None, durable=True)


@contextmanager
def reported_at(where: str) -> Iterator[None]:
    """Errors of the ledger as the house style; a damaged file is never a traceback."""
    try:
        yield
    except DPProxyError as err:
        fail_command(err)
    except sqlite3.Error as err:
        fail_command(
            InvalidParameter(
                f"cannot use the ledger {where}: {err}",
                hint="--ledger must name a dpproxy ledger (a SQLite file)",
            )
        )
    except (ValueError, KeyError, TypeError) as err:  # unreadable amounts or log entries
        fail_command(
            LedgerTampered(
                f"the ledger {where} is damaged: {type(err).__name__}: {err}",
                hint="run `dpproxy budget verify`; restore the file from a backup",
            )
        )


def _settings(ctx: click.Context) -> Settings:
    settings = ctx.find_object(Settings)
    if settings is None:  # a command run outside the `budget` group
        raise click.UsageError("run this command as `dpproxy budget ...`")
    return settings


def open_ledger(ctx: click.Context, *, create: bool = False) -> Ledger:
    """The ledger of ``--ledger`` for the dataset of ``--schema`` (closed with the command)."""
    settings = _settings(ctx)
    where = settings.ledger
    if where == MEMORY:
        fail_command(
            InvalidParameter(
                "the ledger is `memory`: budgets kept inside one process leave nothing to "
                "administer",
                hint="give a ledger file: dpproxy budget --ledger FILE ... (or set "
                "$DPPROXY_LEDGER to one)",
            )
        )
    path = Path(where)
    if not create and not path.exists():
        fail_command(
            InvalidParameter(
                f"there is no ledger at {path}",
                hint="the first `dpproxy query`, `dpproxy serve` or `dpproxy budget grant` "
                "creates it; check --ledger, $DPPROXY_LEDGER and the ledger key of dpproxy.toml",
            )
        )
    if path.is_dir():
        fail_command(InvalidParameter(f"the ledger {path} is a directory, not a file"))
    from dpproxy.catalog.load import load_catalog
    from dpproxy.demo import demo_schema_path

    with reported_at(where):
        catalog = load_catalog(settings.schema or demo_schema_path())
        ledger = Ledger(path, catalog.dataset, catalog.policy.budget)
    ctx.call_on_close(ledger.close)
    return ledger


def other_datasets(ledger: Ledger, what: str) -> None:
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
    out = {"epsilon": exact_amount(c.epsilon, up=up), "delta": exact_amount(c.delta, up=up)}
    if rho:
        out["rho"] = exact_amount(c.rho, up=up)
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


def group_members(ledger: Ledger) -> dict[str, list[str]]:
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
            "period_start": iso_time(a.period_start, ms=True),
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
            short_amount(a.total.epsilon),
            short_amount(a.total.delta),
            short_amount(a.spent.epsilon),
            short_amount(a.spent.delta),
            short_amount(a.reserved.epsilon),
            short_amount(a.reserved.delta),
            short_amount(a.remaining.epsilon),
            short_amount(a.remaining.delta),
            format_duration(a.period_seconds) + ("*" if self.renewal_pending else ""),
            iso_time(a.period_start),
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


def account_view(
    a: Account, now: float, membership: dict[str, list[str]], opened: bool = True
) -> _View:
    shown, pending = _renewed(a, now)
    mine = sorted(g for g, analysts in membership.items() if a.principal in analysts)
    members = membership.get(a.principal, []) if a.kind == "group" else []
    return _View(shown, opened, pending, members, mine if a.kind == "analyst" else [])


def within_groups(v: _View, ledger: Ledger, now: float) -> _View:
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


def print_views(views: list[_View], fmt: str, ledger: Ledger) -> None:
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


FORMAT_OPTION = format_option(
    "Output format (json gives every amount exactly, as a decimal string, or n/d for an amount "
    "such as 1/30 that no decimal of at most 100 places writes)."
)


_F = TypeVar("_F", bound=Callable[..., Any])


def _relocate(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``budget show --ledger F``: the group's options, accepted after the subcommand too."""
    settings = ctx.find_object(Settings)
    if value is not None and settings is not None and param.name is not None:
        setattr(settings, param.name, value)


def located(f: _F) -> _F:
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


GROUP_OPTION = click.option(
    "--group", is_flag=True, help="NAME is a group of analysts, not an analyst."
)
