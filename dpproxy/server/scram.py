"""SCRAM-SHA-256 password authentication, the server side, as PostgreSQL does it.

This is RFC 5802 (SCRAM) with the SHA-256 hash of RFC 7677, in PostgreSQL's variant:

* the client sends ``n,,n=,r=<nonce>``: the user name inside the SCRAM message is ignored and
  the user of the StartupMessage is authenticated instead;
* the stored form of a password is PostgreSQL's verifier text
  ``SCRAM-SHA-256$<iterations>:<b64 salt>$<b64 StoredKey>:<b64 ServerKey>``, so verifiers can be
  copied to and from ``pg_authid.rolpassword``;
* the password is SASLprep-ed exactly as PostgreSQL's ``pg_saslprep`` does it (see
  :func:`prepare_password`);
* channel binding: the gs2 flags ``n`` (client does not support it) and ``y`` (client supports
  it but thinks the server does not) are accepted; ``p=`` (the client *requires* binding) is
  refused, because this server never offers ``SCRAM-SHA-256-PLUS``. (Should ``-PLUS`` ever be
  offered over TLS, ``y`` must then be refused as a downgrade, as PostgreSQL does.)

One authentication is one :class:`ScramExchange`::

    exchange = ScramExchange(store.verifier(user), user=user)
    # AuthenticationSASL(exchange.mechanisms()); read SASLInitialResponse(mechanism, data)
    exchange.select_mechanism(mechanism)
    reply = exchange.server_first(data)            # AuthenticationSASLContinue(reply)
    # read SASLResponse(data)
    reply = exchange.server_final(data)            # AuthenticationSASLFinal(reply), then AuthOk

Any step may raise :class:`AuthenticationFailed` (28P01) or
:class:`~dpproxy.errors.ProtocolViolation` (08P01); the connection must then be closed with a
FATAL ErrorResponse, and the exchange refuses any further call.

Security argument:

* **No password is stored or seen after the verifier is made.** The server keeps only the
  salt, the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
  ``ServerKey = HMAC(SaltedPassword, "Server Key")``. The client proves it knows ``ClientKey``
  without sending it, and the server proves it knows ``ServerKey`` (``v=`` in the final message).
* **Constant-time comparison.** The recovered ``H(ClientKey)`` is compared with ``StoredKey``
  by :func:`hmac.compare_digest`, so the time taken does not reveal how many bytes matched.
* **Unknown users look like wrong passwords (mock authentication).** For a user that does not
  exist the exchange runs in full with a salt and keys derived from the user name by HMAC under
  a secret key (``mock_key``), so the same name always gets the same salt, as a real user does,
  while nobody without the key can predict or recognise it. The proof is checked the same way
  and the exchange then fails with the same error and message as a wrong password; only
  ``log_detail`` (never sent to the client) says which it was. PostgreSQL does the same with the
  cluster's ``mock_auth_nonce``.
* **Nonces and salts come from** :mod:`secrets` (18 random bytes of server nonce, like
  PostgreSQL; 16-byte salts).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import ClassVar, Final

from dpproxy.errors import DPProxyError, ProtocolViolation

MECHANISM: Final = "SCRAM-SHA-256"
PLUS_MECHANISM: Final = "SCRAM-SHA-256-PLUS"
DEFAULT_ITERATIONS: Final = 4096  # PostgreSQL's scram_iterations default
SALT_LENGTH: Final = 16  # PostgreSQL's SCRAM_DEFAULT_SALT_LEN
NONCE_LENGTH: Final = 18  # random bytes in the server nonce (PostgreSQL's SCRAM_RAW_NONCE_LEN)
MAX_PASSWORD_BYTES: Final = 1024  # PostgreSQL's MAX_PASSWORD_LENGTH in pg_saslprep
KEY_LENGTH: Final = 32  # SHA-256 output

# The key of the mock salts of unknown users: secret, and fixed for the life of the process.
# A server that restarts often and wants mock salts stable across restarts (as PostgreSQL's
# are, from pg_control) passes its own persistent ``mock_key`` to ScramExchange.
_PROCESS_MOCK_KEY: Final = secrets.token_bytes(32)


class AuthenticationFailed(DPProxyError):
    """The password is wrong, the user does not exist, or the exchange was replayed.

    The message is the same in every case (it must not tell whether the user exists);
    ``log_detail`` says which, for the server log only.
    """

    sqlstate = "28P01"  # invalid_password
    severity: ClassVar[str] = "FATAL"

    @classmethod
    def for_user(cls, user: str, *, log_detail: str) -> AuthenticationFailed:
        """The error PostgreSQL sends: ``password authentication failed for user "<user>"``."""
        return cls(f'password authentication failed for user "{user}"', log_detail=log_detail)


# ----------------------------------------------------------------------------- the password


def _saslprep(text: str) -> str | None:
    """SASLprep (RFC 4013) as PostgreSQL's ``pg_saslprep``; None where it says "prohibited".

    Like PostgreSQL, the prohibited, unassigned and bidi checks look at the string after the
    mapping step but before NFKC normalization, and an empty result is prohibited.
    """
    if text.isascii():
        return text  # PostgreSQL's shortcut: ASCII passes unchanged (control characters too)
    mapped = "".join(
        " " if stringprep.in_table_c12(c) else "" if stringprep.in_table_b1(c) else c for c in text
    )
    if not mapped:
        return None
    for c in mapped:
        if (
            stringprep.in_table_c12(c)
            or stringprep.in_table_c21_c22(c)
            or stringprep.in_table_c3(c)
            or stringprep.in_table_c4(c)
            or stringprep.in_table_c5(c)
            or stringprep.in_table_c6(c)
            or stringprep.in_table_c7(c)
            or stringprep.in_table_c8(c)
            or stringprep.in_table_c9(c)
            or stringprep.in_table_a1(c)
        ):
            return None
    if any(stringprep.in_table_d1(c) for c in mapped):
        if any(stringprep.in_table_d2(c) for c in mapped):
            return None
        if not (stringprep.in_table_d1(mapped[0]) and stringprep.in_table_d1(mapped[-1])):
            return None
    return unicodedata.normalize("NFKC", mapped)


def prepare_password(password: str) -> bytes:
    """The bytes that are hashed for ``password``: SASLprep-ed UTF-8, as PostgreSQL does it.

    When the password is not valid for SASLprep (a prohibited or unassigned character, bad
    bidi, or nothing left after mapping), PostgreSQL does not refuse it: it hashes the raw UTF-8
    bytes instead, and so does libpq on the client side. This function does the same, so a
    verifier made here accepts exactly the clients PostgreSQL would accept.

    Raises ValueError for a password PostgreSQL could never receive or check: one with a NUL
    character, longer than 1024 bytes in UTF-8, or with characters not encodable in UTF-8.

    >>> prepare_password("I\\u00adX") == prepare_password("IX")   # soft hyphen maps to nothing
    True
    >>> prepare_password("\\u2168")                              # ROMAN NUMERAL NINE → "IX"
    b'IX'
    >>> prepare_password("a\\u0007b")                             # prohibited: raw bytes
    b'a\\x07b'
    """
    if "\0" in password:
        raise ValueError("a password cannot contain a NUL character")
    try:
        raw = password.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the password is not valid Unicode text") from None
    if len(raw) > MAX_PASSWORD_BYTES:
        raise ValueError(f"password too long (more than {MAX_PASSWORD_BYTES} bytes in UTF-8)")
    prepared = _saslprep(password)
    return raw if prepared is None else prepared.encode("utf-8")


# ------------------------------------------------------------------------------ verifiers


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64 (correct alphabet and padding); ValueError otherwise."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ValueError("invalid base64") from None


@dataclass(frozen=True, slots=True)
class Verifier:
    """A stored SCRAM-SHA-256 secret. The keys are left out of ``repr`` (they allow an offline
    dictionary attack on the password)."""

    iterations: int
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int):
            raise ValueError("iterations must be an integer")
        if self.iterations < 1:
            raise ValueError("iterations must be at least 1")
        if not self.salt:
            raise ValueError("the salt must not be empty")
        if len(self.stored_key) != KEY_LENGTH or len(self.server_key) != KEY_LENGTH:
            raise ValueError(f"StoredKey and ServerKey must be {KEY_LENGTH} bytes")

    def to_text(self) -> str:
        """PostgreSQL's text form, as in ``pg_authid.rolpassword``."""
        return (
            f"{MECHANISM}${self.iterations}:{_b64(self.salt)}"
            f"${_b64(self.stored_key)}:{_b64(self.server_key)}"
        )


def _derive(password: bytes, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) for a prepared password (RFC 5802 §3)."""
    salted = hashlib.pbkdf2_hmac("sha256", password, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    return hashlib.sha256(client_key).digest(), server_key


def make_verifier(
    password: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> str:
    """A PostgreSQL SCRAM-SHA-256 verifier for ``password`` with a fresh random salt.

    The salt is 16 bytes from :func:`secrets.token_bytes` unless one is given (for tests and
    for comparing with a verifier PostgreSQL made). The password is prepared by
    :func:`prepare_password` (SASLprep, or the raw bytes where PostgreSQL falls back to them).

    >>> v = make_verifier("pencil", salt=b"0123456789abcdef")
    >>> v.startswith("SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$")
    True
    >>> parse_verifier(v).to_text() == v
    True
    """
    if salt is None:
        salt = secrets.token_bytes(SALT_LENGTH)
    stored_key, server_key = _derive(prepare_password(password), salt, iterations)
    return Verifier(iterations, salt, stored_key, server_key).to_text()


def password_matches(verifier: Verifier, password: str) -> bool:
    """Does ``password`` give this verifier's StoredKey (RFC 5802 §3)? For logins that are
    not a SCRAM exchange (the steward console's form over TLS or loopback); compared in
    constant time. An impossible password (one SASLprep refuses and PostgreSQL would too)
    matches nothing."""
    try:
        prepared = prepare_password(password)
    except ValueError:
        return False
    stored, _ = _derive(prepared, verifier.salt, verifier.iterations)
    return hmac.compare_digest(stored, verifier.stored_key)


def parse_verifier(text: str) -> Verifier:
    """Read PostgreSQL's verifier text; ValueError (never quoting the text) if it is malformed."""
    mechanism, sep1, rest = text.partition("$")
    head, sep2, keys = rest.partition("$")
    if mechanism != MECHANISM or not sep1 or not sep2:
        raise ValueError(f"not a {MECHANISM} verifier ({MECHANISM}$<iter>:<salt>$<keys>)")
    iterations_text, sep3, salt_text = head.partition(":")
    stored_text, sep4, server_text = keys.partition(":")
    if not sep3 or not sep4:
        raise ValueError("malformed verifier: expected <iter>:<salt>$<StoredKey>:<ServerKey>")
    if not (iterations_text.isascii() and iterations_text.isdigit()):
        raise ValueError("malformed verifier: the iteration count is not a positive integer")
    try:
        return Verifier(
            int(iterations_text), _unb64(salt_text), _unb64(stored_text), _unb64(server_text)
        )
    except ValueError as exc:
        raise ValueError(f"malformed verifier: {exc}") from None


def mock_verifier(user: str, mock_key: bytes) -> Verifier:
    """The made-up verifier of an unknown ``user``: stable per name, secret without the key."""
    name = user.encode("utf-8", "surrogatepass")

    def part(label: bytes) -> bytes:
        return hmac.digest(mock_key, b"dpproxy scram mock " + label + b"\0" + name, "sha256")

    return Verifier(DEFAULT_ITERATIONS, part(b"salt")[:SALT_LENGTH], part(b"sk"), part(b"vk"))


# ------------------------------------------------------------------------------- exchange


class _Stage(Enum):
    START = auto()
    SENT_FIRST = auto()
    DONE = auto()
    FAILED = auto()


def _malformed(detail: str, *, hint: str | None = None) -> ProtocolViolation:
    return ProtocolViolation(f"malformed SCRAM message: {detail}", hint=hint)


def _decode(message: bytes) -> str:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("not valid UTF-8") from None
    if not text:
        raise _malformed("empty message")
    if "\0" in text:
        raise _malformed("NUL character in message")
    return text


def _attributes(text: str) -> list[tuple[str, str]]:
    """``a=v,b=w`` → [("a", "v"), ("b", "w")]; each name is one ASCII letter (RFC 5802 §7)."""
    out = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if len(name) != 1 or not (name.isascii() and name.isalpha()) or not sep:
            raise _malformed(f"expected attribute=value, found {part[:20]!r}")
        out.append((name, value))
    return out


def _server_nonce() -> str:
    """A fresh server nonce: 18 bytes from :mod:`secrets`, base64 (never contains ",")."""
    return _b64(secrets.token_bytes(NONCE_LENGTH))


def _valid_nonce(nonce: str) -> bool:
    """printable = %x21-2B / %x2D-7E (RFC 5802 §7): visible ASCII except ","."""
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


class ScramExchange:
    """One SCRAM-SHA-256 authentication of ``user`` against ``verifier``.

    ``verifier=None`` means the user does not exist: the exchange still runs in full with
    :func:`mock_verifier` under ``mock_key`` (default: a random key of this process) and then
    fails exactly like a wrong password. Nonces are checked before the proof and the proof is
    computed in both cases, so neither an error nor the work done tells the two apart.
    """

    def __init__(
        self, verifier: Verifier | None, *, user: str, mock_key: bytes | None = None
    ) -> None:
        self.user = user
        self._doomed = verifier is None
        self._verifier = (
            verifier if verifier is not None else mock_verifier(user, mock_key or _PROCESS_MOCK_KEY)
        )
        self._stage = _Stage.START
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @staticmethod
    def mechanisms() -> list[str]:
        """The SASL mechanisms to offer in AuthenticationSASL (no ``-PLUS``: no binding)."""
        return [MECHANISM]

    @property
    def authenticated(self) -> bool:
        """True once :meth:`server_final` has accepted the client's proof."""
        return self._stage is _Stage.DONE

    def select_mechanism(self, mechanism: str) -> None:
        """Check the mechanism named in SASLInitialResponse; ProtocolViolation if not offered."""
        if mechanism not in self.mechanisms():
            self._stage = _Stage.FAILED
            hint = None
            if mechanism == PLUS_MECHANISM:
                hint = "this server offers only SCRAM-SHA-256, without channel binding"
            raise ProtocolViolation(
                "client selected an invalid SASL authentication mechanism", hint=hint
            )

    def server_first(self, client_first: bytes) -> bytes:
        """Read client-first-message (SASLInitialResponse data); return server-first-message."""
        self._expect(_Stage.START)
        try:
            gs2_header, bare, client_nonce = self._parse_client_first(_decode(client_first))
        except DPProxyError:
            self._stage = _Stage.FAILED
            raise
        self._gs2_header = gs2_header
        self._client_first_bare = bare
        self._nonce = client_nonce + _server_nonce()
        v = self._verifier
        self._server_first = f"r={self._nonce},s={_b64(v.salt)},i={v.iterations}"
        self._stage = _Stage.SENT_FIRST
        return self._server_first.encode("ascii")

    def server_final(self, client_final: bytes) -> bytes:
        """Verify client-final-message (SASLResponse data); return server-final-message.

        Raises :class:`AuthenticationFailed` for a wrong proof, an unknown user or a nonce that
        is not this exchange's (a replay), and ProtocolViolation for a malformed message.
        """
        self._expect(_Stage.SENT_FIRST)
        try:
            reply = self._verify_final(_decode(client_final))
        except DPProxyError:
            self._stage = _Stage.FAILED
            raise
        self._stage = _Stage.DONE
        return reply

    # -------------------------------------------------------------------------- internals

    def _expect(self, stage: _Stage) -> None:
        if self._stage is not stage:
            failed = self._stage is _Stage.FAILED
            self._stage = _Stage.FAILED
            raise ProtocolViolation(
                "SCRAM exchange already failed" if failed else "unexpected SCRAM message"
            )

    @staticmethod
    def _parse_client_first(text: str) -> tuple[str, str, str]:
        """→ (gs2 header, client-first-message-bare, client nonce)."""
        if text.startswith("p"):
            raise _malformed(
                "the client requires channel binding (SCRAM-SHA-256-PLUS), "
                "which this server does not offer",
                hint="connect with channel_binding=disable or prefer",
            )
        if text[:1] not in ("n", "y") or text[1:2] != ",":
            raise _malformed('expected the channel-binding flag "n," or "y," at the start')
        if text[2:3] == "a":
            raise ProtocolViolation("client uses authorization identity, but it is not supported")
        if text[2:3] != ",":
            raise _malformed('expected "," after the channel-binding flag')
        gs2_header, bare = text[:3], text[3:]
        if bare.startswith("m"):
            raise ProtocolViolation("client requires an unsupported SCRAM extension")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise _malformed("expected n=<user>,r=<nonce> in client-first-message")
        client_nonce = attrs[1][1]
        if not _valid_nonce(client_nonce):
            raise _malformed("the client nonce is empty or not printable ASCII")
        return gs2_header, bare, client_nonce  # later attributes are extensions: ignored

    def _verify_final(self, text: str) -> bytes:
        attrs = _attributes(text)
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise _malformed("expected c=<binding>,r=<nonce>,...,p=<proof>")
        if attrs[0][1] != _b64(self._gs2_header.encode("ascii")):
            raise ProtocolViolation(
                "unexpected SCRAM channel-binding attribute in client-final-message"
            )
        proof_at = next((i for i, (name, _) in enumerate(attrs) if name == "p"), None)
        if proof_at is None:
            raise _malformed("no proof in client-final-message")
        if proof_at != len(attrs) - 1:
            raise _malformed("garbage after the proof in client-final-message")
        try:
            proof = _unb64(attrs[proof_at][1])
        except ValueError:
            proof = b""
        if len(proof) != KEY_LENGTH:
            raise _malformed("malformed proof in client-final-message")
        if not hmac.compare_digest(attrs[1][1].encode("utf-8"), self._nonce.encode("ascii")):
            raise AuthenticationFailed.for_user(
                self.user, log_detail="SCRAM nonce does not match (replayed or altered message)"
            )

        without_proof = text[: text.rindex(",")]  # the proof is the last attribute
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        auth_bytes = auth_message.encode("utf-8")
        v = self._verifier
        client_signature = hmac.digest(v.stored_key, auth_bytes, "sha256")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        proof_ok = hmac.compare_digest(hashlib.sha256(client_key).digest(), v.stored_key)
        server_signature = hmac.digest(v.server_key, auth_bytes, "sha256")
        if self._doomed:
            raise AuthenticationFailed.for_user(self.user, log_detail="user does not exist")
        if not proof_ok:
            raise AuthenticationFailed.for_user(self.user, log_detail="password does not match")
        return f"v={_b64(server_signature)}".encode("ascii")
