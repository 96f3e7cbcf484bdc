"""dpproxy: ordinary SQL in, differentially private answers out.

``import dpproxy`` is cheap: it loads the error tree and PEP 249's globals only. The engine
(sqlglot, DuckDB), OpenDP and PostgreSQL's driver are imported when first needed:
``dpproxy.connect`` and ``dpproxy.read_sql`` load ``dpproxy.dbapi`` on first use
(``tests/unit/test_startup_imports.py``).
"""

from __future__ import annotations

import logging

from dpproxy import errors
from dpproxy.errors import DPProxyError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it as True)
if TYPE_CHECKING:
    from dpproxy.dbapi import Connection, connect
    from dpproxy.notebook import read_sql
    from dpproxy.pep249 import (
        BINARY,
        BOOLEAN,
        DATETIME,
        NUMBER,
        ROWID,
        STRING,
        Binary,
        DatabaseError,
        DataError,
        Date,
        DateFromTicks,
        Error,
        IntegrityError,
        InterfaceError,
        InternalError,
        NotSupportedError,
        OperationalError,
        ProgrammingError,
        Time,
        TimeFromTicks,
        Timestamp,
        TimestampFromTicks,
        Warning,
        apilevel,
        paramstyle,
        threadsafety,
    )

# A library leaves its log's destination to the application (``dpproxy serve`` logs to stderr,
# ``dpproxy query --log FILE`` to a file). Without this handler, Python would print dpproxy's
# warnings and errors to stderr, where a failed query's cause — which can quote a value of the
# database — would reach whoever reads the program's output.
logging.getLogger("dpproxy").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "BINARY", "BOOLEAN", "DATETIME", "NUMBER", "ROWID", "STRING", "Binary", "Connection",
    "DPProxyError", "DataError", "DatabaseError", "Date", "DateFromTicks", "Error",
    "IntegrityError", "InterfaceError", "InternalError", "NotSupportedError",
    "OperationalError", "ProgrammingError", "Time", "TimeFromTicks", "Timestamp",
    "TimestampFromTicks", "Warning", "__version__", "apilevel", "connect", "errors",
    "paramstyle", "read_sql", "threadsafety",
]

_LAZY = {"connect": "dpproxy.dbapi", "Connection": "dpproxy.dbapi", "read_sql": "dpproxy.notebook"}
# The PEP 249 module attributes (pep249.py, and the datetime module it needs) on first use:
# ``import dpproxy`` alone loads logging and the errors only.
_EAGER = ("DPProxyError", "__version__", "errors")
_LAZY.update({n: "dpproxy.pep249" for n in __all__ if n not in _LAZY and n not in _EAGER})


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpproxy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
