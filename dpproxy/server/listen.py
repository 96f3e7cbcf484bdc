"""Why ``dpproxy serve`` cannot listen: one error line, not a traceback.

A busy port is the usual case (6432 is also PgBouncer's default port). :func:`check_listen`
binds the address once and lets it go before anything slow starts (building the demo database,
opening the ledger), so the error comes first; :func:`listen_error` turns the ``OSError`` of a
bind, there or in :meth:`Server.start` (the port taken in between), into an
:class:`InvalidParameter` that names the address, what holds it when that is cheaply known
(Linux: the listening socket's inode in ``/proc/net/tcp*``, then the process whose
``/proc/PID/fd`` links to it, among those this user may read), and ``--listen`` as the way out.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from dpproxy.errors import InvalidParameter

_LISTEN_STATE = "0A"  # TCP_LISTEN in /proc/net/tcp


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listening_inodes(port: int, proc: Path) -> set[str]:
    """Inodes of the TCP sockets listening on ``port`` (any address), from ``/proc/net``."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN_STATE:
                continue
            _, _, hex_port = fields[1].rpartition(":")
            if int(hex_port, 16) == port and fields[9] != "0":
                found.add(fields[9])
    return found


def port_holder(port: int, proc: Path = Path("/proc")) -> str | None:
    """``"pid N (name)"`` of a process listening on TCP ``port``, or ``None`` if unknown.

    Only processes whose file descriptors this user may read are seen (all of them as root);
    elsewhere than Linux, or in another network namespace (a container), the answer is ``None``.
    """
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    links = {f"socket:[{inode}]" for inode in inodes}
    try:
        pids = sorted((p for p in os.listdir(proc) if p.isdigit()), key=int)
    except OSError:
        return None
    for pid in pids:
        fd_dir = proc / pid / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd) in links:
                    name = (proc / pid / "comm").read_text(encoding="utf-8").strip()
                    return f"pid {pid} ({name})"
            except OSError:
                continue
    return None


def listen_error(
    host: str, port: int, err: OSError, proc: Path = Path("/proc")
) -> InvalidParameter:
    """The error for a failed bind of ``host:port``, with the next step in its hint."""
    where = _address(host, port)
    other = _address(host, port + 1 if port < 65535 else 6433)
    hint = f"stop what holds it, or listen elsewhere: dpproxy serve --listen {other}"
    if isinstance(err, socket.gaierror):
        reason = f"the host name {host!r} does not resolve ({err.strerror})"
        hint = "give an IP address or a resolvable name: --listen 127.0.0.1:6432"
    elif err.errno == errno.EADDRINUSE:
        holder = port_holder(port, proc)
        reason = f"the address is already in use{f' by {holder}' if holder else ''}"
        if port == 6432 and holder is None:
            reason += " (6432 is also PgBouncer's default port)"
    elif err.errno == errno.EACCES:
        reason = "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        hint = f"listen on a port of 1024 or more: dpproxy serve --listen {_address(host, 6432)}"
    elif err.errno == errno.EADDRNOTAVAIL:
        reason = f"no network interface of this machine has the address {host}"
        hint = "listen on one of its addresses: --listen 127.0.0.1:6432 (this machine only) "
        hint += "or --listen 0.0.0.0:6432 (every interface)"
    else:
        reason = err.strerror or str(err)
    return InvalidParameter(f"cannot listen on {where}: {reason}", hint=hint)


def check_listen(host: str, port: int) -> None:
    """Bind every address of ``host:port`` as the server will, then release it.

    Raises the :func:`listen_error` of the first failure. Like asyncio's server, sets
    ``SO_REUSEADDR`` (a port in TIME_WAIT is free) and ``IPV6_V6ONLY``. Port 0 (any free port)
    always passes.
    """
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as e:
        raise listen_error(host, port, e) from None
    for family, kind, proto, _, address in dict.fromkeys(infos):
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as e:
            raise listen_error(host, port, e) from None
