"""``dpproxy data copy``: CSV and Parquet files copied into a DuckDB file (file_copy.py)."""

from __future__ import annotations

import click

from dpproxy.cli.common import cli_fail
from dpproxy.errors import DPProxyError


@click.group()
def data() -> None:
    """Work with data files (`--database` reads CSV and Parquet in place; this copies them)."""


@data.command("copy")
@click.argument("source", metavar="SOURCE")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The DuckDB database file to write (refused if it exists, unless --force).",
)
@click.option(
    "--table",
    "-t",
    metavar="NAME",
    help="The table's name (one source only; default: the file's, people.csv -> people).",
)
@click.option(
    "--primary-key",
    metavar="COLUMN",
    help="Declare COLUMN the table's PRIMARY KEY, checked by DuckDB on every row: a value on "
    "two rows (23505) or a NULL (23502) refuses the copy. `schema init` then drafts it as the "
    "privacy unit. Only if the data's documentation says one row per person.",
)
@click.option(
    "--not-null",
    "not_null",
    multiple=True,
    metavar="COLUMN[,COLUMN...]",
    help="Declare these columns NOT NULL (repeatable), checked by DuckDB on every row: a NULL "
    "refuses the copy (23502). `schema init` then drafts them without `nullable: true`, and "
    "the counts of such columns are one COUNT(*): VARIANCE(a), STDDEV(b) costs five noisy "
    "values instead of six.",
)
@click.option("--force", is_flag=True, help="Replace an existing --to file.")
def data_copy(
    source: str,
    target: str,
    table: str | None,
    primary_key: str | None,
    not_null: tuple[str, ...],
    force: bool,
) -> None:
    """Copy CSV/Parquet SOURCE (files, a quoted glob, or several separated by commas, as
    --database takes them) into a DuckDB file, one table per source, with the column types
    --database would give them.

    Nothing is copied unless you ask: `--database people.csv` reads the file at every query.
    A copy is faster to query when a big file is read many times. Progress goes to standard
    error (a line per source, then every 2 s DuckDB's estimate of the share read); a failed
    copy leaves no file. Example:

    \b
        dpproxy data copy people.csv --to people.duckdb --primary-key id \\
            --not-null age,income
        dpproxy schema init --database people.duckdb -o people.yaml
    """
    from pathlib import Path

    from dpproxy.backends.file_copy import copy_sources, plan_copy

    try:
        sources = plan_copy(source, table)
        copied = copy_sources(
            sources,
            Path(target),
            primary_key=primary_key,
            not_null=tuple(n.strip() for names in not_null for n in names.split(",") if n.strip()),
            force=force,
            progress=lambda line: click.echo(line, err=True),
        )
    except DPProxyError as err:
        cli_fail(err)
    for c in copied:
        key = f", PRIMARY KEY ({c.primary_key})" if c.primary_key else ""
        required = f", NOT NULL ({', '.join(c.not_null)})" if c.not_null else ""
        click.echo(f"wrote table {c.table} to {target}: {c.rows:,} rows{key}{required}", err=True)
