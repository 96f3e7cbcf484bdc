"""The threshold of DP partition selection, from the law of the noise actually drawn.

A group's count of privacy units is released with *discrete* Laplace noise (``release/noise.py``
adds it with ``integer=True``): OpenDP draws Z on the integers with P(Z = z) ∝ p^|z|, p = e^{-1/s},
where s = ``float_up(b)`` is the planned scale b rounded up to a float (``mechanisms/noise.py``)
and converted to a rational exactly by OpenDP. A group of one unit (exact count 1) is kept when
1 + Z > τ for an integer τ ≥ 0, that is Z ≥ τ, with probability

    P(Z ≥ τ) = Σ_{z ≥ τ} (1 − p)/(1 + p) · p^z = p^τ / (1 + p)        (τ ≥ 0).

It must be at most δ/N, where N is the number of groups that one neighbour can hold and the other
not (the union bound of the privacy argument, ``planning/plan.py``'s :class:`Selection`):

    p^τ/(1 + p) ≤ δ/N  ⇔  τ/s ≥ ln(N/δ) − ln(1 + e^{-1/s}).

The threshold is the smallest integer τ ≥ 0 satisfying the right-hand side with ln(N/δ) bounded
above and ln(1 + e^{-1/s}) bounded below (``values.py``): the rational bound implies the exact
inequality, and it exceeds the exact requirement by a relative 10⁻⁹ only, so τ − 1 fails unless
the exact requirement lies within that sliver of an integer. P(Z ≥ τ) grows with s, so the law at
s also bounds the law at the planned b ≤ s.

The continuous-Laplace threshold 1 + b·ln(N/(2δ)) that dpproxy used before does not bound this
law: with the integer comparison it keeps a one-unit group with probability up to
2/(1 + e^{-1/b}) times δ/N (1.46× at b = 1).

Only Laplace noise is used for selection: the planner calibrates the unit counts with
:meth:`Laplace.calibrate` whatever the query's mechanism, so no Gaussian law is needed here.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.values import exp_down, float_up, ln_down, ln_up

__all__ = ["exclusive_groups", "sampled_scale", "selection_threshold"]


def sampled_scale(scale: Fraction) -> Fraction:
    """The scale the sampler draws with: the exact scale rounded up to a float, exactly."""
    return Fraction(float_up(scale))


def exclusive_groups(groups: int, neighbouring: Neighbouring) -> int:
    """How many groups one neighbour can hold and the other not, each with one unit: the G
    groups of the added unit (add/remove), or G that vanish and G that appear (substitution)."""
    return groups * (2 if neighbouring is Neighbouring.SUBSTITUTE else 1)


@lru_cache(maxsize=256)  # a pure function of exact rationals (issue 21: 50–90 µs a call)
def selection_threshold(scale: Fraction, exclusive: int, delta: Fraction) -> int:
    """The smallest integer τ ≥ 0 with ``exclusive`` · P(Z ≥ τ) ≤ ``delta`` for Z discrete
    Laplace at :func:`sampled_scale` of ``scale`` (see the module docstring).

    >>> selection_threshold(Fraction(1), 1, Fraction(7, 100))  # p = 1/e: p³/(1 + p) ≈ 0.036
    3
    >>> selection_threshold(Fraction(1), 1, Fraction(1, 10))  # p²/(1 + p) ≈ 0.0989
    2
    """
    if scale <= 0 or exclusive < 1 or not 0 < delta < 1:
        raise InternalError("partition selection needs a positive scale and 0 < δ < 1")
    s = sampled_scale(scale)
    need = ln_up(Fraction(exclusive) / delta) - ln_down(1 + exp_down(-1 / s))
    return max(0, math.ceil(s * need))
