"""The ``dpproxy`` command: a thin layer over the engine.

Each subcommand lives in a module of its own (``query``/``explain`` in ``cli/query.py``,
``schema``, ``demo``, ``serve``; ``budget``, ``user`` and ``console`` beside what they
administer) and is imported only when it runs or ``--help`` lists it
(``config.LAZY_COMMANDS``), so a command loads just what it needs.
"""

from __future__ import annotations

import click

from dpproxy import __version__
from dpproxy.config import ConfigGroup


@click.group(cls=ConfigGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dpproxy")
@click.option(
    "--config",
    metavar="FILE",
    expose_value=False,
    help="Settings file (default: $DPPROXY_CONFIG, else ./dpproxy.toml, else "
    "~/.config/dpproxy/dpproxy.toml); keys database, schema, ledger, users, listen, tls_cert, "
    "tls_key, user. Accepted before or after the subcommand.",
)
@click.option(
    "--profile",
    metavar="NAME",
    expose_value=False,
    help="Use the [profile.NAME] table of the settings file (default: $DPPROXY_PROFILE).",
)
def main() -> None:
    """dpproxy: ordinary SQL in, differentially private answers out.

    With no --database/--schema (on the command line or in dpproxy.toml), commands use the
    bundled UCI Adult demo (table `adult`), built into a DuckDB file in your cache directory
    on first use. Budgets are kept in one ledger for every command (--ledger, else
    $DPPROXY_LEDGER, else ~/.local/share/dpproxy/ledger.sqlite). Exit status: 0 success,
    1 an error with a SQLSTATE, 2 a command line that cannot be parsed.
    """


if __name__ == "__main__":
    main()
