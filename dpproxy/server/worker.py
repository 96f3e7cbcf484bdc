"""The worker thread's side of a DP statement, and a connection its worker keeps serving.

A DP statement runs on a worker thread (``direct.hand_off``); :func:`answer_statement` is
what that thread does: run it through the engine (which charges and commits the release), make
the wire's :class:`Result`, and — when the session gave it a :class:`direct.DirectReply` —
write the whole reply to the socket itself.

**Lingering** (:class:`Linger`). After such a reply to a one-statement simple Query, the
worker does not go back to the pool at once: it waits on the connection's socket for the next
message (``poll`` on a duplicate of the descriptor; the loop's transport has paused reading,
so only the worker reads). When that message is again a simple Query with one statement the
session has already run as a DP statement, the worker answers it the same way, and so on; the
client's query then wakes one thread, as a PostgreSQL backend, instead of the event loop and
then a worker (about 0.1–0.2 ms per query on the 2-core machine of ``bench_server.py``). Any
other message, a partial one that stays partial, end of stream, an error, a statement that
failed or was cancelled, a reply the socket did not take whole, another DP statement running
on the server, shutdown (:meth:`Linger.stop`) or a second without a message ends it: the
worker hands the last statement back to the loop (:class:`Turn`) with the bytes it read and
did not use, and the loop finishes that statement exactly as it finishes one it handed off
(log line, cancel, statement timeout, errors) and reads the unused bytes first.

The rules of ``direct.py`` hold for every statement: the worker writes only after
``Engine.run`` returned (released, charged, committed), never when it was cancelled, and never
after the session's gate closed. Cancel requests reach the running statement through the
session's ``cancel_token``, which the worker sets per statement; statement timeouts through
:class:`Watchdog`, a timer of the loop that follows the statement the worker is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dpproxy.backends import CancelToken
from dpproxy.engine import Answer
from dpproxy.errors import DPProxyError
from dpproxy.release.public import plan_notes
from dpproxy.server import direct, pgtypes
from dpproxy.server.notices import release_notice
from dpproxy.server.sqltext import split_statements

LINGER_S = 1.0  # the longest a worker waits for the next message before handing back
_HEADER = struct.Struct("!ci")
_READ = 1 << 16


@dataclass
class Result:
    """What a statement returns: columns (name, type OID), rows (Python values), tag."""

    fields: list[tuple[str, int]]
    rows: list[tuple[Any, ...]]
    tag: str
    cost: str | None = None
    notices: list[str] = field(default_factory=list)  # NoticeResponses before CommandComplete
    # ParameterStatus after CommandComplete: a reported setting that the statement changed
    reported: list[tuple[str, str]] = field(default_factory=list)
    delivered: bool = False  # the worker sent the whole reply itself (``direct.py``)


def result_of(answer: Answer) -> Result:
    """The wire's Result of a DP answer: its columns, rows and the release's notices."""
    released = answer.released
    fields = [(c.name, pgtypes.oid_of(c.type)) for c in released.columns]
    bound = answer.plan.truncation
    notices = []
    if bound is not None and not answer.cached:
        notices.append(f"rows per unit: {bound.describe()}")
    notices += plan_notes(answer.plan)
    notices.append(release_notice(answer.cost, answer.remaining, answer.cached))
    rows = list(released.rows)
    return Result(fields, rows, f"SELECT {len(rows)}", str(answer.cost), notices)


@dataclass(slots=True)
class Turn:
    """The outcome of the last statement a worker ran, for the loop to finish."""

    token: CancelToken
    started: float  # time.perf_counter() when the statement was handed off or read
    answer: Answer | None = None
    result: Result | None = None
    unsent: bytes | None = None  # what the socket did not take (b"": all); None: not written
    error: Exception | None = None
    sent_at: float | None = None  # when the worker wrote the reply
    leftover: bytes = b""  # read from the socket by a lingering worker and not used
    idle: float = 0.0  # seconds it then waited for a message (taken off the idle timeout)
    logged: bool = False  # its release line was written (by a lingering worker)
    lingered: bool = False  # read from the socket by a lingering worker (not the loop)


def answer_statement(
    run: Callable[[CancelToken], Answer],
    token: CancelToken,
    out: direct.DirectReply | None,
    pending: bytes,
    reply: Callable[[Result], bytes | None] | None,
    started: float,
) -> Turn:
    """Run one DP statement (on the worker): the answer (charged and committed by ``run``),
    its Result and — when ``out`` is given and the statement was not cancelled — ``pending``
    and ``reply(result)`` written to the socket. An exception is the Turn's ``error``; a reply
    that cannot be encoded is left to the loop, which meets the same error."""
    turn = Turn(token, started)
    try:
        turn.answer = run(token)
        turn.result = result_of(turn.answer)
    except Exception as e:  # the loop raises it, as if the worker had
        turn.error = e
        return turn
    if out is None or reply is None or token.cancelled:
        return turn
    try:
        data = reply(turn.result)
    except Exception:  # the loop encodes it again and reports the error as before
        return turn
    if data is not None:
        turn.unsent = out.send(pending + data)
        turn.sent_at = out.sent_at
    return turn


def log_release(log: logging.Logger, user: str, pid: int, turn: Turn) -> None:
    """The ``release`` line of a statement (``ms``: from its hand-off, or from the moment a
    lingering worker read it, until the reply was written or the loop had the answer back)."""
    assert turn.answer is not None
    done = turn.sent_at
    log.info(
        "released",
        extra={
            "event": "release",
            "user": user,
            "rows": len(turn.answer.released.rows),
            "cost": str(turn.answer.cost),
            "ms": round(((done or time.perf_counter()) - turn.started) * 1000, 2),
            "direct": done is not None,
            "linger": turn.lingered,
            "pid": pid,
        },
    )


class LingerSession(Protocol):
    """What a lingering worker reads of its session (which waits for it meanwhile)."""

    cancel_token: CancelToken | None
    status: str
    user: str
    pid: int

    def private_statement(self, text: str) -> Callable[[CancelToken], Answer] | None: ...
    def reply_of(self, result: Result) -> bytes | None: ...
    def may_linger(self) -> bool: ...  # not shutting down, no other DP statement running


class Linger:
    """A connection served by its worker thread between statements (see the module)."""

    __slots__ = ("_fd", "_log", "_session", "_wake", "current", "max_size", "timeout")

    def __init__(
        self, session: LingerSession, fd: int, max_size: int, idle: float | None, log: Any
    ) -> None:
        self._session = session
        self._fd = fd  # the socket (the DirectReply's duplicate, closed by its owner)
        self._wake = os.pipe()  # Linger.stop → the worker's poll; closed by close()
        self._log = log
        self.max_size = max_size
        self.timeout = LINGER_S if idle is None else min(LINGER_S, idle)
        self.current: tuple[CancelToken, float] | None = None  # for the Watchdog

    def stop(self) -> None:
        """Wake the worker (loop thread): it hands back instead of waiting."""
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"!")

    def close(self) -> None:
        """Loop thread, once the worker handed back (never while it may poll the pipe)."""
        for fd in self._wake:
            os.close(fd)

    def serve(self, turn: Turn, out: direct.DirectReply) -> Turn:
        """The worker: answer further DP simple Queries until one of the ends of the module
        docstring; the last statement's Turn, with the unused bytes."""
        session = self._session
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        buf = b""
        while turn.error is None and turn.unsent == b"" and session.may_linger():
            # logged while the client reads the reply, not once the next query came
            log_release(self._log, session.user, session.pid, turn)
            turn.logged = True
            waited = time.monotonic()
            statement, buf = self._next_query(poller, buf)
            if statement is None:
                turn.leftover, turn.idle = buf, time.monotonic() - waited
                return turn
            _, run = statement
            token = CancelToken()
            session.cancel_token = token
            self.current = (token, time.monotonic())
            started = time.perf_counter()
            turn = answer_statement(run, token, out, b"", session.reply_of, started)
            turn.lingered = True
        turn.leftover = buf
        return turn

    def _next_query(
        self, poller: select.poll, buf: bytes
    ) -> tuple[tuple[str, Callable[[CancelToken], Answer]] | None, bytes]:
        """The next message if it is a known one-statement DP simple Query (its text and how
        to run it) and what follows it; else None and everything read."""
        deadline = time.monotonic() + self.timeout
        while True:
            if len(buf) >= 5:
                kind, length = _HEADER.unpack_from(buf)
                if kind != b"Q" or length < 5 or length > self.max_size:
                    return None, buf
                if len(buf) > length:
                    statement = self._statement(buf[5 : length + 1])
                    return (None, buf) if statement is None else (statement, buf[length + 1 :])
            wait = deadline - time.monotonic()
            if wait <= 0:
                return None, buf
            events = poller.poll(wait * 1000)
            if not events or any(fd == self._wake[0] for fd, _ in events):
                return None, buf
            try:
                chunk = os.read(self._fd, _READ)
            except BlockingIOError:
                continue
            except OSError:  # the loop's transport meets the error itself
                return None, buf
            if not chunk:
                return None, buf
            buf += chunk

    def _statement(self, body: bytes) -> tuple[str, Callable[[CancelToken], Answer]] | None:
        if body[-1:] != b"\0" or b"\0" in body[:-1]:
            return None
        try:
            statements = split_statements(body[:-1].decode("utf-8"))
        except (UnicodeDecodeError, DPProxyError):
            return None
        if len(statements) != 1 or not self._session.may_linger():
            return None
        run = self._session.private_statement(statements[0])
        return None if run is None else (statements[0], run)


class Watchdog:
    """The statement timeout of a session's DP statements (loop thread): fires ``expire(token)``
    for the running statement once it has run ``timeout`` seconds, following the statement a
    lingering worker runs (``Linger.current``) without a timer per statement."""

    __slots__ = ("_current", "_expire", "_handle", "_loop", "_timeout")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        timeout: float,
        current: Callable[[], tuple[CancelToken, float] | None],
        expire: Callable[[CancelToken], None],
    ) -> None:
        self._loop, self._timeout = loop, timeout
        self._current, self._expire = current, expire
        self._handle = loop.call_later(timeout, self._check)

    def _check(self) -> None:
        now = time.monotonic()
        delay = self._timeout
        current = self._current()
        if current is not None:
            token, since = current
            due = since + self._timeout
            if now >= due - 0.001:  # (uvloop's timers count milliseconds)
                if not token.cancelled:
                    self._expire(token)
            else:
                delay = due - now
        self._handle = self._loop.call_later(delay, self._check)

    def cancel(self) -> None:
        self._handle.cancel()
