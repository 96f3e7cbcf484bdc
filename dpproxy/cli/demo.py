"""``dpproxy demo``: the bundled UCI Adult database, as a DuckDB file or loaded into PostgreSQL."""

from __future__ import annotations

import click

from dpproxy.cli.common import cli_fail
from dpproxy.errors import DPProxyError, InvalidParameter


@click.group()
def demo() -> None:
    """The bundled Adult demo database."""


@demo.command("path")
def demo_path() -> None:
    """Build the demo DuckDB file if needed and print its path and schema path."""
    from dpproxy.demo import demo_database_path, demo_schema_path

    click.echo(f"database: {demo_database_path(progress=True)}")
    click.echo(f"schema:   {demo_schema_path()}")


@demo.command("load")
@click.option(
    "--database",
    "-d",
    required=True,
    metavar="URL",
    help="PostgreSQL URL to load into, e.g. postgresql://USER:PASSWORD@HOST:5432/DBNAME "
    "(a role that may create tables there).",
)
@click.option(
    "--table",
    default="adult",
    show_default=True,
    metavar="NAME",
    help="Table to create, optionally schema-qualified; the demo schema expects adult.",
)
@click.option(
    "--replace/--no-replace",
    default=False,
    show_default=True,
    help="Drop an existing table of that name and load it anew, in the same transaction.",
)
def demo_load(database: str, table: str, replace: bool) -> None:
    """Load the bundled Adult demo (32,561 rows) into a PostgreSQL database.

    Creates the table (person_id PRIMARY KEY and the 15 Adult columns) and copies the rows
    into it in one transaction: a failure leaves the database as it was. An existing table is
    an error unless --replace. The DuckDB demo needs no loading: it is built automatically on
    first use (`dpproxy demo path`). Example:

    \b
        dpproxy demo load --database postgresql://postgres@localhost:5432/demo
    """
    from dpproxy.demo import load_demo_postgres
    from dpproxy.dsn import is_postgres_url, redact_dsn

    if not is_postgres_url(database):
        cli_fail(
            InvalidParameter(
                "--database must be a PostgreSQL URL (postgresql://... or postgres://...): "
                "the demo is loaded only into PostgreSQL",
                hint="the DuckDB demo needs no loading: it is built automatically on first use; "
                "`dpproxy demo path` builds it and prints its path",
            )
        )
    try:
        rows = load_demo_postgres(database, table=table, replace=replace, progress=True)
    except DPProxyError as err:
        cli_fail(err)
    click.echo(f"loaded {rows} rows into {table} at {redact_dsn(database)}")
