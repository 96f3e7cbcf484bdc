"""Reference pages generated from the code itself, so they cannot drift from it.

- ``cli_reference()``: every ``dpproxy`` command and subcommand, walked from the click group
  of ``dpproxy.cli`` and rendered with the command's own ``--help`` text.
- ``sqlstate_reference()``: every SQLSTATE that an error class of dpproxy registers (the tree
  of ``dpproxy/errors.py``, wherever a subclass is defined), with its error class, its PEP 249
  category and the class's docstring.

``docs/hooks.py`` puts them into ``docs/cli.md`` and ``docs/sqlstates.md`` when the site is
built (``mkdocs build --strict``); ``tests/unit/test_docs_site.py`` checks them and builds the
site. To read them without building::

    python docs/gen_reference.py cli
    python docs/gen_reference.py sqlstates
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path
from typing import Any

import click

# PostgreSQL's condition name of each SQLSTATE dpproxy uses (Appendix A of the PostgreSQL
# manual), and dpproxy's own names for its private class ZD. An error class registered in
# errors.py without an entry here fails tests/unit/test_docs_site.py.
CONDITION_NAMES: dict[str, str] = {
    "0A000": "feature_not_supported",
    "08001": "sqlclient_unable_to_establish_sqlconnection",
    "08006": "connection_failure",
    "08P01": "protocol_violation",
    "22003": "numeric_value_out_of_range",
    "22008": "datetime_field_overflow",
    "22012": "division_by_zero",
    "22014": "invalid_argument_for_ntile_function",
    "2201E": "invalid_argument_for_logarithm",
    "2201G": "invalid_argument_for_width_bucket_function",
    "22023": "invalid_parameter_value",
    "22P02": "invalid_text_representation",
    "23502": "not_null_violation",
    "23505": "unique_violation",
    "24000": "invalid_cursor_state",
    "25006": "read_only_sql_transaction",
    "42000": "syntax_error_or_access_rule_violation",
    "42501": "insufficient_privilege",
    "42601": "syntax_error",
    "42702": "ambiguous_column",
    "42703": "undefined_column",
    "42725": "ambiguous_function",
    "42803": "grouping_error",
    "42804": "datatype_mismatch",
    "42883": "undefined_function",
    "42P01": "undefined_table",
    "42P02": "undefined_parameter",
    "42P20": "windowing_error",
    "53100": "disk_full",
    "53400": "configuration_limit_exceeded",
    "54001": "statement_too_complex",
    "55P03": "lock_not_available",
    "57014": "query_canceled",
    "58000": "system_error",
    "58030": "io_error",
    "XX000": "internal_error",
    "F0000": "config_file_error",
    "54000": "program_limit_exceeded",
    "22021": "character_not_in_repertoire",
    "22007": "invalid_datetime_format",
    "22P03": "invalid_binary_representation",
    "22P04": "bad_copy_file_format",
    "57P01": "admin_shutdown",
    "25P02": "in_failed_sql_transaction",
    "25P01": "no_active_sql_transaction",
    "42704": "undefined_object",
    "42P05": "duplicate_prepared_statement",
    "42P03": "duplicate_cursor",
    "34000": "invalid_cursor_name",
    "26000": "invalid_sql_statement_name",
    "53300": "too_many_connections",
    "28000": "invalid_authorization_specification",
    "28P01": "invalid_password",
    "58P01": "undefined_file",
    "ZD001": "dpproxy: budget_exhausted",
    "ZD002": "dpproxy: unbounded_column",
    "ZD003": "dpproxy: privacy_parameter_error",
    "ZD004": "dpproxy: schema_error",
    "ZD005": "dpproxy: stability_test_failed",
    "ZD006": "dpproxy: ledger_tampered",
}

WIDTH = 100  # the terminal width the help texts are rendered at


def _cell(text: str) -> str:
    """One Markdown table cell: a docstring on one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def registry() -> dict[str, type[Exception]]:
    """Every SQLSTATE an error class of dpproxy registers (``errors.DPProxyError._by_code``),
    after importing every module of the package, so classes defined outside errors.py (the
    server's, the backends') are there too."""
    import dpproxy
    from dpproxy import errors

    for module in pkgutil.walk_packages(dpproxy.__path__, "dpproxy."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    return dict(errors.DPProxyError._by_code)


def pep249_category(cls: type[Exception]) -> type[Exception] | None:
    """The PEP 249 exception a Python caller catches this error as (None: an error only ever
    sent on the wire by ``dpproxy serve``, never raised to Python code)."""
    from dpproxy import errors

    categories = (
        errors.InterfaceError,
        errors.DataError,
        errors.OperationalError,
        errors.IntegrityError,
        errors.InternalError,
        errors.ProgrammingError,
        errors.NotSupportedError,
        errors.DatabaseError,
    )
    return next((c for c in cls.__mro__ if c in categories), None)


def sqlstate_reference() -> str:
    """A Markdown table of every SQLSTATE dpproxy's error classes register, sorted by code."""

    rows = [
        "| SQLSTATE | condition | error class | PEP 249 category | description |",
        "|---|---|---|---|---|",
    ]
    codes = registry()
    for code in sorted(codes):
        cls = codes[code]
        category = pep249_category(cls)
        doc = inspect.getdoc(cls) if cls.__doc__ else None
        doc = doc.split("\n\n", 1)[0] if doc else "—"
        name = CONDITION_NAMES.get(code, "?")
        rows.append(
            f"| `{code}` | {_cell(name)} | `{cls.__module__}.{cls.__name__}` | "
            f"{f'`{category.__name__}`' if category else '—'} | {_cell(doc)} |"
        )
    return "\n".join(rows) + "\n"


def _walk(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> list[tuple[tuple[str, ...], click.Command, click.Context]]:
    settings: dict[str, Any] = {
        **command.context_settings,
        "info_name": path[-1],
        "parent": parent,
        "terminal_width": WIDTH,
        "max_content_width": WIDTH,
    }
    ctx = click.Context(command, **settings)
    found = [(path, command, ctx)]
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                found += _walk(sub, (*path, name), ctx)
    return found


def commands() -> list[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every command of ``dpproxy`` as (path, command, context), the group first."""
    from dpproxy.cli import main

    return _walk(main, ("dpproxy",), None)


def cli_reference() -> str:
    """Each command's ``--help`` as a Markdown section, in the order the group lists them."""
    parts: list[str] = []
    for path, command, ctx in commands():
        title = " ".join(path)
        level = "##" if len(path) <= 2 else "###"
        summary = command.get_short_help_str(limit=WIDTH)
        text = command.get_help(ctx).replace(str(Path.home()), "~")
        parts.append(f"{level} `{title}`\n\n{summary}\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    pages = {"cli": cli_reference, "sqlstates": sqlstate_reference}
    if len(argv) != 1 or argv[0] not in pages:
        print(f"usage: python docs/gen_reference.py {'|'.join(pages)}", file=sys.stderr)
        return 2
    sys.stdout.write(pages[argv[0]]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
