"""The listener: accepts connections, negotiates TLS, authenticates, and runs sessions.

asyncio, one task per connection; backend work runs in worker threads
(``asyncio.to_thread``) so one slow query never blocks another client. Limits: a connection
cap (``53300`` beyond it, for sessions and, apart, for connections still logging in), an
authentication timeout (60 s by default, as PostgreSQL's ``authentication_timeout``: a client
that never finishes its startup is disconnected), a maximum message size (``54000``), an idle
timeout (``57P05``);
SIGTERM stops accepting, lets in-flight queries finish (up to a grace period) and refuses new
ones with ``57P01``.

Authentication is SCRAM-SHA-256 against the users file (``users.py``); ``trust`` only when
explicitly enabled, and then only for clients on a loopback address. With ``require_tls``
(the default of ``dpproxy serve`` whenever a certificate is given: PostgreSQL's ``hostssl``)
a login without TLS is refused with ``28000`` before any credential is exchanged. The TLS key
and the users file must not be accessible by group or others (:func:`check_private_file`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import re
import ssl
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpproxy.engine import Engine
from dpproxy.errors import (
    DPProxyError,
    Forbidden,
    InvalidParameter,
    ProtocolViolation,
    QueryCanceled,
)
from dpproxy.server import protocol
from dpproxy.server.catalog import CatalogEmulator
from dpproxy.server.session import (
    SERVER_VERSION,
    STATUS_PARAMETERS,
    Session,
    check_startup_user,
    default_settings,
)
from dpproxy.server.users import UsersFileError

log = logging.getLogger("dpproxy.server")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``dpproxy serve`` runs on: uvloop's when it is installed (the ``fast``
    extra, ``pip install 'dpproxy[fast]'``) and ``DPPROXY_EVENT_LOOP`` is not ``asyncio``;
    otherwise ``None``, asyncio's own. The server uses only what both loops provide (streams,
    ``start_tls``, signal handlers, worker threads)."""
    if os.environ.get("DPPROXY_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


class TooManyConnections(DPProxyError):
    sqlstate = "53300"


class InvalidAuthorization(DPProxyError):
    sqlstate = "28000"


class InsecureFile(UsersFileError):
    """A private key or users file that group or others may access (config_file_error)."""


def check_private_file(path: Path, what: str) -> None:
    """PostgreSQL's rule for its private key: no access for group or others (``0600`` or
    less), except group read for a file owned by root when not running as root (``0640``)."""
    st = path.stat()
    mode = st.st_mode
    allowed = 0o040 if st.st_uid == 0 and os.geteuid() != 0 else 0
    if mode & 0o077 & ~allowed:
        most = "0640" if allowed else "0600"
        raise InsecureFile(
            f'{what} "{path}" has group or world access (mode {mode & 0o777:04o}); it must be '
            f"{most} or less: chmod {most} {path}"
        )


def check_files(config: ServerConfig) -> None:
    """Refuse a TLS key or users file readable by others (``InsecureFile``, F0000)."""
    if config.tls_key is not None:
        check_private_file(config.tls_key, "private key file")
    if config.users_path is not None and config.users_path.exists():
        check_private_file(config.users_path, "users file")


def _is_loopback_host(host: str) -> bool:
    """Is a listen address loopback only? (``localhost``, 127.0.0.0/8, ``::1``)"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 6432
    users_path: Path | None = None
    trust: bool = False  # trust authentication, loopback clients only
    tls_cert: Path | None = None
    tls_key: Path | None = None
    require_tls: bool = False  # refuse logins without TLS (28000), as hostssl
    max_connections: int = 100
    max_message_size: int = protocol.DEFAULT_MAX_MESSAGE
    idle_timeout: float | None = 3600.0
    # From connect to the end of authentication, as PostgreSQL's authentication_timeout (at
    # most max_connections connections at once in that phase; the rest: 53300 at once).
    authentication_timeout: float = 60.0
    statement_timeout: float | None = None  # seconds; cancels a DP query running longer
    shutdown_grace: float = 30.0
    database: str = "dpproxy"
    extra: dict[str, str] = field(default_factory=dict)


def _is_loopback(peer: Any) -> bool:
    if isinstance(peer, tuple) and peer:
        try:
            return ipaddress.ip_address(peer[0]).is_loopback
        except ValueError:
            return False
    return isinstance(peer, str | bytes)  # a Unix socket is local


class JsonFormatter(logging.Formatter):
    """One JSON object per line; only the fields the server puts in ``extra`` (never SQL
    results, exact aggregates or credentials)."""

    FIELDS: tuple[str, ...] = ("event", "user", "sqlstate", "rows", "cost", "ms", "pid", "peer")
    FIELDS += ("reason", "ledger", "address")  # ledger, address: serve's first two lines
    FIELDS += ("loop",)  # the event loop serve runs on (uvloop or asyncio), with its address
    FIELDS += ("direct",)  # a release whose worker wrote the reply itself (direct.py)
    FIELDS += ("linger",)  # ... and whose query that worker read itself (worker.py)

    _second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)  # a release a line: the time text made once a second
        if second != self._second[0]:
            self._second = (second, self.formatTime(record, "%Y-%m-%dT%H:%M:%S"))
        data: dict[str, Any] = {
            "time": self._second[1],
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
        }
        fields = record.__dict__
        for name in self.FIELDS:
            if name in fields:
                data[name] = fields[name]
        return json.dumps(data, ensure_ascii=False)


class Server:
    """``dpproxy serve``: PostgreSQL protocol v3 in front of one engine."""

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self.sessions: dict[int, Session] = {}
        self._starting = 0  # connections not yet logged in (at most max_connections)
        self.shutting_down = False
        self._server: asyncio.base_events.Server | None = None
        self.executor: ThreadPoolExecutor | None = None  # made by start()
        check_files(config)
        if config.require_tls and config.tls_cert is None:
            raise InvalidParameter("TLS is required, but no certificate is configured")
        self._tls = self._tls_context()
        self._users: Any = None
        if config.users_path is not None:
            from dpproxy.server.users import UserStore

            self._users = UserStore(config.users_path)
            self._users.load()
        self._routes: dict[str, bool] = {}
        names = "|".join(re.escape(t.name.lower()) for t in engine.catalog.tables) or "(?!)"
        self._table_names = re.compile(rf"\b(?:{names})\b")

    def _tls_context(self) -> ssl.SSLContext | None:
        if self.config.tls_cert is None:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(self.config.tls_cert), str(self.config.tls_key or ""))
        return ctx

    # ---------------------------------------------------------------------------- life

    async def start(self) -> None:
        if self.config.trust and not _is_loopback_host(self.config.host):
            log.warning(
                "--trust with the non-loopback listen address %s: other hosts can reach the "
                "server, and whatever relays through this one (an SSH tunnel, a local proxy) "
                "logs in without a password",
                self.config.host,
                extra={"event": "config"},
            )
        # The loop's default executor (asyncio.to_thread's; the loop joins it when it closes),
        # made here so that sessions can hand DP statements to it directly (direct.hand_off)
        self.executor = ThreadPoolExecutor(thread_name_prefix="dpproxy-worker")
        asyncio.get_running_loop().set_default_executor(self.executor)
        self._server = await asyncio.start_server(
            self._handle, self.config.host, self.config.port, limit=self.config.max_message_size
        )

    @property
    def sockets(self) -> list[Any]:
        return list(self._server.sockets) if self._server else []

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def shutdown(self) -> None:
        """Stop accepting; let in-flight queries finish (up to the grace period); close."""
        self.shutting_down = True
        if self._server is not None:
            self._server.close()
        for s in self.sessions.values():
            s.stop_lingering()  # a worker waiting for a session's next message hands it back
        busy = [s.running for s in self.sessions.values() if s.running is not None]
        if busy:
            await asyncio.wait(busy, timeout=self.config.shutdown_grace)
        for s in list(self.sessions.values()):
            s.gate.close()  # a worker still running writes nothing after this (direct.py)
            with contextlib.suppress(Exception):
                s.send(
                    protocol.error_response(
                        "57P01",
                        "terminating connection due to administrator command",
                        severity="FATAL",
                    )
                )
                await s.flush()
                s.writer.close()
        log.info("stopped", extra={"event": "shutdown"})

    # ---------------------------------------------------------------------- per session

    def catalog_emulator(self, session: Session) -> CatalogEmulator:
        """The catalog emulation of one session (its own settings and current user; about
        7 ms to make, on a database built once per process)."""
        if session.emulator is None:
            session.emulator = CatalogEmulator(
                self.engine.catalog,
                server_version=SERVER_VERSION,
                database=session.database or self.config.database,
                user=session.user,
                settings=default_settings(session.startup, session.user, session.database),
                backend_pid=session.pid,
                cancel_backend=lambda pid: self.cancel_backend(session, pid),
                cursors=session.cursor_rows,
            )
        return session.emulator

    def cancel_backend(self, caller: Session, pid: int) -> bool:
        """``pg_cancel_backend(pid)`` (from the catalog emulation's thread): cancel the
        running query of session ``pid``, which must belong to the caller's user (42501
        otherwise, as PostgreSQL 15); false when no session has that pid."""
        session = self.sessions.get(pid)
        if session is None:
            return False
        if session.user != caller.user:
            raise Forbidden(
                "must be a member of the role whose query is being canceled or member of "
                "pg_signal_backend"
            )
        if session is caller:  # the signal stops the very statement that sent it
            raise QueryCanceled("canceling statement due to user request")
        if session.cancel_token is not None:
            session.cancel_token.cancel()
        if session.emulator is not None and session is not caller:
            session.emulator.interrupt()
        log.info("cancel", extra={"event": "cancel", "pid": pid, "user": session.user})
        return True

    def is_catalog_query(self, session: Session, sql: str) -> bool:
        """Route to the catalog emulation? A statement naming a schema table and no catalog
        relation goes straight to the DP engine (which plans or refuses it) without the
        emulation's sqlglot parse; answers are cached per statement text."""
        known = self._routes.get(sql)
        if known is not None:
            return known
        lowered = sql.lower()
        if self._table_names.search(lowered) and not any(
            marker in lowered for marker in ("pg_", "information_schema", "current_", "version")
        ):
            decision = False
        else:
            decision = bool(self.catalog_emulator(session).is_catalog_query(sql))
        if len(self._routes) > 4096:
            self._routes.clear()
        self._routes[sql] = decision
        return decision

    def known_route(self, sql: str) -> bool | None:
        """:meth:`is_catalog_query`'s cached answer for ``sql``, or None (any thread)."""
        return self._routes.get(sql)

    def startup_params(self, session: Session) -> dict[str, str]:
        return session.startup

    # ---------------------------------------------------------------------- connection

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session: Session | None = None
        peer = writer.get_extra_info("peername")
        self._starting += 1
        starting = True
        try:
            if self._starting > self.config.max_connections:
                raise TooManyConnections(
                    "sorry, too many clients are connecting at once",
                    hint=f"at most {self.config.max_connections} may be logging in at a time",
                )
            try:
                async with asyncio.timeout(self.config.authentication_timeout):
                    session = await self._login(reader, writer, peer)
            except TimeoutError:  # a client that never finishes logging in holds nothing
                log.info("authentication timed out", extra={"event": "refused", "peer": str(peer)})
                return
            self._starting -= 1
            starting = False
            if session is None:
                return
            self.sessions[session.pid] = session
            self._greet(session)
            await session.flush()
            log.info(
                "connected", extra={"event": "connect", "user": session.user, "pid": session.pid}
            )
            await session.serve()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except DPProxyError as e:
            with contextlib.suppress(Exception):
                writer.write(protocol.error_from(e, severity="FATAL"))
                await writer.drain()
            log.info(
                "connection refused",
                extra={"event": "refused", "sqlstate": e.sqlstate, "peer": str(peer)},
            )
        finally:
            if starting:
                self._starting -= 1
            if session is not None:
                self.sessions.pop(session.pid, None)
                if session.emulator is not None:
                    session.emulator.close()
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    async def _login(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Any
    ) -> Session | None:
        """Startup and authentication: the session to serve, or None (a CancelRequest)."""
        params = await self._startup(reader, writer)
        if params is None:
            return None
        _, reader, writer = params  # the same streams, upgraded in place by TLS
        startup = params[0]
        session = Session(self, reader, writer)
        session.startup = startup
        if self.shutting_down:
            raise TooManyConnections("the server is shutting down")
        if len(self.sessions) >= self.config.max_connections:
            raise TooManyConnections(
                "sorry, too many clients already",
                hint=f"the limit is {self.config.max_connections} (--max-connections)",
            )
        session.user = check_startup_user(startup)
        session.database = startup.get("database", session.user)
        if self.config.require_tls and writer.get_extra_info("ssl_object") is None:
            host = peer[0] if isinstance(peer, tuple) and peer else "local"
            raise InvalidAuthorization(
                f'connection without TLS refused: host "{host}", user "{session.user}", '
                f'database "{session.database}", no encryption',
                hint="this server requires TLS: connect with sslmode=require (or verify-full)",
            )
        await self._authenticate(session, peer)
        return session

    async def _startup(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[dict[str, str], asyncio.StreamReader, asyncio.StreamWriter] | None:
        """SSL/GSS negotiation and the StartupMessage; ``None`` for a CancelRequest."""
        negotiated_tls = False
        while True:
            code, payload = await protocol.read_startup(reader, self.config.max_message_size)
            if code == protocol.SSL_REQUEST and not negotiated_tls:
                if self._tls is None:
                    writer.write(b"N")
                    await writer.drain()
                    continue
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(self._tls)
                negotiated_tls = True
                continue
            if code == protocol.GSSENC_REQUEST:
                writer.write(b"N")
                await writer.drain()
                continue
            if code == protocol.CANCEL_REQUEST:
                pid, key = payload.int32(), payload.int32()
                self._cancel(pid, key)
                return None
            if code >> 16 != 3:
                raise ProtocolViolation(
                    f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                    "server supports 3.0"
                )
            return protocol.parse_startup_parameters(payload), reader, writer

    def _cancel(self, pid: int, key: int) -> None:
        session = self.sessions.get(pid)
        if session is None:
            return
        if hmac.compare_digest(struct.pack("!i", session.key), struct.pack("!i", key)):
            if session.cancel_token is not None:
                session.cancel_token.cancel()
            if session.emulator is not None:
                session.emulator.interrupt()
            log.info("cancel", extra={"event": "cancel", "pid": pid, "user": session.user})

    async def _authenticate(self, session: Session, peer: Any) -> None:
        if self.config.trust and _is_loopback(peer):
            session.send(protocol.authentication_ok())
            return
        if self._users is None:
            raise InvalidAuthorization(
                f'no authentication method for user "{session.user}"',
                hint="create users with `dpproxy user add` and start with --users FILE "
                "(or --trust for loopback-only development)",
            )
        from dpproxy.server.scram import ScramExchange

        # Re-read on every login: a user removed with `dpproxy user remove` is out at once
        # (the file is replaced atomically, so a reader never sees half of it).
        await asyncio.to_thread(self._users.load)
        exchange = ScramExchange(self._users.verifier(session.user), user=session.user)
        session.send(protocol.authentication_sasl(exchange.mechanisms()))
        await session.flush()
        kind, payload = await protocol.read_message(session.reader, 1 << 16)
        if kind != b"p":
            raise ProtocolViolation("expected SASL response")
        exchange.select_mechanism(payload.cstr())
        length = payload.int32()
        first = payload.raw(length) if length >= 0 else b""
        session.send(protocol.authentication_sasl_continue(exchange.server_first(first)))
        await session.flush()
        kind, payload = await protocol.read_message(session.reader, 1 << 16)
        if kind != b"p":
            raise ProtocolViolation("expected SASL response")
        final = exchange.server_final(payload.rest())
        session.send(protocol.authentication_sasl_final(final))
        session.send(protocol.authentication_ok())

    def _greet(self, session: Session) -> None:
        settings = default_settings(session.startup, session.user, session.database)
        for key, name in STATUS_PARAMETERS.items():
            session.send(protocol.parameter_status(name, settings[key]))
        session.send(protocol.backend_key_data(session.pid, session.key))
        session.send(protocol.ready_for_query("I"))
