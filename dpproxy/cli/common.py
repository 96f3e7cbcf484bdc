"""What the ``dpproxy`` subcommands share: the query options, error exit, the operator's log."""

from __future__ import annotations

from typing import Any, NoReturn

import click

from dpproxy.errors import DPProxyError

_COMMON = [
    click.option(
        "--database",
        "-d",
        metavar="FILE|URL",
        help="DuckDB file, CSV/Parquet files or globs (README: Your own data), postgresql:// "
        "URL or Spark (spark+local[N], spark://HOST:PORT, "
        "sc://HOST:PORT; docs/spark.md) (default: the bundled Adult demo).",
    ),
    click.option(
        "--schema",
        "-s",
        metavar="FILE",
        help="Privacy schema YAML (default: the demo's schemas/adult.yaml).",
    ),
    click.option(
        "--epsilon",
        "-e",
        metavar="EPS",
        help="ε for this query (default: the schema's privacy.epsilon).",
    ),
    click.option(
        "--delta", metavar="DELTA", help="δ for this query (default: the schema's privacy.delta)."
    ),
    click.option(
        "--mechanism",
        type=click.Choice(["laplace", "gaussian"]),
        help="Noise for sums and counts (default: the schema's).",
    ),
    click.option(
        "--plan",
        type=click.Choice(["gs", "joint", "ptr", "smooth", "exponential", "saa"]),
        help="Force a plan for the aggregates that support it (default: the one with the "
        "lowest predicted error; see `dpproxy explain`). Per-query hints: /*+ dpproxy "
        "mechanism=ptr ptr_bound=0.01 */.",
    ),
]


#: ``-f FILE``: the SQL of ``query`` and ``explain`` read from a file or standard input.
sql_file_option = click.option(
    "--file",
    "-f",
    "sql_file",
    metavar="FILE",
    help="Read the SQL from FILE ('-' for standard input) instead of the argument.",
)


def common_options(f: Any) -> Any:
    """The options every query-like command takes (--database, --schema, ε, δ, …)."""
    for option in reversed(_COMMON):
        f = option(f)
    return f


def cli_fail(err: DPProxyError, fmt: str = "table") -> NoReturn:
    """Print ``err`` in ``fmt`` (with its SQLSTATE and hint) and exit with status 1."""
    from dpproxy.output import fail

    fail(err, fmt)


def operator_log(path: str, level: str = "warning") -> None:
    """Send dpproxy's records at ``level`` and above to ``path`` as JSON lines (the operator's
    log: a failed query's cause is there, never on the terminal)."""
    from dpproxy.logsetup import json_logging

    json_logging(level, path=path)
