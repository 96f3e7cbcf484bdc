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
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from dpproxy.backends import CancelToken
from dpproxy.catalog.model import ColumnType, MechanismKind
from dpproxy.engine import Answer, Engine
from dpproxy.errors import (
    DPProxyError,
    Forbidden,
    InternalError,
    InvalidParameter,
    PrivacyParameterError,
    ProtocolViolation,
    QueryCanceled,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpproxy.explain_command import COLUMN as EXPLAIN_COLUMN
from dpproxy.explain_command import ExplainStatement, explain_rows, parse_explain
from dpproxy.planning.plan import Method
from dpproxy.release.public import FREE, columns_of
from dpproxy.server import direct, pgtypes, protocol, spending, worker
from dpproxy.server.catalog import CatalogEmulator
from dpproxy.server.linger import Linger
from dpproxy.server.linger import with_dummies as _with_dummies
from dpproxy.server.protocol import Field, Payload
from dpproxy.server.sqltext import describe_session_command as _describe_session_command
from dpproxy.server.sqltext import identifier as _identifier
from dpproxy.server.sqltext import (
    infer_parameter_types,
    is_blank,
    parameter_count,
    split_statements,
    substitute,
)
from dpproxy.server.sqltext import raw_names as _raw_names
from dpproxy.server.sqltext import setting_assignment as _setting_assignment
from dpproxy.server.sqltext import words as _words
from dpproxy.server.worker import Result
from dpproxy.sql.parse import too_complex
from dpproxy.values import check_privacy_parameters, parse_privacy_number

log = logging.getLogger("dpproxy.server")

SERVER_VERSION = "15.8"
_VOLATILE = re.compile(
    r"now|time|random|pid|txid|xact|setting|set_config|sequence|nextval|currval|pg_stat|inet_"
    r"|cancel|cursor"
)
_FLUSH_AFTER = frozenset((b"Q", b"S", b"H"))
_UTF8 = frozenset(("utf8", "unicode"))  # client_encoding spellings of UTF8
ISOLATION = "read committed"

_COLUMN_OIDS = {
    ColumnType.INTEGER: 20,
    ColumnType.FLOAT: 701,
    ColumnType.TEXT: 25,
    ColumnType.BOOLEAN: 16,
    ColumnType.DATE: 1082,
}
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


def _steward_hint(err: PrivacyParameterError, limit: Fraction, session: Fraction) -> None:
    """A query that needs δ > 0 (grouping by columns without a domain): if the schema allows a
    positive δ the session lowered, say how to raise it; if the schema's δ is 0, no SET can
    help (a session may only lower δ), so the hint names the data steward's two remedies."""
    if "δ > 0" not in err.message:
        return
    if limit > 0 and session == 0:
        err.hint = (
            f"SET dpproxy.delta = {float(limit):g} (the schema's limit) or give the GROUP BY "
            "columns a domain in the schema"
        )
    elif limit == 0:
        err.hint = (
            "the schema allows no δ, and a session may only lower it: ask the data steward to "
            "give the GROUP BY columns a domain in the schema (a `domain: [...]` list under "
            "each column) or to set a positive privacy.delta there"
        )


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
    """What a :class:`Session` uses of the server that runs it (``server.Server`` is one).

    Declared here so that the dependency is one-way: the server imports this module, and
    this module never imports the server.
    """

    @property
    def config(self) -> SessionLimits: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def shutting_down(self) -> bool: ...
    @property
    def executor(self) -> Executor | None: ...  # the worker threads of DP statements

    def catalog_emulator(self, session: Session) -> CatalogEmulator: ...
    def is_catalog_query(self, session: Session, sql: str) -> bool: ...
    def known_route(self, sql: str) -> bool | None: ...
    def startup_params(self, session: Session) -> dict[str, str]: ...


class Session:
    """The state machine of one connection (created by ``server.Server``)."""

    in_flight = 0  # DP statements running on worker threads (changed on the loop thread only)

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

    # -------------------------------------------------------------------- extended query

    def _extended_error(self, err: DPProxyError) -> None:
        self.send_error(err)
        self.skip_until_sync = True

    def on_parse(self, payload: Payload) -> None:
        name = payload.cstr()
        sql = payload.cstr()
        oids = [payload.int32() for _ in range(payload.int16())]
        try:
            statements = split_statements(sql)
            if len(statements) > 1:
                raise SQLSyntaxError("cannot insert multiple commands into a prepared statement")
            text = statements[0] if statements else ""
            if name and name in self.prepared:
                raise DuplicateObject(f'prepared statement "{name}" already exists')
            count = parameter_count(text) if text else 0
            if count and self.server.is_catalog_query(self, text):
                emulator = self.server.catalog_emulator(self)
                inferred = list(emulator.parameter_types(text))
                inferred += [TEXT_OID] * (count - len(inferred))
            else:
                inferred = self._parameter_types(text)
            full = [
                oids[i]
                if i < len(oids) and oids[i] != 0
                else (inferred[i] if i < len(inferred) else TEXT_OID)
                for i in range(max(count, len(oids)))
            ]
            self.prepared[name] = Prepared(text, full)
        except DPProxyError as e:
            self._extended_error(e)
            return
        self.send(protocol.parse_complete())

    def _parameter_types(self, text: str) -> list[int]:
        """:func:`infer_parameter_types` of a statement, kept per statement text (a function
        of the text and the server's fixed catalog): a client that sends the same Parse for
        every execution tokenizes it once."""
        known = self._param_types.get(text)
        if known is None:
            known = infer_parameter_types(
                text, self.server.engine.catalog, lambda t: _COLUMN_OIDS[t], TEXT_OID
            )
            if len(self._param_types) >= 256:
                self._param_types.clear()
            self._param_types[text] = known
        return list(known)

    def on_bind(self, payload: Payload) -> None:
        portal = payload.cstr()
        name = payload.cstr()
        formats = [payload.int16() for _ in range(payload.int16())]
        values: list[bytes | None] = []
        for _ in range(payload.int16()):
            n = payload.int32()
            values.append(None if n < 0 else payload.raw(n))
        result_formats = [payload.int16() for _ in range(payload.int16())]
        try:
            stmt = self.prepared.get(name)
            if stmt is None:
                raise UndefinedPreparedStatement(f'prepared statement "{name}" does not exist')
            if len(values) != len(stmt.param_oids):
                raise ProtocolViolation(
                    f"bind message supplies {len(values)} parameters, but prepared statement "
                    f'"{name}" requires {len(stmt.param_oids)}'
                )
            literals = []
            for i, (data, oid) in enumerate(zip(values, stmt.param_oids, strict=True)):
                fmt = formats[0] if len(formats) == 1 else (formats[i] if formats else 0)
                if (
                    pgtypes.array_element(oid)
                    and data is not None
                    and self.server.is_catalog_query(self, stmt.sql)
                ):  # an array (asyncpg's $1::oid[]): its text, cast in the catalog query
                    value: object = pgtypes.decode_array(data, oid, fmt, param_number=i + 1)
                else:
                    value = _decode(data, oid, fmt, i + 1)
                literals.append(pgtypes.sql_literal(value))
            sql = substitute(stmt.sql, literals) if literals else stmt.sql
            self.portals[portal] = Portal(sql, result_formats)
        except DPProxyError as e:
            self._extended_error(e)
            return
        self.send(protocol.bind_complete())

    def on_describe(self, payload: Payload) -> None:
        what = payload.raw(1)
        name = payload.cstr()
        try:
            if what == b"S":
                stmt = self.prepared.get(name)
                if stmt is None:
                    raise UndefinedPreparedStatement(f'prepared statement "{name}" does not exist')
                self.send(protocol.parameter_description(stmt.param_oids))
                fields = self.describe(_with_dummies(stmt.sql, stmt.param_oids))
                self.send(self._row_description(fields, []) if fields else protocol.no_data())
            elif what == b"P":
                portal = self.portals.get(name)
                if portal is None:
                    raise UndefinedCursor(f'portal "{name}" does not exist')
                fields = portal.result.fields if portal.result else self.describe(portal.sql)
                portal.described = fields
                self.send(
                    self._row_description(fields, portal.result_formats)
                    if fields
                    else protocol.no_data()
                )
            else:
                raise ProtocolViolation("invalid DESCRIBE message subtype")
        except ProtocolViolation:
            raise
        except DPProxyError as e:
            self._extended_error(e)

    async def on_execute(self, payload: Payload) -> None:
        name = payload.cstr()
        max_rows = payload.int32()
        portal = self.portals.get(name)
        try:
            if portal is None:
                raise UndefinedCursor(f'portal "{name}" does not exist')
            if portal.result is None:
                if is_blank(portal.sql):
                    self.send(protocol.empty_query_response())
                    return
                # Execute then Sync (a driver's usual pipeline): the worker may send the rows
                # and the ReadyForQuery of the Sync itself (direct.py)
                sync = self._messages is not None and self._messages.sync_next()
                reply = functools.partial(self._execute_reply, portal, max_rows) if sync else None
                portal.result = await self.execute(portal.sql, [], reply=reply)
        except DPProxyError as e:
            self._extended_error(e)
            return
        result = portal.result
        delivered, result.delivered = result.delivered, False  # this Execute's, not the portal's
        if result.settled:  # by the worker that went on serving the connection (linger.py)
            result.settled = False
            await self.flush()
            return
        if delivered:  # the worker sent _execute_messages' rows: count them, encode nothing
            assert self._messages is not None
            self._messages.take_sync()  # what on_sync does, but its ReadyForQuery went out
            self._delivered(portal, max_rows, result)
            await self.flush()  # whatever the socket did not take at once
            return
        parts, sent = self._execute_messages(portal, max_rows, result)
        portal.sent += sent
        self.send(b"".join(parts))
        if portal.sent == len(result.rows):
            self._report(result)

    def _settle(self, portal: Portal, max_rows: int, turn: worker.Turn) -> None:
        """A lingering worker, first: the Execute the loop handed off, and its Sync, done."""
        assert turn.result is not None and self._messages is not None
        portal.result = turn.result
        self._messages.take_sync()
        self._delivered(portal, max_rows, turn.result)
        turn.result.settled = True

    def _delivered(self, portal: Portal, max_rows: int, result: Result) -> None:
        """An Execute and its Sync whose reply a worker wrote: count the rows it sent."""
        left = len(result.rows) - portal.sent
        portal.sent += min(left, max_rows) if max_rows > 0 else left
        self.skip_until_sync = False
        self.portals.pop("", None)

    def _execute_messages(
        self, portal: Portal, max_rows: int, result: Result
    ) -> tuple[list[bytes], int]:
        """An Execute's reply (the next ``max_rows`` rows, or all when 0, then PortalSuspended
        or the notices and CommandComplete) and how many rows it sends (any thread)."""
        rows = result.rows[portal.sent :]
        suspended = max_rows > 0 and len(rows) > max_rows
        if suspended:
            rows = rows[:max_rows]
        fields, formats = result.fields, portal.result_formats
        parts = self._data_rows(rows, fields, formats)
        if suspended:
            parts.append(protocol.portal_suspended())
            return parts, len(rows)
        tag = result.tag
        if tag.startswith("SELECT") or tag.startswith("FETCH"):
            tag = f"{tag.split()[0]} {len(rows)}"
        if portal.sent + len(rows) == len(result.rows):
            parts += [protocol.notice_response("00000", n) for n in result.notices]
        parts.append(protocol.command_complete(tag))
        return parts, len(rows)

    def _execute_reply(self, portal: Portal, max_rows: int, result: Result) -> bytes | None:
        """The reply to an Execute and the Sync after it, for the worker (``direct.py``)."""
        if result.reported:
            return None
        parts, _ = self._execute_messages(portal, max_rows, result)
        return b"".join([*parts, protocol.ready_for_query(self.status)])

    def on_close(self, payload: Payload) -> None:
        what = payload.raw(1)
        name = payload.cstr()
        if what == b"S":
            self.prepared.pop(name, None)
        elif what == b"P":
            self.portals.pop(name, None)
            self.cursors.pop(name, None)
        else:
            raise ProtocolViolation("invalid CLOSE message subtype")
        self.send(protocol.close_complete())

    def on_sync(self, payload: Payload) -> None:
        self.skip_until_sync = False
        self.portals.pop("", None)
        self._ready()

    async def on_flush(self, payload: Payload) -> None:
        await self.flush()

    def on_function_call(self, payload: Payload) -> None:
        self._extended_error(
            UnsupportedQuery("the function call protocol is not supported by dpproxy")
        )

    def on_copy(self, payload: Payload) -> None:
        self._extended_error(UnsupportedQuery("COPY is not supported by dpproxy"))

    # --------------------------------------------------------------------- statements

    async def execute(
        self,
        sql: str,
        formats: Sequence[int],
        *,
        reply: Callable[[Result], bytes | None] | None = None,
    ) -> Result:
        """Run one statement: session command, catalog emulation, or the DP engine. A DP
        answer's worker sends ``reply(result)`` itself when it can (see :meth:`run_private`)."""
        if self.status != "E" and not self.server.shutting_down:
            # A statement's route depends on its text alone (see _replay): a text run by the
            # DP engine before goes straight back to it, and a catalog answer still cached is
            # what the catalog branch below would return.
            if sql in self._private:
                return await self.run_private(sql, reply)
            cached = self._catalog_answers.get(sql)
            if cached is not None:
                return Result(list(cached.fields), list(cached.rows), cached.tag)
        if self.server.shutting_down:
            raise AdminShutdown(
                "terminating connection due to administrator command",
                hint="the server is shutting down; reconnect to another instance",
            )
        command = self.session_command(sql)
        if command is not None:
            return command
        head = _words(sql)[:1]
        if head in (["DECLARE"], ["FETCH"], ["MOVE"], ["CLOSE"]):
            return await self.cursor_command(sql)
        if self.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        if spending.mentions_spending(sql):
            engine = self.server.engine
            status = engine.accountant.status(self.user)
            releases = engine.accountant.releases(self.user)
            fields, rows = await asyncio.to_thread(spending.answer, sql, status, releases)
            return Result(fields, rows, f"SELECT {len(rows)}")
        if self.server.is_catalog_query(self, sql):
            cached = self._catalog_answers.get(sql)
            if cached is not None:
                return Result(list(cached.fields), list(cached.rows), cached.tag)
            emulator = self.server.catalog_emulator(self)
            out = await asyncio.to_thread(emulator.execute, sql)
            result = Result(
                list(out.columns), [tuple(r) for r in out.rows], f"SELECT {len(out.rows)}"
            )
            if not _VOLATILE.search(sql.lower()) and len(self._catalog_answers) < 256:
                # The emulated catalog is fixed for the server's life; only the session's
                # settings change it (SET/RESET/DISCARD clear this cache).
                self._catalog_answers[sql] = result
            return result
        explain = parse_explain(sql)
        if explain is not None:
            rows = await asyncio.to_thread(self._explain_rows, explain)
            return Result([(EXPLAIN_COLUMN, pgtypes.TEXT_OID)], list(rows), "EXPLAIN")
        if len(self._private) >= 256:
            self._private.clear()
        self._private.add(sql)
        return await self.run_private(sql, reply)

    def _explain_rows(self, explain: ExplainStatement) -> list[tuple[str]]:
        return explain_rows(
            self.server.engine,
            explain,
            analyst=self.user,
            epsilon=self.state.epsilon,
            delta=self.state.delta,
            mechanism=self.state.mechanism,
            method=self.state.method,
        )

    def _time_out(self, token: CancelToken) -> None:
        self._timed_out = True
        token.cancel()

    async def run_private(
        self, sql: str, reply: Callable[[Result], bytes | None] | None = None
    ) -> Result:
        """Run a DP statement on a worker thread (one hand-off each way). With ``reply``, the
        worker sends ``reply(result)`` itself, after what this session had queued, when the
        connection allows it (``direct.py``); the Result then says ``delivered``. The worker
        may then go on serving the connection (``linger.py``) before this returns."""
        started = time.perf_counter()
        self.cancel_token = token = CancelToken()
        # Only while no other DP statement runs: os.write gives up the GIL, and with several
        # busy workers taking it back waits behind them (32 clients: 113 against 157 queries/s)
        alone = Session.in_flight == 0
        out = direct.open_direct(self.writer, self.gate) if reply is not None and alone else None
        pending = b""
        if out is not None:  # the worker writes what is queued, then the reply
            pending = b"".join(self._out)
            self._out.clear()
            self._queued = 0
        linger = self._linger = self._open_linger(out, reply)
        first = (token, time.monotonic())
        loop = asyncio.get_running_loop()
        timeout = self.server.config.statement_timeout
        watch = (lambda: linger.current or first) if linger is not None else (lambda: first)
        timer = worker.Watchdog(loop, timeout, watch, self._time_out) if timeout else None
        job = functools.partial(
            _run_private, self._runner(sql), token, out, pending, reply, started, linger
        )
        turn: worker.Turn | None = None
        Session.in_flight += 1
        try:
            self.running = running = direct.hand_off(loop, self.server.executor, job)
            turn, leftover, idle = await running
            self._close_linger(linger, leftover, idle)
            if turn.error is not None:
                raise self.statement_error(turn.error)
        finally:
            if timer is not None:
                timer.cancel()
            self._timed_out = False
            self.running = None
            Session.in_flight -= 1
            self.cancel_token = None
            if turn is None:
                self._close_linger(linger, b"", 0.0)
            if (turn is None or turn.unsent is None) and pending:  # the loop sends it
                self._out.insert(0, pending)
                self._queued += len(pending)
        result = turn.result
        assert result is not None
        if turn.unsent is not None:  # the reply went out (a cancel after that came too late)
            if turn.unsent:
                self.send(turn.unsent)
            result.delivered = True
        elif turn.token.cancelled:
            # The CancelRequest came after the database had finished: the query ran (and was
            # charged), but its answer is withheld, as PostgreSQL would not deliver it.
            raise QueryCanceled("canceling statement due to user request")
        # Logged once the answer is on its way: the line is written at the loop's next turn,
        # after this message's reply was flushed (it is not on the client's wait).
        if not turn.logged:
            loop.call_soon(worker.log_release, log, self.user, self.pid, turn)
        return result

    def statement_error(self, e: Exception) -> Exception:
        """The error a client gets for a DP statement's exception (loop or lingering worker):
        a δ refusal with the steward's hint, a cancel by the statement timeout said so."""
        if isinstance(e, PrivacyParameterError):
            limit = self.server.engine.catalog.policy.delta
            _steward_hint(e, limit, limit if self.state.delta is None else self.state.delta)
        elif isinstance(e, QueryCanceled) and self._timed_out:
            timeout = self.server.config.statement_timeout or 0
            err = QueryCanceled(
                "canceling statement due to statement timeout",
                hint=f"the limit is {timeout:g} s (dpproxy serve --statement-timeout); "
                + (
                    "nothing was charged"
                    if e.hint == FREE
                    else "the query ran, so its budget was charged"
                ),
            )
            err.__cause__ = e
            return err
        return e

    def _runner(self, sql: str) -> Callable[[CancelToken], Answer]:
        """``sql`` through the engine with this session's settings, for a worker thread."""
        st = self.state
        run = functools.partial(
            self.server.engine.run,
            sql,
            analyst=self.user,
            epsilon=st.epsilon,
            delta=st.delta,
            mechanism=st.mechanism,
            method=st.method,
        )
        return lambda token: run(cancel=token)

    def _open_linger(
        self, out: direct.DirectReply | None, reply: Callable[[Result], bytes | None] | None
    ) -> Linger | None:
        """A :class:`Linger` when the worker writes the reply to a one-statement simple Query
        (nothing buffered on the way in) or to an Execute (only its Sync buffered); loop
        thread: the transport stops reading until :meth:`_close_linger`."""
        messages = self._messages
        if out is None or messages is None:
            return None
        settle = None
        if reply == self._query_reply:
            if messages.buffered():
                return None
        elif getattr(reply, "func", None) != self._execute_reply or not messages.only_sync():
            return None
        else:  # the worker first does what on_execute does after a reply it wrote
            settle = functools.partial(self._settle, *reply.args)  # type: ignore[union-attr]
        cfg = self.server.config
        linger = Linger(self, out.fd, cfg.max_message_size, cfg.idle_timeout, log, settle)
        transport: Any = self.writer.transport  # a Transport: it reads too
        transport.pause_reading()
        return linger

    def _close_linger(self, linger: Linger | None, leftover: bytes, idle: float) -> None:
        if linger is None or self._linger is None:
            return
        self._linger = None
        linger.close()
        if self._messages is not None:
            self._messages.push(leftover, idle)
        transport: Any = self.writer.transport
        with contextlib.suppress(Exception):  # a transport closed meanwhile reads no more
            transport.resume_reading()

    def stop_lingering(self) -> None:
        """Shutdown: a worker waiting on this connection hands it back to the loop now."""
        if self._linger is not None:
            self._linger.stop()

    # What a lingering worker does with its session (linger.py), on its own thread while
    # this session's coroutine waits for it: nothing else touches the session meanwhile.

    def may_linger(self) -> bool:
        return Session.in_flight == 1 and not self.server.shutting_down

    def reply_of(self, result: Result) -> bytes | None:
        return self._query_reply(result)

    def take_out(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        self._queued = 0
        return out

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

    def describe(self, sql: str) -> list[tuple[str, int]]:
        """Result columns without running anything (from the plan, or the emulation)."""
        st = self.state
        key = (sql, st.epsilon, st.delta, st.mechanism, st.method)
        known = self._described.get(key)  # a statement's route depends on its text alone
        if known is not None:
            return list(known)
        if is_blank(sql):
            return []
        cached = self._catalog_answers.get(sql)  # routed to the catalog by its text alone
        if cached is not None:
            return list(cached.fields)
        command = _describe_session_command(sql)
        if command is not None:
            return command
        if spending.mentions_spending(sql):
            engine = self.server.engine
            status = engine.accountant.status(self.user)
            fields, _ = spending.answer(sql, status, [])
            return fields
        if self.server.is_catalog_query(self, sql):
            cached = self._catalog_answers.get(sql)
            if cached is not None:
                return list(cached.fields)
            return list(self.server.catalog_emulator(self).describe(sql))
        if _words(sql)[:1] in (["DECLARE"], ["FETCH"], ["CLOSE"], ["MOVE"]):
            return []
        if parse_explain(sql) is not None:
            return [(EXPLAIN_COLUMN, pgtypes.TEXT_OID)]
        plan = self.server.engine.plan(
            sql,
            epsilon=self.state.epsilon,
            delta=self.state.delta,
            mechanism=self.state.mechanism,
            method=self.state.method,
        )
        fields = [(c.name, pgtypes.oid_of(c.type)) for c in columns_of(plan)]
        if len(self._described) >= 256:
            self._described.clear()
        self._described[key] = fields
        return list(fields)

    # --------------------------------------------------------------- encoding results

    def _row_description(self, fields: list[tuple[str, int]], formats: Sequence[int]) -> bytes:
        """The RowDescription of ``fields`` in ``formats``, kept per (fields, formats): a
        function of the column names and types alone, never of the data (any thread)."""
        key = (tuple(fields), tuple(formats))
        known = self._descriptions.get(key)
        if known is None:
            known = protocol.row_description(self._fields(fields, formats))
            if len(self._descriptions) >= 256:
                self._descriptions.clear()
            self._descriptions[key] = known
        return known

    def _fields(self, fields: list[tuple[str, int]], formats: Sequence[int]) -> list[Field]:
        out = []
        for i, (name, oid) in enumerate(fields):
            fmt = formats[0] if len(formats) == 1 else (formats[i] if i < len(formats) else 0)
            out.append(Field(name, oid, pgtypes.type_size(oid), fmt))
        return out

    def _data_rows(
        self, rows: Sequence[Sequence[Any]], fields: list[tuple[str, int]], formats: Sequence[int]
    ) -> list[bytes]:
        """DataRow messages (any thread), each column's encoder looked up once."""
        encoders = []
        for i, (_, oid) in enumerate(fields):
            fmt = formats[0] if len(formats) == 1 else (formats[i] if i < len(formats) else 0)
            encoders.append(pgtypes.column_encoder(oid, binary=fmt == 1))
        return [
            protocol.data_row([e(v) for e, v in zip(encoders, row, strict=True)]) for row in rows
        ]

    # ------------------------------------------------------------- session statements

    def session_command(self, sql: str) -> Result | None:
        words = _words(sql)
        if not words:
            return None
        head = words[0]
        if head in ("BEGIN", "START"):
            if self.status == "I":
                self.status = "T"
            return Result([], [], "BEGIN")
        if head in ("COMMIT", "END"):
            failed = self.status == "E"  # PostgreSQL rolls a failed block back, and says so
            self._end_transaction(committed=self.status == "T")
            return Result([], [], "ROLLBACK" if failed else "COMMIT")
        if head == "ABORT":
            self._end_transaction(committed=False)
            return Result([], [], "ROLLBACK")
        if head == "ROLLBACK":
            if "TO" in words[1:3] or (len(words) > 2 and words[1] == "TO"):
                if self.status == "E":
                    self.status = "T"
                return Result([], [], "ROLLBACK")
            self._end_transaction(committed=False)
            return Result([], [], "ROLLBACK")
        if self.status == "E" and head not in ("SHOW",):
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        if head == "SAVEPOINT":
            return Result([], [], "SAVEPOINT")
        if head == "RELEASE":
            return Result([], [], "RELEASE")
        if head == "SET":
            self._catalog_answers.clear()
            return self._set(sql, words)
        if head == "RESET":
            self._catalog_answers.clear()
            return self._reset(words)
        if head == "SHOW":
            return self._show(words)
        if head == "DISCARD":
            self._catalog_answers.clear()
            if words[1:2] == ["ALL"]:
                self.prepared.clear()
                self.portals.clear()
                self.cursors.clear()
                self.state = SessionState()
            return Result([], [], "DISCARD " + " ".join(words[1:2]))
        if head == "DEALLOCATE":
            rest = [w for w in words[1:] if w != "PREPARE"]
            if rest == ["ALL"]:
                self.prepared = {k: v for k, v in self.prepared.items() if not k}
                return Result([], [], "DEALLOCATE ALL")
            name = _identifier(_raw_names(sql)[-1]) if rest else ""
            if name not in self.prepared:
                raise UndefinedPreparedStatement(f'prepared statement "{name}" does not exist')
            del self.prepared[name]
            return Result([], [], "DEALLOCATE")
        if head == "COPY":
            raise UnsupportedQuery(
                "COPY is not supported by dpproxy",
                hint="every answer is an aggregate: use SELECT with COUNT, SUM, AVG, ...",
            )
        if head in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
            return None  # handled by the cursor functions below, via execute_cursor
        if head in ("LISTEN", "UNLISTEN", "NOTIFY", "LOCK", "VACUUM", "ANALYZE", "CHECKPOINT"):
            raise UnsupportedQuery(f"{head} is not supported by dpproxy")
        return None

    def _end_transaction(self, *, committed: bool) -> None:
        """COMMIT closes the cursors without HOLD; ROLLBACK every cursor the transaction
        declared (PostgreSQL's portal cleanup at transaction end)."""
        if self.status != "I":
            for name, cursor in list(self.cursors.items()):
                if not cursor.holdable or (cursor.in_transaction and not committed):
                    del self.cursors[name]
                    self.portals.pop(name, None)
                else:
                    cursor.in_transaction = False
        self.status = "I"

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

    def _set(self, sql: str, words: list[str]) -> Result:
        rest = words[1:]
        if rest[:1] in (["SESSION"], ["LOCAL"]):
            if rest[1:3] == ["CHARACTERISTICS", "AS"]:
                return Result([], [], "SET")
            rest = rest[1:]
        if rest[:1] == ["TRANSACTION"]:
            return Result([], [], "SET")
        names = _raw_names(sql)
        # names: the tokens after SET [SESSION|LOCAL]: name, [=|TO], value...
        if not rest:
            raise SQLSyntaxError("syntax error at end of input")
        if rest[0] == "TIME" and rest[1:2] == ["ZONE"]:
            value = " ".join(names[3 if words[1] not in ("SESSION", "LOCAL") else 4 :])
            self.state.settings["timezone"] = value.strip("'") or "UTC"
            return Result([], [], "SET", reported=self._reported(["timezone"]))
        name, value = _setting_assignment(sql)
        key = name.lower()
        if key.startswith("dpproxy."):
            self._set_dpproxy(key, value)
        else:
            if key == "client_encoding" and re.sub(r"[-_]", "", value).lower() in _UTF8:
                value, sql = "UTF8", "SET client_encoding = 'UTF8'"  # PostgreSQL's name
            self.state.settings[key] = value
            if self.emulator is not None:  # keep current_setting() in catalog queries in step
                with contextlib.suppress(DPProxyError):
                    self.emulator.execute(sql)
            return Result([], [], "SET", reported=self._reported([key]))
        return Result([], [], "SET")

    def _set_dpproxy(self, key: str, value: str) -> None:
        policy = self.server.engine.catalog.policy
        if key == "dpproxy.epsilon":
            eps = parse_privacy_number(value, "epsilon")
            check_privacy_parameters(eps, Fraction(0))  # refused now, not at the next query
            if eps > policy.epsilon:
                raise Forbidden(
                    "dpproxy.epsilon cannot exceed the schema's limit of "
                    f"{float(policy.epsilon):g}",
                    hint="a session may only lower ε; the data steward sets the limit",
                )
            self.state.epsilon = eps
        elif key == "dpproxy.delta":
            dlt = parse_privacy_number(value, "delta", allow_zero=True)
            check_privacy_parameters(Fraction(1), dlt)
            if dlt > policy.delta:
                raise Forbidden(
                    f"dpproxy.delta cannot exceed the schema's limit of {float(policy.delta):g}",
                    hint="a session may only lower δ; the data steward sets the limit",
                )
            self.state.delta = dlt
        elif key == "dpproxy.mechanism":
            word = value.strip().strip("'\"").lower()
            if word in ("auto", "default"):
                self.state.method = None
            elif word in {m.value for m in MechanismKind}:
                self.state.mechanism = MechanismKind(word)
            elif word in {m.value for m in Method}:
                self.state.method = Method(word)
            else:
                raise PrivacyParameterError(
                    f"unknown mechanism {value!r}",
                    hint="laplace or gaussian (the noise of sums and counts), a plan ("
                    + ", ".join(m.value for m in Method)
                    + "), or auto",
                )
        elif key == "dpproxy.budget":
            raise Forbidden("dpproxy.budget cannot be set by a session")
        else:
            raise UndefinedObject(f'unrecognized configuration parameter "{key}"')

    def _report(self, result: Result) -> None:
        """ParameterStatus for each reported setting the statement changed, as PostgreSQL
        sends it (drivers and BI tools track DateStyle, TimeZone, application_name …)."""
        for name, value in result.reported:
            self.send(protocol.parameter_status(name, value))

    def _reported(self, keys: list[str]) -> list[tuple[str, str]]:
        """(PostgreSQL's name, current value) of each of ``keys`` that is reported."""
        now = self.settings()
        return [(STATUS_PARAMETERS[k], now.get(k, "")) for k in keys if k in STATUS_PARAMETERS]

    def _reset(self, words: list[str]) -> Result:
        if words[1:2] == ["ALL"]:
            changed = [k for k in self.state.settings if k in STATUS_PARAMETERS]
            self.state = SessionState()
            return Result([], [], "RESET", reported=self._reported(changed))
        key = words[1].lower() if len(words) > 1 else ""
        if key == "dpproxy.epsilon":
            self.state.epsilon = None
        elif key == "dpproxy.delta":
            self.state.delta = None
        elif key == "dpproxy.mechanism":
            self.state.mechanism = None
            self.state.method = None
        else:
            if self.state.settings.pop(key, None) is not None:
                return Result([], [], "RESET", reported=self._reported([key]))
        return Result([], [], "RESET")

    def settings(self) -> dict[str, str]:
        base = default_settings(self.server.startup_params(self), self.user, self.database)
        base.update(self.state.settings)
        return base

    def _show(self, words: list[str]) -> Result:
        rest = [w.lower() for w in words[1:]]
        if rest == ["all"]:
            rows = [(k, v, "") for k, v in sorted(self.settings().items())]
            return Result(
                [("name", TEXT_OID), ("setting", TEXT_OID), ("description", TEXT_OID)], rows, "SHOW"
            )
        if rest[:2] == ["transaction", "isolation"]:
            return Result([("transaction_isolation", TEXT_OID)], [(ISOLATION,)], "SHOW")
        name = "".join(rest)
        if name == "timezone" or rest[:2] == ["time", "zone"]:
            name = "timezone"
        if name.startswith("dpproxy."):
            return Result([(name, TEXT_OID)], [(self._dpproxy_setting(name),)], "SHOW")
        value = self.settings().get(name)
        if value is None:
            raise UndefinedObject(f'unrecognized configuration parameter "{name}"')
        shown = STATUS_PARAMETERS.get(name, name)
        return Result([(shown if shown != name else name, TEXT_OID)], [(value,)], "SHOW")

    def _dpproxy_setting(self, name: str) -> str:
        engine = self.server.engine
        policy = engine.catalog.policy
        if name == "dpproxy.budget":
            return spending.describe_budget(engine.accountant.status(self.user))
        if name == "dpproxy.epsilon":
            eps = self.state.epsilon if self.state.epsilon is not None else policy.epsilon
            return f"{float(eps):g}"
        if name == "dpproxy.delta":
            return f"{float(self.state.delta if self.state.delta is not None else policy.delta):g}"
        if name == "dpproxy.mechanism":
            noise = (self.state.mechanism or policy.mechanism).value
            plan = self.state.method.value if self.state.method else "auto"
            return f"{noise}, plan {plan}"
        raise UndefinedObject(f'unrecognized configuration parameter "{name}"')


# ------------------------------------------------------------------------------- helpers


def _run_private(
    run: Callable[[CancelToken], Answer],
    token: CancelToken,
    out: direct.DirectReply | None,
    pending: bytes,
    reply: Callable[[Result], bytes | None] | None,
    started: float,
    linger: Linger | None,
) -> tuple[worker.Turn, bytes, float]:
    """The worker's part of :meth:`Session.run_private`: the statement's Turn, then (when
    lingering) the bytes read and not used and the time waited for them."""
    try:
        turn = worker.answer_statement(run, token, out, pending, reply, started)
        if linger is not None and out is not None:
            return (turn, *linger.serve(turn, out))
        return turn, b"", 0.0
    finally:
        if out is not None:
            out.close()


def _decode(data: bytes | None, oid: int, fmt: int, number: int) -> object:
    """A Bind value; text-format values of types without a decoder (``regclass`` and the
    like, inferred for catalog queries) are passed on as text, as PostgreSQL would coerce."""
    try:
        return pgtypes.decode_param(data, oid, fmt, param_number=number)
    except pgtypes.UnsupportedParameterType:
        if fmt != 0:
            raise
        return pgtypes.decode_param(data, TEXT_OID, 0, param_number=number)


def check_startup_user(params: dict[str, str]) -> str:
    user = params.get("user", "")
    if not user:
        raise InvalidParameter("no PostgreSQL user name specified in startup packet")
    return user
