"""PostgreSQL types on the wire: OIDs, an emulated ``pg_type``, and value codecs (pure).

* :data:`TYPES` / :data:`BY_OID`: the built-in types clients ask about, as ``pg_type`` rows;
* :func:`oid_of`: dpproxy's output column types → OIDs;
* :func:`encode_text` / :func:`encode_binary`: a Python value → a DataRow field, byte for byte
  what PostgreSQL 15 sends (``extra_float_digits`` ≥ 1, ``DateStyle`` ISO, ``TimeZone`` UTC);
* :func:`decode_param`: a Bind parameter → a Python value, with PostgreSQL's input rules, error
  codes and messages;
* :func:`sql_literal`: a decoded value → a SQL literal to substitute for ``$n``.

A value whose Python type differs from the column type is converted as PostgreSQL's cast would
(an ``int`` sent as ``float8`` is written as a float; a ``float`` sent as ``int8`` is rounded
half to even), except ``float`` → ``numeric``, which keeps the shortest round-trip digits rather
than PostgreSQL's 15. Naive datetimes count as UTC. Types without a codec here (bytea, time,
interval, uuid, arrays, ...) raise :class:`~dpproxy.errors.InternalError` when encoding and
:class:`UnsupportedParameterType` (0A000) when a client binds one.

>>> encode_text(1e20, FLOAT8_OID), encode_text(0.1, FLOAT4_OID), encode_binary(2, INT4_OID)
(b'1e+20', b'0.1', b'\\x00\\x00\\x00\\x02')
>>> decode_param(b" 42 ", INT8_OID, 0), sql_literal(-1.5), sql_literal("it's")
(42, '(-1.5)', "'it''s'")
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Final, NoReturn

from dpproxy.errors import (
    DatetimeFieldOverflow,
    DPProxyError,
    InternalError,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    ProtocolViolation,
    UnsupportedQuery,
)


class CharacterNotInRepertoire(DPProxyError):
    """Bytes that are not UTF-8, or a NUL character (PostgreSQL text cannot hold one)."""

    sqlstate = "22021"


class InvalidDatetimeFormat(InvalidTextRepresentation):
    """PostgreSQL's code for an unreadable date or timestamp (an InvalidTextRepresentation)."""

    sqlstate = "22007"


class UnsupportedParameterType(UnsupportedQuery):
    """A Bind parameter of a type with no decoder here (0A000, as its base class); values
    this module cannot represent (a date 'infinity', say) raise plain UnsupportedQuery."""


class InvalidBinaryRepresentation(ProtocolViolation):
    """A binary parameter with bytes left over or bad fields: 22P03 as in PostgreSQL, where it
    is not fatal to the connection; a ProtocolViolation subclass for callers that catch that."""

    sqlstate = "22P03"


# ----------------------------------------------------------------------------------- OIDs

BOOL_OID: Final = 16
BYTEA_OID: Final = 17
CHAR_OID: Final = 18
NAME_OID: Final = 19
INT8_OID: Final = 20
INT2_OID: Final = 21
INT2VECTOR_OID: Final = 22
INT4_OID: Final = 23
REGPROC_OID: Final = 24
TEXT_OID: Final = 25
OID_OID: Final = 26
XID_OID: Final = 28
OIDVECTOR_OID: Final = 30
JSON_OID: Final = 114
FLOAT4_OID: Final = 700
FLOAT8_OID: Final = 701
UNKNOWN_OID: Final = 705
BPCHAR_OID: Final = 1042
VARCHAR_OID: Final = 1043
DATE_OID: Final = 1082
TIME_OID: Final = 1083
TIMESTAMP_OID: Final = 1114
TIMESTAMPTZ_OID: Final = 1184
INTERVAL_OID: Final = 1186
NUMERIC_OID: Final = 1700
REGCLASS_OID: Final = 2205
REGTYPE_OID: Final = 2206
UUID_OID: Final = 2950
CHAR_ARRAY_OID: Final = 1002
NAME_ARRAY_OID: Final = 1003
INT2_ARRAY_OID: Final = 1005
INT4_ARRAY_OID: Final = 1007
TEXT_ARRAY_OID: Final = 1009
OID_ARRAY_OID: Final = 1028


@dataclass(frozen=True, slots=True)
class PgType:
    """One row of the emulated ``pg_type`` (all in ``pg_catalog``, ``typdelim`` ``','``)."""

    name: str  # typname
    oid: int
    typlen: int  # bytes; -1 varlena, -2 C string
    typbyval: bool
    typtype: str  # 'b' base, 'p' pseudo-type
    typcategory: str  # 'N' numeric, 'S' string, 'A' array, ...
    typelem: int  # element type of an array (or a vector), else 0
    typarray: int  # the array type of this type, else 0
    typalign: str
    sql_name: str  # format_type(oid, NULL)


def _array_of(t: PgType) -> PgType:
    align = "d" if t.typalign == "d" else "i"
    return PgType("_" + t.name, t.typarray, -1, False, "b", "A", t.oid, 0, align, t.sql_name + "[]")


_BASE = (  # as PostgreSQL 15's pg_type has them (tests/unit/test_pgtypes.py compares)
    PgType("bool", 16, 1, True, "b", "B", 0, 1000, "c", "boolean"),
    PgType("bytea", 17, -1, False, "b", "U", 0, 1001, "i", "bytea"),
    PgType("char", 18, 1, True, "b", "Z", 0, 1002, "c", '"char"'),
    PgType("name", 19, 64, False, "b", "S", 18, 1003, "c", "name"),
    PgType("int8", 20, 8, True, "b", "N", 0, 1016, "d", "bigint"),
    PgType("int2", 21, 2, True, "b", "N", 0, 1005, "s", "smallint"),
    PgType("int2vector", 22, -1, False, "b", "A", 21, 1006, "i", "int2vector"),
    PgType("int4", 23, 4, True, "b", "N", 0, 1007, "i", "integer"),
    PgType("regproc", 24, 4, True, "b", "N", 0, 1008, "i", "regproc"),
    PgType("text", 25, -1, False, "b", "S", 0, 1009, "i", "text"),
    PgType("oid", 26, 4, True, "b", "N", 0, 1028, "i", "oid"),
    PgType("xid", 28, 4, True, "b", "U", 0, 1011, "i", "xid"),
    PgType("oidvector", 30, -1, False, "b", "A", 26, 1013, "i", "oidvector"),
    PgType("json", 114, -1, False, "b", "U", 0, 199, "i", "json"),
    PgType("float4", 700, 4, True, "b", "N", 0, 1021, "i", "real"),
    PgType("float8", 701, 8, True, "b", "N", 0, 1022, "d", "double precision"),
    PgType("unknown", 705, -2, False, "p", "X", 0, 0, "c", "unknown"),
    PgType("bpchar", 1042, -1, False, "b", "S", 0, 1014, "i", "character"),
    PgType("varchar", 1043, -1, False, "b", "S", 0, 1015, "i", "character varying"),
    PgType("date", 1082, 4, True, "b", "D", 0, 1182, "i", "date"),
    PgType("time", 1083, 8, True, "b", "D", 0, 1183, "d", "time without time zone"),
    PgType("timestamp", 1114, 8, True, "b", "D", 0, 1115, "d", "timestamp without time zone"),
    PgType("timestamptz", 1184, 8, True, "b", "D", 0, 1185, "d", "timestamp with time zone"),
    PgType("interval", 1186, 16, False, "b", "T", 0, 1187, "d", "interval"),
    PgType("numeric", 1700, -1, False, "b", "N", 0, 1231, "i", "numeric"),
    PgType("regclass", 2205, 4, True, "b", "N", 0, 2210, "i", "regclass"),
    PgType("regtype", 2206, 4, True, "b", "N", 0, 2211, "i", "regtype"),
    PgType("uuid", 2950, 16, False, "b", "U", 0, 2951, "c", "uuid"),
)
TYPES: Final[tuple[PgType, ...]] = _BASE + tuple(_array_of(t) for t in _BASE if t.typarray)
BY_OID: Final[Mapping[int, PgType]] = MappingProxyType({t.oid: t for t in TYPES})

_OUTPUT_OIDS = {"integer": INT8_OID, "double": FLOAT8_OID, "text": TEXT_OID,
                "boolean": BOOL_OID, "date": DATE_OID}  # fmt: skip


def oid_of(dpproxy_type_name: str) -> int:
    """The OID of a released column type (``OutputColumn.type``); unknown names are text."""
    return _OUTPUT_OIDS.get(dpproxy_type_name, TEXT_OID)


def type_size(oid: int) -> int:
    """``typlen`` for RowDescription (-1 for types not in :data:`TYPES`)."""
    t = BY_OID.get(oid)
    return t.typlen if t else -1


def type_name(oid: int) -> str:
    """The SQL spelling of a type for ``CAST(... AS <name>)``; unspecified, unknown → text."""
    t = BY_OID.get(oid)
    return "text" if t is None or oid == UNKNOWN_OID else t.sql_name


# ---------------------------------------------------------------------------- floats

_CTX = Context(prec=400_000, Emax=10**9, Emin=-(10**9))  # exact for every value we accept


def _shortest(x: float, single: bool) -> Decimal:
    """The fewest digits strictly inside the float's rounding interval, and of those the
    nearest (ties to an even last digit): PostgreSQL's Ryu (``STRICTLY_SHORTEST 0``, which
    never prints an interval end, unlike Python's repr). ``x`` > 0 and finite."""
    fmt, width = (">f", ">I") if single else (">d", ">Q")
    bits = struct.unpack(width, struct.pack(fmt, x))[0]

    def at(b: int) -> Fraction:
        return Fraction(struct.unpack(fmt, struct.pack(width, b))[0])

    exact, below = Fraction(x), at(bits - 1)
    top = 0x7F800000 if single else 0x7FF0000000000000
    above = at(bits + 1) if bits + 1 < top else 2 * exact - below
    lo, hi = (below + exact) / 2, (exact + above) / 2
    d = Decimal(x)
    for p in range(1, 18):
        q = Decimal(1).scaleb(d.adjusted() - p + 1)
        down = d.quantize(q, rounding=ROUND_FLOOR, context=_CTX)
        ok = [c for c in (down, _CTX.add(down, q)) if lo < Fraction(c) < hi]
        if ok:
            return min(ok, key=lambda c: (abs(Fraction(c) - exact), c.as_tuple().digits[-1] % 2))
    raise InternalError("no shortest float representation")  # unreachable: 17 digits suffice


def _float8_digits(x: float) -> Decimal:
    """Python's repr, unless it printed an end of the rounding interval (a midpoint between
    ``x`` and a neighbour; only a dyadic decimal can be one). ``x`` > 0 and finite."""
    d = Decimal(repr(x))
    _, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    if exp < 0 and int("".join(map(str, digits))) % 5**-exp:
        return d  # not dyadic
    above, exact = math.nextafter(x, math.inf), Fraction(x)
    if math.isfinite(above):
        ends = (exact + Fraction(math.nextafter(x, 0.0)), exact + Fraction(above))  # doubled
        if 2 * Fraction(d) not in ends:
            return d
    return _shortest(x, single=False)


def _float4_digits(x: float) -> Decimal:
    return _shortest(x, single=True)


def _float_text(x: float, fixed_below: int, digits: Callable[[float], Decimal]) -> str:
    """PostgreSQL's layout of shortest float digits (``common/d2s.c``, ``f2s.c``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0"
    t = digits(abs(x)).normalize(_CTX).as_tuple()
    ds = "".join(map(str, t.digits))
    return _float_layout(sign, ds, len(ds) - 1 + int(t.exponent), fixed_below)


def _float8_text(x: float) -> str:
    """``_float_text(x, 15, _float8_digits)`` without Decimal when Python's repr already is
    PostgreSQL's digits: repr's shortest digits name a non-dyadic decimal, which is never an
    end of the rounding interval (``_float8_digits``). About a tenth of the time for a noisy
    value; dyadic ones (integers, halves …) take the exact route."""
    if x != 0 and math.isfinite(x):
        r = repr(abs(x))
        mant, _, ex = r.partition("e")
        whole, _, frac = mant.partition(".")
        scaled = (whole + frac).lstrip("0")  # value = int(scaled) · 10^(exp − len(frac))
        ds = scaled.rstrip("0")
        last = (int(ex) if ex else 0) - len(frac) + len(scaled) - len(ds)  # exponent of ds[-1]
        if last < 0 and int(ds) % 5**-last:  # not dyadic
            return _float_layout("-" if x < 0 else "", ds, last + len(ds) - 1, 15)
    return _float_text(x, 15, _float8_digits)


def _float_layout(sign: str, ds: str, e: int, fixed_below: int) -> str:
    """Significant digits ``ds`` (no trailing zero), the first of them at 10^``e``."""
    if not -4 <= e < fixed_below:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{sign}{mant}e{'-' if e < 0 else '+'}{abs(e):02d}"
    if e < 0:
        return f"{sign}0.{'0' * (-e - 1)}{ds}"
    if len(ds) <= e + 1:
        return sign + ds + "0" * (e + 1 - len(ds))
    return f"{sign}{ds[: e + 1]}.{ds[e + 1 :]}"


def _round_binary(q: Fraction, mant: int, emin: int, emax: int) -> float:
    """|q| rounded to the nearest (ties even) binary float of ``mant`` bits; inf past emax."""
    n, d = abs(q.numerator), q.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1  # now 2**e <= |q| < 2**(e + 1)
    shift = max(e, emin) - (mant - 1)
    num, den = (n, d << shift) if shift >= 0 else (n << -shift, d)
    m, r = divmod(num, den)
    m += 2 * r > den or (2 * r == den and m % 2 == 1)
    return math.inf if m.bit_length() + shift > emax + 1 else math.ldexp(m, shift)


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
_INTS = {INT2_OID: ("smallint", 16), INT4_OID: ("integer", 32), INT8_OID: ("bigint", 64)}
_OIDS = (OID_OID, XID_OID, REGPROC_OID, REGCLASS_OID, REGTYPE_OID)
_FLOAT_NAMES = {FLOAT4_OID: "real", FLOAT8_OID: "double precision"}
_TEXTS = (TEXT_OID, VARCHAR_OID, BPCHAR_OID, NAME_OID, JSON_OID, UNKNOWN_OID)


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
