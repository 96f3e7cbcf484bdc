"""Running one statement: the route it takes, and a DP statement on a worker thread.

:class:`StatementRunner` is the part of :class:`~dpproxy.server.session.Session` that runs a
statement (:meth:`StatementRunner.execute`): a session command (``session_commands.py``), a
cursor command (``session_cursors.py``), the spending views, the catalog emulation, EXPLAIN, or
the DP engine on a worker thread (:meth:`StatementRunner.run_private`), whose worker may send
the reply itself (``direct.py``) and go on serving the connection (``linger.py``); and the
error a client gets for a DP statement's exception (:meth:`StatementRunner.statement_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import time
from collections.abc import Callable, Coroutine, Sequence
from fractions import Fraction
from typing import Any

from dpproxy.backends import CancelToken
from dpproxy.engine import Answer
from dpproxy.errors import PrivacyParameterError, QueryCanceled
from dpproxy.explain_command import COLUMN as EXPLAIN_COLUMN
from dpproxy.explain_command import ExplainStatement, explain_rows, parse_explain
from dpproxy.release.public import FREE
from dpproxy.server import direct, pgtypes, protocol, spending, worker
from dpproxy.server.linger import Linger
from dpproxy.server.session_types import (
    AdminShutdown,
    InFailedTransaction,
    Portal,
    SessionHost,
    SessionState,
)
from dpproxy.server.sqltext import words as _words
from dpproxy.server.worker import Result

log = logging.getLogger("dpproxy.server")

_VOLATILE = re.compile(
    r"now|time|random|pid|txid|xact|setting|set_config|sequence|nextval|currval|pg_stat|inet_"
    r"|cancel|cursor"
)


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


class StatementRunner:
    """Statements routed and run, DP ones on worker threads (a part of ``Session``)."""

    in_flight = 0  # DP statements running on worker threads (changed on the loop thread only)

    # What this part reads of the session (set by Session.__init__, or defined by Session).
    server: SessionHost
    user: str
    pid: int
    status: str
    state: SessionState
    writer: asyncio.StreamWriter
    gate: direct.Gate
    running: asyncio.Future[Any] | None
    cancel_token: CancelToken | None
    _timed_out: bool
    _catalog_answers: dict[str, Result]
    _private: set[str]
    _out: list[bytes]
    _queued: int
    _linger: Linger | None
    _messages: protocol.MessageReader | None
    send: Callable[[bytes], None]
    _query_reply: Callable[[Result], bytes | None]  # session.py
    session_command: Callable[[str], Result | None]  # session_commands.py
    cursor_command: Callable[[str], Coroutine[Any, Any, Result]]  # session_cursors.py
    _execute_reply: Callable[[Portal, int, Result], bytes | None]  # session_extended.py
    _settle: Callable[[Portal, int, worker.Turn], None]  # session_extended.py

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
        alone = StatementRunner.in_flight == 0
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
        StatementRunner.in_flight += 1
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
            StatementRunner.in_flight -= 1
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
        return StatementRunner.in_flight == 1 and not self.server.shutting_down

    def reply_of(self, result: Result) -> bytes | None:
        return self._query_reply(result)

    def take_out(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        self._queued = 0
        return out


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
