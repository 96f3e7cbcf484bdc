"""PEP 249's module globals, exceptions, constructors and type objects, without the engine.

``import dpproxy`` exports these (so ``dpproxy.paramstyle`` and ``except dpproxy.ProgrammingError``
work as with psycopg or sqlite3) while importing nothing heavier than the standard library:
``dpproxy.dbapi``, which opens engines, is imported at the first ``dpproxy.connect``.

The exceptions are the categories of ``dpproxy.errors``: every dpproxy error derives from the
one its SQLSTATE maps to (``errors.DBAPI_CATEGORIES``) and carries ``.sqlstate``.

>>> import dpproxy
>>> dpproxy.apilevel, dpproxy.threadsafety, dpproxy.paramstyle
('2.0', 1, 'pyformat')
>>> issubclass(dpproxy.errors.Forbidden, dpproxy.ProgrammingError)
True
>>> "double" == dpproxy.NUMBER, "text" == dpproxy.NUMBER
(True, False)
"""

from __future__ import annotations

import datetime
import time

from dpproxy.errors import (
    DatabaseError,
    DataError,
    DPProxyError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)

apilevel = "2.0"
# Threads may share the module, not connections: a connection's cursors share one engine
# session (PEP 249 level 1).
threadsafety = 1
paramstyle = "pyformat"

Error = DPProxyError


class Warning(Exception):
    """PEP 249's Warning; dpproxy reports notices on ``cursor.notices`` and raises none."""


Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> datetime.date:
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    return Timestamp(*time.localtime(ticks)[:6])


class TypeObject:
    """A PEP 249 type object: equal to each ``cursor.description`` type code it covers."""

    def __init__(self, name: str, *codes: str) -> None:
        self.name = name
        self.codes = frozenset(codes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TypeObject):
            return self.codes == other.codes
        return other in self.codes

    def __hash__(self) -> int:
        return hash(self.codes)

    def __repr__(self) -> str:
        return f"<dpproxy type {self.name}>"


# The type codes of ``cursor.description`` are the released columns' types
# (``release/postprocess.OutputColumn.type``).
STRING = TypeObject("STRING", "text")
NUMBER = TypeObject("NUMBER", "integer", "double")
DATETIME = TypeObject("DATETIME", "date")
BOOLEAN = TypeObject("BOOLEAN", "boolean")  # an extension, as psycopg's
BINARY = TypeObject("BINARY")  # dpproxy releases no binary column
ROWID = TypeObject("ROWID")  # nor row ids

__all__ = [
    "BINARY", "BOOLEAN", "DATETIME", "NUMBER", "ROWID", "STRING", "Binary", "DataError",
    "DatabaseError", "Date", "DateFromTicks", "Error", "IntegrityError", "InterfaceError",
    "InternalError", "NotSupportedError", "OperationalError", "ProgrammingError", "Time",
    "TimeFromTicks", "Timestamp", "TimestampFromTicks", "TypeObject", "Warning", "apilevel",
    "paramstyle", "threadsafety",
]
