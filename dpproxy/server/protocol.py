"""PostgreSQL frontend/backend protocol v3: message framing, as pure functions over bytes.

Backend messages are built by small functions returning ``bytes``; frontend messages are read
by :func:`read_message` and picked apart with :class:`Payload`. Nothing here knows about
sessions, SQL or privacy (``session.py`` does).

Reference: PostgreSQL 15 documentation, chapter 55 ("Frontend/Backend Protocol"), section
55.7 (message formats).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dpproxy.errors import DPProxyError, ProtocolViolation

PROTOCOL_V3 = 196608  # 3.0
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
DEFAULT_MAX_MESSAGE = 1 << 20  # bytes; larger messages are refused (54000)

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_HEADER = struct.Struct("!ci")
_SYNC = b"S\x00\x00\x00\x04"
# ReadyForQuery of each transaction status (idle, in a block, in a failed block)
_READY = {s: b"Z\x00\x00\x00\x05" + s.encode("ascii") for s in "ITE"}
# The messages without a body (EmptyQueryResponse, ParseComplete, BindComplete, ...), made once
_EMPTY = {k: k + b"\x00\x00\x00\x04" for k in (b"I", b"1", b"2", b"3", b"n", b"s")}


class MessageTooLarge(DPProxyError):
    """A message above the configured maximum size (program_limit_exceeded)."""

    sqlstate = "54000"


# ------------------------------------------------------------------------------------ reading


class Payload:
    """A cursor over one message body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("message is shorter than its fields")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def cstr(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise ProtocolViolation("unterminated string in message")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolViolation("invalid UTF-8 in message") from e

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out


async def read_exact(reader: asyncio.StreamReader, n: int) -> bytes:
    return await reader.readexactly(n)


async def read_startup(reader: asyncio.StreamReader, max_size: int) -> tuple[int, Payload]:
    """The first message of a connection (no type byte): its code and the rest."""
    (length,) = _I32.unpack(await reader.readexactly(4))
    if length < 8 or length > max_size:
        raise ProtocolViolation("invalid length of startup packet")
    body = await reader.readexactly(length - 4)
    payload = Payload(body)
    return payload.int32(), payload


async def read_message(reader: asyncio.StreamReader, max_size: int) -> tuple[bytes, Payload]:
    """One typed frontend message: its type byte and body."""
    kind, length = _HEADER.unpack(await reader.readexactly(5))
    if length < 4:
        raise ProtocolViolation("invalid message length")
    if length > max_size:
        raise MessageTooLarge(
            f"message of {length} bytes exceeds the maximum of {max_size}",
            hint="dpproxy serve --max-message-size raises the limit",
        )
    return kind, Payload(await reader.readexactly(length - 4))


class MessageReader:
    """Typed frontend messages from one stream, read a chunk at a time.

    :func:`read_message` awaits twice per message (header, then body); this reads whatever
    the socket holds (up to 64 KiB) in one await and returns every message already received
    without waiting, so a round trip costs one wake-up of the event loop and a pipelined
    batch one read. The checks are :func:`read_message`'s: a length below 4 is a protocol
    violation and one above ``max_size`` is refused (54000) as soon as its header arrives.
    End of stream in the middle of a message is ``IncompleteReadError``, as ``readexactly``.

    The timeout of :meth:`read` is one timer per reader, not one per wait (``asyncio.timeout``
    made a timer, a context and two ``getpid`` calls per message): each wait records its
    deadline, and the timer, when it fires, cancels the waiting task only if that deadline
    has passed, else goes back to sleep until it. One task at a time reads from a reader.
    """

    __slots__ = (
        "_bound", "_buf", "_deadline", "_expired", "_idle", "_loop", "_task", "_timer_at",
        "max_size", "reader",
    )  # fmt: skip

    def __init__(self, reader: asyncio.StreamReader, max_size: int) -> None:
        self.reader = reader
        self.max_size = max_size
        self._buf = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._deadline: float | None = None  # of the wait in progress (None: not waiting)
        self._timer_at: float | None = None  # when the timer fires (None: no timer)
        self._expired = False  # the timer cancelled the waiting task
        self._bound: asyncio.Task[Any] | None = None  # see bind()
        self._idle = 0.0  # seconds already waited for the next message elsewhere (push)

    def bind(self, task: asyncio.Task[Any] | None) -> None:
        """Declare ``task`` the only one that will ever read (saves looking up the current
        task, a ``getpid`` call, at every wait)."""
        self._bound = self._task = task

    def buffered(self) -> bool:
        """Are bytes received and not yet read as messages (here or in the stream)?"""
        return bool(self._buf) or bool(getattr(self.reader, "_buffer", b""))

    def only_sync(self) -> bool:
        """Is a Sync all that was received and not yet read?"""
        return bytes(self._buf) == _SYNC and not getattr(self.reader, "_buffer", b"")

    def push(self, data: bytes, idle: float = 0.0) -> None:
        """Bytes read from the socket elsewhere (a lingering worker, ``linger.py``, while the
        stream was paused), read before anything the stream receives later, and how long that
        reader already waited for a message (the next :meth:`read`'s timeout is that much
        shorter)."""
        self._buf += data
        self._idle = idle

    def _next(self) -> tuple[bytes, Payload] | None:
        buf = self._buf
        if len(buf) < 5:
            return None
        kind, length = _HEADER.unpack_from(buf)
        if length < 4:
            raise ProtocolViolation("invalid message length")
        if length > self.max_size:
            raise MessageTooLarge(
                f"message of {length} bytes exceeds the maximum of {self.max_size}",
                hint="dpproxy serve --max-message-size raises the limit",
            )
        end = length + 1
        if len(buf) < end:
            return None
        body = bytes(buf[5:end])
        del buf[:end]
        return kind, Payload(body)

    def sync_next(self) -> bool:
        """Is the next message, already received, a Sync?"""
        return bytes(self._buf[:5]) == _SYNC

    def take_sync(self) -> None:
        """Drop the Sync that :meth:`sync_next` saw (its ReadyForQuery was sent already)."""
        if not self.sync_next():
            raise ProtocolViolation("expected a Sync message")
        del self._buf[:5]

    async def _fill(self) -> tuple[bytes, Payload]:
        while True:
            chunk = await self.reader.read(1 << 16)
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(self._buf), None)
            self._buf += chunk
            message = self._next()
            if message is not None:
                return message

    async def read(self, timeout: float | None = None) -> tuple[bytes, Payload]:
        """The next message; ``TimeoutError`` when none is complete within ``timeout`` s."""
        message = self._next()
        if message is not None:
            return message
        if timeout is None:
            return await self._fill()
        if self._idle:
            timeout, self._idle = max(timeout - self._idle, 0.001), 0.0
        if self._bound is None:
            self._task = asyncio.current_task()
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = self._deadline = loop.time() + timeout
        if self._timer_at is None or self._timer_at > deadline:
            self._arm(deadline)
        try:
            return await self._fill()
        except asyncio.CancelledError:
            if not self._expired:
                raise
            self._expired = False
            if self._task is not None:
                self._task.uncancel()
            raise TimeoutError from None
        finally:
            self._deadline = None

    def _arm(self, when: float) -> None:
        assert self._loop is not None
        self._timer_at = when
        self._loop.call_at(when, self._expire, when)

    def _expire(self, when: float) -> None:
        """The timer: cancel the waiting task if its deadline passed, else wait until it."""
        if when != self._timer_at:  # superseded by an earlier timer
            return
        self._timer_at = None
        deadline = self._deadline
        if deadline is None:  # not waiting: the next wait arms a timer again
            return
        assert self._loop is not None and self._task is not None
        if self._loop.time() + 0.001 < deadline:  # (uvloop's clock counts milliseconds)
            self._arm(deadline)
            return
        self._expired = True
        self._task.cancel()


def parse_startup_parameters(payload: Payload) -> dict[str, str]:
    """``name\\0value\\0...\\0`` of a StartupMessage; every parameter is kept."""
    params: dict[str, str] = {}
    while True:
        name = payload.cstr()
        if not name:
            return params
        params[name] = payload.cstr()


# ------------------------------------------------------------------------------------ writing


def _msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _I32.pack(len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode("utf-8").replace(b"\0", b"") + b"\0"


def authentication_ok() -> bytes:
    return _msg(b"R", _I32.pack(0))


def authentication_sasl(mechanisms: Iterable[str]) -> bytes:
    return _msg(b"R", _I32.pack(10) + b"".join(_cstr(m) for m in mechanisms) + b"\0")


def authentication_sasl_continue(data: bytes) -> bytes:
    return _msg(b"R", _I32.pack(11) + data)


def authentication_sasl_final(data: bytes) -> bytes:
    return _msg(b"R", _I32.pack(12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return _msg(b"S", _cstr(name) + _cstr(value))


def backend_key_data(pid: int, key: int) -> bytes:
    return _msg(b"K", _I32.pack(pid) + _I32.pack(key))


def ready_for_query(status: str) -> bytes:
    known = _READY.get(status)
    return known if known is not None else _msg(b"Z", status.encode("ascii"))


@dataclass(frozen=True, slots=True)
class Field:
    """One column of a RowDescription."""

    name: str
    type_oid: int
    type_size: int = -1
    format: int = 0  # 0 text, 1 binary
    type_modifier: int = -1
    table_oid: int = 0
    column: int = 0


def row_description(fields: Sequence[Field]) -> bytes:
    parts = [struct.pack("!h", len(fields))]
    for f in fields:
        parts.append(_cstr(f.name))
        parts.append(
            struct.pack(
                "!ihihih", f.table_oid, f.column, f.type_oid, f.type_size, f.type_modifier, f.format
            )
        )
    return _msg(b"T", b"".join(parts))


def data_row(values: Sequence[bytes | None]) -> bytes:
    parts = [_I16.pack(len(values))]
    for v in values:
        if v is None:
            parts.append(_I32.pack(-1))
        else:
            parts.append(_I32.pack(len(v)))
            parts.append(v)
    return _msg(b"D", b"".join(parts))


def command_complete(tag: str) -> bytes:
    return _msg(b"C", _cstr(tag))


def empty_query_response() -> bytes:
    return _EMPTY[b"I"]


def parse_complete() -> bytes:
    return _EMPTY[b"1"]


def bind_complete() -> bytes:
    return _EMPTY[b"2"]


def close_complete() -> bytes:
    return _EMPTY[b"3"]


def no_data() -> bytes:
    return _EMPTY[b"n"]


def portal_suspended() -> bytes:
    return _EMPTY[b"s"]


def parameter_description(oids: Sequence[int]) -> bytes:
    return _msg(b"t", _I16.pack(len(oids)) + b"".join(_I32.pack(o) for o in oids))


def _fields(
    severity: str,
    code: str,
    message: str,
    *,
    hint: str | None = None,
    detail: str | None = None,
    position: int | None = None,
) -> bytes:
    parts = [b"S" + _cstr(severity), b"V" + _cstr(severity), b"C" + _cstr(code)]
    parts.append(b"M" + _cstr(message))
    if detail:
        parts.append(b"D" + _cstr(detail))
    if hint:
        parts.append(b"H" + _cstr(hint))
    if position is not None:
        parts.append(b"P" + _cstr(str(position)))
    return b"".join(parts) + b"\0"


def error_response(
    code: str,
    message: str,
    *,
    severity: str = "ERROR",
    hint: str | None = None,
    detail: str | None = None,
    position: int | None = None,
) -> bytes:
    body = _fields(severity, code, message, hint=hint, detail=detail, position=position)
    return _msg(b"E", body)


def notice_response(code: str, message: str, *, severity: str = "NOTICE") -> bytes:
    return _msg(b"N", _fields(severity, code, message))


def error_from(err: DPProxyError, *, severity: str = "ERROR") -> bytes:
    """An ErrorResponse for a dpproxy error (its message is safe to show by construction)."""
    return error_response(
        err.sqlstate, err.message, severity=severity, hint=err.hint, position=err.position
    )
