"""Interval arithmetic over row-level numeric expressions, rounding outward.

Every numeric column is clamped to its schema bounds in the rewritten SQL (and every measure
to the interval computed here), so the interval is a sound bound on each row's value whatever
the data holds. A NULL contributes nothing to SUM or COUNT, so NULL branches are skipped.
"""

from __future__ import annotations

import math
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import ColumnType, Table
from dpproxy.sql.buckets import bucket_spec
from dpproxy.sql.dates import MAX_DAYS
from dpproxy.sql.mathargs import (
    EXP_LIMIT,
    log_base,
    math_operand,
    power_exponent,
    power_limits,
)
from dpproxy.sql.postmath import digits_of
from dpproxy.values import (
    Interval,
    exp_down,
    exp_up,
    float_down,
    float_up,
    ln_down,
    ln_up,
    sqrt_down,
    sqrt_up,
)

# isinstance tuples built once: ``A | B`` written in the call builds a union of sqlglot
# classes at every call, a microsecond each (issue 21); a tuple tests the same classes
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod)
_RING = (exp.Add, exp.Sub, exp.Mul)
_EXTREMES = (exp.Greatest, exp.Least)
_ROUNDINGS = (exp.Round, exp.Floor, exp.Ceil)
_CASTS = (exp.Cast, exp.TryCast)
_CONDITIONS = (exp.Predicate, exp.Not, exp.And, exp.Or)
_MATH = (exp.Sqrt, exp.Ln, exp.Log, exp.Exp)

_UNBOUNDED = Interval.unbounded()


def _hull(parts: list[Interval | None]) -> Interval | None:
    out: Interval | None = None
    for p in parts:
        if p is not None:
            out = p if out is None else out.hull(p)
    return out


def square(i: Interval) -> Interval:
    """x² for x in i (tighter than i * i when i straddles zero)."""
    if not i.bounded:
        return Interval(Fraction(0), None)
    assert i.lo is not None and i.hi is not None
    hi = max(i.lo * i.lo, i.hi * i.hi)
    lo = Fraction(0) if i.contains_zero() else min(i.lo * i.lo, i.hi * i.hi)
    return Interval(lo, hi)


def bounds_of(node: exp.Expression, table: Table) -> Interval | None:
    """The interval of a numeric expression (``None``: the expression is always NULL).

    >>> from dpproxy.catalog.model import Column, ColumnType, Table
    >>> t = Table("t", True, (Column("age", ColumnType.INTEGER, Fraction(0), Fraction(100)),))
    >>> str(bounds_of(exp.maybe_parse("age / 10 - 1"), t))
    '[-1, 9]'
    """

    def b(n: exp.Expression) -> Interval | None:
        return bounds_of(n, table)

    if isinstance(node, exp.Paren):
        return b(node.this)
    if isinstance(node, exp.Column):
        col = table.column(node.name)
        if col is None:
            return _UNBOUNDED
        return col.bounds  # half-bounded columns are clamped on their side (rewrite/clamps.py)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return _UNBOUNDED
        text = node.name  # digits alone (most literals): int() is the same value, far faster
        value = Fraction(int(text)) if text.isascii() and text.isdigit() else Fraction(text)
        return Interval(value, value)
    if isinstance(node, exp.Boolean):
        return Interval.point(int(node.this))
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        v = b(node.this)
        return None if v is None else -v
    if isinstance(node, _ARITHMETIC):
        lhs, rhs = b(node.this), b(node.expression)
        if lhs is None or rhs is None:
            return None
        if isinstance(node, exp.Add):
            return lhs + rhs
        if isinstance(node, exp.Sub):  # lhs + (−rhs) without the negated interval
            return Interval(
                None if lhs.lo is None or rhs.hi is None else lhs.lo - rhs.hi,
                None if lhs.hi is None or rhs.lo is None else lhs.hi - rhs.lo,
            )
        if isinstance(node, exp.Mul):
            return lhs * rhs
        if isinstance(node, exp.Mod):
            if not rhs.bounded or not lhs.bounded:
                return _UNBOUNDED
            m = rhs.max_abs()
            return Interval(-m if lhs.lo is not None and lhs.lo < 0 else Fraction(0), m)
        # Division: the rewrite guards the divisor with NULLIF(d, 0), so 0 is excluded;
        # for integer-valued divisors that keeps |d| >= 1, otherwise the bound is open.
        q = lhs * _reciprocal_nonzero(rhs, integral(node.expression, table))
        if isinstance(node, exp.IntDiv) and q.bounded:
            assert q.lo is not None and q.hi is not None
            return Interval(q.lo - 1, q.hi + 1)
        return q
    if isinstance(node, exp.Case):
        parts = [b(w.args["true"]) for w in node.args.get("ifs") or []]
        parts.append(b(node.args["default"]) if node.args.get("default") is not None else None)
        return _hull(parts)
    if isinstance(node, exp.If):
        false = node.args.get("false")
        return _hull([b(node.args["true"]), b(false) if false is not None else None])
    if isinstance(node, exp.Coalesce):
        return _hull([b(node.this), *(b(e) for e in node.expressions)])
    if isinstance(node, exp.Nullif):
        return b(node.this)
    if isinstance(node, _EXTREMES):
        found = [b(node.this), *(b(e) for e in node.expressions)]
        present: list[Interval] = [p for p in found if p is not None]
        if not present:
            return None
        los = [p.lo for p in present]
        his = [p.hi for p in present]
        known_lo = [v for v in los if v is not None]
        known_hi = [v for v in his if v is not None]
        if isinstance(node, exp.Greatest):
            lo = max(known_lo) if known_lo else None
            hi = None if len(known_hi) < len(his) else max(known_hi)
        else:
            lo = None if len(known_lo) < len(los) else min(known_lo)
            hi = min(known_hi) if known_hi else None
        return Interval(lo, hi)
    if isinstance(node, exp.Abs):
        v = b(node.this)
        if v is None:
            return None
        if not v.bounded:
            return Interval(Fraction(0), None)
        return Interval(
            Fraction(0) if v.contains_zero() else min(abs(v.lo), abs(v.hi)),  # type: ignore[arg-type]
            v.max_abs(),
        )
    if isinstance(node, _ROUNDINGS):
        v = b(node.this)
        if v is None or not v.bounded:
            return v
        assert v.lo is not None and v.hi is not None
        d = node.args.get("decimals")
        # ROUND(x, -k) moves x by at most 10^k / 2 (to a multiple of 10^k); else at most 1
        step = Fraction(10) ** -digits if isinstance(d, exp.Neg) and (digits := digits_of(d)) else 1
        return Interval(v.lo - step, v.hi + step)
    if isinstance(node, _CASTS):
        if node.to.this is exp.DataType.Type.BOOLEAN:
            return Interval(Fraction(0), Fraction(1))
        # ``(a = b)::int`` parses as a cast of the parenthesised predicate: 0 or 1 too
        if isinstance(node.this.unnest(), _CONDITIONS):
            return Interval(Fraction(0), Fraction(1))
        v = b(node.this)
        if v is None or not v.bounded:
            return v
        assert v.lo is not None and v.hi is not None
        return Interval(v.lo - 1, v.hi + 1)  # a cast to an integer type may round
    if isinstance(node, exp.Length):
        return text_length(node.this, table)
    if isinstance(node, exp.StrPosition):
        return Interval(Fraction(0), None)
    if isinstance(node, exp.Sign):
        v = b(node.this)
        if v is None:
            return None
        lo = Fraction(0) if v.lo is not None and v.lo >= 0 else Fraction(-1)
        hi = Fraction(0) if v.hi is not None and v.hi <= 0 else Fraction(1)
        return Interval(lo, hi)
    if isinstance(node, exp.WidthBucket):  # an integer in 0 … n + 1 (sql/buckets.py)
        return Interval(Fraction(0), Fraction(bucket_spec(node)[2] + 1))
    if isinstance(node, exp.Pi):
        return Interval.point(Fraction(math.pi))  # pi() is this double on both engines
    if isinstance(node, exp.Pow):  # a literal exponent (sql/mathargs.py)
        v, p = b(node.this), power_exponent(node)
        if v is None or p is None:
            return None if v is None else _UNBOUNDED
        return integer_power(v, int(p)) if p.denominator == 1 else fractional_power(v, p)
    if isinstance(node, exp.Cbrt):
        v = b(node.this)
        return None if v is None else cube_root(v)
    if isinstance(node, _MATH):
        v = b(math_operand(node))
        return None if v is None else monotone(node, v)
    if isinstance(node, exp.DateDiff):  # days between two dates of 0001…9999 (sql/dates.py)
        return Interval(Fraction(-MAX_DAYS), Fraction(MAX_DAYS))
    return _UNBOUNDED


def text_length(node: exp.Expression, table: Table) -> Interval:
    """LENGTH of ``node`` in characters: within the shortest and longest value of a text
    column's declared public domain (its values are public, so their lengths are too), or
    [0, max_length] when the schema declares one, else [0, ∞). The clamp of the measure to
    this interval enforces it on any data.

    >>> from dpproxy.catalog.model import Column, ColumnType, Table
    >>> t = Table("t", True, (Column("job", ColumnType.TEXT, domain=("Sales", "Über-Chef")),))
    >>> str(text_length(exp.column("job"), t))
    '[5, 9]'
    >>> t = Table("t", True, (Column("note", ColumnType.TEXT, max_length=80),))
    >>> str(text_length(exp.column("note"), t))
    '[0, 80]'
    """
    while isinstance(node, exp.Paren):
        node = node.this
    col = table.column(node.name) if isinstance(node, exp.Column) else None
    values = col.domain if col is not None and col.domain else None
    if values is None or not all(isinstance(v, str) for v in values):
        longest = col.max_length if col is not None else None
        return Interval(Fraction(0), Fraction(longest) if longest is not None else None)
    lengths = [len(str(v)) for v in values]  # characters, as both engines count them
    return Interval(Fraction(min(lengths)), Fraction(max(lengths)))


def monotone(node: exp.Expression, v: Interval) -> Interval | None:
    """SQRT, LN, LOG (base 10) or EXP of a value in ``v``, as rewrite/guard.py prints them:
    NULL outside the domain (``None`` when no value of ``v`` is inside it); increasing inside,
    so the ends map to the ends, rounded outward to doubles with a margin far above the
    engines' one-ulp error (None: unbounded on that side)."""
    if isinstance(node, exp.Exp):
        lo = max(v.lo, Fraction(-EXP_LIMIT)) if v.lo is not None else Fraction(-EXP_LIMIT)
        hi = min(v.hi, Fraction(EXP_LIMIT)) if v.hi is not None else Fraction(EXP_LIMIT)
        if lo > hi:
            return None
        return Interval(Fraction(float_down(exp_down(lo))), Fraction(float_up(exp_up(hi))))
    if isinstance(node, exp.Sqrt):
        if v.hi is not None and v.hi < 0:
            return None
        lo = Fraction(float_down(sqrt_down(v.lo))) if v.lo is not None else Fraction(0)
        return Interval(lo, Fraction(float_up(sqrt_up(v.hi))) if v.hi is not None else None)
    if v.hi is not None and v.hi <= 0:  # LN, LOG: x > 0 only
        return None
    base = log_base(node) if isinstance(node, exp.Log) else None
    if isinstance(node, exp.Ln):
        scale = Fraction(1)
    else:  # LOG(x) = LN(x) / LN(10); LOG(b, x) = LN(x) / LN(b): decreasing for b < 1
        b = base if base is not None else Fraction(10)
        scale = 1 / (ln_down(b) if b > 1 else ln_up(b))
    margin = Fraction(1, 10**6)  # covers 1/ln b rounded and LOG's own rounding
    rising = scale > 0

    def end(x: Fraction, up: bool) -> Fraction:
        y = (ln_up(x) if up == rising else ln_down(x)) * scale
        y += (abs(y) * margin + Fraction(1, 10**300)) * (1 if up else -1)
        return Fraction(float_up(y) if up else float_down(y))

    small = v.lo if v.lo is not None and v.lo > 0 else None  # None: LN → −∞ there
    if rising:
        low = end(small, False) if small is not None else None
        return Interval(low, end(v.hi, True) if v.hi is not None else None)
    high = end(small, True) if small is not None else None
    return Interval(end(v.hi, False) if v.hi is not None else None, high)


def _outward(y: float, up: bool) -> Fraction:
    """A float result rounded outward by a relative 1e-9 (and 1e-300): far above the error of
    the float evaluation here (an ulp or two, times |p| <= 64) and of the engines'."""
    f = Fraction(y)
    step = abs(f) * Fraction(1, 10**9) + Fraction(1, 10**300)
    return Fraction(float_up(f + step)) if up else Fraction(float_down(f - step))


def cube_root(v: Interval) -> Interval:
    """CBRT of a value in ``v``: increasing and defined everywhere."""

    def at(x: Fraction, up: bool) -> Fraction:
        return _outward(math.cbrt(float(x)), up)

    return Interval(
        at(v.lo, False) if v.lo is not None else None, at(v.hi, True) if v.hi is not None else None
    )


def fractional_power(v: Interval, p: Fraction) -> Interval | None:
    """x^p for a fractional p, as rewrite/domains.py prints it: x^p where x lies within
    ``power_limits(|p|)`` (so x^p is within [1e-150, 1e150]), 0 for x = 0 when p > 0, NULL
    elsewhere; increasing in x for p > 0 and decreasing for p < 0 (None: always NULL)."""
    limit_lo, limit_hi = (Fraction(t) for t in power_limits(abs(p)))
    lo = max(v.lo, limit_lo) if v.lo is not None else limit_lo
    hi = min(v.hi, limit_hi) if v.hi is not None else limit_hi
    zero = p > 0 and (v.lo is None or v.lo <= 0) and (v.hi is None or v.hi >= 0)
    if lo > hi:
        return Interval(Fraction(0), Fraction(0)) if zero else None
    e = float(p)
    if p > 0:
        low = Fraction(0) if zero else _outward(float(lo) ** e, False)
        return Interval(low, _outward(float(hi) ** e, True))
    return Interval(_outward(float(hi) ** e, False), _outward(float(lo) ** e, True))


def integer_power(v: Interval, n: int) -> Interval | None:
    """x^n for x in ``v`` (n >= 1), as rewrite/domains.py prints it: NULL for |x| beyond
    10^(150/n), so ``v`` is first cut to that range; x^n is monotone on each side of 0, so
    the extremes are among the ends' powers and 0; rounded outward with a margin far above
    the engines' error of an ulp or two."""
    h = Fraction(power_limits(n)[1])
    lo = max(v.lo, -h) if v.lo is not None else -h
    hi = min(v.hi, h) if v.hi is not None else h
    if lo > hi:  # always NULL
        return None
    values = [lo**n, hi**n] + ([Fraction(0)] if lo <= 0 <= hi else [])
    margin = Fraction(1, 10**9)
    low, high = min(values), max(values)
    return Interval(
        Fraction(float_down(low - abs(low) * margin)), Fraction(float_up(high + abs(high) * margin))
    )


def integral(node: exp.Expression, table: Table) -> bool:
    """Is every value of ``node`` an integer (columns of integer type, integer literals)?"""
    if isinstance(node, exp.Paren):
        return integral(node.this, table)
    if isinstance(node, exp.Literal):
        return not node.is_string and node.name.lstrip("-").isdigit()
    if isinstance(node, exp.Column):
        col = table.column(node.name)
        return col is not None and col.type is ColumnType.INTEGER
    if isinstance(node, _RING):
        return integral(node.this, table) and integral(node.expression, table)
    if isinstance(node, exp.Neg):
        return integral(node.this, table)
    return False


def _reciprocal_nonzero(d: Interval, integral: bool) -> Interval:
    if not d.contains_zero():
        return d.reciprocal()
    if integral and d.bounded:
        assert d.lo is not None and d.hi is not None
        m = Fraction(1)
        lo = -1 if d.lo <= -1 else 0
        hi = 1 if d.hi >= 1 else 0
        return Interval(Fraction(lo) * m, Fraction(hi) * m)
    return _UNBOUNDED
