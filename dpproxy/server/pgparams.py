"""Bind parameters: wire bytes → Python values → SQL literals (one part of
:mod:`dpproxy.server.pgtypes`).

:func:`decode_param` and :func:`decode_array` read a parameter as PostgreSQL's input and
``*recv`` functions do (its SQLSTATEs and messages), :func:`array_element` names an array
type's element type, and :func:`sql_literal` writes a decoded value as the literal put for
``$n``. The input direction of the wire, apart from the result encoders it borrows from.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable
from decimal import ROUND_DOWN, Decimal
from typing import Final

from dpproxy.errors import (
    DatetimeFieldOverflow,
    InternalError,
    ProtocolViolation,
    UnsupportedQuery,
)
from dpproxy.server.pgencode import (
    _EPOCH_TS,
    _TEXT,
    _USEC,
    CharacterNotInRepertoire,
    _numeric_text,
    _plain,
    _to_decimal,
)
from dpproxy.server.pgfloat import _CTX, _float8_digits, _float_text
from dpproxy.server.pgoids import (
    _FLOAT_NAMES,
    _INTS,
    _TEXTS,
    BOOL_OID,
    DATE_OID,
    FLOAT4_OID,
    NAME_OID,
    NUMERIC_OID,
    OID_OID,
    TEXT_OID,
    TIMESTAMP_OID,
    TIMESTAMPTZ_OID,
    TYPES,
    type_name,
)
from dpproxy.server.pgparse import (
    _RANGE_HINT,
    _TS_NAMES,
    _UTC,
    _numeric_layout,
    _parse_bool,
    _parse_float,
    _parse_int,
    _parse_numeric,
    _parse_timestamp,
)


class UnsupportedParameterType(UnsupportedQuery):
    """A Bind parameter of a type with no decoder here (0A000, as its base class); values
    this module cannot represent (a date 'infinity', say) raise plain UnsupportedQuery."""


class InvalidBinaryRepresentation(ProtocolViolation):
    """A binary parameter with bytes left over or bad fields: 22P03 as in PostgreSQL, where it
    is not fatal to the connection; a ProtocolViolation subclass for callers that catch that."""

    sqlstate = "22P03"


# ----------------------------------------------------------------------- parameters


def _utf8(data: bytes) -> str:
    """``pg_verify_mbstr``: UTF-8 without NUL, else 22021 naming the offending bytes."""
    bad = data.find(b"\x00")
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        bad = e.start if bad < 0 else min(bad, e.start)
    else:
        if bad < 0:
            return text
    lead = data[bad]  # pg_utf_mblen: the length the lead byte announces
    size = next((n for n, tag in ((2, 6), (3, 14), (4, 30)) if lead >> (7 - n) == tag), 1)
    shown = " ".join(f"0x{b:02x}" for b in data[bad : bad + size])
    raise CharacterNotInRepertoire(f'invalid byte sequence for encoding "UTF8": {shown}')


def _decode_text(s: str, oid: int) -> object:
    if oid in (0, *_TEXTS):
        return s.encode()[:63].decode(errors="ignore") if oid == NAME_OID else s
    if oid == BOOL_OID:
        return _parse_bool(s)
    if oid in _INTS or oid == OID_OID:
        return _parse_int(s, oid)
    if oid in _FLOAT_NAMES:
        return _parse_float(s, oid)
    if oid == NUMERIC_OID:
        return _parse_numeric(s)
    if oid in _TS_NAMES:
        t = _parse_timestamp(s, oid)
        return t.date() if oid == DATE_OID else t
    raise UnsupportedParameterType(f"parameters of type {type_name(oid)} are not supported")


def _numeric_recv(take: Callable[[int], bytes]) -> Decimal:
    ndigits, weight, sign = struct.unpack(">HhH", take(6))
    if sign not in (0, 0x4000, 0xC000, 0xD000, 0xF000):
        raise InvalidBinaryRepresentation('invalid sign in external "numeric" value')
    (dscale,) = struct.unpack(">H", take(2))
    if dscale > 0x3FFF:
        raise InvalidBinaryRepresentation('invalid scale in external "numeric" value')
    groups = []
    for _ in range(ndigits):  # each digit is checked as it is read
        groups.append(int.from_bytes(take(2), "big", signed=True))
        if not 0 <= groups[-1] < 10000:
            raise InvalidBinaryRepresentation('invalid digit in external "numeric" value')
    if sign >= 0xC000:
        return Decimal({0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}[sign])
    ds = tuple(int(c) for g in groups for c in f"{g:04d}")
    d = Decimal((sign == 0x4000, ds or (0,), 4 * (weight - ndigits + 1)))
    d = d.quantize(Decimal((0, (1,), -dscale)), ROUND_DOWN, _CTX)  # numeric_recv's trunc_var
    _numeric_layout(d)
    return d.copy_abs() if d.is_zero() else d


def _datetime_recv(n: int, oid: int) -> object:
    """``date_recv`` (days) / ``timestamp_recv`` (µs) since 2000-01-01; ±infinity are the
    extreme integers, and PostgreSQL's own range is checked first (22008)."""
    if oid == DATE_OID:
        lo, end, word, unit = -2451545, 2145031949, "date", dt.timedelta(days=1)
        infinite = n in (-(2**31), 2**31 - 1)
    else:
        lo, end, word, unit = -211813488000000000, 9223371331200000000, "timestamp", _USEC
        infinite = n in (-(2**63), 2**63 - 1)
    if not (lo <= n < end or infinite):
        raise DatetimeFieldOverflow(f"{word} out of range")
    try:
        t = _EPOCH_TS + n * unit
    except OverflowError:
        raise UnsupportedQuery(f"this {word} is not supported", hint=_RANGE_HINT) from None
    if oid == DATE_OID:
        return t.date()
    return t.replace(tzinfo=_UTC) if oid == TIMESTAMPTZ_OID else t


def _decode_binary(data: bytes, oid: int, param_number: int | None) -> object:
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(data):  # pq_getmsgbyte's words, and pq_copymsgbytes'
            raise ProtocolViolation(f"{'no' if oid == BOOL_OID else 'insufficient'} data left "
                                    "in message")  # fmt: skip
        pos += n
        return data[pos - n : pos]

    value: object = None
    unrepresentable: UnsupportedQuery | None = None  # reported after the checks PostgreSQL makes
    if oid in (0, *_TEXTS):  # unknownrecv and textrecv read the bytes as text
        value, pos = _decode_text(_utf8(data), TEXT_OID if oid == 0 else oid), len(data)
    elif oid == BOOL_OID:
        value = take(1) != b"\x00"
    elif oid in _INTS:
        value = int.from_bytes(take(_INTS[oid][1] // 8), "big", signed=True)
    elif oid == OID_OID:
        value = int.from_bytes(take(4), "big")
    elif oid in _FLOAT_NAMES:
        single = oid == FLOAT4_OID
        value = struct.unpack(">f" if single else ">d", take(4 if single else 8))[0]
    elif oid == NUMERIC_OID:
        value = _numeric_recv(take)
    elif oid in _TS_NAMES:
        size = 4 if oid == DATE_OID else 8
        try:
            value = _datetime_recv(int.from_bytes(take(size), "big", signed=True), oid)
        except UnsupportedQuery as e:
            unrepresentable = e
    else:
        raise UnsupportedParameterType(f"parameters of type {type_name(oid)} are not supported")
    if pos != len(data):
        where = f" {param_number}" if param_number is not None else ""
        raise InvalidBinaryRepresentation(f"incorrect binary data format in bind parameter{where}")
    if unrepresentable is not None:
        raise unrepresentable
    return value


_ELEMENT_OF: Final = {t.oid: t.typelem for t in TYPES if t.typcategory == "A"}


def array_element(oid: int) -> int:
    """The element type of array type ``oid`` (``int4[]`` → ``int4``), or 0."""
    return _ELEMENT_OF.get(oid, 0)


def _array_item_text(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = value.isoformat() if isinstance(value, dt.date) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def decode_array(data: bytes, oid: int, fmt: int, *, param_number: int | None = None) -> str:
    """A Bind parameter of an array type as PostgreSQL's array text (``{23,NULL,"a b"}``).

    Text format: the text as sent. Binary format (``array_recv``): the header (dimensions,
    null flag, element type), then each element read by its type's ``*recv``; errors as
    :func:`decode_param` (0A000 for an element type without a decoder).

    >>> from dpproxy.server.pgoids import OID_ARRAY_OID
    >>> header = struct.pack(">iiIii", 1, 0, OID_OID, 2, 1)  # one dimension of 2 oids
    >>> decode_array(header + struct.pack(">iIiI", 4, 23, 4, 25), OID_ARRAY_OID, 1)
    '{23,25}'
    """
    element = array_element(oid)
    if not element:
        raise UnsupportedParameterType(f"parameters of type {type_name(oid)} are not supported")
    if fmt == 0:
        return _utf8(data)
    if fmt != 1:
        raise ProtocolViolation(f"unsupported format code: {fmt}")
    if len(data) < 12:
        raise ProtocolViolation("insufficient data left in message")
    ndim, _flags, sent_element = struct.unpack(">iiI", data[:12])
    if ndim < 0 or ndim > 6:
        raise InvalidBinaryRepresentation(f"invalid number of dimensions: {ndim}")
    if ndim and sent_element != element:
        raise InvalidBinaryRepresentation("wrong element type")
    pos = 12
    dims = []
    for _ in range(ndim):
        if pos + 8 > len(data):
            raise ProtocolViolation("insufficient data left in message")
        size, _lower = struct.unpack(">ii", data[pos : pos + 8])
        if size < 0:
            raise InvalidBinaryRepresentation("invalid array dimension")
        dims.append(size)
        pos += 8
    items: list[str] = []
    for _ in range(math.prod(dims) if dims else 0):
        if pos + 4 > len(data):
            raise ProtocolViolation("insufficient data left in message")
        (n,) = struct.unpack(">i", data[pos : pos + 4])
        pos += 4
        if n < 0:
            items.append("NULL")
            continue
        if pos + n > len(data):
            raise ProtocolViolation("insufficient data left in message")
        items.append(_array_item_text(_decode_binary(data[pos : pos + n], element, None)))
        pos += n
    if pos != len(data):
        where = f" {param_number}" if param_number is not None else ""
        raise InvalidBinaryRepresentation(f"incorrect binary data format in bind parameter{where}")

    def nest(level: int, flat: list[str]) -> str:
        if level == len(dims) - 1:
            return "{" + ",".join(flat) + "}"
        step = len(flat) // dims[level] if dims[level] else 0
        parts = [nest(level + 1, flat[i * step : (i + 1) * step]) for i in range(dims[level])]
        return "{" + ",".join(parts) + "}"

    return nest(0, items) if dims else "{}"


def decode_param(
    data: bytes | None, oid: int, fmt: int, *, param_number: int | None = None
) -> object:
    """A Bind parameter as a Python value, read as PostgreSQL reads type ``oid``.

    Text format (0): oid 0 and unknown give the ``str`` (the caller infers the type); other
    types follow PostgreSQL's input functions (dates and timestamps: ISO 8601 only; a
    timestamptz without a zone is UTC). Binary format (1): the ``*recv`` functions; oid 0 is
    read as text, like unknown. Errors carry PostgreSQL's SQLSTATE and message: 22P02
    (:class:`~dpproxy.errors.InvalidTextRepresentation`), 22007, 22008, 22003, 22021, 08P01 (a
    binary value too short), 22P03 (bytes left over; ``param_number`` goes in the message),
    0A000 (:class:`UnsupportedParameterType` for a type without a decoder; a plain
    UnsupportedQuery for a value Python cannot hold, such as a date 'infinity').

    >>> from dpproxy.server.pgoids import INT4_OID
    >>> decode_param(b"abc", INT4_OID, 0)
    Traceback (most recent call last):
    dpproxy.errors.InvalidTextRepresentation: 22P02: invalid input syntax for type integer: "abc"
    """
    if data is None:
        return None
    if fmt == 0:
        return _decode_text(_utf8(data), oid)
    if fmt != 1:
        raise ProtocolViolation(f"unsupported format code: {fmt}")
    return _decode_binary(data, oid, param_number)


# -------------------------------------------------------------------------- literals


def sql_literal(value: object) -> str:
    """A PostgreSQL-dialect SQL literal denoting ``value`` exactly, safe to put for ``$n``.

    Strings are standard-conforming (quotes doubled, backslashes literal; NUL refused with
    22021); negative numbers are parenthesised, so ``1-$1`` never turns into a ``--`` comment;
    finite floats use their shortest round-trip digits (an untyped numeric literal that casts
    back to the same float8), the others ``'NaN'::float8`` and the like.

    >>> [sql_literal(v) for v in (None, True, -3, 0.1, float("nan"), dt.date(2020, 1, 2))]
    ['NULL', 'TRUE', '(-3)', '0.1', "'NaN'::float8", "DATE '2020-01-02'"]
    """
    value = _plain(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, float):
        if not math.isfinite(value) or (math.copysign(1.0, value) < 0 and value == 0):
            return f"'{_float_text(value, 15, _float8_digits)}'::float8"
        return repr(value) if value >= 0 else f"({value!r})"
    if isinstance(value, Decimal):
        d = _to_decimal(value)
        text = _numeric_text(d)  # checks the range, too
        if not d.is_finite():
            return f"'{text}'::numeric"
        return text if not d.is_signed() else f"({text})"
    if isinstance(value, str):
        if "\x00" in value:
            raise CharacterNotInRepertoire('invalid byte sequence for encoding "UTF8": 0x00')
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        aware = value.utcoffset() is not None
        oid, word = (TIMESTAMPTZ_OID, "TIMESTAMPTZ") if aware else (TIMESTAMP_OID, "TIMESTAMP")
        return f"{word} '{_TEXT[oid](value)}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    raise InternalError(f"no SQL literal for a {type(value).__name__}")
