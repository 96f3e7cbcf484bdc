"""``server/direct.py``: the worker's write of a DP reply on a duplicate of the socket's
descriptor, over a real socket pair: all of it, the rest when the send buffer is full, nothing
once the gate is closed, and no duplicate at all for TLS or a transport with buffered data."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from dpproxy.server import direct


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def _drain(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_the_whole_reply_is_written_and_the_duplicate_closed() -> None:
    a, b = _pair()
    try:
        fd = os.dup(a.fileno())
        out = direct.DirectReply(fd, direct.Gate())
        assert out.send(b"D reply Z") == b"" and out.sent_at is not None
        out.close()
        out.close()  # once only
        assert _drain(b) == b"D reply Z"
        try:
            os.fstat(fd)
            raise AssertionError("the duplicate is still open")
        except OSError:
            pass
    finally:
        a.close()
        b.close()


def test_a_full_send_buffer_returns_the_rest_in_order() -> None:
    a, b = _pair()
    try:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        data = bytes(range(256)) * 8192  # 2 MiB: more than the socket takes at once
        out = direct.DirectReply(os.dup(a.fileno()), direct.Gate())
        rest = out.send(data)
        out.close()
        assert rest is not None and 0 < len(rest) < len(data)
        received = _drain(b)
        assert received + rest == data
    finally:
        a.close()
        b.close()


def test_nothing_is_written_once_the_gate_is_closed() -> None:
    a, b = _pair()
    try:
        gate = direct.Gate()
        out = direct.DirectReply(os.dup(a.fileno()), gate)
        gate.close()
        assert out.send(b"late") is None and out.sent_at is None
        out.close()
        assert _drain(b) == b""
    finally:
        a.close()
        b.close()


class _Transport:
    def __init__(self, buffered: int = 0, closing: bool = False) -> None:
        self.buffered, self.closing = buffered, closing

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered


class _Writer:
    def __init__(self, sock: socket.socket, transport: _Transport, tls: bool = False) -> None:
        self.transport = transport
        self.extra: dict[str, Any] = {"socket": sock, "ssl_object": object() if tls else None}

    def get_extra_info(self, name: str) -> Any:
        return self.extra.get(name)


def _open(writer: _Writer) -> direct.DirectReply | None:
    return direct.open_direct(writer, direct.Gate())  # type: ignore[arg-type]


def test_only_a_plain_idle_non_blocking_socket_gets_a_duplicate() -> None:
    a, b = _pair()
    try:
        out = _open(_Writer(a, _Transport()))
        assert out is not None
        out.close()
        assert _open(_Writer(a, _Transport(), tls=True)) is None  # the transport encrypts
        assert _open(_Writer(a, _Transport(buffered=10))) is None  # bytes queued ahead
        assert _open(_Writer(a, _Transport(closing=True))) is None
        a.setblocking(True)
        assert _open(_Writer(a, _Transport())) is None  # a worker must never block
    finally:
        a.close()
        b.close()


def test_the_loop_transport_sees_what_the_worker_wrote() -> None:
    """On a real event loop: the worker's bytes arrive before the loop's next write."""

    async def go() -> bytes:
        got: list[bytes] = []
        done = asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            out = direct.open_direct(writer, direct.Gate())
            assert out is not None
            rest = await asyncio.to_thread(out.send, b"first;")
            out.close()
            assert rest == b""
            writer.write(b"second")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got.append(await reader.read())
        done.set()
        writer.close()
        server.close()
        await server.wait_closed()
        return b"".join(got)

    assert asyncio.run(go()) == b"first;second"
