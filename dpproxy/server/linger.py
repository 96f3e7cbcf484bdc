"""A connection its DP worker keeps serving between statements.

After a DP worker wrote the whole reply to a one-statement simple Query itself (``direct.py``),
it does not go back to the pool at once: it waits on the connection's socket for the next
message (``poll`` on the reply's duplicate of the descriptor; the loop's transport has paused
reading, so only the worker reads). When that is again work the session can do from its own
state alone, the worker does it, writes the reply and waits again; the client's query then
wakes one thread, as a PostgreSQL backend, instead of the event loop and then a worker. The
work a worker takes:

* a simple Query with one statement the session already ran as a DP statement;
* an extended-protocol batch ``[Parse] [Bind] [Describe] Execute Sync`` whose Parse, Bind and
  Describe need only the session's caches (a statement text already parsed and routed to DP,
  a portal already described, no array parameter: no catalog emulation, no planning) and whose
  Execute runs a portal text the session already ran as a DP statement.

The worker finishes every statement it read, as the loop would: the reply, or the error
(``Session.statement_error``), the withheld answer of a statement cancelled after the database
finished, the rows when it could not write them, and the ReadyForQuery, queued for the loop
when not written. It stops — handing the connection back to the loop with the bytes it read and
did not use — at any other message or one that stays partial, end of stream, a socket error, a
statement that did not end in a reply written whole, another DP statement running anywhere on
the server, shutdown (:meth:`Linger.stop`), or ``LINGER_S`` without a message. The loop then
finishes the first statement (the one it handed off) as always, sends what the worker queued,
and reads the unused bytes before anything else.

The rules of ``direct.py`` hold for every statement: the worker writes only after
``Engine.run`` returned (released, charged, committed), never when the statement was
cancelled, never after the session's gate closed. A cancel request reaches the running
statement through the session's ``cancel_token``, which the worker sets per statement; the
statement timeout through ``worker.Watchdog``, which follows :attr:`Linger.current`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import select
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from dpproxy.backends import CancelToken
from dpproxy.engine import Answer
from dpproxy.errors import DPProxyError, QueryCanceled
from dpproxy.server import pgtypes
from dpproxy.server.direct import DirectReply
from dpproxy.server.protocol import Payload
from dpproxy.server.sqltext import parameter_count, split_statements, substitute
from dpproxy.server.worker import Turn, answer_statement, log_release

LINGER_S = 1.0  # the longest a worker waits for the next message before handing back
_HEADER = struct.Struct("!ci")
_READ = 1 << 16
_STEPS = frozenset((b"P", b"B", b"D"))

# One message of a batch: its type, its body, and where it starts in the buffer.
Message = tuple[bytes, bytes, int]


class Linger:
    """A connection served by its worker thread between statements (see the module)."""

    __slots__ = (
        "_fd", "_log", "_session", "_settle", "_wake", "current", "max_size", "timeout",
    )  # fmt: skip

    def __init__(
        self,
        session: Any,
        fd: int,
        max_size: int,
        idle: float | None,
        log: logging.Logger,
        settle: Callable[[Turn], None] | None = None,
    ) -> None:
        self._session = session  # a Session (session.py), waiting for this worker meanwhile
        self._settle = settle  # what the loop does after the first statement, done first
        self._fd = fd  # the socket (the DirectReply's duplicate, closed by its owner)
        self._wake = os.pipe()  # Linger.stop → the worker's poll; closed by close()
        self._log = log
        self.max_size = max_size
        self.timeout = LINGER_S if idle is None else min(LINGER_S, idle)
        self.current: tuple[CancelToken, float] | None = None  # for worker.Watchdog

    def stop(self) -> None:
        """Wake the worker (loop thread): it hands back instead of waiting."""
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"!")

    def close(self) -> None:
        """Loop thread, once the worker handed back (never while it may poll the pipe)."""
        for fd in self._wake:
            os.close(fd)

    # ------------------------------------------------------------------------ the worker

    def serve(self, first: Turn, out: DirectReply) -> tuple[bytes, float]:
        """After ``first`` (the loop's statement), serve the connection until one of the ends
        of the module docstring: the bytes read and not used, and how long the worker then
        waited for a message (taken off the idle timeout)."""
        session = self._session
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        buf, turn = b"", first
        while _written(turn) and session.may_linger():
            if not turn.logged:  # the first statement's
                if self._settle is not None:  # (an Execute: its portal counts the rows sent)
                    self._settle(turn)
                log_release(self._log, session.user, session.pid, turn)  # as the client reads
                turn.logged = True
            waited = time.monotonic()
            batch, buf = self._next_batch(poller, buf)
            if batch is None:
                return buf, time.monotonic() - waited
            if not session.may_linger():  # another DP statement started meanwhile
                return buf, 0.0
            try:
                done, ran = self._run(batch, buf, out)
            except Exception as e:  # a bug: this batch fails, the session goes on (as serve)
                session.send_error(session._unexpected(e))
                if batch[0][0] == b"Q":
                    session._ready()
                    return buf[_end(batch) :], 0.0
                session.skip_until_sync = True  # the loop reads on from the Sync
                return buf[batch[-1][2] :], 0.0
            buf = buf[done:]
            if ran is None:  # handed back before the statement ran
                return buf, 0.0
            turn = ran
            if turn.answer is not None and not (turn.unsent is None and turn.token.cancelled):
                log_release(self._log, session.user, session.pid, turn)  # (an answer sent)
                turn.logged = True
        return buf, 0.0

    def _run(self, batch: list[Message], buf: bytes, out: DirectReply) -> tuple[int, Turn | None]:
        """Run a batch: how many bytes of ``buf`` it used, and the Turn of its statement (None
        when a message needed the loop: the bytes from that message on go back)."""
        session = self._session
        end = _end(batch)
        kind, body, start = batch[-1] if batch[-1][0] != b"S" else batch[-2]
        if kind == b"Q":
            run = query_job(session, body)
            if run is None:
                return start, None
            turn = self._statement(run, out.send, session.reply_of)
            if not _written(turn):
                query_failed(session, turn)
            return end, turn
        for step_kind, step_body, step_start in batch[:-2]:
            if not step(session, step_kind, step_body):
                return step_start, None
        job = execute_job(session, body)
        if job is None:
            return start, None
        portal, max_rows, run, reply = job
        pending = session.take_out()
        turn = self._statement(run, lambda data: out.send(pending + data), reply)
        if turn.unsent is None and pending:
            session.send(pending)  # before the loop's messages for this statement
        executed(session, portal, max_rows, turn, batch[-1][1])
        return end, turn

    def _statement(self, run: Any, send: Any, reply: Any) -> Turn:
        session = self._session
        token = CancelToken()
        session.cancel_token = token
        self.current = (token, time.monotonic())
        started = time.perf_counter()
        turn = answer_statement(run, token, _Sender(send), b"", reply, started)
        turn.lingered = True
        return turn

    def _next_batch(self, poller: Any, buf: bytes) -> tuple[list[Message] | None, bytes]:
        """The next batch (a Query, or the messages up to a Sync), once whole; None when
        something else comes, or nothing for a while."""
        deadline = time.monotonic() + self.timeout
        while True:
            batch = self._batch(buf)
            if batch is None:
                return None, buf
            if batch:
                return batch, buf
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

    def _batch(self, buf: bytes) -> list[Message] | None:
        """The whole messages at the start of ``buf`` up to a Query or a Sync (an empty list
        while that is still partial), or None when they are no batch a worker takes."""
        out: list[Message] = []
        pos = 0
        while len(buf) - pos >= 5:
            kind, length = _HEADER.unpack_from(buf, pos)
            if length < 4 or length > self.max_size or kind not in b"QPBDES":
                return None
            if len(buf) - pos <= length:
                return []
            out.append((kind, buf[pos + 5 : pos + 1 + length], pos))
            pos += 1 + length
            if kind == b"Q":
                return out if len(out) == 1 else None
            if kind == b"S":  # [P] [B] [D] E S: one Execute, right before the Sync
                kinds = [k for k, _, _ in out]
                ok = len(kinds) >= 2 and kinds[-2] == b"E" and set(kinds[:-2]) <= _STEPS
                return out if ok else None
        return []


class _Sender:
    """A DirectReply look-alike that sends through a function (the worker's queue first)."""

    __slots__ = ("_send", "sent_at")

    def __init__(self, send: Any) -> None:
        self._send = send
        self.sent_at: float | None = None

    def send(self, data: bytes) -> bytes | None:
        rest: bytes | None = self._send(data)
        if rest is not None:
            self.sent_at = time.perf_counter()
        return rest


def _written(turn: Turn) -> bool:
    """Did the statement end in a reply the socket took whole?"""
    return turn.error is None and turn.unsent == b""


def _end(batch: list[Message]) -> int:
    _, body, start = batch[-1]
    return start + 5 + len(body)


def query_text(body: bytes) -> str | None:
    """The one statement of a Query's body, or None (not exactly one, or not UTF-8)."""
    if body[-1:] != b"\0" or b"\0" in body[:-1]:
        return None
    try:
        statements = split_statements(body[:-1].decode("utf-8"))
    except (UnicodeDecodeError, DPProxyError):
        return None
    return statements[0] if len(statements) == 1 else None


# What a lingering worker does with its session (a session.Session), on the worker's thread
# while the session's coroutine waits for it: nothing else touches the session meanwhile.


def query_job(s: Any, body: bytes) -> Callable[[CancelToken], Answer] | None:
    """How to run a Query's one statement, if the session already ran it as DP."""
    text = query_text(body)
    if text is None or text not in s._private or s.status == "E":
        return None
    run: Callable[[CancelToken], Answer] = s._runner(text)
    return run


def query_failed(s: Any, turn: Turn) -> None:
    """Queue what :meth:`Session._query` sends for a statement whose reply was not written whole."""
    if turn.error is not None:
        s.send_error(s._unexpected(s.statement_error(turn.error)))
    elif turn.unsent:
        s.send(turn.unsent)  # ReadyForQuery included
        return
    elif turn.token.cancelled:
        s.send_error(QueryCanceled("canceling statement due to user request"))
    elif turn.result is not None:
        s.send(b"".join(s._statement_messages(turn.result)))
        s._report(turn.result)
    s._timed_out = False
    s._ready()


def step(s: Any, kind: bytes, body: bytes) -> bool:
    """Run a Parse, Bind or Describe if it needs this session's caches alone (no catalog
    emulation, no planning) and did not fail; False: the loop takes it from here."""
    payload = Payload(body)
    try:
        if kind == b"P":
            name, texts = payload.cstr(), split_statements(payload.cstr())
            if (name and name in s.prepared) or len(texts) != 1:
                return False
            if texts[0] not in s._param_types:
                return False
            if parameter_count(texts[0]) and s.server.known_route(texts[0]) is not False:
                return False
        elif kind == b"B":
            payload.cstr()
            stmt = s.prepared.get(payload.cstr())
            if stmt is None or any(pgtypes.array_element(o) for o in stmt.param_oids):
                return False
        else:
            what, name = payload.raw(1), payload.cstr()
            portal = s.portals.get(name) if what == b"P" else None
            stmt = s.prepared.get(name) if what == b"S" else None
            sql = (
                with_dummies(stmt.sql, stmt.param_oids)
                if stmt is not None
                else (portal.sql if portal is not None and portal.result is None else None)
            )
            st = s.state
            key = (sql, st.epsilon, st.delta, st.mechanism, st.method)
            if sql is None or key not in s._described:
                return False
        s._steps[kind](Payload(body))
    except DPProxyError:  # a malformed message: the loop meets the same error
        return False
    return not s.skip_until_sync


def execute_job(s: Any, body: bytes) -> tuple[Any, ...] | None:
    """An Execute of a portal whose text the session already ran as DP: the portal, the
    row limit, how to run it and its reply (with the Sync's ReadyForQuery)."""
    payload = Payload(body)
    try:
        name, max_rows = payload.cstr(), payload.int32()
    except DPProxyError:
        return None
    portal = s.portals.get(name)
    if portal is None or portal.result is not None or s.status == "E":
        return None
    if portal.sql not in s._private:
        return None
    reply = functools.partial(s._execute_reply, portal, max_rows)
    return portal, max_rows, s._runner(portal.sql), reply


def executed(s: Any, portal: Any, max_rows: int, turn: Turn, sync: bytes) -> None:
    """What :meth:`Session.on_execute` and the Sync after it do once a worker ran the Execute."""
    result = turn.result
    if turn.unsent is not None and result is not None:
        portal.result = result
        s._delivered(portal, max_rows, result)
        s.send(turn.unsent)
        return
    if turn.error is not None:
        s._extended_error(s._unexpected(s.statement_error(turn.error)))
    elif turn.token.cancelled:
        s._extended_error(QueryCanceled("canceling statement due to user request"))
    elif result is not None:
        portal.result = result
        parts, sent = s._execute_messages(portal, max_rows, result)
        portal.sent += sent
        s.send(b"".join(parts))
        if portal.sent == len(result.rows):
            s._report(result)
    s._timed_out = False
    s.on_sync(Payload(sync))


def with_dummies(sql: str, oids: Sequence[int]) -> str:
    """The statement with a typed NULL for every ``$n`` (to plan it for Describe)."""
    if not oids:
        return sql
    return substitute(sql, [f"CAST(NULL AS {pgtypes.type_name(o)})" for o in oids])
