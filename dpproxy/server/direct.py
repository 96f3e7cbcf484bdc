"""A DP answer written to the client by the worker thread that computed it.

A DP statement runs on a worker thread, so that the event loop stays free for the other
connections, cancel requests and statement timeouts. Handing the answer back to the loop
before it goes out puts one more thread wake-up on the client's wait: 0.13–0.23 ms p50 on the
loaded 2-core machine of ``benchmarks/bench_server.py`` (the loop has slept in ``epoll`` for as
long as the query ran). When the connection is plain TCP or a Unix socket and no other DP
statement is running (with several, ``os.write`` giving up the GIL made the writing workers wait
behind the busy ones: 28% fewer queries per second with 32 clients), the worker sends the
whole reply itself — what the session had queued before it, the rows, CommandComplete and
ReadyForQuery — on a duplicate of the socket's descriptor, and the loop afterwards only logs.

Why this is safe:

* the duplicate is made on the loop thread just before the hand-off, while the transport is
  open and its buffer empty, and the worker closes it: it always names this connection's socket
  (never a number the loop has closed and reused for another connection);
* nothing else writes to the connection while its statement runs (the session's coroutine is
  awaiting it), except ``Server.shutdown``, which closes the session's :class:`Gate` first;
* the worker writes only after ``Engine.run`` returned — the release charged and the ledger
  committed — and not when the statement was cancelled (the loop then answers 57014);
* what the socket does not take at once (a full send buffer) goes back to the loop, which
  writes it through the transport before anything else; on a TLS connection (the transport
  owns the encryption) the loop writes the reply, as before.

:func:`hand_off` is how the statement gets to its worker (and its outcome back) with as little
of the loop thread's Python between the hand-off and its sleep as possible.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

_T = TypeVar("_T")


class Gate:
    """Whether a worker may still write to a session's socket (closed by shutdown)."""

    __slots__ = ("_lock", "_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = True

    def close(self) -> None:
        """No worker writes after this returns (one that is writing finishes first)."""
        with self._lock:
            self._open = False


class DirectReply:
    """A duplicate of one connection's socket descriptor, for one reply (see the module)."""

    __slots__ = ("_fd", "_gate", "sent_at")

    def __init__(self, fd: int, gate: Gate) -> None:
        self._fd: int | None = fd
        self._gate = gate
        self.sent_at: float | None = None  # time.perf_counter() once the reply was written

    def send(self, data: bytes) -> bytes | None:
        """Write ``data``; the part the socket did not take now (``b""`` when it took it all),
        or None when nothing was written because the gate is closed."""
        with self._gate._lock:
            if not self._gate._open or self._fd is None:
                return None
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self._fd, view)
                except OSError:  # a full buffer (EAGAIN), or the client is gone: the loop's
                    break  # transport takes the rest and sees the error itself
                view = view[n:]
            self.sent_at = time.perf_counter()
            return bytes(view)

    @property
    def fd(self) -> int:
        """The duplicate (for a lingering worker's reads: ``worker.Linger``)."""
        assert self._fd is not None
        return self._fd

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def open_direct(writer: asyncio.StreamWriter, gate: Gate) -> DirectReply | None:
    """A :class:`DirectReply` for the connection of ``writer`` when its worker may write the
    reply (plain socket, transport open with nothing buffered), else None. Loop thread only."""
    if writer.get_extra_info("ssl_object") is not None:
        return None
    transport = writer.transport
    if transport.is_closing() or transport.get_write_buffer_size():
        return None
    sock = writer.get_extra_info("socket")
    if sock is None:
        return None
    try:
        fd = os.dup(sock.fileno())
    except (OSError, ValueError):
        return None
    if os.get_blocking(fd):  # the loop's sockets are non-blocking; a worker must never block
        os.close(fd)
        return None
    return DirectReply(fd, gate)


def hand_off(
    loop: asyncio.AbstractEventLoop, executor: Executor | None, job: Callable[[], _T]
) -> asyncio.Future[_T]:
    """``job`` on a worker thread of ``executor`` (the loop's default one, which the server
    installs; None: ``run_in_executor``'s), as the last thing the loop thread does before it
    awaits the result: the worker, woken by the hand-off, then mostly finds the GIL free
    instead of waiting for the loop thread to reach ``epoll`` (a second sleep and wake-up on
    the statement's path). The worker settles the future as its last step, likewise. No
    context is copied (dpproxy sets no context variables)."""
    if executor is None:
        return loop.run_in_executor(None, job)
    future: asyncio.Future[_T] = loop.create_future()
    executor.submit(_run_and_settle, loop, future, job)
    return future


def _run_and_settle(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[_T], job: Callable[[], _T]
) -> None:
    """A worker: run ``job`` and hand its outcome back to ``loop``."""
    try:
        outcome = job()
    except BaseException as e:  # as ThreadPoolExecutor: every outcome goes to the future
        settle = functools.partial(_settle, future, None, e)
    else:
        settle = functools.partial(_settle, future, outcome, None)
    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody waits for the answer any more
        pass


def _settle(future: asyncio.Future[_T], outcome: _T | None, error: BaseException | None) -> None:
    if future.done():  # the waiting statement was cancelled (its session is gone)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(outcome)  # type: ignore[arg-type]
