"""Evaluation of post-processing expressions (the select list, HAVING, ORDER BY and window
arguments over ``__agg_i``, ``__key_j`` and ``__win_k``) on released values, with SQL NULL
semantics, and their interval evaluation for the 95% error bounds (``release/postprocess.py``).

The expressions are typed statically (``sql/validate.py``), and their evaluation here is total:
an operation that has no value — an overflow, a rounding or cast of ±∞ or NaN, a text that does
not read as the cast's type (the grammar the rewrite uses for row-level casts,
``rewrite/dialect.py``), an integer out of its type's range — is NULL, never an error, since the
query is already charged when this runs. Integers beyond 64 bits become doubles.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from dpproxy.errors import InternalError
from dpproxy.release.cells import Span
from dpproxy.release.cells import number as _number
from dpproxy.release.functions import apply_function, function_span
from dpproxy.rewrite.dialect import BOOL_TEXT, DATE_TEXT, FLOAT_TEXT, INTEGER_TEXT, MAX_CAST_TEXT
from dpproxy.rewrite.real import REAL, real_value
from dpproxy.sql.postmath import POST_FUNCS

_BINARY: dict[type[exp.Expression], Callable[[Any, Any], Any]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
    exp.Mod: lambda a, b: math.fmod(a, b) if b else None,
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
}


_INT_RANGES = {
    exp.DataType.Type.SMALLINT: 2**15,
    exp.DataType.Type.INT: 2**31,
    exp.DataType.Type.BIGINT: 2**63,
}
_TEXT_GRAMMAR = {
    "integer": re.compile(INTEGER_TEXT),
    "float": re.compile(FLOAT_TEXT, re.IGNORECASE),
    "boolean": re.compile(BOOL_TEXT, re.IGNORECASE),
    "date": re.compile(DATE_TEXT),
}


def _read_text(text: str, kind: str) -> Any:
    """A text as the row-level casts read it (``rewrite/dialect.py``), else None."""
    if len(text) > MAX_CAST_TEXT or not _TEXT_GRAMMAR[kind].search(text):
        return None
    if kind == "boolean":
        return text.lower() in ("t", "true", "y", "yes", "1")
    if kind == "date":
        try:
            day = datetime.date.fromisoformat(text)
        except ValueError:
            return None
        return day if day.year > 0 else None
    if kind == "float":
        return float(text)
    try:
        return Decimal(text.strip()).to_integral_value(ROUND_HALF_UP)
    except InvalidOperation:
        return None


def _cast(v: Any, to: exp.DataType) -> Any:
    """CAST on a released value, total: NULL where the row-level cast would be NULL."""
    t = to.this
    text = isinstance(v, str)
    if t in (*_INT_RANGES, exp.DataType.Type.TINYINT):
        if text:
            v = _read_text(v, "integer")
            if v is None:
                return None
        elif isinstance(v, float):
            if not math.isfinite(v):
                return None
            v = round(v)
        elif not isinstance(v, int | Decimal):
            return None
        limit = _INT_RANGES.get(t, 2**7)
        return int(v) if -limit <= v < limit else None
    if t in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL):
        if text:
            double = _read_text(v, "float")
        else:
            double = float(v) if isinstance(v, int | float) else None
        return real_value(double) if t is REAL else double  # REAL: as rewrite/real.py
    if t in (exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR):
        if isinstance(v, bool):
            return "true" if v else "false"
        return v.isoformat() if isinstance(v, datetime.date) else str(v)
    if t is exp.DataType.Type.BOOLEAN:
        if text:
            return _read_text(v, "boolean")
        return bool(v) if isinstance(v, int) else None
    if t is exp.DataType.Type.DATE:
        if text:
            return _read_text(v, "date")
        return v if isinstance(v, datetime.date) else None
    return v


def evaluate(node: exp.Expression, env: dict[str, Any]) -> Any:
    """Evaluate a post-processing expression with SQL NULL semantics; total (see the module
    docstring): an operation without a value is NULL.

    >>> evaluate(exp.maybe_parse("ROUND(__agg_0 / 2, 1) > 1"), {"__agg_0": 3})
    True
    >>> evaluate(exp.maybe_parse("CAST(__key_0 AS INTEGER)"), {"__key_0": "Male"}) is None
    True
    """
    try:
        return _number(_evaluate(node, env))
    except (ArithmeticError, ValueError):  # overflow, ±∞ or NaN where a number is needed
        return None


def _evaluate(node: exp.Expression, env: dict[str, Any]) -> Any:
    def ev(n: exp.Expression) -> Any:
        return evaluate(n, env)

    if isinstance(node, exp.Column):
        if node.name not in env:
            raise InternalError(f"unbound post-processing name {node.name}")
        return env[node.name]
    if isinstance(node, exp.Paren):
        return ev(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.name
        text = node.name
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        v = ev(node.this)
        return None if v is None else -v
    if isinstance(node, exp.Div):
        a, b = ev(node.this), ev(node.expression)
        if a is None or b is None or b == 0:
            return None
        return a / b
    if type(node) in _BINARY:
        a, b = ev(node.this), ev(node.expression)
        if a is None or b is None:
            return None
        return _BINARY[type(node)](a, b)
    if isinstance(node, exp.And):
        a, b = ev(node.this), ev(node.expression)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(node, exp.Or):
        a, b = ev(node.this), ev(node.expression)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(node, exp.Not):
        v = ev(node.this)
        return None if v is None else not v
    if isinstance(node, exp.Is):
        rhs = node.expression
        holds = ev(node.this) is (rhs.this if isinstance(rhs, exp.Boolean) else None)
        return not holds if node.args.get("negate") else holds  # IS NOT: sqlglot's negate
    if isinstance(node, exp.Between):
        v, lo, hi = ev(node.this), ev(node.args["low"]), ev(node.args["high"])
        return None if None in (v, lo, hi) else lo <= v <= hi
    if isinstance(node, exp.In):
        v = ev(node.this)
        return None if v is None else v in [ev(e) for e in node.expressions]
    if isinstance(node, exp.Case):
        for when in node.args.get("ifs") or []:
            if ev(when.this) is True:
                return ev(when.args["true"])
        default = node.args.get("default")
        return ev(default) if default is not None else None
    if isinstance(node, exp.If):
        if ev(node.this) is True:
            return ev(node.args["true"])
        false = node.args.get("false")
        return ev(false) if false is not None else None
    if isinstance(node, exp.Coalesce):
        for e in [node.this, *node.expressions]:
            v = ev(e)
            if v is not None:
                return v
        return None
    if isinstance(node, exp.Nullif):
        a, b = ev(node.this), ev(node.expression)
        return None if a == b else a
    if isinstance(node, exp.Greatest | exp.Least):
        vals = [v for v in (ev(e) for e in [node.this, *node.expressions]) if v is not None]
        if not vals:
            return None
        return max(vals) if isinstance(node, exp.Greatest) else min(vals)
    if isinstance(node, exp.Abs | exp.Floor | exp.Ceil | exp.Round):
        v = ev(node.this)
        if v is None:
            return None
        if isinstance(node, exp.Abs):
            return abs(v)
        if isinstance(v, float) and not math.isfinite(v):
            return v  # ±∞ and NaN round to themselves
        if isinstance(node, exp.Floor):
            return math.floor(v)
        if isinstance(node, exp.Ceil):
            return math.ceil(v)
        d = node.args.get("decimals")
        digits = int(ev(d)) if d is not None else 0
        return float(round(v, digits)) if d is not None else float(round(v))
    if isinstance(node, exp.Cast):
        v = ev(node.this)
        return None if v is None else _cast(v, node.to)
    if isinstance(node, POST_FUNCS):  # SQRT, LN, LOG, EXP, POWER ...: release/functions.py
        return apply_function(node, [ev(a) for a in _arguments(node)])
    raise InternalError(f"cannot post-process {node.key}")


def evaluate_span(node: exp.Expression, spans: dict[str, Span | None]) -> Span | None:
    """Interval evaluation of arithmetic over aggregates (None where not supported)."""
    if isinstance(node, exp.Column):
        return spans.get(node.name)
    if isinstance(node, exp.Paren):
        return evaluate_span(node.this, spans)
    if isinstance(node, exp.Literal) and not node.is_string:
        v = float(node.name)
        return v, v
    if isinstance(node, exp.Neg):
        s = evaluate_span(node.this, spans)
        return None if s is None else (-s[1], -s[0])
    if isinstance(node, exp.Round | exp.Cast):
        return evaluate_span(node.this, spans)
    if isinstance(node, POST_FUNCS):
        return function_span(node, [evaluate_span(a, spans) for a in _arguments(node)])
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        a, b = evaluate_span(node.this, spans), evaluate_span(node.expression, spans)
        if a is None or b is None:
            return None
        if isinstance(node, exp.Add):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(node, exp.Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(node, exp.Div):
            if b[0] <= 0 <= b[1]:
                return None
            b = (1 / b[1], 1 / b[0])
        c = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return min(c), max(c)
    return None


def _arguments(node: exp.Expression) -> list[exp.Expression]:
    """A function's arguments in order: ``this``, then ``expression`` (LOG's base first) or
    TRUNC's ``decimals``."""
    keys = ("this", "expression", "decimals")
    return [a for a in (node.args.get(k) for k in keys) if a is not None]
