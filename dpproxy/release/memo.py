"""Products of a plan alone, computed once per plan object rather than once per query.

The engine keeps its checked plans (``Engine._plan``), so a repeated query hands release the
very same :class:`QueryPlan` object again; what release derives from the plan alone (the output
columns, the fixed-point grid of each sum, the notices about NULL intervals) is the same every
time. :func:`per_plan` keeps such a product per plan object. It never sees data: its functions
take the plan only, so nothing that depends on the data — no exact value, no noise, no released
key — is ever kept here.

A plan is a frozen dataclass with slots (no weak references), and hashing it would walk the
whole tree on every lookup; entries are therefore keyed by ``id(plan)`` and hold the plan
itself, so an id cannot be reused by another object while its entry lives, and a hit is
checked to be the same object. At most ``size`` plans are kept per function (the oldest entry
out first). No lock (this layer is pure): a dict's get, set and pop are atomic, two threads
missing at once both compute the same value, and an eviction that races another is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

SIZE = 512  # like the engine's plan cache


def per_plan(fn: Callable[[Any], _T], size: int = SIZE) -> Callable[[Any], _T]:
    """``fn(plan)``, computed once per plan object (see the module's docstring). ``fn`` must be
    a pure function of the plan, and its result must not be mutated by callers."""
    kept: dict[int, tuple[Any, _T]] = {}

    def cached(plan: Any) -> _T:
        key = id(plan)
        hit = kept.get(key)
        if hit is not None and hit[0] is plan:
            return hit[1]
        value = fn(plan)
        kept[key] = (plan, value)
        if len(kept) > size:
            try:
                kept.pop(next(iter(kept)), None)  # the oldest entry
            except (RuntimeError, StopIteration):  # another thread changed the dict meanwhile
                pass
        return value

    cached.__doc__ = fn.__doc__
    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached
