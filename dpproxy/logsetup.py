"""The logs of ``dpproxy serve`` and ``dpproxy query --log``: JSON lines at ``--log-level``.

Every line is one JSON object (``server.JsonFormatter``: time, level, msg and the named fields
only, never data). The level is ``--log-level``, else ``$DPPROXY_LOG_LEVEL``, else ``info``.
"""

from __future__ import annotations

import logging
from typing import IO

from dpproxy.server.server import JsonFormatter

LEVELS = ("debug", "info", "warning", "error")
LEVEL_ENV = "DPPROXY_LOG_LEVEL"


class _OneLinePerRelease(logging.Filter):
    """The server logs each release once, with its fields (``event: release``, user, rows,
    cost, ms, pid); the engine's own line for the same release (meant for the embedded API and
    ``dpproxy query --log``) is dropped here so that a release is never logged twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name == "dpproxy"
            and record.module == "engine"
            and str(record.msg).startswith("released ")
        )


ENGINE_RELEASE = "released %d rows for %s at %s"  # engine.py's line for each release


class _ReleaseFields(logging.Filter):
    """``dpproxy query --log``: the engine's release line gets the fields of ``serve``'s
    (``event: release``, user, rows, cost) from its arguments (rows, analyst, cost)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.msg == ENGINE_RELEASE and isinstance(args, tuple) and len(args) == 3:
            record.event, record.user, record.rows = "release", args[1], args[0]
            record.cost = str(args[2])
        return True


# A server's life: its ledger, its address, its shutdown. Written at every --log-level, since
# an operator (and a script waiting for the port) needs them; labelled with their own level.
LIFECYCLE = frozenset({"ledger", "listen", "stopping", "shutdown"})


class _LevelOrLifecycle(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or getattr(record, "event", None) in LIFECYCLE


def json_logging(
    level: str, stream: IO[str] | None = None, path: str | None = None, *, server: bool = False
) -> None:
    """Send the ``dpproxy`` logger's records at ``level`` and above to ``path`` (appended) or
    ``stream`` (standard error), one JSON object a line. ``server``: the session logs each
    release, so the engine's line for it is dropped, and the lifecycle lines are always
    written."""
    handler: logging.Handler = (
        logging.FileHandler(path, encoding="utf-8") if path else logging.StreamHandler(stream)
    )
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("dpproxy")
    logger.addHandler(handler)
    wanted = logging.getLevelNamesMapping()[level.upper()]
    if not server:
        handler.addFilter(_ReleaseFields())
    if server:
        handler.addFilter(_OneLinePerRelease())
        handler.addFilter(_LevelOrLifecycle(wanted))
        wanted = min(wanted, logging.INFO)
    logger.setLevel(wanted)
