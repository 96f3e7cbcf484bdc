"""Wire fuzzing against a real ``dpproxy serve``, over raw sockets.

Hypothesis builds byte streams of PostgreSQL protocol v3 frames — startup packets, SSL/GSS
and cancel requests, SASL responses, Query, Parse, Bind, Describe, Execute, Sync, Close,
Flush and unknown messages — valid ones, mutated ones (lengths off by a little or a lot,
bodies truncated, extended or random, bytes flipped) and random bytes, and sends them before
authentication and after a real SCRAM-SHA-256 login. Then it closes its side of the socket.
Properties:

* the connection ends, within :data:`TIMEOUT` seconds, with a clean close; what the server
  sent is a sequence of well-formed backend messages (no hang, no torn output), and a
  connection the server ended itself ended with an ErrorResponse or after the client's
  Terminate;
* the server never crashes: after every example a fresh connection logs in and answers;
* well-framed Query messages with fuzzed SQL (``tests/fuzz/test_sql_fuzz.py``'s grammar and
  mutations) never end the session: ``SELECT COUNT(*) FROM adult`` on the same connection
  is answered afterwards;
* the server's log has no Python traceback (no unhandled exception, no internal error).

Bounded runs (well under a minute on two cores): ``DPPROXY_FUZZ_EXAMPLES`` (default 150;
each test takes a share). A long run::

    DPPROXY_FUZZ_EXAMPLES=20000 pytest tests/fuzz/test_wire_fuzz.py -p no:cacheprovider
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpproxy.demo import demo_schema_path
from tests.integration.test_server import PASSWORD, Running, start_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sql_fuzz import EXAMPLES, SEEDED, mutated, queries

TIMEOUT = 15.0  # seconds for the server to finish a connection once the client is done
PROTOCOL = 196608
FUZZ = settings(
    max_examples=max(EXAMPLES // 3, 10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ------------------------------------------------------------------------- the server


@dataclass
class Server:
    run: Running
    log: list[str] = field(default_factory=list, repr=False)
    reader: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.run.host, self.run.port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Server]:
    """The demo with a budget that no number of examples exhausts."""
    tmp = tmp_path_factory.mktemp("wire-fuzz")
    schema = tmp / "adult.yaml"
    text = demo_schema_path().read_text(encoding="utf-8")
    text, n = re.subn(r"(?m)^(\s*)budget:.*$", r"\1budget: {epsilon: 1.0e+9, delta: 0.5}", text)
    assert n == 1
    schema.write_text(text, encoding="utf-8")
    shutil.copy(demo_db, tmp / "adult.duckdb")
    run = start_server(tmp, "--database", str(tmp / "adult.duckdb"), "--schema", str(schema))
    s = Server(run)
    stderr = run.proc.stderr
    assert stderr is not None

    def drain() -> None:  # a full pipe would block the server's logging
        for line in stderr:
            s.log.append(line)

    s.reader = threading.Thread(target=drain, daemon=True)
    s.reader.start()
    try:
        yield s
    finally:
        run.proc.send_signal(signal.SIGTERM)
        try:
            run.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.proc.wait()
        s.reader.join(timeout=10)
        stderr.close()
    text = "".join(s.log)
    assert "Traceback" not in text, text[-5000:]


@pytest.fixture(autouse=True)
def _server_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "server" in request.fixturenames:
        s: Server = request.getfixturevalue("server")
        assert s.run.proc.poll() is None, "the server died:\n" + "".join(s.log)[-5000:]
        assert "Traceback" not in "".join(s.log), "".join(s.log)[-5000:]


# ---------------------------------------------------------------------- a raw client


def frame(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def startup(user: str = "ana", **extra: str) -> bytes:
    params = {"user": user, "database": "dpproxy", **extra}
    body = struct.pack("!i", PROTOCOL)
    body += b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def query(sql: str) -> bytes:
    return frame(b"Q", sql.encode() + b"\0")


def messages(data: bytes) -> list[tuple[bytes, bytes]]:
    """Backend messages; fails on a torn or malformed stream (one 'N'/'S' byte alone answers
    an SSLRequest or GSSENCRequest)."""
    out: list[tuple[bytes, bytes]] = []
    i = 0
    while i < len(data):
        kind = data[i : i + 1]
        if kind in (b"N", b"S") and (i + 1 == len(data) or data[i + 1 : i + 2] in b"NSREZ"):
            out.append((kind, b""))
            i += 1
            continue
        assert i + 5 <= len(data), f"torn message header at {i}: {data[i:]!r}"
        (length,) = struct.unpack("!i", data[i + 1 : i + 5])
        assert length >= 4 and i + 1 + length <= len(data), f"torn message at {i}: {data[i:]!r}"
        assert kind in b"RSKZECDTINnst123AGHWVvc" and kind, f"unknown message type {kind!r}"
        out.append((kind, data[i + 5 : i + 1 + length]))
        i += 1 + length
    return out


def read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes, within TIMEOUT (else the server hangs)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "the server neither answered nor closed the connection (hang)"
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise AssertionError("the server neither answered nor closed (hang)") from None
        except ConnectionResetError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def read_until(sock: socket.socket, last: bytes) -> list[tuple[bytes, bytes]]:
    """Messages up to and including one of type ``last``."""
    data = b""
    sock.settimeout(TIMEOUT)
    while True:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a {last!r} message: {data!r}"
        data += chunk
        try:
            got = messages(data)
        except AssertionError:
            continue  # more to come
        if got and got[-1][0] == last:
            return got


def read_until_ready(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    return read_until(sock, b"Z")


def _scram_login(sock: socket.socket, password: str = PASSWORD) -> None:
    """SCRAM-SHA-256 (RFC 5802/7677) as a client, up to ReadyForQuery."""
    nonce = base64.b64encode(secrets.token_bytes(18)).decode()
    first_bare = f"n=,r={nonce}"
    first = b"n,," + first_bare.encode()
    read_until(sock, b"R")  # AuthenticationSASL
    sock.sendall(frame(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
    _kind, body = read_until(sock, b"R")[-1]
    assert body[:4] == struct.pack("!i", 11), body  # AuthenticationSASLContinue
    server_first = body[4:].decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored, auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    sock.sendall(frame(b"p", final.encode()))
    got = read_until_ready(sock)
    assert all(kind != b"E" for kind, _ in got), got


def login(server: Server) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=TIMEOUT)
    sock.sendall(startup())
    _scram_login(sock)
    return sock


def answers_count(sock: socket.socket) -> None:
    sock.sendall(query("SELECT COUNT(*) FROM adult"))
    got = read_until_ready(sock)
    rows = [body for kind, body in got if kind == b"D"]
    assert len(rows) == 1 and all(kind != b"E" for kind, _ in got), got


def check_alive(server: Server) -> None:
    """A fresh connection logs in and answers."""
    with login(server) as sock:
        sock.sendall(query("SELECT 1"))
        got = read_until_ready(sock)
        assert [k for k, _ in got] == [b"T", b"D", b"C", b"Z"], got
        sock.sendall(frame(b"X", b""))


def finish(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    """Close the client's side; the server must then end the connection in time, having
    sent only whole messages."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    got = messages(read_all(sock))
    sock.close()
    return got


# ---------------------------------------------------------------------- strategies

TYPES = b"QPBDESCHXFdcfpZz\x00\xff"


@st.composite
def garbage_frame(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from([bytes([c]) for c in TYPES]))
    body = draw(st.binary(max_size=64))
    length = len(body) + 4
    how = draw(st.integers(0, 4))
    if how == 1:
        length = draw(st.sampled_from([-1, 0, 3, 4, 5, 2**31 - 1, 1 << 20, (1 << 20) + 1]))
    elif how == 2:
        length += draw(st.integers(-8, 8))
    return kind + struct.pack("!i", length) + body


def _cstr(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass") + b"\0"


@st.composite
def extended(draw: st.DrawFn) -> bytes:
    """A Parse/Bind/Describe/Execute/Sync sequence with fuzzed fields."""
    sql = draw(st.one_of(queries(), mutated(), st.just("SELECT $1::int + $2")))
    name = draw(st.sampled_from(["", "s1", "x" * 100]))
    oids = draw(st.lists(st.sampled_from([0, 16, 20, 23, 25, 701, 1082, 1700, 9999]), max_size=3))
    parse = frame(
        b"P", _cstr(name) + _cstr(sql) + struct.pack("!h", len(oids))
        + b"".join(struct.pack("!i", o) for o in oids)
    )  # fmt: skip
    values = draw(st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=3))
    formats = draw(st.lists(st.integers(-1, 2), max_size=3))
    bind = frame(
        b"B",
        _cstr("")
        + _cstr(name)
        + struct.pack("!h", len(formats))
        + b"".join(struct.pack("!h", f) for f in formats)
        + struct.pack("!h", len(values))
        + b"".join(
            struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v for v in values
        )
        + struct.pack("!h", draw(st.integers(-1, 2)))
        + b"".join(struct.pack("!h", f) for f in draw(st.lists(st.integers(0, 1), max_size=2))),
    )
    describe = frame(b"D", draw(st.sampled_from([b"S", b"P", b"x"])) + _cstr(name))
    execute = frame(b"E", _cstr("") + struct.pack("!i", draw(st.integers(-1, 3))))
    parts = [parse, bind, describe, execute, frame(b"H", b""), frame(b"S", b"")]
    order = draw(st.permutations(parts)) if draw(st.integers(0, 3)) == 0 else parts
    return b"".join(order)


@st.composite
def mutate_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    raw = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not raw:
            break
        i = draw(st.integers(0, len(raw) - 1))
        op = draw(st.integers(0, 3))
        if op == 0:
            raw[i] = draw(st.integers(0, 255))
        elif op == 1:
            del raw[i : i + draw(st.integers(1, 8))]
        elif op == 2:
            raw[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            del raw[i:]
    return bytes(raw)


special_startups = st.sampled_from(
    [
        struct.pack("!ii", 8, 80877103),  # SSLRequest
        struct.pack("!ii", 8, 80877104),  # GSSENCRequest
        struct.pack("!iiii", 16, 80877102, 1, 2),  # CancelRequest of nobody
        struct.pack("!ii", 8, 80877103) * 3,
        struct.pack("!ii", 8, 196608),  # no parameters
        struct.pack("!ii", 8, 131072),  # protocol 2.0
        struct.pack("!i", 7),
        struct.pack("!i", 1 << 30),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
    ]
)


@st.composite
def before_login(draw: st.DrawFn) -> bytes:
    """What a client sends before it is authenticated."""
    first = draw(
        st.one_of(
            special_startups,
            st.builds(startup, st.sampled_from(["ana", "", "nobody", "x" * 300, "é\x01"])),
            st.builds(startup).flatmap(mutate_bytes),
            st.binary(max_size=40),
        )
    )
    rest = draw(
        st.lists(
            st.one_of(
                garbage_frame(),
                st.builds(startup),
                st.just(frame(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", 5) + b"n,,n=")),
                st.binary(min_size=1, max_size=30).map(lambda b: frame(b"p", b)),
                st.just(frame(b"p", b"c=biws,r=abc,p=AAAA")),
                st.just(frame(b"X", b"")),
            ),
            max_size=3,
        )
    )
    return first + b"".join(rest)


@st.composite
def after_login(draw: st.DrawFn) -> bytes:
    """What an authenticated client sends: protocol messages, fuzzed."""
    parts = draw(
        st.lists(
            st.one_of(
                queries().map(query),
                mutated().map(query),
                extended(),
                extended().flatmap(mutate_bytes),
                garbage_frame(),
                queries().map(query).flatmap(mutate_bytes),
                st.sampled_from(
                    [
                        frame(b"S", b""),
                        frame(b"H", b""),
                        frame(b"C", b"S\0"),
                        frame(b"C", b"Q\0"),
                        frame(b"F", b"\0\0\0\0"),
                        frame(b"d", b"xyz"),
                        query("BEGIN; SELECT 1; COMMIT"),
                        query("DECLARE c CURSOR FOR SELECT COUNT(*) FROM adult; FETCH 2 c"),
                        query("SET dpproxy.epsilon = '1e-300'"),
                        query("SELECT * FROM dpproxy.spending WHERE " + "(" * 300 + "1=1"),
                        query("SELECT #>>"),
                    ]
                ),
            ),
            min_size=1,
            max_size=4,
        )
    )
    return b"".join(parts)


# ---------------------------------------------------------------------------- tests


@SEEDED
@FUZZ
@given(data=before_login())
def test_before_login(server: Server, data: bytes) -> None:
    with socket.create_connection(server.address, timeout=TIMEOUT) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server already refused and closed
        finish(sock)
    check_alive(server)


@SEEDED
@FUZZ
@given(data=after_login())
def test_after_login(server: Server, data: bytes) -> None:
    sock = login(server)
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finish(sock)
    check_alive(server)


@SEEDED
@FUZZ
@given(
    sqls=st.lists(
        st.one_of(mutated(), queries(), queries().map(lambda q: f"EXPLAIN {q}")),
        min_size=1,
        max_size=3,
    )
)
def test_fuzzed_sql_keeps_the_session(server: Server, sqls: list[str]) -> None:
    with login(server) as sock:
        sock.sendall(query("SET dpproxy.epsilon = 0.001"))
        read_until_ready(sock)
        for sql in sqls:
            sock.sendall(query(sql))
            got = read_until_ready(sock)
            errors = [body for kind, body in got if kind == b"E"]
            for body in errors:
                state = re.search(rb"C([0-9A-Z]{5})\0", body)
                assert state is not None and state[1] != b"XX000", (sql, body)
        answers_count(sock)
        sock.sendall(frame(b"X", b""))


def test_refused_query_spends_nothing_on_the_wire(server: Server) -> None:
    """Budget before and after a refusal over the same raw connection."""

    def budget(sock: socket.socket) -> bytes:
        sock.sendall(query("SHOW dpproxy.budget"))
        return next(body for kind, body in read_until_ready(sock) if kind == b"D")

    with login(server) as sock:
        before = budget(sock)
        for sql in ("SELECT #>>", "SELECT COUNT(*) FROM adult GROUP BY 0.5", "SELECT x"):
            sock.sendall(query(sql))
            assert any(kind == b"E" for kind, _ in read_until_ready(sock))
        assert budget(sock) == before
        answers_count(sock)
