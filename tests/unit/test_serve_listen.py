"""``dpproxy serve`` on an address it cannot listen on: one ERROR line and a HINT, exit 1.

Real sockets throughout: a port held open by this test process, the real CLI in a subprocess,
the real ``/proc`` of this machine for the holder's pid.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpproxy.errors import InvalidParameter
from dpproxy.server.listen import check_listen, listen_error, port_holder
from tests.commands import dpproxy_command

linux_only = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="the holder is looked up in Linux's /proc"
)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that this process listens on for the test's duration."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _serve(port: int, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DPPROXY_CACHE_DIR": str(cache)}
    argv = ["serve", "--trust", "--ledger", "memory", "--listen", f"127.0.0.1:{port}"]
    return subprocess.run(
        [*dpproxy_command(), *argv], capture_output=True, text=True, timeout=120, env=env
    )


@linux_only
def test_a_busy_port_is_one_error_line_naming_the_holder_and_the_way_out(
    held_port: int, tmp_path: Path
) -> None:
    proc = _serve(held_port, tmp_path / "cache")
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert lines == [
        f"ERROR:  cannot listen on 127.0.0.1:{held_port}: the address is already in use by "
        f"pid {os.getpid()} ({Path(f'/proc/{os.getpid()}/comm').read_text().strip()})  "
        "(SQLSTATE 22023)",
        "HINT:  stop what holds it, or listen elsewhere: "
        f"dpproxy serve --listen 127.0.0.1:{held_port + 1}",
    ]
    # refused before anything slow: the demo database was not built
    assert not (tmp_path / "cache").exists()


def test_the_port_taken_after_the_check_is_the_same_error(held_port: int) -> None:
    """Server.start's bind (asyncio) failing, as when the port is taken after check_listen."""

    async def bind() -> None:
        await asyncio.start_server(lambda r, w: None, "127.0.0.1", held_port)

    with pytest.raises(OSError) as caught:
        asyncio.run(bind())
    err = listen_error("127.0.0.1", held_port, caught.value)
    assert isinstance(err, InvalidParameter)
    assert err.message.startswith(f"cannot listen on 127.0.0.1:{held_port}: ")
    assert "already in use" in err.message
    assert err.hint is not None and f"--listen 127.0.0.1:{held_port + 1}" in err.hint


@linux_only
def test_port_holder_finds_this_process_and_nobody_on_a_free_port(held_port: int) -> None:
    assert (
        port_holder(held_port)
        == f"pid {os.getpid()} ({Path('/proc/self/comm').read_text().strip()})"
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening
        assert port_holder(sock.getsockname()[1]) is None


def test_without_proc_the_holder_is_unknown_and_6432_mentions_pgbouncer(tmp_path: Path) -> None:
    busy = OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))
    assert port_holder(6432, tmp_path) is None
    err = listen_error("127.0.0.1", 6432, busy, proc=tmp_path)
    assert err.message == (
        "cannot listen on 127.0.0.1:6432: the address is already in use "
        "(6432 is also PgBouncer's default port)"
    )
    assert (
        err.hint == "stop what holds it, or listen elsewhere: dpproxy serve --listen 127.0.0.1:6433"
    )


def test_an_address_of_no_interface_and_an_unknown_host() -> None:
    with pytest.raises(InvalidParameter) as caught:
        check_listen("192.0.2.1", 6432)  # TEST-NET-1: never a local address
    assert caught.value.message == (
        "cannot listen on 192.0.2.1:6432: no network interface of this machine has the "
        "address 192.0.2.1"
    )
    assert caught.value.hint is not None and "--listen 127.0.0.1:6432" in caught.value.hint
    with pytest.raises(InvalidParameter) as caught:
        check_listen("no-such-host.invalid", 6432)
    assert "does not resolve" in caught.value.message


def test_a_free_port_passes_and_stays_free() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    check_listen("127.0.0.1", port)
    with socket.socket() as again:  # released: the server can bind it next
        again.bind(("127.0.0.1", port))
