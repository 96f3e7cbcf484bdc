"""The range of a row measure's values as the database computes them, read off its SQL tree.

A fixed-point SUM (``rewrite/fixed.py``) clamps each row's scaled value onto the grid's
interval with two comparisons, unless the value is proved to lie there already. For a bare
clamped column ``fixed.exact_range`` proves it; :func:`row_range` proves it for arithmetic
over clamped columns too (``SUM(amount / 100 + age)``, ``AVG(amount * 0.5)``): it walks the
row measure *as built* (``rewrite/rows.row_measure``: clamps, guards and tamings
written, before ``rewrite/noop_clamps.py`` leaves out what the rows make no-ops, which gives
every row the same value) and returns an interval of doubles [L, H] that holds every
non-NULL value any row can give, on DuckDB, PostgreSQL and Spark, or ``None``.

Why it holds. Each node gets an interval that holds every value it can take:

* *Exact integers* (an integer literal, an integer column bound by a clamp, integer ``+ − ×``
  that no engine computes as a double) are intervals of Python integers, below 2⁵³ in
  magnitude, so each converts to a double exactly.
* *Doubles.* A node every engine computes as a DOUBLE (``guard.is_double``; any ``/``, which
  is real division on every engine, ``rewrite/dialect.py``) applies one IEEE operation,
  rounded to nearest, to its operands converted to doubles. Rounding is monotone, and ``+``,
  ``−``, ``×``, ``÷`` (by a divisor whose interval excludes 0) are monotone in each operand
  over a box whose extremes lie at its corners: the rounded results at the corners bound the
  rounded result anywhere in the box. Python's float arithmetic is that same IEEE arithmetic.
  A literal that is not exactly a double is widened by one unit in the last place on each
  side, whatever the engine's conversion.
* *A CASE* takes the value of one of its branches: the hull of theirs (a missing ELSE is
  NULL). In the ELSE of a clamp, ``CASE WHEN v < a THEN … WHEN v > b THEN … ELSE … END``
  (either order), v is NULL or within [a, b]: every other value, ±inf included, took a WHEN,
  NaN the ``>`` one since it compares above every number on all three engines; so inside that
  ELSE each occurrence of v (the same tree) has [a, b].
* ``NULLIF(x, y)`` is x or NULL; parentheses, ``−`` and ``ABS`` are exact; a cast to a
  double converts; a cast to an integer type keeps an exact integer interval; a cast to REAL
  (``rewrite/real.real_rounding``) rounds each end to a REAL (rounding is monotone; a value
  beyond the largest REAL is NULL there, NaN and ±inf come only from such operands).

Anything else (a column not bound by a clamp, a function, a divisor that may be 0, a result
beyond ±10³⁰⁰) gives ``None``, and the comparisons stay.
"""

from __future__ import annotations

import math
import re
import typing
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.rewrite.guard import is_double
from dpproxy.rewrite.real import REAL, round_to_real, rounded_operand

_EXACT = 2**53  # integers below this convert to doubles exactly
LIMIT = 1e300  # a range beyond this is not used (no overflow anywhere near)
_WHOLE = re.compile(r"^[0-9]+$")
_DOUBLES = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
_INTEGERS = (
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
)


class _Range(NamedTuple):
    """Every value the node can take lies in [lo, hi]; ``exact``: integers (Python ints)."""

    lo: float | int
    hi: float | int
    exact: bool


_Env = tuple[tuple[exp.Expression, _Range], ...]  # (expression, its range) in a clamp's ELSE


def row_range(tree: exp.Expression, table: Table) -> tuple[float, float] | None:
    """[L, H]: doubles between which every non-NULL value of ``tree`` lies (module docstring),
    or ``None`` when that is not proved."""
    r = _range(tree, table, ())
    if r is None:
        return None
    lo, hi = float(r.lo), float(r.hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) > LIMIT:
        return None
    return lo, hi


def _range(node: exp.Expression, table: Table, env: _Env) -> _Range | None:
    kind = type(node)
    for bound, r in env:  # the class first: a tree's equality hashes it whole
        if kind is type(bound) and node == bound:
            return r
    if kind is exp.Literal:
        return _literal(typing.cast(exp.Literal, node))
    if kind is exp.Paren:
        return _range(node.this, table, env)
    if isinstance(node, exp.Case):
        return _case(node, table, env)
    if isinstance(node, exp.Neg):
        inner = _range(node.this, table, env)
        return None if inner is None else _Range(-inner.hi, -inner.lo, inner.exact)
    if isinstance(node, exp.Abs):
        inner = _range(node.this, table, env)
        if inner is None:
            return None
        if inner.lo >= 0:
            return inner
        if inner.hi <= 0:
            return _Range(-inner.hi, -inner.lo, inner.exact)
        return _Range(0, max(-inner.lo, inner.hi), inner.exact)
    if isinstance(node, exp.Cast):
        return _cast(node, table, env)
    if isinstance(node, exp.Nullif):
        return _range(node.this, table, env)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        return _arithmetic(node, table, env)
    return None


def _literal(node: exp.Literal) -> _Range | None:
    return None if node.is_string else _number_text(str(node.this))


@lru_cache(maxsize=1024)
def _number_text(text: str) -> _Range | None:
    """A number literal's interval, from its text (kept: the same few texts recur)."""
    if _WHOLE.match(text):
        v = int(text)
        return _Range(v, v, True) if v < _EXACT else None
    try:
        f = float(text)
        exact = Fraction(text) == Fraction(f)
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(f):
        return None
    if exact:
        return _Range(f, f, False)
    return _Range(math.nextafter(f, -math.inf), math.nextafter(f, math.inf), False)


def _cast(node: exp.Cast, table: Table, env: _Env) -> _Range | None:
    operand = rounded_operand(node)  # CAST(... AS REAL), rewrite/real.py
    inner = _range(node.this if operand is None else operand, table, env)
    if inner is None:
        return None
    to = node.to.this
    if operand is not None or to is REAL:  # rounded to a REAL: monotone
        return _Range(round_to_real(float(inner.lo)), round_to_real(float(inner.hi)), False)
    if to in _DOUBLES:
        return _Range(float(inner.lo), float(inner.hi), False)
    if to in _INTEGERS and inner.exact:
        return inner
    return None


def _hull(ranges: list[_Range]) -> _Range:
    exact = all(r.exact for r in ranges)
    lo = min(r.lo for r in ranges)
    hi = max(r.hi for r in ranges)
    return _Range(lo, hi, True) if exact else _Range(float(lo), float(hi), False)


def _case(node: exp.Case, table: Table, env: _Env) -> _Range | None:
    ifs = node.args.get("ifs") or []
    values: list[_Range] = []
    for branch in ifs:
        r = _range(branch.args["true"], table, env)
        if r is None:
            return None
        values.append(r)
    default = node.args.get("default")
    if default is not None:
        bound = _clamped(ifs, table, env)
        r = _range(default, table, env if bound is None else (bound, *env))
        if r is None:
            return None
        values.append(r)
    return _hull(values) if values else None


def _clamped(
    ifs: list[exp.Expression], table: Table, env: _Env
) -> tuple[exp.Expression, _Range] | None:
    """``(v, [a, b])`` when the WHENs hold ``v < a`` and ``v > b`` (number literals a ≤ b):
    in the ELSE, v lies in [a, b] (module docstring)."""
    low: tuple[exp.Expression, _Range] | None = None
    high: tuple[exp.Expression, _Range] | None = None
    for branch in ifs:
        cond = branch.this
        if type(cond) is exp.LT and low is None:
            a = _number(cond.expression)
            if a is not None:
                low = (cond.this, a)
        elif type(cond) is exp.GT and high is None:
            b = _number(cond.expression)
            if b is not None:
                high = (cond.this, b)
    if low is None or high is None or low[0] != high[0]:
        return None
    a, b = low[1], high[1]
    if a.lo > b.hi:
        return None
    return low[0], _Range(a.lo, b.hi, a.exact and b.exact)


def _number(node: exp.Expression) -> _Range | None:
    """A number literal's interval, or that of ``-`` one."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        r = _literal(node.this)
        return None if r is None else _Range(-r.hi, -r.lo, r.exact)
    if isinstance(node, exp.Literal):
        return _literal(node)
    return None


def _arithmetic(node: exp.Expression, table: Table, env: _Env) -> _Range | None:
    a = _range(node.this, table, env)
    b = _range(node.expression, table, env) if a is not None else None
    if a is None or b is None:
        return None
    division = isinstance(node, exp.Div)
    if not division and not is_double(node, table):
        if not (a.exact and b.exact):  # a decimal's arithmetic: not modelled here
            return None
        return _integers(node, a, b)
    x = (float(a.lo), float(a.hi))
    y = (float(b.lo), float(b.hi))
    if isinstance(node, exp.Add):
        lo, hi = x[0] + y[0], x[1] + y[1]
    elif isinstance(node, exp.Sub):
        lo, hi = x[0] - y[1], x[1] - y[0]
    else:
        if division and y[0] <= 0 <= y[1]:
            return None
        corners = [(p / q) if division else (p * q) for p in x for q in y]
        lo, hi = min(corners), max(corners)
    if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) > LIMIT:
        return None
    return _Range(lo, hi, False)


def _integers(node: exp.Expression, a: _Range, b: _Range) -> _Range | None:
    """``+ − ×`` of exact integers, exactly; ``None`` past 2⁵³."""
    ai, bi = (int(a.lo), int(a.hi)), (int(b.lo), int(b.hi))
    if isinstance(node, exp.Add):
        lo, hi = ai[0] + bi[0], ai[1] + bi[1]
    elif isinstance(node, exp.Sub):
        lo, hi = ai[0] - bi[1], ai[1] - bi[0]
    else:
        corners = [p * q for p in ai for q in bi]
        lo, hi = min(corners), max(corners)
    if max(abs(lo), abs(hi)) >= _EXACT:
        return None
    return _Range(lo, hi, True)
