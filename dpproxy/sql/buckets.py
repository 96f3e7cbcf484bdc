"""``WIDTH_BUCKET(x, lo, hi, n)`` over private rows: typing, totality and its thresholds.

PostgreSQL 15 computes ``width_bucket(x, lo, hi, n)`` for a double x (and for an integer x with
integer bounds, which it reads as doubles) as: 0 for x < lo, n + 1 for x >= hi, else
``trunc(n * (x - lo) / (hi - lo) + 1)`` in double precision (mirrored when lo > hi: 0 for
x > lo, n + 1 for x <= hi). It raises for n <= 0, lo = hi, a NaN operand or bound and an
infinite bound; DuckDB has no such function.

**Totality.** lo, hi and n must be literals, checked here before any data is read: n a whole
number 1 … :data:`MAX_BUCKETS`, lo ≠ hi, both finite within ±1e300 (so ``n * (x - lo)``
cannot overflow). The rewrite (``rewrite/domains.py``) then prints no arithmetic at all: the
formula is non-decreasing in x (non-increasing when lo > hi), since each IEEE operation is, so
the smallest double that reaches bucket k is found here by bisection over the doubles
(:func:`thresholds`), and the call becomes ``CASE WHEN x < lo THEN 0 WHEN x >= hi THEN n + 1
WHEN x >= t_k THEN k … WHEN x >= lo THEN 1 END`` over x as DOUBLE: comparisons of doubles,
which cannot fail and give the same answer on both engines and PostgreSQL 15's own value for
every number. NULL gives NULL; NaN, which PostgreSQL refuses, sorts above every number on
both engines and gets the bucket that order gives it (n + 1, or 0 when lo > hi).
When x is an integer and a bound has a decimal point, PostgreSQL picks its numeric
width_bucket instead, which can differ from the double one at the edge of a bucket.

The result lies in 0 … n + 1, a public domain of n + 2 values (``sql/validate.py``): grouped
by it, every bucket is released, zero-filled when empty.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from sqlglot import exp

from dpproxy.errors import (
    DatatypeMismatch,
    InvalidArgumentForWidthBucket,
    NumericValueOutOfRange,
    UnsupportedQuery,
)
from dpproxy.sql.sqltype import SqlType

MAX_BUCKETS = 1000
MAX_BOUND = 1e300


def literal_number(node: exp.Expression | None) -> float | None:
    """The value of a number literal, of ``-`` one, or of either in parentheses; else None."""
    negative = isinstance(node, exp.Neg)
    value = node.this if isinstance(node, exp.Neg) else node
    while isinstance(value, exp.Paren):
        value = value.this
    if not isinstance(value, exp.Literal) or value.is_string:
        return None
    try:
        v = float(value.name)
    except ValueError:
        return None
    return -v if negative else v


def bucket_spec(node: exp.Expression) -> tuple[float, float, int]:
    """(lo, hi, n) of a WIDTH_BUCKET call, checked: literals, n in 1 … MAX_BUCKETS, lo ≠ hi,
    |lo|, |hi| ≤ 1e300 (0A000, 2201G, 22003 otherwise)."""
    lo, hi = literal_number(node.args.get("min_value")), literal_number(node.args.get("max_value"))
    count = node.args.get("num_buckets")
    if lo is None or hi is None:
        raise UnsupportedQuery(
            "WIDTH_BUCKET takes literal numbers as its bounds",
            hint="e.g. WIDTH_BUCKET(age, 17, 90, 8)",
        )
    n = literal_number(count)
    text = count.sql().lower() if count is not None else ""
    if n is None or not n.is_integer() or "." in text or "e" in text:
        raise UnsupportedQuery(
            "WIDTH_BUCKET takes a literal whole number of buckets",
            hint="e.g. WIDTH_BUCKET(age, 17, 90, 8)",
        )
    if n <= 0:
        raise InvalidArgumentForWidthBucket("count must be greater than zero")
    if n > MAX_BUCKETS:
        raise UnsupportedQuery(
            f"WIDTH_BUCKET takes at most {MAX_BUCKETS} buckets",
            hint="use fewer, wider buckets",
        )
    if not (abs(lo) <= MAX_BOUND and abs(hi) <= MAX_BOUND):
        raise NumericValueOutOfRange(f"the bounds of WIDTH_BUCKET must lie within ±{MAX_BOUND:g}")
    if lo == hi:
        raise InvalidArgumentForWidthBucket("lower bound cannot equal upper bound")
    return lo, hi, int(n)


def width_bucket_type(node: exp.Expression, t: Callable[[exp.Expression], SqlType]) -> SqlType:
    """``WIDTH_BUCKET(x, lo, hi, n)``: x numeric (42804), the rest as :func:`bucket_spec`."""
    operand = t(node.this)
    if operand not in (SqlType.NUMERIC, SqlType.NULL):
        raise DatatypeMismatch(f"WIDTH_BUCKET needs a numeric operand, not {operand.value}")
    bucket_spec(node)
    return SqlType.NUMERIC


def postgres_bucket(x: float, lo: float, hi: float, n: int) -> int:
    """PostgreSQL 15's ``width_bucket(float8, float8, float8, int)`` of a number x.

    >>> [postgres_bucket(a, 17.0, 90.0, 8) for a in (16.0, 17.0, 26.125, 89.9, 90.0)]
    [0, 1, 2, 8, 9]
    """
    if lo < hi:
        if x < lo:
            return 0
        if x >= hi:
            return n + 1
        return math.trunc(n * (x - lo) / (hi - lo) + 1)
    if x > lo:
        return 0
    if x <= hi:
        return n + 1
    return math.trunc(n * (lo - x) / (lo - hi) + 1)


def _key(x: float) -> int:
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def _double(k: int) -> float:
    bits = k if k >= 0 else (-k) | -0x8000000000000000
    value: float = struct.unpack("<d", struct.pack("<q", bits))[0]
    return value


def thresholds(lo: float, hi: float, n: int) -> list[tuple[int, float]]:
    """(k, t) for each bucket k >= 2 that a number strictly between the bounds reaches, with t
    the first double (from lo's side) in bucket k or beyond, highest k first.

    >>> thresholds(0.0, 10.0, 2)
    [(2, 5.0)]
    """
    inside_lo, inside_hi = (lo, math.nextafter(hi, -math.inf)) if lo < hi else (hi, lo)
    if lo > hi:
        inside_lo = math.nextafter(hi, math.inf)
    a, b = _key(inside_lo), _key(inside_hi)
    out: list[tuple[int, float]] = []
    for k in range(2, n + 2):
        if lo < hi:  # smallest key with bucket >= k
            if postgres_bucket(_double(b), lo, hi, n) < k:
                break
            left, right = a, b
            while left < right:
                mid = (left + right) // 2
                if postgres_bucket(_double(mid), lo, hi, n) >= k:
                    right = mid
                else:
                    left = mid + 1
        else:  # largest key with bucket >= k
            if postgres_bucket(_double(a), lo, hi, n) < k:
                break
            left, right = a, b
            while left < right:
                mid = (left + right + 1) // 2
                if postgres_bucket(_double(mid), lo, hi, n) >= k:
                    left = mid
                else:
                    right = mid - 1
        out.append((k, _double(left)))
    return out[::-1]
