"""SCRAM-SHA-256 server side: RFC 7677's test vector, real clients, and PostgreSQL itself.

The clients are independent implementations: ``scramp`` (the SCRAM library of pg8000), libpq
(through psycopg, against a minimal authentication-only server in this file), and a client
written here from RFC 5802 (for tampering). PostgreSQL is the reference for verifiers: it must
accept ours byte for byte, and hash every password to the very verifier we make.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import scramp  # test extra: a SCRAM client independent of ours

from dpproxy.errors import DPProxyError, ProtocolViolation
from dpproxy.server import scram
from dpproxy.server.scram import (
    AuthenticationFailed,
    ScramExchange,
    Verifier,
    make_verifier,
    parse_verifier,
    prepare_password,
)
from tests import pg

FAILED_ANA = 'password authentication failed for user "ana"'


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class RfcClient:
    """The client side of RFC 5802 as libpq does it (``n,,n=,r=<nonce>``), tamperable."""

    def __init__(self, password: str, *, gs2: str = "n,,", nonce: str | None = None) -> None:
        self.password = password.encode("utf-8")  # the tests use ASCII: SASLprep is identity
        self.gs2 = gs2
        self.nonce = nonce or b64(secrets.token_bytes(18))
        self.bare = f"n=,r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return (self.gs2 + self.bare).encode("ascii")

    def final(
        self,
        server_first: bytes,
        *,
        nonce: str | None = None,
        cbind: str | None = None,
        extensions: str = "",
    ) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode("ascii").split(","))
        assert attrs["r"].startswith(self.nonce) and len(attrs["r"]) > len(self.nonce)
        salted = hashlib.pbkdf2_hmac(
            "sha256", self.password, base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        server_key = hmac.digest(salted, b"Server Key", "sha256")
        cbind = cbind if cbind is not None else b64(self.gs2.encode("ascii"))
        without_proof = f"c={cbind},r={nonce or attrs['r']}{extensions}"
        auth = f"{self.bare},{server_first.decode('ascii')},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_signature = hmac.digest(server_key, auth, "sha256")
        return f"{without_proof},p={b64(proof)}".encode("ascii")


def exchange_for(password: str, user: str = "ana", **kw: Any) -> ScramExchange:
    return ScramExchange(parse_verifier(make_verifier(password, **kw)), user=user)


def run_rfc(exchange: ScramExchange, client: RfcClient, **final_kw: Any) -> bytes:
    return exchange.server_final(client.final(exchange.server_first(client.first()), **final_kw))


# ------------------------------------------------------------------------------ RFC 7677


def test_rfc7677_test_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 7677 §3, byte for byte (user "user", password "pencil")."""
    monkeypatch.setattr(scram, "_server_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    exchange = exchange_for("pencil", user="user", salt=salt)
    first = exchange.server_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = exchange.server_final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.authenticated


# ----------------------------------------------------------------------------- verifiers


def test_verifier_format_and_round_trip() -> None:
    text = make_verifier("pencil")
    match = re.fullmatch(r"SCRAM-SHA-256\$4096:([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):(\S+)", text)
    assert match, text
    v = parse_verifier(text)
    assert (v.iterations, len(v.salt), len(v.stored_key), len(v.server_key)) == (4096, 16, 32, 32)
    assert v.to_text() == text
    assert make_verifier("pencil", iterations=10000).startswith("SCRAM-SHA-256$10000:")


def test_salts_are_fresh() -> None:
    salts = {parse_verifier(make_verifier("same")).salt for _ in range(20)}
    assert len(salts) == 20


def test_verifier_repr_hides_keys() -> None:
    v = parse_verifier(make_verifier("pencil"))
    shown = repr(v)
    assert "iterations=4096" in shown
    assert "stored_key" not in shown and "server_key" not in shown
    assert repr(v.stored_key) not in shown


@pytest.mark.parametrize(
    "text",
    [
        "",
        "md5abcdef",
        "SCRAM-SHA-1$4096:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$4096:c2FsdA==",
        "SCRAM-SHA-256$4096c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$0:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$-1:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$x:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$4096:$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$4096:c2F*dA==$" + "A" * 43 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$4096:c2FsdA==$" + "A" * 42 + "=:" + "A" * 43 + "=",
        "SCRAM-SHA-256$4096:c2FsdA==$" + "A" * 43 + "=:" + "A" * 40 + "==",
        "SCRAM-SHA-256$4096:c2FsdA==$" + "A" * 43 + "=" + "A" * 43 + "=",
    ],
)
def test_malformed_verifiers_are_refused(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_verifier(text)
    if len(text) > 20:
        assert text not in str(info.value)  # never echoed into logs or messages


def test_verifier_checks_its_fields() -> None:
    with pytest.raises(ValueError):
        Verifier(4096, b"salt", b"short", b"\0" * 32)
    with pytest.raises(ValueError):
        Verifier(True, b"salt", b"\0" * 32, b"\0" * 32)


def test_passwords_postgres_could_never_check_are_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        make_verifier("a\0b")
    with pytest.raises(ValueError, match="too long"):
        make_verifier("é" * 513)  # 1026 bytes of UTF-8
    assert parse_verifier(make_verifier("x" * 1024)).iterations == 4096
    with pytest.raises(ValueError, match="Unicode"):
        make_verifier("\udcff")


def test_saslprep_maps_normalizes_and_falls_back_to_raw_bytes() -> None:
    assert prepare_password("I\u00adX") == b"IX"  # soft hyphen: mapped to nothing
    assert prepare_password("\u2168") == b"IX"  # NFKC
    assert prepare_password("a\u00a0b") == b"a b"  # non-ASCII space → space
    assert prepare_password("a\u0007b") == b"a\x07b"  # ASCII passes unchanged, like PostgreSQL
    assert prepare_password("\u0627a") == "\u0627a".encode()  # bad bidi: raw bytes
    assert prepare_password("\u00ad") == "\u00ad".encode()  # empty after mapping: raw bytes
    assert prepare_password("x\u0221") == "x\u0221".encode()  # unassigned in Unicode 3.2: raw


# ---------------------------------------------------------------------- happy exchanges


def test_scramp_client_authenticates_and_checks_the_server() -> None:
    exchange = exchange_for("correct horse")
    assert exchange.mechanisms() == ["SCRAM-SHA-256"]
    exchange.select_mechanism("SCRAM-SHA-256")
    client = scramp.ScramClient(["SCRAM-SHA-256"], "ana", "correct horse")
    client.set_server_first(exchange.server_first(client.get_client_first().encode()).decode())
    final = exchange.server_final(client.get_client_final().encode())
    client.set_server_final(final.decode())  # raises unless the server signature is right
    assert exchange.authenticated


def test_postgres_style_client_first_with_empty_user_name() -> None:
    exchange = exchange_for("pw")
    client = RfcClient("pw")
    final = run_rfc(exchange, client)
    assert final == b"v=" + b64(client.server_signature).encode()
    assert exchange.authenticated


def test_gs2_flag_y_is_accepted() -> None:
    """``y``: the client could bind but believes the server cannot: true, we never offer it."""
    exchange = exchange_for("pw")
    client = scramp.ScramClient(
        ["SCRAM-SHA-256"], "ana", "pw", channel_binding=("tls-server-end-point", b"x" * 32)
    )
    first = client.get_client_first()
    assert first.startswith("y,,")
    client.set_server_first(exchange.server_first(first.encode()).decode())
    client.set_server_final(exchange.server_final(client.get_client_final().encode()).decode())
    assert exchange.authenticated


def test_extensions_are_ignored_but_covered_by_the_proof() -> None:
    exchange = exchange_for("pw")
    client = RfcClient("pw")
    first = exchange.server_first(client.first() + b",x=ext")
    client.bare += ",x=ext"
    exchange.server_final(client.final(first, extensions=",y=more"))
    assert exchange.authenticated


# -------------------------------------------------------------------- failing exchanges


def test_wrong_password_fails_with_28p01() -> None:
    exchange = exchange_for("right")
    with pytest.raises(AuthenticationFailed) as info:
        run_rfc(exchange, RfcClient("wrong"))
    assert info.value.sqlstate == "28P01"
    assert info.value.message == FAILED_ANA
    assert not exchange.authenticated


def test_wrong_password_from_scramp() -> None:
    exchange = exchange_for("right")
    client = scramp.ScramClient(["SCRAM-SHA-256"], "ana", "wrong")
    client.set_server_first(exchange.server_first(client.get_client_first().encode()).decode())
    with pytest.raises(AuthenticationFailed, match="password authentication failed"):
        exchange.server_final(client.get_client_final().encode())


def _server_first_shape(first: bytes, client_nonce: str) -> tuple[int, int, str]:
    r, s, i = first.decode().split(",")
    assert r.startswith("r=" + client_nonce)
    return len(r), len(base64.b64decode(s.removeprefix("s="))), i


def test_unknown_user_runs_a_full_exchange_and_fails_like_a_wrong_password() -> None:
    known = exchange_for("right")
    unknown = ScramExchange(None, user="ana")
    known_client, unknown_client = RfcClient("wrong", nonce="abc"), RfcClient("wrong", nonce="abc")
    known_first = known.server_first(known_client.first())
    unknown_first = unknown.server_first(unknown_client.first())
    assert _server_first_shape(known_first, "abc") == _server_first_shape(unknown_first, "abc")

    errors = []
    for exchange, client, first in (
        (known, known_client, known_first),
        (unknown, unknown_client, unknown_first),
    ):
        with pytest.raises(AuthenticationFailed) as info:
            exchange.server_final(client.final(first))
        errors.append(info.value)
    assert [(e.sqlstate, e.message, e.hint) for e in errors] == [("28P01", FAILED_ANA, None)] * 2
    assert errors[0].log_detail != errors[1].log_detail  # only the server log tells them apart


def test_unknown_user_fails_even_with_the_mock_keys_password() -> None:
    """The mock keys are not derived from any password: nothing authenticates an unknown user."""
    exchange = ScramExchange(None, user="ghost")
    with pytest.raises(AuthenticationFailed, match='"ghost"'):
        run_rfc(exchange, RfcClient(""))


def _salt_of(exchange: ScramExchange) -> bytes:
    first = exchange.server_first(RfcClient("x").first()).decode()
    return base64.b64decode(first.split(",")[1].removeprefix("s="))


def test_mock_salt_is_stable_per_name_and_secret() -> None:
    key = secrets.token_bytes(32)
    ana = _salt_of(ScramExchange(None, user="ana", mock_key=key))
    assert ana == _salt_of(ScramExchange(None, user="ana", mock_key=key))  # like a real user
    assert ana != _salt_of(ScramExchange(None, user="bob", mock_key=key))
    assert ana != _salt_of(ScramExchange(None, user="ana", mock_key=secrets.token_bytes(32)))
    assert len(ana) == 16
    # without mock_key: a process-wide secret, still stable per name
    assert _salt_of(ScramExchange(None, user="ana")) == _salt_of(ScramExchange(None, user="ana"))


def test_tampered_nonce_fails() -> None:
    exchange = exchange_for("pw")
    client = RfcClient("pw")
    first = exchange.server_first(client.first())
    real = first.decode().split(",")[0].removeprefix("r=")
    tampered = real[:-1] + ("A" if real[-1] != "A" else "B")
    with pytest.raises(AuthenticationFailed, match=FAILED_ANA):
        exchange.server_final(client.final(first, nonce=tampered))


def test_replayed_client_final_fails() -> None:
    """A client-final captured from one exchange is useless in the next (fresh server nonce)."""
    verifier = parse_verifier(make_verifier("pw"))
    client = RfcClient("pw", nonce="fixed")
    first = ScramExchange(verifier, user="ana")
    captured = client.final(first.server_first(client.first()))
    first.server_final(captured)
    second = ScramExchange(verifier, user="ana")
    second.server_first(client.first())
    with pytest.raises(AuthenticationFailed):
        second.server_final(captured)


def test_tampered_proof_fails() -> None:
    exchange = exchange_for("pw")
    client = RfcClient("pw")
    final = client.final(exchange.server_first(client.first())).decode()
    head, proof = final.rsplit(",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[0] ^= 1
    with pytest.raises(AuthenticationFailed):
        exchange.server_final(f"{head},p={b64(bytes(raw))}".encode())


def test_channel_binding_p_is_refused() -> None:
    client = scramp.ScramClient(
        ["SCRAM-SHA-256-PLUS"], "ana", "pw", channel_binding=("tls-server-end-point", b"x" * 32)
    )
    first = client.get_client_first()
    assert first.startswith("p=tls-server-end-point,,")
    exchange = exchange_for("pw")
    with pytest.raises(ProtocolViolation, match="channel binding") as info:
        exchange.server_first(first.encode())
    assert info.value.sqlstate == "08P01"
    assert info.value.hint


def test_plus_mechanism_is_refused() -> None:
    with pytest.raises(ProtocolViolation) as info:
        exchange_for("pw").select_mechanism("SCRAM-SHA-256-PLUS")
    assert info.value.sqlstate == "08P01"
    assert "without channel binding" in (info.value.hint or "")
    with pytest.raises(ProtocolViolation):
        exchange_for("pw").select_mechanism("SCRAM-SHA-1")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"garbage",
        b"n,,",
        b"n,,n=",
        b"n,,r=abc",
        b"n,,n=,r=",
        b"n,,n=,r=ab c",
        b"x,,n=,r=abc",
        b"n,n=,r=abc",
        b"n,a=bob,n=,r=abc",
        b"n,,m=ext,n=,r=abc",
        b"n,,n=,r=abc\xff",
        b"n,,n=,r=a\x00bc",
        b"n,,n=,r=abc,=x",
        b"n,,n=,r=abc,xyz",
    ],
)
def test_malformed_client_first_is_a_protocol_violation(message: bytes) -> None:
    exchange = exchange_for("pw")
    with pytest.raises(ProtocolViolation) as info:
        exchange.server_first(message)
    assert info.value.sqlstate == "08P01"
    with pytest.raises(ProtocolViolation):  # a failed exchange stays failed
        exchange.server_first(RfcClient("pw").first())


def _final_variants(good: str) -> list[str]:
    c, r, p = good.split(",")
    return [
        "",
        c,
        f"{c},{r}",
        f"{r},{c},{p}",
        f"{c},{p}",
        f"{c},{r},{p},x=after",
        f"{c},{r},p=notbase64!",
        f"{c},{r},p={b64(b'short')}",
        f"c=eSws,{r},{p}",  # "y,," although the client sent "n,,"
        f"c=,{r},{p}",
        f"{c},{r},{p}\0",
    ]


@pytest.mark.parametrize("index", range(11))
def test_malformed_client_final_is_a_protocol_violation(index: int) -> None:
    exchange = exchange_for("pw")
    client = RfcClient("pw")
    good = client.final(exchange.server_first(client.first())).decode()
    with pytest.raises(ProtocolViolation) as info:
        exchange.server_final(_final_variants(good)[index].encode())
    assert info.value.sqlstate == "08P01"
    assert not exchange.authenticated


def test_messages_out_of_order_are_refused() -> None:
    exchange = exchange_for("pw")
    with pytest.raises(ProtocolViolation):
        exchange.server_final(b"c=biws,r=abc,p=" + b64(bytes(32)).encode())
    exchange = exchange_for("pw")
    client = RfcClient("pw")
    first = exchange.server_first(client.first())
    with pytest.raises(ProtocolViolation):
        exchange.server_first(client.first())
    exchange = exchange_for("pw")
    run_rfc(exchange, client)
    with pytest.raises(ProtocolViolation):
        exchange.server_final(client.final(first))


# ------------------------------------------------------------ libpq, the reference client


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError("client closed the connection")
        buf += chunk
    return buf


def _recv_message(conn: socket.socket) -> tuple[bytes, bytes]:
    head = _recv_exact(conn, 5)
    (length,) = struct.unpack("!i", head[1:])
    return head[:1], _recv_exact(conn, length - 4)


def _send(conn: socket.socket, kind: bytes, body: bytes) -> None:
    conn.sendall(kind + struct.pack("!i", len(body) + 4) + body)


def _authenticate_one(
    conn: socket.socket, lookup: Callable[[str], Verifier | None], outcome: list[object]
) -> None:
    """Startup and SASL authentication as a PostgreSQL server, then ReadyForQuery."""
    while True:
        (length,) = struct.unpack("!i", _recv_exact(conn, 4))
        body = _recv_exact(conn, length - 4)
        (code,) = struct.unpack("!i", body[:4])
        if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not offered
            conn.sendall(b"N")
            continue
        break
    items = body[4:].split(b"\0")
    params = dict(zip(items[0::2], items[1::2], strict=False))
    user = params[b"user"].decode()
    exchange = ScramExchange(lookup(user), user=user)
    offered = b"".join(m.encode() + b"\0" for m in exchange.mechanisms()) + b"\0"
    _send(conn, b"R", struct.pack("!i", 10) + offered)  # AuthenticationSASL
    try:
        kind, body = _recv_message(conn)
        assert kind == b"p"
        mechanism, _, rest = body.partition(b"\0")
        (size,) = struct.unpack("!i", rest[:4])
        exchange.select_mechanism(mechanism.decode())
        _send(conn, b"R", struct.pack("!i", 11) + exchange.server_first(rest[4 : 4 + size]))
        kind, body = _recv_message(conn)
        assert kind == b"p"
        _send(conn, b"R", struct.pack("!i", 12) + exchange.server_final(body))
    except DPProxyError as err:
        fields = [b"SFATAL", b"VFATAL", b"C" + err.sqlstate.encode(), b"M" + err.message.encode()]
        _send(conn, b"E", b"".join(f + b"\0" for f in fields) + b"\0")
        outcome.append(err)
        return
    _send(conn, b"R", struct.pack("!i", 0))
    for key, value in ((b"server_version", b"15.0"), (b"client_encoding", b"UTF8")):
        _send(conn, b"S", key + b"\0" + value + b"\0")
    _send(conn, b"K", struct.pack("!ii", 1, 2))
    _send(conn, b"Z", b"I")
    outcome.append(exchange.authenticated)
    try:
        _recv_message(conn)  # Terminate
    except EOFError:
        pass


@pytest.fixture
def auth_server() -> Iterator[Callable[..., tuple[object, str | None]]]:
    """Connect with psycopg (libpq) to a one-connection server that authenticates by SCRAM;
    returns (what the server concluded, the client's error or None)."""
    threads: list[threading.Thread] = []

    def connect(
        lookup: Callable[[str], Verifier | None], user: str, password: str
    ) -> tuple[object, str | None]:
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        outcome: list[object] = []

        def serve() -> None:
            with listener:
                listener.settimeout(30)
                conn, _ = listener.accept()
                with conn:
                    conn.settimeout(30)
                    try:
                        _authenticate_one(conn, lookup, outcome)
                    except Exception as exc:  # recorded: the test fails on it
                        outcome.append(exc)

        thread = threading.Thread(target=serve, daemon=True)
        threads.append(thread)
        thread.start()
        error = None
        try:
            conn = psycopg.connect(
                host="127.0.0.1",
                port=port,
                user=user,
                password=password,
                dbname="x",
                sslmode="disable",
                gssencmode="disable",
                connect_timeout=30,
            )
            conn.close()
        except psycopg.OperationalError as exc:
            error = str(exc)
        thread.join(30)
        assert not thread.is_alive()
        assert len(outcome) == 1, outcome
        return outcome[0], error

    yield connect
    for thread in threads:
        thread.join(30)


def test_libpq_authenticates(auth_server: Callable[..., tuple[object, str | None]]) -> None:
    """libpq checks our server signature too: success means mutual authentication."""
    verifier = parse_verifier(make_verifier("s3cret"))
    outcome, error = auth_server(lambda u: verifier if u == "ana" else None, "ana", "s3cret")
    assert (outcome, error) == (True, None)


def test_libpq_wrong_password_and_unknown_user_look_the_same(
    auth_server: Callable[..., tuple[object, str | None]],
) -> None:
    verifier = parse_verifier(make_verifier("s3cret"))

    def lookup(user: str) -> Verifier | None:
        return verifier if user == "ana" else None

    wrong, wrong_error = auth_server(lookup, "ana", "guess")
    unknown, unknown_error = auth_server(lookup, "nobody", "guess")
    assert isinstance(wrong, AuthenticationFailed) and isinstance(unknown, AuthenticationFailed)
    assert wrong_error is not None and FAILED_ANA in wrong_error
    assert unknown_error is not None
    assert 'password authentication failed for user "nobody"' in unknown_error

    def same(text: str, user: str) -> str:
        return re.sub(r"port \d+", "port N", text.replace(f'"{user}"', "USER"))

    assert same(wrong_error, "ana") == same(unknown_error, "nobody")


# --------------------------------------------------------------- PostgreSQL is the reference


@pytest.fixture
def pg_admin(pg_server: pg.Server) -> Iterator[Callable[[str], str]]:
    """``create(password_sql_literal_value) -> rolpassword`` of a new LOGIN role; roles are
    dropped afterwards (they are cluster-wide)."""
    from psycopg import sql

    roles: list[str] = []
    with psycopg.connect(pg_server.admin_dsn, autocommit=True) as conn:

        def create(password: str) -> str:
            role = f"dpproxy_test_scram_{secrets.token_hex(4)}"
            roles.append(role)
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)
                )
            )
            row = conn.execute(
                "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)
            ).fetchone()
            assert row is not None and isinstance(row[0], str)
            return row[0]

        try:
            yield create
        finally:
            for role in roles:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
            left = conn.execute(
                "SELECT count(*) FROM pg_roles WHERE rolname = ANY(%s)", (roles,)
            ).fetchone()
            assert left == (0,)


PASSWORDS = [
    "pencil",
    "correct horse battery staple",
    "caf\u00e9",  # NFC already
    "e\u0301",  # NFKC composes it
    "I\u00adX",  # soft hyphen: mapped to nothing
    "\u2168",  # ROMAN NUMERAL NINE: NFKC → "IX"
    "\u00a0lead",  # non-ASCII space → " "
    "\ufb00\u0301",  # ligature ff
    "a\u0007b",  # ASCII control character: ASCII passes unchanged
    "\u0627a",  # bad bidi: raw bytes
    "\u05d01\u05d0",  # good bidi
    "\U000e0001x",  # prohibited (tagging character): raw bytes
    "x\u0221",  # unassigned in Unicode 3.2: raw bytes
    "\u200b",  # zero-width space: C.1.2 → " "
]


@pytest.mark.parametrize("password", PASSWORDS)
def test_postgres_hashes_every_password_to_our_verifier(
    pg_admin: Callable[[str], str], password: str
) -> None:
    """Same salt and iterations ⇒ the same text: the same SASLprep, PBKDF2, keys and format."""
    theirs = pg_admin(password)
    v = parse_verifier(theirs)
    assert make_verifier(password, iterations=v.iterations, salt=v.salt) == theirs


@pytest.mark.parametrize("password", ["pencil", "\u2168", "a\u0007b"])
def test_postgres_stores_our_verifier_as_is(pg_admin: Callable[[str], str], password: str) -> None:
    """PostgreSQL takes a valid SCRAM secret as the stored secret; anything it could not
    parse it would hash as a plaintext password, giving a different text."""
    for iterations in (4096, 10000):
        ours = make_verifier(password, iterations=iterations)
        assert pg_admin(ours) == ours


def test_postgres_verifier_authenticates_real_clients(pg_admin: Callable[[str], str]) -> None:
    verifier = parse_verifier(pg_admin("from postgres"))

    exchange = ScramExchange(verifier, user="ana")
    client = scramp.ScramClient(["SCRAM-SHA-256"], "ana", "from postgres")
    client.set_server_first(exchange.server_first(client.get_client_first().encode()).decode())
    client.set_server_final(exchange.server_final(client.get_client_final().encode()).decode())
    assert exchange.authenticated

    exchange = ScramExchange(verifier, user="ana")
    assert run_rfc(exchange, RfcClient("from postgres"))
    with pytest.raises(AuthenticationFailed):
        run_rfc(ScramExchange(verifier, user="ana"), RfcClient("from postgre"))


def test_postgres_verifier_authenticates_libpq(
    pg_admin: Callable[[str], str], auth_server: Callable[..., tuple[object, str | None]]
) -> None:
    verifier = parse_verifier(pg_admin("\u2168 lives"))  # SASLprep on both sides
    outcome, error = auth_server(lambda u: verifier, "ana", "\u2168 lives")
    assert (outcome, error) == (True, None)
    outcome, error = auth_server(lambda u: verifier, "ana", "IX lives")  # same after NFKC
    assert (outcome, error) == (True, None)
