"""One released cell's post-processing, and a bare column's (``release/postprocess.py``).

A bare output column (an aggregate or a key read by name) is read for every kept group in one
pass, with the per-cell calls inlined for the common types (a double, an int within 64 bits):
exactly what :func:`number` and :func:`half_width` return for each cell, without a Python call
per cell (a 50-group answer has 100 to 200 cells). Pure post-processing of released values:
no privacy cost.
"""

from __future__ import annotations

import math
from typing import Any

from dpproxy.errors import InternalError

Span = tuple[float, float]
_I64_LO, _I64_HI = -(2**63), 2**63


def number(v: Any) -> Any:
    """An integer beyond 64 bits as a double (±∞ beyond doubles); anything else as it is."""
    if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    return v


def half_width(span: Span | None, value: Any) -> float | None:
    """A cell's 95% error bound from its span: None without one, or for a value that is not
    a number."""
    if span is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return max(value - span[0], span[1] - value, 0.0)


def bare_column(name: str, envs: list[dict[str, Any]]) -> list[Any]:
    """``number(env[name])`` for every group's bindings: a float, or an int within 64 bits,
    as it is (what :func:`number` returns for them), anything else through it."""
    out = []
    for env in envs:
        try:
            v = env[name]
        except KeyError:
            raise InternalError(f"unbound post-processing name {name}") from None
        t = type(v)
        if not (t is float or (t is int and _I64_LO <= v < _I64_HI)):
            v = number(v)
        out.append(v)
    return out


def bare_half_widths(
    name: str, groups: list[tuple[dict[str, Any], dict[str, Span | None]]], values: list[Any]
) -> list[float | None]:
    """``half_width(spans.get(name), v)`` for every group's spans and value of a bare column,
    inlined for a float or an int (not a bool: ``type`` is exact); anything else through it."""
    out: list[float | None] = []
    for (_, spans), v in zip(groups, values, strict=True):
        span = spans.get(name)
        t = type(v)
        if span is None or not (t is float or t is int):
            out.append(half_width(span, v))
        else:
            out.append(max(v - span[0], span[1] - v, 0.0))
    return out
