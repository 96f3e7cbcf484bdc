"""Session settings: PostgreSQL's defaults as dpproxy reports them, and SHOW/SET/RESET syntax.

Pure functions and patterns; the settings themselves live in each
:class:`~.emulator.CatalogEmulator` (and, for ``pg_settings`` and ``current_setting``, in
the session's TEMP tables, see :mod:`.session_tables`).
"""

from __future__ import annotations

import re
from typing import Final

REPORTED: Final = (
    "application_name",
    "client_encoding",
    "DateStyle",
    "default_transaction_read_only",
    "in_hot_standby",
    "integer_datetimes",
    "IntervalStyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "TimeZone",
)


def default_settings(version: str, user: str) -> dict[str, tuple[str, str]]:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0]
    values = {
        "server_version": version,
        "server_version_num": f"{parts[0] * 10000 + parts[1]}",
        "server_encoding": "UTF8",
        "client_encoding": "UTF8",
        "application_name": "",
        "DateStyle": "ISO, MDY",
        "IntervalStyle": "postgres",
        "TimeZone": "UTC",
        "integer_datetimes": "on",
        "standard_conforming_strings": "on",
        "is_superuser": "off",
        "session_authorization": user,
        "default_transaction_read_only": "on",
        "transaction_read_only": "on",
        "in_hot_standby": "off",
        "transaction_isolation": "read committed",
        "default_transaction_isolation": "read committed",
        "search_path": '"$user", public',
        "extra_float_digits": "1",
        "jit": "off",
        "max_identifier_length": "63",
        "lc_collate": "C",
        "lc_ctype": "C",
        "lc_messages": "C",
        "default_table_access_method": "heap",
        "block_size": "8192",
        "max_index_keys": "32",
        "bytea_output": "hex",
        "statement_timeout": "0",
        "lock_timeout": "0",
        "idle_in_transaction_session_timeout": "0",
        "client_min_messages": "notice",
        "row_security": "on",
        "timezone_abbreviations": "Default",
    }
    return {k.lower(): (k, v) for k, v in values.items()}


SHOW_RE: Final = re.compile(
    r"SHOW\s+(?P<name>ALL|TIME\s+ZONE|TRANSACTION\s+ISOLATION\s+LEVEL|SESSION\s+AUTHORIZATION"
    r'|[A-Za-z_][\w.$]*|"[^"]+")\s*;?\s*\Z',
    re.I | re.S,
)
SET_RE: Final = re.compile(
    r"SET\s+(?:(?:SESSION|LOCAL)\s+)?(?P<name>TIME\s+ZONE|[A-Za-z_][\w.$]*|\"[^\"]+\")"
    r"\s*(?:(?:=|\bTO\b)\s*)?(?P<value>.*?)\s*;?\s*\Z",
    re.I | re.S,
)
RESET_RE: Final = re.compile(r"RESET\s+(?P<name>ALL|[A-Za-z_][\w.$]*)\s*;?\s*\Z", re.I | re.S)
SHOW_ALIASES: Final = {
    "time zone": "timezone",
    "transaction isolation level": "transaction_isolation",
    "session authorization": "session_authorization",
}
_VALUE_ITEM: Final = re.compile(r"\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^,\s]+)\s*(?:,|\Z)")


def strip_comments(sql: str) -> str:
    """``sql`` without leading/trailing whitespace and leading comments."""
    text = sql.strip()
    while True:
        if text.startswith("--"):
            text = text.partition("\n")[2].lstrip()
        elif text.startswith("/*") and "*/" in text:
            text = text.split("*/", 1)[1].lstrip()
        else:
            return text


def setting_value(raw: str) -> str | None:
    """The value of ``SET x = raw`` as SHOW prints it; None for DEFAULT."""
    if raw.upper() in ("DEFAULT", "LOCAL DEFAULT"):
        return None
    items = []
    for m in _VALUE_ITEM.finditer(raw):
        item = m.group(1)
        items.append(item[1:-1].replace("''", "'") if item.startswith("'") else item)
    return ", ".join(items)


# Settings SET, RESET and set_config() refuse to change.
READ_ONLY_SETTINGS: Final = frozenset(
    {
        "server_version",
        "server_version_num",
        "server_encoding",
        "is_superuser",
        "session_authorization",
        "integer_datetimes",
        "max_identifier_length",
        "block_size",
        "lc_collate",
        "lc_ctype",
        "in_hot_standby",
        "max_index_keys",
        "transaction_read_only",
        "default_transaction_read_only",
    }
)
