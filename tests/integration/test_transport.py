"""Transport hardening of ``dpproxy serve``, over real sockets.

* With a certificate, TLS is required (PostgreSQL's ``hostssl``): psycopg and psql with
  ``sslmode=disable`` are refused with 28000 before any credential is exchanged; with
  ``sslmode=require`` they log in. ``--allow-plaintext`` opts out; ``--require-tls`` without a
  certificate is refused.
* The server refuses to start (one line, exit 1) when the TLS key or the users file can be
  accessed by group or others, as PostgreSQL does for its key.
* ``--trust`` with a non-loopback listen address logs one warning at start.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from tests.commands import dpproxy_command
from tests.integration.test_server import PASSWORD, start_server, stop_server


def _certificate(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "server.crt", tmp / "server.key"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.fail(f"openssl could not make a test certificate: {made.stderr}")
    key.chmod(0o600)
    return cert, key


def _recv(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise AssertionError("the server closed the connection")
        data += chunk
    return data


def _plaintext_startup(host: str, port: int) -> dict[str, str]:
    """A StartupMessage without SSLRequest; the fields of the ErrorResponse it gets."""
    body = struct.pack("!i", 3 << 16) + b"user\0ana\0database\0dpproxy\0\0"
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(struct.pack("!i", len(body) + 4) + body)
        kind = _recv(s, 1)
        (length,) = struct.unpack("!i", _recv(s, 4))
        payload = _recv(s, length - 4)
    assert kind == b"E", (kind, payload)
    return {chr(p[0]): p[1:].decode() for p in payload.split(b"\0") if p}


def _psql(dsn: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", dsn, "-XAtc", "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PGPASSWORD=PASSWORD),
    )


def test_tls_is_required_when_a_certificate_is_given(tmp_path: Path, demo_db: Path) -> None:
    cert, key = _certificate(tmp_path)
    run = start_server(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        with pytest.raises(psycopg.OperationalError) as err:
            psycopg.connect(run.dsn())  # sslmode=disable
        assert "connection without TLS refused" in str(err.value)
        assert "no encryption" in str(err.value)
        fields = _plaintext_startup(run.host, run.port)
        assert (fields["S"], fields["C"]) == ("FATAL", "28000"), fields
        assert "sslmode=require" in fields["H"]
        refused = _psql(run.dsn())
        assert refused.returncode == 2 and "no encryption" in refused.stderr, refused
        with psycopg.connect(
            run.dsn().replace("sslmode=disable", "sslmode=require"), autocommit=True
        ) as c:
            assert c.pgconn.ssl_in_use
            assert c.execute("SELECT 1").fetchone() == (1,)
        answered = _psql(run.dsn().replace("sslmode=disable", "sslmode=require"))
        assert (answered.returncode, answered.stdout.strip()) == (0, "1"), answered
    finally:
        err_text = stop_server(run)
    assert PASSWORD not in err_text


def test_allow_plaintext_lets_unencrypted_clients_in(tmp_path: Path, demo_db: Path) -> None:
    cert, key = _certificate(tmp_path)
    run = start_server(
        tmp_path, "--tls-cert", str(cert), "--tls-key", str(key), "--allow-plaintext"
    )
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as c:
            assert not c.pgconn.ssl_in_use
            assert c.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(
            run.dsn().replace("sslmode=disable", "sslmode=require"), autocommit=True
        ) as c:
            assert c.pgconn.ssl_in_use
    finally:
        stop_server(run)


# ------------------------------------------------------------------ refusals at start


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _refused(out: subprocess.CompletedProcess[str], sqlstate: str) -> str:
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr and "dpproxy serving on" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("ERROR:") and f"(SQLSTATE {sqlstate})" in lines[0], lines[0]
    return lines[0]


def _users(tmp: Path) -> Path:
    path = tmp / "users.json"
    subprocess.run(
        [*dpproxy_command(), "user", "--users", str(path), "add", "ana", "--password-stdin"],
        input=PASSWORD + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620], ids=lambda m: f"{m:04o}")
def test_a_key_others_can_access_is_refused(tmp_path: Path, mode: int) -> None:
    cert, key = _certificate(tmp_path)
    key.chmod(mode)
    line = _refused(_serve("--trust", "--tls-cert", str(cert), "--tls-key", str(key)), "F0000")
    assert f'private key file "{key}" has group or world access' in line


def test_a_users_file_others_can_read_is_refused(tmp_path: Path) -> None:
    users = _users(tmp_path)
    assert users.stat().st_mode & 0o777 == 0o600  # as `dpproxy user add` writes it
    users.chmod(0o644)
    line = _refused(_serve("--users", str(users)), "F0000")
    assert f'users file "{users}" has group or world access' in line


def test_require_tls_needs_a_certificate(tmp_path: Path) -> None:
    line = _refused(_serve("--trust", "--require-tls"), "22023")
    assert "--require-tls needs --tls-cert" in line


# ------------------------------------------------------------------ the trust warning


def _warnings_at_start(tmp: Path, listen: str) -> list[str]:
    """Start ``dpproxy serve --trust --listen LISTEN``, stop it once it serves; the lines of
    its log that warn about --trust."""
    log = tmp / f"serve-{listen.replace(':', '_')}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*dpproxy_command(), "serve", "--trust", "--listen", listen],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not re.search(r"dpproxy serving on", log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    return [line for line in log.read_text().splitlines() if "--trust with" in line]


def test_trust_on_a_non_loopback_address_warns_once(tmp_path: Path, demo_db: Path) -> None:
    warned = _warnings_at_start(tmp_path, "0.0.0.0:0")
    assert len(warned) == 1, warned
    assert '"level": "warning"' in warned[0] and "0.0.0.0" in warned[0]
    assert _warnings_at_start(tmp_path, "127.0.0.1:0") == []
