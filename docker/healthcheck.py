"""The image's HEALTHCHECK: is `dpproxy serve` answering the PostgreSQL protocol?

Connects to 127.0.0.1 on $DPPROXY_HEALTHCHECK_PORT (default 6432) and sends the 8-byte
SSLRequest every PostgreSQL client may send first; a PostgreSQL server (dpproxy serve among
them) answers with one byte, "S" (TLS offered) or "N" (not). Exit 0 on either, 1 otherwise: no
listener, a timeout, or anything else on the port. No login, no query, no budget spent; only
the standard library, so it runs in the slim image as it is.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

SSL_REQUEST = struct.pack("!ii", 8, 80877103)


def probe(host: str, port: int, timeout: float = 3.0) -> str | None:
    """The server's answer to an SSLRequest ("S" or "N"), or ``None`` if it gave none."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(SSL_REQUEST)
            answer = sock.recv(1)
    except OSError:
        return None
    return answer.decode("ascii") if answer in (b"S", b"N") else None


def main() -> int:
    port = int(os.environ.get("DPPROXY_HEALTHCHECK_PORT", "6432"))
    host = os.environ.get("DPPROXY_HEALTHCHECK_HOST", "127.0.0.1")
    answer = probe(host, port)
    if answer is None:
        print(f"unhealthy: no PostgreSQL protocol answer on {host}:{port}", file=sys.stderr)
        return 1
    print(f"healthy: {host}:{port} answered the SSLRequest with {answer!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
