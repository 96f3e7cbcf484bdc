"""The extended query protocol: Parse, Bind, Describe, Execute, Close, Sync and the rest.

:class:`ExtendedQuery` is the part of :class:`~dpproxy.server.session.Session` that handles the
extended protocol's messages (``on_parse``, ``on_bind``, ``on_describe``, ``on_execute``,
``on_close``, ``on_sync``, ...), answers Describe from the plan or the emulation without running
anything (:meth:`ExtendedQuery.describe`), and encodes results (RowDescription and DataRow, for
the simple protocol too).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from dpproxy.catalog.model import ColumnType
from dpproxy.errors import (
    DPProxyError,
    ProtocolViolation,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpproxy.explain_command import COLUMN as EXPLAIN_COLUMN
from dpproxy.explain_command import parse_explain
from dpproxy.release.public import columns_of
from dpproxy.server import pgtypes, protocol, spending, worker
from dpproxy.server.linger import with_dummies as _with_dummies
from dpproxy.server.protocol import Field, Payload
from dpproxy.server.session_types import (
    TEXT_OID,
    Cursor,
    DuplicateObject,
    Portal,
    Prepared,
    SessionHost,
    SessionState,
    UndefinedCursor,
    UndefinedPreparedStatement,
)
from dpproxy.server.sqltext import describe_session_command as _describe_session_command
from dpproxy.server.sqltext import (
    infer_parameter_types,
    is_blank,
    parameter_count,
    split_statements,
    substitute,
)
from dpproxy.server.sqltext import words as _words
from dpproxy.server.worker import Result

_COLUMN_OIDS = {
    ColumnType.INTEGER: 20,
    ColumnType.FLOAT: 701,
    ColumnType.TEXT: 25,
    ColumnType.BOOLEAN: 16,
    ColumnType.DATE: 1082,
}


class ExtendedQuery:
    """The extended protocol, Describe, and the encoding of results (a part of ``Session``)."""

    # What this part reads of the session (set by Session.__init__, or defined by Session).
    server: SessionHost
    user: str
    status: str
    state: SessionState
    prepared: dict[str, Prepared]
    portals: dict[str, Portal]
    cursors: dict[str, Cursor]
    skip_until_sync: bool
    _messages: protocol.MessageReader | None
    _catalog_answers: dict[str, Result]
    _param_types: dict[str, list[int]]
    _described: dict[tuple[object, ...], list[tuple[str, int]]]
    _descriptions: dict[tuple[object, ...], bytes]
    send: Callable[[bytes], None]
    send_error: Callable[[DPProxyError], None]
    flush: Callable[[], Coroutine[Any, Any, None]]
    _ready: Callable[[], None]
    execute: Callable[..., Coroutine[Any, Any, Result]]  # session_statements.py
    _report: Callable[[Result], None]  # session_commands.py

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

    # ------------------------------------------------------------------------ describe

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


# ------------------------------------------------------------------------------- helpers


def _decode(data: bytes | None, oid: int, fmt: int, number: int) -> object:
    """A Bind value; text-format values of types without a decoder (``regclass`` and the
    like, inferred for catalog queries) are passed on as text, as PostgreSQL would coerce."""
    try:
        return pgtypes.decode_param(data, oid, fmt, param_number=number)
    except pgtypes.UnsupportedParameterType:
        if fmt != 0:
            raise
        return pgtypes.decode_param(data, TEXT_OID, 0, param_number=number)
