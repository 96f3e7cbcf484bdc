"""What the ``dpproxy`` subcommands share: the query options, error exit, the operator's log."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
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
        "sc://HOST:PORT; README: Running on Spark) (default: the bundled Adult demo).",
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


#: True once :meth:`dpproxy.config.ConfigGroup.main` parsed this process's own command line
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
