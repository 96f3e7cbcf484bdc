"""The error tree of dpproxy: every error carries a SQLSTATE.

Postgres codes are used where the meaning matches. Conditions that exist only because
of differential privacy use the private class ``ZD`` (the first character is in the
implementation-defined range ``I``-``Z`` that the SQL standard leaves to products):

======  ===========================  ==================================================
code    class                        meaning
======  ===========================  ==================================================
ZD001   BudgetExhausted              the analyst's privacy budget cannot pay for the query
ZD002   UnboundedColumn              an aggregate needs bounds the schema does not give
ZD003   PrivacyParameterError        ε/δ requested are invalid or need δ > 0
ZD004   SchemaError                  the privacy schema is invalid (never loads half-way)
======  ===========================  ==================================================

Messages are safe to show a client; ``log_detail`` goes only to logs.

Every error is also one of PEP 249's categories, chosen by its SQLSTATE as psycopg and sqlite3
users expect (``DBAPI_CATEGORIES``): ``ProgrammingError`` for class 42 (and the privacy
parameters of a request), ``OperationalError`` for classes 08, 25 and 53–58 and a spent budget,
``DataError`` for 22, ``IntegrityError`` for 23 and a tampered ledger, ``NotSupportedError`` for
0A, ``InternalError`` for XX, ``InterfaceError`` for a closed cursor (24000). ``dpproxy`` and
``dpproxy.dbapi`` export them; ``tests/unit/test_pep249.py`` checks every error against the table.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it as True)
if TYPE_CHECKING:  # ``import dpproxy`` loads this module: ClassVar is an annotation only
    from typing import ClassVar


class DPProxyError(Exception):
    """Base class: a message safe for clients, a SQLSTATE, optional hint and position."""

    sqlstate: ClassVar[str] = "XX000"
    severity: ClassVar[str] = "ERROR"
    _by_code: ClassVar[dict[str, type[DPProxyError]]] = {}

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        code = cls.__dict__.get("sqlstate")
        if code is not None:
            if code in DPProxyError._by_code:
                other = DPProxyError._by_code[code].__name__
                raise TypeError(f"SQLSTATE {code} already used by {other}")
            DPProxyError._by_code[code] = cls

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        position: int | None = None,
        log_detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.position = position
        self.log_detail = log_detail

    def __str__(self) -> str:
        text = f"{self.sqlstate}: {self.message}"
        if self.hint:
            text += f"\nHINT: {self.hint}"
        return text


Error = DPProxyError  # PEP 249's name for the base class


class InterfaceError(DPProxyError):
    """PEP 249: misuse of the Python interface rather than of the database (a closed cursor)."""


class DatabaseError(DPProxyError):
    """PEP 249: an error about the query, the data, the budget or the database."""


class DataError(DatabaseError):
    """PEP 249: a value that cannot be used (SQLSTATE class 22)."""


class OperationalError(DatabaseError):
    """PEP 249: a condition outside the query text: the database or the ledger unreachable,
    a limit, a cancellation, a spent budget (classes 08, 25, 53–58; ZD001, ZD004, ZD005)."""


class IntegrityError(DatabaseError):
    """PEP 249: integrity of stored data broken (class 23; a tampered ledger, ZD006)."""


class ProgrammingError(DatabaseError):
    """PEP 249: the query or the request is wrong (class 42; ZD002, ZD003)."""


class NotSupportedError(DatabaseError):
    """PEP 249: a construct dpproxy does not support (class 0A)."""


class SQLSyntaxError(ProgrammingError):
    sqlstate = "42601"


class UnsupportedQuery(NotSupportedError):
    """A construct dpproxy cannot (yet) make differentially private."""

    sqlstate = "0A000"


class UndefinedTable(ProgrammingError):
    sqlstate = "42P01"


class UndefinedColumn(ProgrammingError):
    sqlstate = "42703"


class UndefinedFunction(ProgrammingError):
    sqlstate = "42883"


class AmbiguousFunction(ProgrammingError):
    """An operator or function whose operands are all untyped NULLs (PostgreSQL cannot choose
    among its candidates: ``- NULL``, ``NULL + NULL``)."""

    sqlstate = "42725"


class DatatypeMismatch(ProgrammingError):
    sqlstate = "42804"


class GroupingError(ProgrammingError):
    sqlstate = "42803"


class OuterQueryInvalid(ProgrammingError):
    """The query around parts released first (``composed.py``) does not bind on the database
    (syntax_error_or_access_rule_violation): a static error — a type, a grouping, a function —
    found before the budget is reserved, so nothing is charged (SECURITY.md)."""

    sqlstate = "42000"


class WindowingError(ProgrammingError):
    """A window function where SQL allows none (WHERE, GROUP BY, HAVING) or nested in one."""

    sqlstate = "42P20"


class AmbiguousColumn(ProgrammingError):
    sqlstate = "42702"


class Forbidden(ProgrammingError):
    """Row-level reads, DML, DDL and system functions."""

    sqlstate = "42501"


class InvalidTextRepresentation(DataError):
    """A string literal that cannot be read as the type it is compared with."""

    sqlstate = "22P02"


class NumericValueOutOfRange(DataError):
    """A number outside its type's range: a constant beyond the finite doubles every engine
    computes with, or a wire parameter beyond its type (or numeric's 131072 + 16383 digits)."""

    sqlstate = "22003"


class DivisionByZero(DataError):
    """A division by a constant zero in the query's text (LOG(1, x)), refused before any row
    is read; a division by a row's zero is NULL (``NULLIF``), never this error."""

    sqlstate = "22012"


class InvalidArgumentForLog(DataError):
    """LOG(b, x) with a constant base b <= 0, refused before any row is read; a row's x <= 0
    gives NULL (``rewrite/domains.py``), never this error."""

    sqlstate = "2201E"


class InvalidArgumentForNtile(DataError):
    """NTILE(n) with n <= 0 (PostgreSQL raises it when the query runs; refused before)."""

    sqlstate = "22014"


class InvalidArgumentForWidthBucket(DataError):
    """WIDTH_BUCKET with a count <= 0 or equal bounds (PostgreSQL raises it per row)."""

    sqlstate = "2201G"


class DatetimeFieldOverflow(DataError):
    """A date or time field out of range (month 13, February 30), or beyond PostgreSQL's (a
    wire parameter); date arithmetic on constants whose result leaves 0001-01-01 …
    9999-12-31, decided before any data is read."""

    sqlstate = "22008"


class InvalidParameter(DataError):
    sqlstate = "22023"


class QueryCanceled(OperationalError):
    sqlstate = "57014"


class CanceledBeforeStart(QueryCanceled):
    """Cancelled before the backend sent the statement (``CancelToken.check``): it provably
    read nothing, so the engine refunds the reservation when no earlier statement ran."""


class StatementTooComplex(OperationalError):
    """A statement past dpproxy's limits on size and nesting (``sql/parse.py``), refused
    before it is planned: deep trees would exhaust the stack of the parser or the planner."""

    sqlstate = "54001"


class BudgetExhausted(OperationalError):
    sqlstate = "ZD001"


class UnboundedColumn(ProgrammingError):
    sqlstate = "ZD002"


class PrivacyParameterError(ProgrammingError):
    sqlstate = "ZD003"


class SchemaError(OperationalError):
    """A privacy schema failed validation; ``problems`` lists every ``file: key.path: issue``."""

    sqlstate = "ZD004"

    def __init__(self, message: str, problems: tuple[str, ...] = (), **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.problems = problems


class BackendUnavailable(OperationalError):
    """The database could not be reached or opened; the query provably never ran, so its
    budget is refunded (sqlclient_unable_to_establish_sqlconnection)."""

    sqlstate = "08001"


class ConnectionLost(OperationalError):
    """The connection to the database broke while a query ran; the query may have read the
    data, so its budget is charged (connection_failure)."""

    sqlstate = "08006"


class ProtocolViolation(OperationalError):
    """A malformed or unexpected wire-protocol message (``dpproxy serve``)."""

    sqlstate = "08P01"


class InternalError(DatabaseError):
    """A broken invariant inside dpproxy; clients see only a generic message."""

    sqlstate = "XX000"


class StabilityTestFailed(OperationalError):
    """Propose-test-release refused: the data is not far enough from instability. The test
    itself spent budget, so the query is charged."""

    sqlstate = "ZD005"


class LedgerTampered(IntegrityError):
    """``dpproxy budget verify``: the budget ledger's hash chain or its replay disagrees with
    the file (an entry edited, inserted or deleted, or an account changed behind the log's
    back); ``problems`` lists every finding."""

    sqlstate = "ZD006"

    def __init__(self, message: str, problems: tuple[str, ...] = (), **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.problems = problems


class LedgerUnavailable(OperationalError):
    """The budget ledger cannot be read or written (io_error): no charge can be recorded, so
    nothing is released. The subclasses name the common causes with PostgreSQL's codes."""

    sqlstate = "58030"


class LedgerFull(LedgerUnavailable):
    """The ledger's disk (or file system quota) is full (disk_full)."""

    sqlstate = "53100"


class LedgerReadOnly(LedgerUnavailable):
    """The ledger file, its directory or its file system is read-only
    (read_only_sql_transaction, as a read-only PostgreSQL answers a write)."""

    sqlstate = "25006"


class LedgerLocked(LedgerUnavailable):
    """Another process held the ledger's write lock for longer than the busy timeout
    (lock_not_available)."""

    sqlstate = "55P03"


class NotNullViolation(IntegrityError):
    """``dpproxy data copy --primary-key``: the key column is NULL on some row
    (not_null_violation; ``backends/file_copy.py``)."""

    sqlstate = "23502"


class UniqueViolation(IntegrityError):
    """``dpproxy data copy --primary-key``: a key value occurs on more than one row
    (unique_violation; ``backends/file_copy.py``)."""

    sqlstate = "23505"


class UndefinedFile(OperationalError):
    """A data file given as ``--database`` does not exist, or a glob matches no file
    (undefined_file; ``backends/files.py``)."""

    sqlstate = "58P01"


class BadFileFormat(DataError):
    """A data file DuckDB cannot read as the format its extension names, an empty data file,
    or a file that is not a DuckDB database (bad_copy_file_format; ``backends/files.py``)."""

    sqlstate = "22P04"


class PublicQueryFailed(OperationalError):
    """The database failed to run a query over public tables only (system_error). Such a
    query reads no private row, so its failure reveals nothing private: the message carries
    the database's own, and nothing is charged (``planning/public.py``)."""

    sqlstate = "58000"


class PublicResultTooLarge(OperationalError):
    """A query over public tables only returned more rows than dpproxy releases at once
    (configuration_limit_exceeded, ``planning/public.MAX_PUBLIC_ROWS``); nothing is charged."""

    sqlstate = "53400"


class UndefinedParameter(ProgrammingError):
    """Query parameters that do not match the placeholders (a placeholder with no value, or a
    value with no placeholder): PEP 249 calls it a ProgrammingError, as psycopg and sqlite3 do."""

    sqlstate = "42P02"


class CursorClosed(InterfaceError):
    """A closed cursor or connection used again (invalid_cursor_state)."""

    sqlstate = "24000"


# PEP 249's category of each SQLSTATE: its class (two characters), or the whole code for
# dpproxy's own ``ZD`` codes. An error's category is the one of its class's SQLSTATE.
DBAPI_CATEGORIES: dict[str, type[DPProxyError]] = {
    "0A": NotSupportedError,
    "08": OperationalError,
    "22": DataError,  # 22P04 too: a data file that cannot be read as its format
    "23": IntegrityError,
    "24": InterfaceError,
    "25": OperationalError,  # a read-only ledger: sqlite3 reports its read-only file so
    "42": ProgrammingError,
    "53": OperationalError,
    "54": OperationalError,
    "55": OperationalError,
    "57": OperationalError,
    "58": OperationalError,  # 58P01: a --database file missing, a glob matching nothing
    "XX": InternalError,
    "ZD001": OperationalError,  # budget exhausted
    "ZD002": ProgrammingError,  # an aggregate the schema gives no bounds for
    "ZD003": ProgrammingError,  # invalid ε/δ requested
    "ZD004": OperationalError,  # the privacy schema is invalid (nothing can be opened)
    "ZD005": OperationalError,  # PTR refused on this data
    "ZD006": IntegrityError,  # the ledger was tampered with
}


def dbapi_category(sqlstate: str) -> type[DPProxyError] | None:
    """The PEP 249 category of a SQLSTATE (``DBAPI_CATEGORIES``), None if it has none."""
    return DBAPI_CATEGORIES.get(sqlstate) or DBAPI_CATEGORIES.get(sqlstate[:2])
