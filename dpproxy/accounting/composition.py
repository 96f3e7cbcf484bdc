"""The tightest valid (ε, δ) of a history of releases.

Budgets are *checked* with basic composition (ε's and δ's add: simple, exact and valid for
any mix of mechanisms). What has been spent is *reported* as tightly as can be proved: the
Gaussian releases of a history compose in zero-concentrated DP (ρ's add; Bun–Steinke 2016,
Lemma 2.3) and are converted to (ε, δ) once, at the sum of their δ's, which for more than one
Gaussian release is smaller than the sum of their separate conversions; the other releases
(pure ε-DP, or (ε, δ) from PTR, smooth sensitivity and partition selection) add basically.
δ is the same either way. Both bounds are valid, so the smaller ε is reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from dpproxy.mechanisms.base import zcdp_to_approx
from dpproxy.values import Cost


def tightest(costs: Iterable[Cost]) -> Cost:
    """The tightest (ε, δ) this module can prove for the composition of ``costs``.

    >>> from fractions import Fraction as F
    >>> g = Cost(F(1), F(1, 10**6), F(1, 50))  # a Gaussian release (ρ = 0.02)
    >>> basic = Cost(F(4), F(4, 10**6))
    >>> tightest([g, g, g, g]).epsilon < basic.epsilon
    True
    """
    eps = delta = pure_eps = rho = gauss_delta = Fraction(0)
    for c in costs:
        eps += c.epsilon
        delta += c.delta
        if c.rho:
            rho += c.rho
            gauss_delta += c.delta
        else:
            pure_eps += c.epsilon
    if rho and 0 < gauss_delta < 1:
        eps = min(eps, pure_eps + zcdp_to_approx(rho, gauss_delta))
    return Cost(eps, delta, rho)
