"""Float digits and text as PostgreSQL prints them (one part of :mod:`dpproxy.server.pgtypes`).

Shortest round-trip digits with PostgreSQL's tie rule (Ryu's ``STRICTLY_SHORTEST``) laid out
as ``common/d2s.c`` and ``f2s.c`` do, the float8 fast path through Python's repr, the correct
rounding of an exact value to a binary float that the ``strtod`` of
:mod:`~dpproxy.server.pgparse` uses, and the exact Decimal context the other parts share.
Self-contained numerics (no OIDs, no SQLSTATEs), and the hot path of float8 output.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from decimal import ROUND_FLOOR, Context, Decimal
from fractions import Fraction

from dpproxy.errors import InternalError

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
