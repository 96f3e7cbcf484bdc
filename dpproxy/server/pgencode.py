"""Result values → DataRow fields, as PostgreSQL 15 sends them (one part of
:mod:`dpproxy.server.pgtypes`).

The coercions (a Python value converted as PostgreSQL's cast to the column type would), each
type's text output and ``*send`` encoder, and :func:`column_encoder`, :func:`encode_text` and
:func:`encode_binary`. The output direction of the wire; :mod:`~dpproxy.server.pgparams`
borrows its coercions and text output to write SQL literals.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import struct
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from dpproxy.errors import (
    DPProxyError,
    InternalError,
    NumericValueOutOfRange,
    UnsupportedQuery,
)
from dpproxy.server.pgfloat import _CTX, _float4_digits, _float8_text, _float_text
from dpproxy.server.pgoids import (
    _INTS,
    _OIDS,
    _TEXTS,
    BOOL_OID,
    BY_OID,
    CHAR_OID,
    DATE_OID,
    FLOAT4_OID,
    FLOAT8_OID,
    INT2_OID,
    INT4_OID,
    INT8_OID,
    NUMERIC_OID,
    REGCLASS_OID,
    REGPROC_OID,
    REGTYPE_OID,
    TEXT_OID,
    TIMESTAMP_OID,
    TIMESTAMPTZ_OID,
)
from dpproxy.server.pgparse import (
    _RANGE_HINT,
    _UTC,
    _numeric_layout,
    _parse_bool,
    _parse_float,
    _parse_int,
    _parse_numeric,
    _parse_timestamp,
)


class CharacterNotInRepertoire(DPProxyError):
    """Bytes that are not UTF-8, or a NUL character (PostgreSQL text cannot hold one)."""

    sqlstate = "22021"


# ------------------------------------------------------------------------ coercions


def _cannot(value: object, oid: int) -> InternalError:
    t = BY_OID.get(oid)
    return InternalError(f"cannot send a {type(value).__name__} as {t.name if t else oid}")


def _to_bool(v: object) -> bool:
    if isinstance(v, int):
        return v != 0
    if isinstance(v, str):
        return _parse_bool(v)
    raise _cannot(v, BOOL_OID)


def _to_int(v: object, oid: int) -> int:
    if isinstance(v, str):
        return _parse_int(v, oid)
    if isinstance(v, int):
        n = int(v)
    elif isinstance(v, float) and math.isfinite(v):
        n = round(v)  # rint, as float8 → int
    elif isinstance(v, Decimal) and v.is_finite() and v.adjusted() < 100:
        n = int(v.to_integral_value(ROUND_HALF_UP, _CTX))  # half away from zero, as numeric
    elif isinstance(v, Decimal) and not v.is_finite():
        what = "NaN" if v.is_nan() else "infinity"
        raise UnsupportedQuery(f"cannot convert {what} to {_INTS.get(oid, ('oid',))[0]}")
    elif isinstance(v, float | Decimal):
        n = 1 << 64
    else:
        raise _cannot(v, oid)
    name, bits = ("OID", 0) if oid in _OIDS else _INTS[oid]
    if not (0 <= n < 2**32 if not bits else -(2 ** (bits - 1)) <= n < 2 ** (bits - 1)):
        raise NumericValueOutOfRange(f"{name} out of range")
    return n


def _to_decimal(v: object) -> Decimal:
    if isinstance(v, Decimal):
        if v.is_snan():
            raise _cannot(v, NUMERIC_OID)
        return v.copy_abs() if v.is_nan() or v.is_zero() else v  # no -0 or -NaN in PostgreSQL
    if isinstance(v, int):
        return Decimal(int(v))
    if isinstance(v, float):
        return Decimal(repr(v) if math.isfinite(v) else str(v).replace("inf", "Infinity"))
    if isinstance(v, str):
        return _parse_numeric(v)
    raise _cannot(v, NUMERIC_OID)


def _to_float(v: object, oid: int) -> float:
    if isinstance(v, str):
        return _parse_float(v, oid)
    if isinstance(v, float) and (oid == FLOAT8_OID or not math.isfinite(v)):
        return v
    if not isinstance(v, int | float | Decimal):
        raise _cannot(v, oid)
    d = Decimal(v) if isinstance(v, float) else _to_decimal(v)  # exact
    if not d.is_finite():
        return float(d)
    try:  # one correct rounding, as PostgreSQL's casts (a C conversion, or *in of the text)
        return _parse_float(str(d), oid)
    except NumericValueOutOfRange:
        flow = "underflow" if d.adjusted() < 0 else "overflow"
        raise NumericValueOutOfRange(f"value out of range: {flow}") from None


def _to_timestamp(v: object, oid: int) -> dt.datetime:
    if isinstance(v, str):
        return _parse_timestamp(v, oid)
    if isinstance(v, dt.datetime):
        t = v
    elif isinstance(v, dt.date):
        t = dt.datetime(v.year, v.month, v.day)
    else:
        raise _cannot(v, oid)
    try:
        t = t.astimezone(_UTC) if t.utcoffset() is not None else t
    except OverflowError:
        raise UnsupportedQuery("this timestamp is not supported", hint=_RANGE_HINT) from None
    return t.replace(tzinfo=_UTC if oid == TIMESTAMPTZ_OID else None)


def _to_date(v: object) -> dt.date:
    return v if type(v) is dt.date else _to_timestamp(v, DATE_OID).date()


def _to_char(v: object) -> bytes:
    if isinstance(v, str) and len(v) <= 1 and v.isascii():
        return v.encode()
    raise _cannot(v, CHAR_OID)


# ------------------------------------------------------------------------- encoders


def _to_str(v: object) -> str:
    """A value as text, as PostgreSQL's cast of its natural type to text prints it."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    natural = ((int, NUMERIC_OID), (float, FLOAT8_OID), (Decimal, NUMERIC_OID),
               (dt.datetime, TIMESTAMP_OID), (dt.date, DATE_OID))  # fmt: skip
    for cls, oid in natural:
        if isinstance(v, cls):
            aware = isinstance(v, dt.datetime) and v.utcoffset() is not None
            return _TEXT[TIMESTAMPTZ_OID if aware else oid](v)
    raise _cannot(v, TEXT_OID)


def _timestamp_text(t: dt.datetime) -> str:
    frac = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
    return f"{t.date().isoformat()} {t:%H:%M:%S}{frac}" + ("+00" if t.tzinfo else "")


def _numeric_text(d: Decimal) -> str:
    if not d.is_finite():
        return "NaN" if d.is_nan() else ("-Infinity" if d.is_signed() else "Infinity")
    _numeric_layout(d)
    return format(d, "f")


def _int_text(oid: int) -> Callable[[object], str]:
    return lambda v: str(_to_int(v, oid))


def _oid_text(oid: int) -> Callable[[object], str]:
    def text(v: object) -> str:
        if isinstance(v, str) and oid in (REGPROC_OID, REGCLASS_OID, REGTYPE_OID):
            return v  # a regtype & co. prints as its name, which the caller resolves
        return str(_to_int(v, oid))

    return text


_TEXT: dict[int, Callable[[object], str]] = {
    BOOL_OID: lambda v: "t" if _to_bool(v) else "f",
    FLOAT8_OID: lambda v: _float8_text(_to_float(v, FLOAT8_OID)),
    FLOAT4_OID: lambda v: _float_text(_to_float(v, FLOAT4_OID), 6, _float4_digits),
    NUMERIC_OID: lambda v: _numeric_text(_to_decimal(v)),
    DATE_OID: lambda v: _to_date(v).isoformat(),
    TIMESTAMP_OID: lambda v: _timestamp_text(_to_timestamp(v, TIMESTAMP_OID)),
    TIMESTAMPTZ_OID: lambda v: _timestamp_text(_to_timestamp(v, TIMESTAMPTZ_OID)),
    CHAR_OID: lambda v: _to_char(v).decode(),
    **{o: _int_text(o) for o in _INTS},
    **{o: _oid_text(o) for o in _OIDS},
    **dict.fromkeys(_TEXTS, _to_str),
}

_EPOCH = dt.date(2000, 1, 1)
_EPOCH_TS = dt.datetime(2000, 1, 1)
_USEC = dt.timedelta(microseconds=1)


def _numeric_send(v: object) -> bytes:
    d = _to_decimal(v)
    if not d.is_finite():  # PostgreSQL 15 sends dscale 32 for ±Infinity (a header artefact)
        special = 0xC000 if d.is_nan() else (0xF000 if d.is_signed() else 0xD000)
        return struct.pack(">hhHH", 0, 0, special, 0 if d.is_nan() else 32)
    weight, sign, dscale, groups = _numeric_layout(d)
    return struct.pack(f">HhHH{len(groups)}H", len(groups), weight, sign, dscale, *groups)


def _float_send(oid: int) -> Callable[[object], bytes]:
    fmt = ">f" if oid == FLOAT4_OID else ">d"
    return lambda v: struct.pack(fmt, _to_float(v, oid))  # NaN payloads kept, as float8send


def _int_send(oid: int) -> Callable[[object], bytes]:
    fmt = {INT2_OID: ">h", INT4_OID: ">i", INT8_OID: ">q"}.get(oid, ">I")
    return lambda v: struct.pack(fmt, _to_int(v, oid))


def _timestamp_send(oid: int) -> Callable[[object], bytes]:
    epoch = _EPOCH_TS.replace(tzinfo=_UTC if oid == TIMESTAMPTZ_OID else None)
    return lambda v: struct.pack(">q", (_to_timestamp(v, oid) - epoch) // _USEC)


_BINARY: dict[int, Callable[[object], bytes]] = {
    BOOL_OID: lambda v: b"\x01" if _to_bool(v) else b"\x00",
    FLOAT4_OID: _float_send(FLOAT4_OID),
    FLOAT8_OID: _float_send(FLOAT8_OID),
    NUMERIC_OID: _numeric_send,
    DATE_OID: lambda v: struct.pack(">i", (_to_date(v) - _EPOCH).days),
    TIMESTAMP_OID: _timestamp_send(TIMESTAMP_OID),
    TIMESTAMPTZ_OID: _timestamp_send(TIMESTAMPTZ_OID),
    CHAR_OID: lambda v: _to_char(v) or b"\x00",
    **{o: _int_send(o) for o in (*_INTS, *_OIDS)},
    **dict.fromkeys(_TEXTS, lambda v: _to_str(v).encode()),
}


def _plain(value: object) -> object:
    """Other numeric types (numpy's, say) as int or float."""
    if isinstance(value, int | float | Decimal) or not isinstance(value, numbers.Real):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _encode(table: dict[int, Callable[[object], bytes]], value: object, oid: int) -> bytes:
    return _apply(table.get(oid), value, oid)


def _apply(enc: Callable[[object], bytes] | None, value: object, oid: int) -> bytes:
    """``value`` encoded by ``enc``, the encoder of type ``oid`` (None: it has none)."""
    value = _plain(value)
    if enc is None:
        raise _cannot(value, oid)
    try:
        return enc(value)
    except UnicodeEncodeError as e:  # a lone surrogate
        raise CharacterNotInRepertoire("a text value is not valid Unicode") from e


def column_encoder(oid: int, binary: bool) -> Callable[[object], bytes | None]:
    """:func:`encode_binary` or :func:`encode_text` for one result column, its type's encoder
    looked up once (a reply encodes every row of the column with it).

    >>> column_encoder(FLOAT8_OID, binary=False)(0.5), column_encoder(INT8_OID, True)(None)
    (b'0.5', None)
    """
    table = _BINARY if binary else _TEXT_BYTES
    enc = table.get(oid)
    if enc is None:
        return lambda value: None if value is None else _apply(enc, value, oid)
    # A value of exactly one of these types is already plain (_plain returns it as it is),
    # and for the commonest columns in text a shorter encoder does what enc does.
    kind, direct = (None, enc) if binary else _DIRECT_TEXT.get(oid, (None, enc))

    def encode(value: object) -> bytes | None:
        if value is None:
            return None
        cls = type(value)
        if cls is kind or cls in _PLAIN_TYPES:
            try:
                return (direct if cls is kind else enc)(value)
            except UnicodeEncodeError as e:  # a lone surrogate, as _apply says
                raise CharacterNotInRepertoire("a text value is not valid Unicode") from e
        return _apply(enc, value, oid)

    return encode


def encode_text(value: object, oid: int) -> bytes | None:
    """A DataRow field in text format, as PostgreSQL 15 prints a value of type ``oid``.

    >>> [encode_text(v, FLOAT8_OID) for v in (1, 1e15, 1.5e-05, float("-inf"))]
    [b'1', b'1e+15', b'1.5e-05', b'-Infinity']
    """
    if value is None:
        return None
    return _encode(_TEXT_BYTES, value, oid)


def encode_binary(value: object, oid: int) -> bytes | None:
    """A DataRow field in binary format, as PostgreSQL 15's ``*send`` function writes it.

    >>> encode_binary(Decimal("1.50"), NUMERIC_OID).hex(" ", 2)
    '0002 0000 0000 0002 0001 1388'
    """
    if value is None:
        return None
    return _encode(_BINARY, value, oid)


def _text_bytes(f: Callable[[object], str]) -> Callable[[object], bytes]:
    return lambda v: f(v).encode()


_TEXT_BYTES = {oid: _text_bytes(f) for oid, f in _TEXT.items()}
_PLAIN_TYPES = frozenset((int, float, str, bool))  # what _plain returns unchanged
# oid → (the one value type, its text encoder without the checks that type never needs):
# what _TEXT_BYTES[oid] returns for a value of exactly that type (_to_str of a str is the
# str, _to_float of a float for float8 is the float).
_DIRECT_TEXT: dict[int, tuple[type, Callable[[Any], bytes]]] = {
    **dict.fromkeys(_TEXTS, (str, str.encode)),
    FLOAT8_OID: (float, lambda v: _float8_text(v).encode()),
}
