"""SQL cursors: DECLARE, FETCH, MOVE and CLOSE, and the rows of ``pg_cursors``.

:class:`CursorCommands` is the part of :class:`~dpproxy.server.session.Session` that runs them:
a cursor's query runs (and is charged) at DECLARE, its rows become the portal of the same name,
and FETCH and MOVE page through the released rows. The cursors a transaction declared are
closed at its end by ``SessionCommands._end_transaction`` (``session_commands.py``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Coroutine
from typing import Any

from dpproxy.errors import SQLSyntaxError, UnsupportedQuery
from dpproxy.server.session_types import (
    Cursor,
    DuplicateCursor,
    NoActiveTransaction,
    Portal,
    UndefinedCursor,
)
from dpproxy.server.sqltext import identifier as _identifier
from dpproxy.server.worker import Result


class CursorCommands:
    """DECLARE/FETCH/MOVE/CLOSE and ``pg_cursors`` (a part of ``Session``)."""

    # What this part reads of the session (set by Session.__init__, or defined by Session).
    status: str
    portals: dict[str, Portal]
    cursors: dict[str, Cursor]
    execute: Callable[..., Coroutine[Any, Any, Result]]  # session_statements.py

    async def cursor_command(self, sql: str) -> Result:
        """DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD] FOR query; FETCH [n|ALL|NEXT]
        [FROM|IN] name; MOVE ...; CLOSE name|ALL. The query runs (and is charged) at DECLARE;
        FETCH pages through the released rows."""
        raw = sql.strip().rstrip(";")
        words = raw.split()
        head = words[0].upper()
        if head == "DECLARE":
            if len(words) < 4:
                raise SQLSyntaxError("syntax error in DECLARE")
            name = _identifier(words[1])
            upper = [w.upper() for w in words]
            if "FOR" not in upper:
                raise SQLSyntaxError('syntax error in DECLARE: expected "FOR"')
            options = upper[2 : upper.index("FOR")]
            holdable = "HOLD" in options and "WITHOUT" not in options
            if self.status == "I" and not holdable:
                raise NoActiveTransaction("DECLARE CURSOR can only be used in transaction blocks")
            query = " ".join(words[upper.index("FOR") + 1 :])
            if name in self.portals:
                raise DuplicateCursor(f'cursor "{name}" already exists', hint=None)
            result = await self.execute(query, [])
            self.portals[name] = Portal(query, [], result)
            self.cursors[name] = Cursor(
                raw,
                holdable,
                "BINARY" in options,
                "SCROLL" in options and "NO" not in options,
                time.time(),
                self.status != "I",
            )
            return Result([], [], "DECLARE CURSOR", notices=result.notices)  # the query ran here
        if head == "CLOSE":
            target = _identifier(words[1]) if len(words) > 1 else ""
            if words[1:2] and words[1].upper() == "ALL":
                self.portals = {k: v for k, v in self.portals.items() if k not in self.cursors}
                self.cursors.clear()
            elif self.portals.pop(target, None) is None:
                raise UndefinedCursor(f'cursor "{target}" does not exist')
            self.cursors.pop(target, None)
            return Result([], [], "CLOSE CURSOR")
        # FETCH / MOVE [FORWARD] [n | ALL | NEXT] [FROM | IN] name
        rest = [w for w in words[1:] if w.upper() not in ("FROM", "IN", "FORWARD")]
        if not rest:
            raise SQLSyntaxError(f"syntax error in {head}")
        name = _identifier(rest[-1])
        count_word = rest[0].upper() if len(rest) > 1 else "NEXT"
        cursor = self.portals.get(name)
        if cursor is None or cursor.result is None:
            raise UndefinedCursor(f'cursor "{name}" does not exist')
        if count_word == "ALL":
            count = len(cursor.result.rows)
        elif count_word == "NEXT":
            count = 1
        elif count_word.isdigit():
            count = int(count_word)
        else:
            raise UnsupportedQuery(f"{head} {count_word} is not supported", hint="FETCH n or ALL")
        rows = cursor.result.rows[cursor.sent : cursor.sent + count]
        cursor.sent += len(rows)
        if head == "MOVE":
            return Result([], [], f"MOVE {len(rows)}")
        return Result(cursor.result.fields, list(rows), f"FETCH {len(rows)}")

    def cursor_rows(self) -> list[tuple[object, ...]]:
        """The rows of pg_cursors: name, statement, is_holdable, is_binary, is_scrollable,
        creation_time."""
        return [
            (
                name,
                c.statement,
                c.holdable,
                c.binary,
                c.scrollable,
                datetime.datetime.fromtimestamp(c.created, datetime.UTC),
            )
            for name, c in self.cursors.items()
        ]
