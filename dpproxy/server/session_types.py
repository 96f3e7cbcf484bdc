"""The data of a session: errors, cursors, prepared statements, portals and settings.

What :class:`~dpproxy.server.session.Session` and its parts (``session_*.py``) share, and what
it needs from the server that runs it:

* the errors a session raises with their SQLSTATEs (:class:`UndefinedCursor`,
  :class:`InFailedTransaction`, ...);
* :class:`Cursor`, :class:`Prepared`, :class:`Portal` and :class:`SessionState` (SET/SHOW
  settings and dpproxy's own ε, δ and mechanism);
* :func:`default_settings` and :data:`STATUS_PARAMETERS` (the settings a session starts with,
  and those reported in ParameterStatus);
* :class:`SessionLimits` and :class:`SessionHost`: what a session uses of the server.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from dpproxy.catalog.model import MechanismKind
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.planning.plan import Method
from dpproxy.server.catalog import CatalogEmulator
from dpproxy.server.worker import Result

SERVER_VERSION = "15.8"
ISOLATION = "read committed"
TEXT_OID = 25


class AdminShutdown(DPProxyError):
    sqlstate = "57P01"


class InFailedTransaction(DPProxyError):
    sqlstate = "25P02"


class UndefinedObject(DPProxyError):
    """An unknown setting, prepared statement, portal or cursor."""

    sqlstate = "42704"


class DuplicateObject(DPProxyError):
    sqlstate = "42P05"


class DuplicateCursor(DPProxyError):
    sqlstate = "42P03"


class UndefinedCursor(DPProxyError):
    """An unknown cursor or portal (PostgreSQL's invalid_cursor_name)."""

    sqlstate = "34000"


class UndefinedPreparedStatement(DPProxyError):
    """An unknown prepared statement (PostgreSQL's invalid_sql_statement_name)."""

    sqlstate = "26000"


class NoActiveTransaction(DPProxyError):
    sqlstate = "25P01"


@dataclass
class Cursor:
    """A cursor of DECLARE (its rows are the portal of the same name), for pg_cursors and
    for closing it at the end of the transaction that declared it."""

    statement: str
    holdable: bool
    binary: bool
    scrollable: bool
    created: float  # time.time()
    in_transaction: bool  # declared in the open transaction block (closed by its ROLLBACK)


@dataclass
class Prepared:
    sql: str
    param_oids: list[int]


@dataclass
class Portal:
    sql: str
    result_formats: list[int]
    result: Result | None = None
    sent: int = 0
    described: list[tuple[str, int]] | None = None


@dataclass
class SessionState:
    """SET/SHOW settings and dpproxy's own (ε, δ, mechanism for this session)."""

    settings: dict[str, str] = field(default_factory=dict)
    epsilon: Fraction | None = None
    delta: Fraction | None = None
    mechanism: MechanismKind | None = None
    method: Method | None = None  # a forced plan (SET dpproxy.mechanism = 'ptr')


def default_settings(params: dict[str, str], user: str, database: str) -> dict[str, str]:
    s = {
        "server_version": SERVER_VERSION,
        "server_version_num": "150008",
        "server_encoding": "UTF8",
        "client_encoding": "UTF8",
        "datestyle": "ISO, MDY",
        "timezone": "UTC",
        "intervalstyle": "postgres",
        "integer_datetimes": "on",
        "standard_conforming_strings": "on",
        "is_superuser": "off",
        "session_authorization": user,
        "application_name": params.get("application_name", ""),
        "default_transaction_read_only": "on",
        "transaction_read_only": "on",
        "in_hot_standby": "off",
        "search_path": '"$user", public',
        "transaction_isolation": ISOLATION,
        "default_transaction_isolation": ISOLATION,
        "extra_float_digits": "1",
        "lc_messages": "C",
        "max_identifier_length": "63",
        "jit": "off",
        "statement_timeout": "0",
        "idle_in_transaction_session_timeout": "0",
        "bytea_output": "hex",
        "xmloption": "content",
    }
    return s


# Reported in ParameterStatus at startup (names as PostgreSQL spells them).
STATUS_PARAMETERS = {
    "server_version": "server_version",
    "server_encoding": "server_encoding",
    "client_encoding": "client_encoding",
    "datestyle": "DateStyle",
    "timezone": "TimeZone",
    "intervalstyle": "IntervalStyle",
    "integer_datetimes": "integer_datetimes",
    "standard_conforming_strings": "standard_conforming_strings",
    "is_superuser": "is_superuser",
    "session_authorization": "session_authorization",
    "application_name": "application_name",
    "default_transaction_read_only": "default_transaction_read_only",
    "in_hot_standby": "in_hot_standby",
}


class SessionLimits(Protocol):
    """The limits of the server's configuration that a session enforces."""

    @property
    def max_message_size(self) -> int: ...
    @property
    def idle_timeout(self) -> float | None: ...
    @property
    def statement_timeout(self) -> float | None: ...


class SessionHost(Protocol):
    """What a :class:`~dpproxy.server.session.Session` uses of the server that runs it
    (``server.Server`` is one).

    Declared here so that the dependency is one-way: the server imports this module, and
    this module never imports the server. The ``session`` a method takes is the
    :class:`~dpproxy.server.session.Session` calling it (typed ``Any``: its parts, in
    ``session_*.py``, pass themselves, and none of them imports the class they make up).
    """

    @property
    def config(self) -> SessionLimits: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def shutting_down(self) -> bool: ...
    @property
    def executor(self) -> Executor | None: ...  # the worker threads of DP statements

    def catalog_emulator(self, session: Any) -> CatalogEmulator: ...
    def is_catalog_query(self, session: Any, sql: str) -> bool: ...
    def known_route(self, sql: str) -> bool | None: ...
    def startup_params(self, session: Any) -> dict[str, str]: ...
