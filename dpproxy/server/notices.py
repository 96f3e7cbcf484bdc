"""The NOTICEs a release sends over the wire: its cost and the budget left, and why an
interval function (``DP_INTERVAL_LOW``/``_HIGH``) is NULL where it is."""

from __future__ import annotations

from dpproxy.values import Cost


def _cost(c: Cost) -> str:
    return f"ε={float(c.epsilon):.6g}, δ={float(c.delta):.3g}"


def release_notice(cost: Cost, remaining: Cost, cached: bool) -> str:
    """``dpproxy: this answer cost ε=1, δ=0; budget left ε=9, δ=1e-05`` (or, for the answer
    released earlier to the same query, ``... came from the cache, no cost; ...``)."""
    what = "came from the cache, no cost" if cached else f"cost {_cost(cost)}"
    return f"dpproxy: this answer {what}; budget left {_cost(remaining)}"
