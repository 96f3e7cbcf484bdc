"""The worker thread's side of a DP statement.

A DP statement runs on a worker thread (``direct.hand_off``); :func:`answer_statement` is
what that thread does: run it through the engine (which charges and commits the release), make
the wire's :class:`Result`, and — when the session gave it a :class:`direct.DirectReply` —
write the whole reply to the socket itself. The outcome is a :class:`Turn`, which the loop
finishes (``Session.run_private``), or a lingering worker (``linger.py``) for the statements
it read itself. :class:`Watchdog` is the statement timeout of either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dpproxy.backends import CancelToken
from dpproxy.engine import Answer
from dpproxy.release.public import plan_notes
from dpproxy.server import pgtypes
from dpproxy.server.notices import release_notice


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
    settled: bool = False  # ... and counted it as sent, before lingering (``linger.py``)


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


class Sender(Protocol):
    """Where a worker writes a reply (``direct.DirectReply``): ``send`` returns what was not
    written (``b""``: all of it), or None when nothing was."""

    sent_at: float | None

    def send(self, data: bytes) -> bytes | None: ...


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
    out: Sender | None,
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
