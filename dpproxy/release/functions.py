"""Math functions computed on released values (``sql/postmath.py`` says what is accepted and
why it is post-processing).

PostgreSQL's values, with its errors replaced by NULL (the decision is made on the released
value alone, so it is post-processing too):

* ``SQRT(x)``: NULL for x < 0; ``CBRT(x)``: the real cube root of any x;
* ``LN(x)``, ``LOG(x)`` (base 10): NULL for x <= 0; ``LOG(b, x)`` = ln x / ln b, NULL for
  b <= 0, b = 1 or x <= 0;
* ``EXP(x)``: NULL when e^x is beyond the largest double; 0 when it is below the smallest
  (PostgreSQL's numeric gives 0 there too);
* ``POWER(a, b)``: NULL for 0 to a negative power, a negative a to a non-integer power, and a
  result beyond the largest double;
* ``SIGN(x)``: −1, 0 or 1; ``PI()``: π;
* ``TRUNC(x [, d])``: x cut toward zero to d decimals (d < 0: to tens, hundreds, …), on the
  decimal text of the double as PostgreSQL's numeric would cut it.

Every value is a double (released aggregates are). ±∞ and NaN never reach these functions as
released values; should one, the result is what Python's ``math`` gives or NULL, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_DOWN, Decimal
from typing import Any

from sqlglot import exp

Span = tuple[float, float]


def apply_function(node: exp.Expression, args: Sequence[Any]) -> float | None:
    """``node`` (a function of ``sql/postmath.py``'s POST_FUNCS) of the evaluated ``args``
    (its ``this`` then its ``expression``); NULL in, NULL out; total.

    >>> apply_function(exp.Sqrt(this=exp.column("a")), [-1.0]) is None
    True
    >>> apply_function(exp.Log(this=exp.column("b"), expression=exp.column("x")), [2, 8])
    3.0
    """
    if isinstance(node, exp.Pi):
        return math.pi
    if any(a is None for a in args):
        return None
    try:
        value = _apply(node, [float(a) for a in args])
    except (ArithmeticError, ValueError):  # overflow; a domain math refuses
        return None
    if value is not None and math.isnan(value) and not any(map(math.isnan, args)):
        return None  # NaN from numbers: no value
    return value


def _apply(node: exp.Expression, a: list[float]) -> float | None:
    x = a[0]
    if isinstance(node, exp.Sqrt):
        return math.sqrt(x) if x >= 0 else None
    if isinstance(node, exp.Cbrt):
        return math.cbrt(x)
    if isinstance(node, exp.Ln):
        return math.log(x) if x > 0 else None
    if isinstance(node, exp.Log):
        if len(a) == 1:
            return math.log10(x) if x > 0 else None
        base, y = a
        if base <= 0 or base == 1 or y <= 0:
            return None
        return math.log(y) / math.log(base)
    if isinstance(node, exp.Exp):
        return math.exp(x)  # OverflowError beyond the largest double: NULL
    if isinstance(node, exp.Pow):
        base, power = a
        if base == 0 and power < 0:
            return None
        if base < 0 and not power.is_integer():
            return None
        result = math.pow(base, power)
        return result if math.isfinite(result) or not math.isfinite(base) else None
    if isinstance(node, exp.Sign):
        return float((x > 0) - (x < 0))
    if isinstance(node, exp.Trunc):
        if not math.isfinite(x):
            return x
        digits = int(a[1]) if len(a) > 1 else 0
        cut = Decimal(repr(x)).scaleb(digits).to_integral_value(ROUND_DOWN).scaleb(-digits)
        return float(cut)
    return None


_MONOTONE = (exp.Sqrt, exp.Cbrt, exp.Ln, exp.Exp)


def function_span(node: exp.Expression, spans: Sequence[Span | None]) -> Span | None:
    """An interval that holds ``node`` of values within ``spans`` (the arguments' 95%
    intervals), or None where none is derived: a non-decreasing function maps the ends when
    the whole interval lies in its domain; SIGN and TRUNC map their ends; others give None."""
    if isinstance(node, exp.Pi):
        return math.pi, math.pi
    if any(s is None for s in spans):
        return None
    monotone = (*_MONOTONE, exp.Sign, exp.Trunc)
    if isinstance(node, monotone) or (isinstance(node, exp.Log) and len(spans) == 1):
        s = spans[0]
        assert s is not None
        rest = [r[0] for r in spans[1:] if r is not None]  # TRUNC's literal digits
        lo, hi = apply_function(node, [s[0], *rest]), apply_function(node, [s[1], *rest])
        return None if lo is None or hi is None else (lo, hi)
    return None
