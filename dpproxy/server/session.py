"""One client connection: startup, authentication, then simple and extended queries.

Every statement is routed, in this order, to

1. the session itself (transaction control, SET/RESET/SHOW, DISCARD, DEALLOCATE, cursors,
   dpproxy's own settings) — answered without any database;
2. the catalog emulation (the ``catalog`` package) when it reads only ``pg_catalog`` /
   ``information_schema`` or calls system functions — answered from the privacy schema, with
   nothing that depends on the data;
3. the differential-privacy engine — which plans it or refuses it (a query over public tables
   only is answered exactly, at no cost). No SQL reaches the backend unless the planner
   produced it.

DP semantics on the wire: Describe is answered from the plan and never runs the query; the
budget is charged once per executed portal (the first Execute runs it, later Executes of a
suspended portal only page through the released rows); a refused query is an ErrorResponse
and the session stays usable.

The session is one class, :class:`Session`, made of parts that each live in a module of their
own (and read the session's attributes they declare); this module holds the connection itself:
its state, the output queue, the message loop and the simple Query protocol.

* :mod:`~dpproxy.server.session_types`: the session's errors (with their SQLSTATEs), cursors,
  prepared statements, portals, settings (:func:`default_settings`, :data:`STATUS_PARAMETERS`),
  and :class:`SessionHost`, what a session uses of the server;
* :mod:`~dpproxy.server.session_statements`: running a statement (route, DP worker threads);
* :mod:`~dpproxy.server.session_extended`: the extended protocol, Describe, result encoding;
* :mod:`~dpproxy.server.session_cursors`: DECLARE, FETCH, MOVE, CLOSE, ``pg_cursors``;
* :mod:`~dpproxy.server.session_commands`: transactions, SET/RESET/SHOW, DISCARD, DEALLOCATE
  and dpproxy's own settings.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from dpproxy.backends import CancelToken
from dpproxy.errors import (
    DPProxyError,
    InternalError,
    InvalidParameter,
    ProtocolViolation,
)
from dpproxy.server import direct, protocol
from dpproxy.server.catalog import CatalogEmulator
from dpproxy.server.linger import Linger
from dpproxy.server.protocol import Payload
from dpproxy.server.session_commands import SessionCommands
from dpproxy.server.session_cursors import CursorCommands
from dpproxy.server.session_extended import ExtendedQuery
from dpproxy.server.session_statements import StatementRunner
from dpproxy.server.session_types import (
    SERVER_VERSION,
    STATUS_PARAMETERS,
    Cursor,
    Portal,
    Prepared,
    SessionHost,
    SessionLimits,
    SessionState,
    default_settings,
)
from dpproxy.server.sqltext import split_statements
from dpproxy.server.worker import Result
from dpproxy.sql.parse import too_complex

__all__ = [
    "SERVER_VERSION",
    "STATUS_PARAMETERS",
    "Session",
    "SessionHost",
    "SessionLimits",
    "SessionState",
    "check_startup_user",
    "default_settings",
]

log = logging.getLogger("dpproxy.server")

_FLUSH_AFTER = frozenset((b"Q", b"S", b"H"))


class Session(StatementRunner, ExtendedQuery, CursorCommands, SessionCommands):
    """The state machine of one connection (created by ``server.Server``); its parts are
    the classes it derives from (see the module)."""

    def __init__(
        self,
        server: SessionHost,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.pid = secrets.randbelow(2**31 - 1) + 1
        self.key = secrets.randbits(31)
        self.user = ""
        self.database = ""
        self.status = "I"  # I idle, T in a transaction block, E failed transaction block
        self.state = SessionState()
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}  # also SQL cursors: DECLARE makes a named portal
        self.cursors: dict[str, Cursor] = {}  # the portals made by DECLARE
        self.skip_until_sync = False
        self.running: asyncio.Future[Any] | None = None
        self.cancel_token: CancelToken | None = None
        self._timed_out = False
        self._catalog_answers: dict[str, Result] = {}
        # Query → (its statement, the cached catalog answer encoded, the messages): a
        # repeated one-statement catalog query (``SELECT 1``, a driver's probe) is answered
        # from these bytes while that cached answer is still the current one.
        self._replies: dict[str, tuple[str, Result, bytes]] = {}
        self._out: list[bytes] = []
        self._queued = 0
        self._param_types: dict[str, list[int]] = {}  # statement text → its $n type OIDs
        # (statement text, ε, δ, mechanism, method) → the columns of its DP plan: a driver
        # that describes every portal before executing it plans the statement once
        self._described: dict[tuple[object, ...], list[tuple[str, int]]] = {}
        self._private: set[str] = set()  # statement texts that :meth:`execute` routed to DP
        self.startup: dict[str, str] = {}
        self.emulator: CatalogEmulator | None = None  # made on first use
        self.peer = writer.get_extra_info("peername")
        self.gate = direct.Gate()  # closed by Server.shutdown: no worker writes after it
        self._linger: Linger | None = None  # a worker serving this connection (linger.py)
        self._messages: protocol.MessageReader | None = None
        self._handlers = self._make_handlers()  # message type → handler, made once
        self._steps = self._make_steps()
        self._descriptions: dict[tuple[object, ...], bytes] = {}  # see _row_description

    # ----------------------------------------------------------------------------- output

    def send(self, data: bytes) -> None:
        """Queue a message; :meth:`flush` writes the queue in one go (one ``send`` per
        exchange instead of one per message)."""
        self._out.append(data)
        self._queued += len(data)
        if self._queued > 1 << 16:
            self.writer.write(b"".join(self._out))
            self._out.clear()
            self._queued = 0

    async def flush(self) -> None:
        if self._write_out():
            await self.writer.drain()

    def _write_out(self) -> bool:
        """Hand the queue to the transport; whether it holds data back (the socket's buffer
        was full), the only case in which ``drain`` can wait (a lost connection shows at the
        next read)."""
        out = self._out
        if out:
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
            self._queued = 0
        return bool(self.writer.transport.get_write_buffer_size())

    def send_error(self, err: DPProxyError) -> None:
        self.send(protocol.error_from(err))
        if self.status == "T":
            self.status = "E"
        log.info(
            "refused",
            extra={"event": "error", "user": self.user, "sqlstate": err.sqlstate, "pid": self.pid},
        )

    # ------------------------------------------------------------------------- main loop

    async def serve(self) -> None:
        cfg = self.server.config
        messages = self._messages = protocol.MessageReader(self.reader, cfg.max_message_size)
        messages.bind(asyncio.current_task())  # the only task that reads this connection
        handlers, steps = self._handlers, self._steps
        while True:
            try:
                kind, payload = await messages.read(cfg.idle_timeout)
            except TimeoutError:
                self.send(
                    protocol.error_response(
                        "57P05", "terminating connection due to idle timeout", severity="FATAL"
                    )
                )
                await self.flush()
                return
            if kind == b"X":
                return
            if self.skip_until_sync and kind != b"S":
                if kind == b"H":  # Flush still delivers what is pending (the error)
                    await self.flush()
                continue
            try:
                step = steps.get(kind)  # dispatch(), without a coroutine of its own
                if step is not None:
                    step(payload)
                elif kind == b"Q":  # on_query, without a coroutine for a replayed answer
                    sql = payload.cstr()
                    if not self._replay(sql):
                        await self._query(sql)
                else:
                    handler = handlers.get(kind)
                    if handler is None:
                        raise ProtocolViolation(f"invalid frontend message type {kind!r}")
                    await handler(payload)
            except (ProtocolViolation, protocol.MessageTooLarge) as e:
                self.send(protocol.error_from(e, severity="FATAL"))
                await self.flush()
                return
            except Exception as e:  # a bug: this message fails, the session goes on
                self.send_error(self._unexpected(e))
                if kind == b"Q":
                    self._ready()
                else:
                    self.skip_until_sync = True
            # The protocol lets a server hold its output until Sync, Flush or the end of a
            # simple Query; pipelined clients then get one write per round trip.
            if kind in _FLUSH_AFTER and self._write_out():
                await self.writer.drain()

    def _unexpected(self, e: Exception) -> DPProxyError:
        """The error a client gets for an exception that is no DPProxyError: 54001 for a
        recursion too deep (``sql/parse.py`` keeps statements far from it), else XX000, with
        the traceback in the log."""
        if isinstance(e, DPProxyError):
            return e
        if isinstance(e, RecursionError):
            return too_complex("it ran out of stack")
        log.error(
            "internal error",
            exc_info=e,
            extra={"event": "internal", "user": self.user, "pid": self.pid},
        )
        return InternalError("internal error")

    async def dispatch(self, kind: bytes, payload: Payload) -> None:
        step = self._steps.get(kind)
        if step is not None:
            step(payload)
            return
        handler = self._handlers.get(kind)
        if handler is None:
            raise ProtocolViolation(f"invalid frontend message type {kind!r}")
        await handler(payload)

    def _make_handlers(self) -> dict[bytes, Callable[[Payload], Awaitable[None]]]:
        """The handlers that may wait (a statement, a flush)."""
        return {b"Q": self.on_query, b"E": self.on_execute, b"H": self.on_flush}

    def _make_steps(self) -> dict[bytes, Callable[[Payload], None]]:
        """The handlers that never wait: called without a coroutine of their own."""
        return {
            b"P": self.on_parse,
            b"B": self.on_bind,
            b"D": self.on_describe,
            b"C": self.on_close,
            b"S": self.on_sync,
            b"F": self.on_function_call,
            b"d": self.on_copy,
            b"c": self.on_copy,
            b"f": self.on_copy,
        }

    def _ready(self) -> None:
        self.send(protocol.ready_for_query(self.status))

    # ----------------------------------------------------------------------- simple query

    async def on_query(self, payload: Payload) -> None:
        sql = payload.cstr()
        if not self._replay(sql):
            await self._query(sql)

    async def _query(self, sql: str) -> None:
        """A simple Query that :meth:`_replay` did not answer."""
        try:
            statements = split_statements(sql)
        except DPProxyError as e:
            self.send_error(e)
            self._ready()
            return
        if not statements:
            self.send(protocol.empty_query_response())
            self._ready()
            return
        for text in statements:
            try:
                # one statement: its worker may send the whole reply (direct.py)
                reply = self._query_reply if len(statements) == 1 else None
                result = await self.execute(text, [], reply=reply)
            except DPProxyError as e:
                self.send_error(e)
                break
            if result.delivered:
                return  # ReadyForQuery included
            self.send(b"".join(self._statement_messages(result)))
            self._report(result)
            if len(statements) == 1:
                self._remember_reply(sql, statements[0], result)
        self._ready()

    def _statement_messages(self, result: Result) -> list[bytes]:
        """A simple-query statement's reply up to CommandComplete (any thread: it reads only
        ``result``)."""
        parts = []
        if result.fields:
            parts.append(self._row_description(result.fields, []))
            parts += self._data_rows(result.rows, result.fields, [])
        parts += [protocol.notice_response("00000", n) for n in result.notices]
        parts.append(protocol.command_complete(result.tag))
        return parts

    def _query_reply(self, result: Result) -> bytes | None:
        """The whole reply to a one-statement Query, for the worker to send (``direct.py``);
        None when the loop must send it (a reported setting changed)."""
        if result.reported:
            return None
        return b"".join([*self._statement_messages(result), protocol.ready_for_query(self.status)])

    def _replay(self, sql: str) -> bool:
        """Answer a simple Query from :attr:`_replies`: only while the catalog answer it was
        encoded from is still the session's cached one (SET, RESET and DISCARD drop those)
        and ``execute`` would return it (not shutting down, no failed transaction block)."""
        known = self._replies.get(sql)
        if known is None or self.status == "E" or self.server.shutting_down:
            return False
        text, source, reply = known
        if self._catalog_answers.get(text) is not source:
            return False
        self.send(reply)
        self._ready()
        return True

    def _remember_reply(self, sql: str, text: str, result: Result) -> None:
        """Keep the messages of a small answer that came from the cached catalog answers
        (the route of a statement's text is fixed, so its next run would return the same)."""
        source = self._catalog_answers.get(text)
        if source is None or result.notices or result.reported or len(result.rows) > 64:
            return
        if len(self._replies) >= 256:
            self._replies.clear()
        parts = [self._row_description(result.fields, [])] if result.fields else []
        parts += self._data_rows(result.rows, result.fields, [])
        parts.append(protocol.command_complete(result.tag))
        self._replies[sql] = (text, source, b"".join(parts))


# ------------------------------------------------------------------------------- helpers


def check_startup_user(params: dict[str, str]) -> str:
    user = params.get("user", "")
    if not user:
        raise InvalidParameter("no PostgreSQL user name specified in startup packet")
    return user
