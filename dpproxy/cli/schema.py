"""``dpproxy schema check`` and ``dpproxy schema init``: privacy schemas against the data."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any

import click

from dpproxy.cli.common import cli_fail
from dpproxy.errors import DPProxyError, InvalidParameter
from dpproxy.output import cost_text, format_option

if TYPE_CHECKING:
    from fractions import Fraction

    from dpproxy.accounting.ledger import ReleaseRecord
    from dpproxy.catalog.draft import TableShape


@click.group()
def schema() -> None:
    """Work with privacy schemas (see schemas/README.md)."""


@schema.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--database",
    "-d",
    metavar="FILE|URL",
    help="Also check the schema against this database (DuckDB file, CSV/Parquet files or "
    "globs, postgresql:// URL): every missing table (42P01) or column (42703) and every "
    "type mismatch (42804). Reads metadata only.",
)
@format_option(
    "Output format: table (problems and TODOs on standard error); json (one document: per "
    "file its problems with their SQLSTATEs and its TODOs); csv (one row per finding)."
)
def schema_check(files: tuple[str, ...], database: str | None, fmt: str) -> None:
    """Validate privacy schema FILES and report every problem with its file and key path.

    Lines still marked TODO are listed (a `privacy_unit: TODO` is a problem: the schema
    cannot load until it names a column). Exits 1 if any file has a problem. Example:

    \b
        dpproxy schema check --database people.csv people.yaml
    """
    from dpproxy.catalog.check import check_schema_file

    shapes = None
    if database is not None:
        from dpproxy.backends.opener import describe

        try:
            shapes = describe(database)
        except DPProxyError as err:
            cli_fail(err, fmt)
    if fmt != "table":
        import json

        from dpproxy.output import print_records

        reports = [check_schema_file(f, shapes) for f in files]
        if fmt == "json":
            doc = {
                "ok": all(r.ok for r in reports),
                "database": database,
                "files": [r.as_json() for r in reports],
            }
            click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            rows = [
                [r.source, kind, item.get("sqlstate", ""), item["message"]]
                for r in reports
                for kind, item in r.findings()
            ]
            print_records(["file", "kind", "sqlstate", "message"], rows, "csv")
        sys.exit(0 if all(r.ok for r in reports) else 1)
    failed = 0
    for f in files:
        report = check_schema_file(f, shapes)
        if not report.ok:
            failed += 1
            click.echo(f"{f}: {len(report.problems)} problem(s)", err=True)
            for p in report.problems:
                click.echo(f"  {p}", err=True)
        elif report.catalog is not None:
            cat = report.catalog
            n_cols = sum(len(t.columns) for t in cat.tables)
            fits = "; fits the database" if shapes is not None else ""
            click.echo(
                f"{f}: ok (dataset {cat.dataset}: {len(cat.tables)} table(s), "
                f"{n_cols} column(s){fits})"
            )
        if report.todos:
            click.echo(f"{f}: {len(report.todos)} TODO(s) left", err=True)
            for t in report.todos:
                click.echo(f"  {t}", err=True)
    if failed:
        sys.exit(1)


@schema.command("init")
@click.option(
    "--database",
    "-d",
    required=True,
    metavar="FILE|URL",
    help="The data: CSV/Parquet files or globs, a DuckDB file, or a postgresql:// URL.",
)
@click.option(
    "--table",
    "-t",
    "tables",
    multiple=True,
    metavar="NAME",
    help="Draft this table only (repeatable; default: every table).",
)
@click.option("--dataset", metavar="NAME", help="The dataset's name (default: the first table's).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the draft here (default: standard output).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing --output file.")
@click.option(
    "--dp-bounds",
    is_flag=True,
    help="Choose each numeric column's bounds with DP (about the 5th and 95th percentiles of "
    "the units' values, from a fixed grid) and each text column's domain (the values enough "
    "units hold), charged to --steward in the ledger; needs --epsilon and one table.",
)
@click.option("--epsilon", "-e", metavar="EPS", help="--dp-bounds: the total ε to spend.")
@click.option(
    "--delta",
    metavar="DELTA",
    help="--dp-bounds: the total δ of the text columns' DP domains (default 1e-6; 0 leaves "
    "them as TODOs).",
)
@click.option(
    "--unit",
    metavar="COLUMN",
    help="The column naming one person, written as the privacy unit (default: the primary "
    "key; --dp-bounds needs one).",
)
@click.option(
    "--steward",
    default="steward",
    show_default=True,
    metavar="NAME",
    help="--dp-bounds: the ledger account that pays.",
)
@click.option(
    "--ledger",
    metavar="FILE",
    help="--dp-bounds: the budget ledger (default: $DPPROXY_LEDGER, else the default file).",
)
def schema_init(
    database: str,
    tables: tuple[str, ...],
    dataset: str | None,
    output: str | None,
    force: bool,
    dp_bounds: bool,
    epsilon: str | None,
    delta: str | None,
    unit: str | None,
    steward: str,
    ledger: str | None,
) -> None:
    """Write a draft privacy schema from a database's metadata: tables, columns, types,
    nullability, and the primary key as the privacy unit when there is one.

    Never reads the data to decide anything: the privacy unit (without a primary key), bounds
    and domains are left as TODOs for you to fill in from the data's documentation;
    `dpproxy schema check` lists them. With --dp-bounds the bounds and the text columns'
    domains are released with DP instead, at a cost recorded in the ledger
    (mechanisms/dp_bounds.py, mechanisms/dp_domains.py). Examples:

    \b
        dpproxy schema init --database people.csv -o people.yaml
        dpproxy schema init -d people.csv --dp-bounds --epsilon 1 --unit id -o people.yaml
    """
    from pathlib import Path

    from dpproxy.backends.opener import describe
    from dpproxy.catalog.check import check_schema, pick_tables
    from dpproxy.catalog.draft import draft_schema

    try:
        chosen = pick_tables(describe(database), tables, database)
    except DPProxyError as err:
        cli_fail(err)
    if output is not None and Path(output).exists() and not force:
        cli_fail(InvalidParameter(f"{output} exists", hint="pass --force to overwrite it"))
    lacking = [t.name for t in chosen if unit is not None and t.column(unit) is None]
    if lacking:
        from dpproxy.errors import UndefinedColumn

        cli_fail(
            UndefinedColumn(
                f'--unit {unit}: no such column in table "{lacking[0]}"',
                hint="name the column identifying one person; --table picks the tables",
            )
        )
    dp = None
    if dp_bounds:
        dp = _dp_bounds(database, chosen, dataset, epsilon, delta, unit, steward, ledger)
    units = {t.name: unit for t in chosen if unit is not None}
    text = draft_schema(
        dataset or chosen[0].name,
        chosen,
        source=database,
        bounds=dp and dp.bounds,
        units=units,
        domains=dp and dp.domains,
    )
    report = check_schema(text, output or "<draft>")
    if output is None:
        click.echo(text, nl=False)
    else:
        Path(output).write_text(text, encoding="utf-8")
    must = len(report.problems)
    click.echo(
        f"wrote {output or 'the draft'}: {len(chosen)} table(s); {must} TODO(s) to replace "
        f"before it loads, {len(report.todos)} to consider; then `dpproxy schema check"
        f" --database {shlex.quote(database)} {shlex.quote(output) if output else 'FILE'}`",
        err=True,
    )


def _dp_bounds(
    database: str,
    chosen: Any,
    dataset: str | None,
    epsilon: str | None,
    delta: str | None,
    unit: str | None,
    steward: str,
    ledger: str | None,
) -> Any:
    """``schema init --dp-bounds``: check the options, open the ledger, release the bounds and
    domains (``backends/steward.py``)."""
    from fractions import Fraction

    from dpproxy.accounting.ledger import MEMORY, Ledger, ledger_setting
    from dpproxy.backends.steward import estimate_bounds, parse_delta
    from dpproxy.values import Cost

    if epsilon is None or len(chosen) != 1:
        cli_fail(
            InvalidParameter(
                "--dp-bounds needs --epsilon and exactly one table",
                hint="e.g. --dp-bounds --epsilon 1 --table people (the ε is spent once, in all)",
            )
        )
    try:
        total = Fraction(epsilon)
    except (ValueError, ZeroDivisionError):
        total = Fraction(0)
    if not Fraction(1, 1000) <= total <= 100:
        cli_fail(
            InvalidParameter(
                f"--epsilon must be a number in [0.001, 100], not {epsilon!r}",
                hint="the total ε spent on all the bounds, e.g. --epsilon 1",
            )
        )
    try:
        dlt = parse_delta(delta)
    except DPProxyError as err:
        cli_fail(err)
    shape = chosen[0]
    who = unit or shape.primary_key
    if who is None:
        cli_fail(
            InvalidParameter(
                f'--dp-bounds needs the privacy unit: table "{shape.name}" has no primary key',
                hint="pass --unit COLUMN, the column naming one person",
            )
        )
    where = ledger_setting(ledger, durable=True)
    if where == MEMORY:
        cli_fail(
            InvalidParameter(
                "--dp-bounds charges a durable ledger, not --ledger memory",
                hint="omit --ledger for the default ledger, or give a file",
            )
        )
    record = release_record(shape, who, dlt)
    try:
        book = Ledger(where, dataset or shape.name, Cost(Fraction(10), Fraction(1, 10**5)))
        try:
            out = estimate_bounds(database, shape, who, total, book, steward, record, delta=dlt)
        finally:
            book.close()
    except DPProxyError as err:
        cli_fail(err)
    paid = cost_text(Cost(total, out.cost.delta))
    click.echo(f"privacy cost: {paid}, charged to {steward!r} in ledger {where}", err=True)
    return out


def release_record(shape: TableShape, unit: str, delta: Fraction) -> ReleaseRecord:
    """What the ledger logs of a ``--dp-bounds`` release (never a value)."""
    from dpproxy.accounting.ledger import ReleaseRecord
    from dpproxy.backends.steward import bounded_columns, domain_columns

    numeric = ", ".join(bounded_columns(shape, unit))
    text = ", ".join(domain_columns(shape, unit)) if delta else ""
    cols = f"{numeric}; domains: {text}" if text else numeric
    plan = "dp_bounds: report-noisy-min over a public grid, 2 choices per column"
    if text:
        plan += "; dp_domains: one value per unit, discrete Laplace unit counts over a threshold"
    return ReleaseRecord(
        query=f"schema init --dp-bounds {shape.name}({cols}) unit {unit}",
        plan=plan,
        mechanism="exponential, laplace" if text else "exponential",
    )
