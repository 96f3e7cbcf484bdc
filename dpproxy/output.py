"""How every ``dpproxy`` command prints: one ``--format table|csv|json``, one error shape,
one exit-code table, amounts as decimals (docs/cli-conventions.md).

``--format json`` carries everything a script needs on standard output: the rows, the privacy
cost, the budget left and which ledger paid; a failure is ``{"error": {"sqlstate", "message",
"hint"}}`` there too, with exit status 1. The table and CSV formats print errors and the cost
line on standard error, so standard output holds only the data.
"""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from dpproxy.errors import DPProxyError
from dpproxy.values import Cost

# Exit statuses (README, the "exit status" table under Command line; test_cli_conventions.py).
EXIT_OK = 0
EXIT_ERROR = 1  # a refusal or failure with a SQLSTATE
EXIT_USAGE = 2  # a command line click could not parse (unknown option, missing argument)

FORMATS = ("table", "csv", "json")
F = TypeVar("F", bound=Callable[..., Any])


class _Formats(click.Choice[str]):
    """table, csv or json; ``text`` (explain's old name for table) is still read as table."""

    def __init__(self) -> None:
        super().__init__(FORMATS)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.lower() == "text":
            return "table"
        return super().convert(value, param, ctx)


def format_option(help_text: str = "Output format.") -> Callable[[F], F]:
    """The ``--format table|csv|json`` option, the same on every command that prints data."""
    return click.option(
        "--format",
        "fmt",
        type=_Formats(),
        default="table",
        show_default=True,
        help=help_text,
    )


# ----------------------------------------------------------------------------- amounts


def decimal_text(f: Fraction) -> str:
    """An amount as a decimal, never ``n/d``: :func:`exact_text` when that is a decimal, else
    rounded to 17 significant digits (1/3 → ``0.33333333333333331``)."""
    exact = _decimal_or_double(f)
    return exact if exact is not None else _positional(Decimal(f"{float(f):.17g}"))


def exact_text(f: Fraction, *, up: bool = True) -> str:
    """An amount for JSON: a decimal when its expansion ends within 30 places (``0.00001``
    written as a fraction); a value that is exactly a double (``1e-5`` read from a YAML schema
    is the binary fraction 5902958103587057/590295810358705651712) as the shortest decimal that
    reads back to that double, the number the steward wrote; any other decimal that ends within
    100 places in full (what is left of a δ of 1e-5 after 1e-6 is spent, both doubles:
    ``0.0000090000000000000008632824…`` to its 72nd place). Anything else (1/30 from a split of
    ε, a Gaussian's ε converted from zCDP, an exact fraction of ~700 digits) is rounded to 17
    significant digits: up (``up=True``, for an amount spent: never below the true cost) or down
    (for an amount left or granted: never above it). The ledger keeps and compares the exact
    fractions."""
    text = _decimal_or_double(f)
    if text is None:
        text = _decimal_places(f, _LONG_PLACES)  # 1e-5 - 1e-6 as doubles: 72 places
    return text if text is not None else _rounded(f, up)


def _rounded(f: Fraction, up: bool) -> str:
    """``f`` to 17 significant digits, rounded toward +∞ (``up``) or toward −∞."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, Context

    ctx = Context(prec=17, rounding=ROUND_CEILING if up else ROUND_FLOOR, Emin=-(10**9))
    return _positional(ctx.divide(Decimal(f.numerator), Decimal(f.denominator)))


_LONG_PLACES = 100  # the most places an exact decimal in JSON may have; else rounded


def _decimal_or_double(f: Fraction) -> str | None:
    if f == 0:
        return "0"
    text = _decimal_places(f, 30)
    if text is not None:
        return text
    as_float = float(f)
    if Fraction(as_float) == f:
        return _positional(Decimal(repr(as_float)))
    return None


def _decimal_places(f: Fraction, most: int) -> str | None:
    """``f`` written exactly as a decimal when its expansion ends within ``most`` places."""
    d, twos, fives = f.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    places = max(twos, fives)  # 1/(2^a 5^b) has max(a, b) decimal places
    if d != 1 or places > most:
        return None
    digits = str(abs(f.numerator) * 10**places // f.denominator).rjust(places + 1, "0")
    whole, frac = digits[: len(digits) - places], digits[len(digits) - places :].rstrip("0")
    return ("-" if f < 0 else "") + whole + (f".{frac}" if frac else "")


def _positional(d: Decimal) -> str:
    if d and abs(d) < Decimal("1e-30"):
        return str(d).replace("E", "e")  # 1e-300: 300 zeros would help nobody
    text = format(d, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def short_text(f: Fraction) -> str:
    """An amount for a person: 6 significant digits, positional (``0.00001``, not ``1e-05``)
    down to 1e-12, below that in scientific notation."""
    if f == 0:
        return "0"
    d = Decimal(f"{float(f):.6g}")
    return _positional(d) if abs(d) >= Decimal("1e-12") else f"{float(f):.6g}"


def cost_text(c: Cost) -> str:
    """``ε=1`` or ``ε=1, δ=0.00001``: the cost line's form of an amount."""
    text = f"ε={short_text(c.epsilon)}"
    return text + (f", δ={short_text(c.delta)}" if c.delta else "")


def cost_json(c: Cost, *, up: bool = True) -> dict[str, str]:
    """An amount for JSON: decimal strings (a JSON number would go through a float), rounded
    up (a cost) or down (``up=False``: a budget left) where :func:`exact_text` rounds."""
    return {"epsilon": exact_text(c.epsilon, up=up), "delta": exact_text(c.delta, up=up)}


def ledger_label(where: str) -> str:
    """Where budgets are kept, for a person: the ledger file (``~`` for the home directory) or
    ``memory`` (this process only)."""
    if where == "memory":
        return "memory"
    path = Path(where)
    try:
        return "~/" + path.resolve().relative_to(Path.home().resolve()).as_posix()
    except (ValueError, RuntimeError, OSError):
        return str(path)


def budget_line(analyst: str, where: str, remaining: Cost) -> str:
    """``budget left for 'ana' in ledger ~/.local/share/dpproxy/ledger.sqlite: ε=9``."""
    if where == "memory":
        place = "in memory (this process only: --ledger memory)"
    else:
        place = f"in ledger {ledger_label(where)}"
    return f"budget left for {analyst!r} {place}: {cost_text(remaining)}"


# ----------------------------------------------------------------------------- errors


def exhausted_hint(err: DPProxyError, analyst: str, where: str) -> DPProxyError:
    """Hints that name the command-line remedy. An exhausted budget (ZD001): which ledger
    holds it and the commands that help (a grant or reset by the steward, or a throwaway
    budget in memory). Grouping that needs δ > 0 (ZD003): the ``--delta`` option."""
    if err.sqlstate == "ZD003" and "δ > 0" in err.message:
        err.hint = (
            "pass --delta (e.g. --delta 1e-6) to pay for partition selection, or give the "
            "GROUP BY columns a domain in the schema"
        )
    if err.sqlstate == "ZD001" and where != "memory":
        err.hint = (
            f"the budget is kept in ledger {ledger_label(where)}: the data steward can run "
            f"`dpproxy budget grant {analyst} --epsilon E` or `dpproxy budget reset {analyst}`; "
            "`--ledger memory` tries queries against a budget that lasts one command"
        )
    return err


def error_json(err: DPProxyError) -> dict[str, Any]:
    """``{"error": {"sqlstate", "message", "hint", ...}}``: problems and position when set."""
    body: dict[str, Any] = {"sqlstate": err.sqlstate, "message": err.message, "hint": err.hint}
    problems = list(getattr(err, "problems", ()))
    if problems:
        body["problems"] = problems
    if err.position is not None:
        body["position"] = err.position
    return {"error": body}


SCHEMA_CHECK_HINT = (
    "`dpproxy schema check FILE` lists each problem with its line, and the TODOs of a draft "
    "left to replace (see schemas/README.md)"
)


def fail(err: DPProxyError, fmt: str = "table") -> NoReturn:
    """Report ``err`` and exit with status 1: JSON on standard output for ``--format json``,
    else ``ERROR: message (SQLSTATE s)``, the problems, the hint (unless it only repeats the
    problems) and the position on stderr."""
    if fmt == "json":
        click.echo(json.dumps(error_json(err), ensure_ascii=False))
        sys.exit(EXIT_ERROR)
    click.echo(f"ERROR:  {err.message}  (SQLSTATE {err.sqlstate})", err=True)
    problems = tuple(getattr(err, "problems", ()))
    for p in problems:
        click.echo(f"  {p}", err=True)
    hint = err.hint
    if problems and hint == "; ".join(problems[:3]):  # a schema's: the lines above again
        hint = SCHEMA_CHECK_HINT if err.sqlstate == "ZD004" else None
    if hint:
        click.echo(f"HINT:  {hint}", err=True)
    if err.position is not None:
        click.echo(f"POSITION:  {err.position}", err=True)
    sys.exit(EXIT_ERROR)


# ----------------------------------------------------------------------------- records


def plain(v: Any) -> Any:
    """A value JSON can carry: Fractions as decimal strings, dates as ISO text."""
    if isinstance(v, Fraction):
        return exact_text(v)
    if isinstance(v, Cost):
        return cost_json(v)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    iso = getattr(v, "isoformat", None)
    return iso() if iso is not None else str(v)


def print_records(
    names: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, *, key: str = "rows"
) -> None:
    """A list of records in ``fmt``: a table (with a row count), CSV with a header, or JSON
    ``{key: [{name: value}, ...]}``."""
    if fmt == "json":
        records = [dict(zip(names, (plain(v) for v in r), strict=True)) for r in rows]
        click.echo(json.dumps({key: records}, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        import csv  # --format csv only

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        for r in rows:
            w.writerow(["" if v is None else v for v in r])
        click.echo(buf.getvalue(), nl=False)
    else:
        cells = [["" if v is None else str(v) for v in r] for r in rows]
        click.echo(table_text(list(names), cells))


def table_text(names: list[str], rows: list[list[str]]) -> str:
    """The table layout of ``dpproxy query``: numbers right-aligned, then the row count."""
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    out = [
        " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip(),
        "-+-".join("-" * w for w in widths),
    ]
    for r in rows:
        cells = [c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)]
        out.append(" | ".join(cells).rstrip())
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _numeric(text: str) -> bool:
    try:
        float(text.split(" ")[0])
        return True
    except ValueError:
        return False


def read_sql(sql: str | None, sql_file: str | None) -> str:
    """The SQL of a command: the argument, or ``-f FILE`` (``-`` or an argument ``-`` reads
    standard input). Exactly one source; anything else is a usage error (exit 2)."""
    if sql is not None and sql_file is not None:
        raise click.UsageError("give the SQL as an argument or with -f FILE, not both")
    if sql_file is not None:
        if sql_file == "-":
            return sys.stdin.read()
        try:
            return Path(sql_file).read_text(encoding="utf-8")
        except OSError as e:
            raise click.UsageError(f"cannot read -f {sql_file}: {e.strerror or e}") from e
        except UnicodeDecodeError as e:
            raise click.UsageError(f"-f {sql_file} is not UTF-8 text") from e
    if sql is None:
        raise click.UsageError("give the SQL as an argument, or with -f FILE (- for stdin)")
    return sys.stdin.read() if sql == "-" else sql


# ----------------------------------------------------------------------------- query answers


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 1e15:
            return f"{v:.1f}"
        return f"{v:.6g}" if abs(v) >= 1e6 or abs(v) < 1e-3 else f"{v:.4f}"
    return str(v)


def report_answer(cur: Any, analyst: str, where: str, fmt: str, errors: bool) -> None:
    """Print a released answer (a ``dpproxy.dbapi`` cursor after ``execute``) in ``fmt``.

    JSON: ``{"columns", "rows", "privacy_cost", "budget_left", "analyst", "ledger", "cached",
    "notices"}`` (with ``--errors`` each row has ``_error95``). Table and CSV: the rows on
    standard output; the notes and the cost line (which ledger paid) on standard error.
    """
    names = [d[0] for d in cur.description or ()]
    rows = cur.fetchall()
    bounds = cur.error_bounds
    notes = list(cur.notices)
    if cur.bound_note is not None and not cur.cached:
        notes.insert(0, f"rows per unit: {cur.bound_note}")
    if fmt == "json":
        records = []
        for row, errs in zip(rows, bounds, strict=True):
            rec: dict[str, Any] = {n: plain(v) for n, v in zip(names, row, strict=True)}
            if errors:
                rec["_error95"] = dict(zip(names, errs, strict=True))
            records.append(rec)
        doc = {
            "columns": names,
            "rows": records,
            "privacy_cost": cost_json(cur.privacy_cost),
            "budget_left": cost_json(cur.remaining_budget, up=False),
            "analyst": analyst,
            "ledger": where,
            "cached": bool(cur.cached),
            "notices": notes,
        }
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    if fmt == "csv":
        import csv  # --format csv only

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(list(names) + ([f"{n}_error95" for n in names] if errors else []))
        for row, errs in zip(rows, bounds, strict=True):
            w.writerow(list(row) + (list(errs) if errors else []))
        click.echo(buf.getvalue(), nl=False)
    else:
        text_rows = []
        for row, errs in zip(rows, bounds, strict=True):
            cells = []
            for v, e in zip(row, errs, strict=True):
                cell = _cell(v)
                if errors and e:
                    cell += f" ± {e:.3g}"
                cells.append(cell)
            text_rows.append(cells)
        click.echo(table_text(names, text_rows))
    for note in notes:
        click.echo(note, err=True)
    again = " (the answer released before, from the cache)" if cur.cached else ""
    click.echo(
        f"privacy cost: {cost_text(cur.privacy_cost)}{again}; "
        f"{budget_line(analyst, where, cur.remaining_budget)}",
        err=True,
    )
