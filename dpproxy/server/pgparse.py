"""PostgreSQL's text input functions for the types dpproxy reads (one part of
:mod:`dpproxy.server.pgtypes`).

``boolin``, ``int2in`` / ``int4in`` / ``int8in`` and ``oidin``, ``float4in`` / ``float8in``,
``numeric_in``, and ISO 8601 dates and timestamps: a string → a Python value, with
PostgreSQL's SQLSTATEs and messages. Both directions of the wire use them: Bind parameters in
text format (:mod:`~dpproxy.server.pgparams`) and the encoders' coercion of a ``str`` to the
column type (:mod:`~dpproxy.server.pgencode`), hence a module of their own.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import NoReturn

from dpproxy.errors import (
    DatetimeFieldOverflow,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    UnsupportedQuery,
)
from dpproxy.server.pgfloat import _round_binary
from dpproxy.server.pgoids import (
    _FLOAT_NAMES,
    _INTS,
    _OIDS,
    DATE_OID,
    FLOAT4_OID,
    TIMESTAMP_OID,
    TIMESTAMPTZ_OID,
)


class InvalidDatetimeFormat(InvalidTextRepresentation):
    """PostgreSQL's code for an unreadable date or timestamp (an InvalidTextRepresentation)."""

    sqlstate = "22007"


# ---------------------------------------------------------------------- text input

_WS = " \t\n\r\v\f"  # C isspace
_INT_RE = re.compile(rf"[{_WS}]*([+-]?)([0-9]+)(.*)", re.S)
_FLOAT_RE = re.compile(  # what glibc strtod consumes: hexadecimal, decimal, inf, nan(chars)
    rf"[{_WS}]*(?:([+-]?)0x([0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p([+-]?[0-9]+))?"
    r"|([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)"
    r"|([+-]?(?:inf(?:inity)?|nan(?:\([0-9a-z_]*\))?)))(.*)",
    re.I | re.S,
)
_NUMERIC_RE = re.compile(  # numeric_in: its exponent is read by strtol, which skips spaces
    rf"[{_WS}]*(?:([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(?:e[{_WS}]*([+-]?[0-9]+))?"
    rf"|(nan|[+-]?inf(?:inity)?)(?=[{_WS}]*$))(.*)",
    re.I | re.S,
)


def _syntax(type_word: str, s: str) -> InvalidTextRepresentation:
    return InvalidTextRepresentation(f'invalid input syntax for type {type_word}: "{s}"')


def _parse_bool(s: str) -> bool:
    w = s.strip(_WS).lower()
    if w in ("1", "0", "on", "of", "off"):
        return w in ("1", "on")
    for word in ("true", "false", "yes", "no"):
        if w and word.startswith(w):
            return word in ("true", "yes")
    raise _syntax("boolean", s)


def _parse_int(s: str, oid: int) -> int:
    """``pg_strtoint16/32/64``, or ``oidin`` (``strtoul``: -1 wraps to 4294967295). Overflow in
    the digits is reported before junk after them, as PostgreSQL does."""
    name, bits = ("oid", 0) if oid in _OIDS else _INTS[oid]
    m = _INT_RE.fullmatch(s)
    if m is None:
        raise _syntax(name, s)
    sign, digits, rest = m.groups()
    mag = int(digits) if len(digits) < 30 else 1 << 100
    if mag > (2 ** (bits - 1) if bits else 2**64 - 1):
        raise NumericValueOutOfRange(f'value "{s}" is out of range for type {name}')
    if rest.strip(_WS):
        raise _syntax(name, s)
    if bits:
        if mag == 2 ** (bits - 1) and sign != "-":
            raise NumericValueOutOfRange(f'value "{s}" is out of range for type {name}')
        return -mag if sign == "-" else mag
    n = -mag % 2**64 if sign == "-" else mag
    oid_value = n % 2**32  # kept if it equals n after zero- or sign-extension to 64 bits
    if n not in (oid_value, (oid_value - (oid_value >> 31 << 32)) % 2**64):
        raise NumericValueOutOfRange(f'value "{s}" is out of range for type {name}')
    return oid_value


def _parse_float(s: str, oid: int) -> float:
    """``float8in`` / ``float4in``: glibc ``strtod`` / ``strtof`` syntax, correctly rounded."""
    name = _FLOAT_NAMES[oid]
    m = _FLOAT_RE.match(s)
    if m is None:
        raise _syntax(name, s)
    hex_sign, hex_digits, hex_exp, dec, word, rest = m.groups()
    junk = rest.strip(_WS) != ""  # reported after an overflow, as PostgreSQL checks errno first
    if word is not None:
        if junk:
            raise _syntax(name, s)
        w = word.lower()
        return math.nan if "nan" in w else (-math.inf if w.startswith("-") else math.inf)
    if dec is not None:
        mant, _, exp = dec.lower().partition("e")
        neg, base, digits = mant.startswith("-"), 10, mant.lstrip("+-")
    else:
        neg, base, digits, exp = hex_sign == "-", 16, hex_digits, hex_exp or "0"
    whole, _, frac = digits.partition(".")
    sig = (whole + frac).lstrip("0")
    if not sig:
        if junk:
            raise _syntax(name, s)
        return -0.0 if neg else 0.0
    e = int(exp or "0") if len(exp.lstrip("+-0")) < 9 else (-1 if "-" in exp else 1) * 10**9
    step = 1 if base == 10 else 4  # digits → powers of 10, or of 2
    e -= len(frac) * step
    order = len(sig) * step + e  # |value| < 10**order (hexadecimal: 2**order)
    if abs(order) > (400 if base == 10 else 1200):
        x = math.inf if order > 0 else 0.0
    else:
        q = Fraction(Decimal(f"{sig}e{e}")) if base == 10 else int(sig, 16) * Fraction(2) ** e
        single = oid == FLOAT4_OID
        x = _round_binary(q, 24, -126, 127) if single else _round_binary(q, 53, -1022, 1023)
    if x == 0 or math.isinf(x):  # float8in quotes just the number; float4in all the input
        shown = s if oid == FLOAT4_OID else s[len(s) - len(s.lstrip(_WS)) : m.start(6)]
        raise NumericValueOutOfRange(f'"{shown}" is out of range for type {name}')
    if junk:
        raise _syntax(name, s)
    return -x if neg else x


def _numeric_layout(d: Decimal) -> tuple[int, int, int, tuple[int, ...]]:
    """(weight, sign, dscale, base-10000 digits) of a finite ``d``, as PostgreSQL stores it;
    22003 past PostgreSQL's limits (weight ≤ 32767 four-digit groups, dscale ≤ 16383)."""
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    dscale = max(0, -exp)
    if dscale > 0x3FFF or (not d.is_zero() and d.adjusted() // 4 > 0x7FFF):
        raise NumericValueOutOfRange("value overflows numeric format")
    if d.is_zero():
        return 0, 0, dscale, ()
    frac_groups = -(-dscale // 4)
    ds = "".join(map(str, digits)) + "0" * (exp + 4 * frac_groups)
    ds = "0" * (-len(ds) % 4) + ds
    groups = [int(ds[i : i + 4]) for i in range(0, len(ds), 4)]
    weight = len(groups) - 1 - frac_groups
    while groups[-1] == 0:
        groups.pop()
    return weight, 0x4000 if sign else 0, dscale, tuple(groups)


def _parse_numeric(s: str) -> Decimal:
    m = _NUMERIC_RE.match(s)
    if m is None:
        raise _syntax("numeric", s)
    sign, digits, exp, word, rest = m.groups()
    if word is not None:
        w = word.lower()
        return Decimal("NaN" if w == "nan" else ("-Infinity" if w[0] == "-" else "Infinity"))
    e = (exp or "0").lstrip("+-").lstrip("0")
    if len(e) > 10 or (e and int(e) >= (2**31 - 1) // 2):  # before the junk, as numeric_in
        raise NumericValueOutOfRange("value overflows numeric format")
    if rest.strip(_WS):
        raise _syntax("numeric", s)
    d = Decimal(f"{sign}{digits}e{exp or 0}")  # dscale = max(0, -exponent), as numeric_in's
    _numeric_layout(d)
    return d.copy_abs() if d.is_zero() else d


_TS_RE = re.compile(
    rf"[{_WS}]*([0-9]{{4,}})-([0-9]{{1,2}})-([0-9]{{1,2}})"
    r"(?:(?:[ T]|\s+)([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(\.[0-9]*)?)?)?"
    rf"[{_WS}]*(?:Z|UTC|([+-])([0-9]{{1,2}})(?::?([0-9]{{2}})(?::?([0-9]{{2}}))?)?)?"
    rf"(?:[{_WS}]*(BC))?[{_WS}]*",
    re.I,
)
_TS_WORDS = ("infinity", "-infinity", "now", "today", "tomorrow", "yesterday", "allballs")
_TS_NAMES = {DATE_OID: "date", TIMESTAMP_OID: "timestamp",
             TIMESTAMPTZ_OID: "timestamp with time zone"}  # fmt: skip
_UTC = dt.UTC
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February: 29 in leap years
_RANGE_HINT = "dpproxy reads dates and timestamps from 0001-01-01 to 9999-12-31"


def _beyond_python(s: str, oid: int, year: int, mo: int, d: int) -> NoReturn:
    """A date outside Python's years 1-9999 (``year`` astronomical: 0 is 1 BC): 22008 if
    PostgreSQL refuses it too, else 0A000."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if year >= 2**31 or not (1 <= mo <= 12 and 1 <= d <= _MONTH_DAYS[mo - 1] + (mo == 2 and leap)):
        raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"')
    end = (5874898, 1, 1) if oid == DATE_OID else (294277, 1, 1)
    if (
        (year, mo, d) < (-4713, 11, 24)
        or (year, mo, d) > end
        or (
            (year, mo, d) == end and oid != TIMESTAMPTZ_OID  # a zone may bring that day in range
        )
    ):
        word = "date" if oid == DATE_OID else "timestamp"
        raise DatetimeFieldOverflow(f'{word} out of range: "{s}"')
    raise UnsupportedQuery(f'{_TS_NAMES[oid]} value "{s}" is not supported', hint=_RANGE_HINT)


def _parse_timestamp(s: str, oid: int) -> dt.datetime:
    """ISO 8601 dates and timestamps; a zone counts only for timestamptz (default UTC)."""
    w = s.strip(_WS).lower()
    if w == "epoch":
        return dt.datetime(1970, 1, 1, tzinfo=_UTC if oid == TIMESTAMPTZ_OID else None)
    if w in _TS_WORDS:
        raise UnsupportedQuery(f'{_TS_NAMES[oid]} value "{s}" is not supported', hint=_RANGE_HINT)
    m = _TS_RE.fullmatch(s)
    if m is None:
        raise InvalidDatetimeFormat(
            f'invalid input syntax for type {_TS_NAMES[oid]}: "{s}"',
            hint="dpproxy reads ISO 8601: YYYY-MM-DD [HH:MM[:SS[.ffffff]]] [+HH[:MM]]",
        )
    y, mo, d, h, mi, sec = (int(g or 0) for g in m.groups()[:6])
    frac, sign, zh, zm, zs, bc = m.groups()[6:]
    if y > 9999 or (bc and y):
        _beyond_python(s, oid, 1 - y if bc else y, mo, d)
    usec = round(float(frac) * 1_000_000) if frac and frac != "." else 0  # rint, as PostgreSQL
    if (h, mi, sec, usec) > (24, 0, 0, 0) or mi > 59 or sec > 60 or (sec == 60 and usec):
        raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"')
    try:
        t = dt.datetime(y, mo, d, h % 24, mi, sec % 60)
    except ValueError:
        raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
    try:  # 24:00:00 is the next midnight, and a leap second the next minute
        t += dt.timedelta(days=h // 24, minutes=sec // 60, microseconds=usec)
    except OverflowError:
        raise UnsupportedQuery(f'{_TS_NAMES[oid]} value "{s}" is not supported') from None
    if oid != TIMESTAMPTZ_OID:
        return t
    offset = dt.timedelta(hours=int(zh or 0), minutes=int(zm or 0), seconds=int(zs or 0))
    try:
        return (t + offset if sign == "-" else t - offset).replace(tzinfo=_UTC)
    except OverflowError:
        raise UnsupportedQuery(f'{_TS_NAMES[oid]} value "{s}" is not supported') from None
