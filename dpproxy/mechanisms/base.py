"""Mechanisms: Laplace (pure ε-DP, L1) and Gaussian (ρ-zCDP, L2), with exact cost arithmetic.

Privacy arguments (``../shared/reading/001_*``):

* **Laplace.** If every pair of neighbouring datasets moves the released vector by at most Δ₁ in
  L1 norm, adding independent Laplace(b) noise to each coordinate is (Δ₁/b)-DP (Dwork, McSherry,
  Nissim, Smith 2006, Thm 1). The discrete Laplace on integers has the same guarantee
  (Ghosh–Roughgarden–Sundararajan 2012; Canonne–Kamath–Steinke 2020).
* **Gaussian.** If the L2 movement is at most Δ₂, independent N(0, σ²) noise is ρ-zCDP with
  ρ = Δ₂²/(2σ²) (Bun–Steinke 2016, Prop. 1.6; the discrete Gaussian likewise, CKS 2020 Thm 4),
  and ρ-zCDP implies (ρ + 2√(ρ ln(1/δ)), δ)-DP for every δ > 0 (Bun–Steinke Prop. 1.3).

Which pairs are neighbours (add/remove one privacy unit, or substitute one) is fixed by the
schema and enters through the sensitivities computed in :mod:`dpproxy.analysis.sensitivity`.
All costs are exact fractions; irrational steps round toward more privacy loss or more noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.errors import InternalError, PrivacyParameterError
from dpproxy.mechanisms.staircase import Staircase
from dpproxy.values import Sensitivity, ln_down, ln_up, sqrt_down, sqrt_up

__all__ = [
    "Gaussian",
    "Laplace",
    "Mechanism",
    "Sensitivity",
    "Staircase",
    "approx_to_zcdp",
    "laplace_sum_half_width",
    "zcdp_to_approx",
]


@dataclass(frozen=True, slots=True)
class Laplace:
    """Additive Laplace noise of scale ``scale`` (discrete on integer-valued releases)."""

    scale: Fraction

    def __post_init__(self) -> None:
        if self.scale.numerator < 0:  # a Fraction's sign (its ``<`` is slow)
            raise InternalError("negative Laplace scale")

    def epsilon(self, sens: Sensitivity) -> Fraction:
        """ε = Δ₁ / b, exactly; 0 when nothing can change, infinite (error) without noise."""
        if not sens.l1:  # a Fraction's truth is its numerator's: no comparison with 0
            return Fraction(0)
        if not self.scale:
            raise InternalError("a zero-scale Laplace cannot release a sensitive value")
        return sens.l1 / self.scale

    @classmethod
    def calibrate(cls, sens: Sensitivity, epsilon: Fraction) -> Laplace:
        """The smallest scale b with Δ₁/b ≤ ε (exact inverse of :meth:`epsilon`)."""
        if epsilon.numerator <= 0:  # its sign (``<=`` on a Fraction is an ABC check first)
            raise PrivacyParameterError("ε must be positive")
        return cls(sens.l1 / epsilon)

    def half_width(self, alpha: float, *, integer: bool = False) -> float:
        """The smallest w with P(|noise| > w) ≤ α.

        Continuous Laplace: w = b·ln(1/α). Discrete Laplace (integer releases), with
        p = e^{-1/b}: P(|X| ≥ m) = 2p^m/(1 + p), so w = m − 1 for the smallest such m ≤ α;
        at small b this is wider than the continuous formula (b = 1, α = 0.05: 3, not 2.996).
        """
        b = float(self.scale)
        if b == 0:
            return 0.0
        if not integer:
            return b * math.log(1 / alpha)
        # ln p = −1/b exactly: no log(p), which is log(0) once e^{-1/b} underflows (b < 1/745)
        # and a division by log(1) = 0 once it rounds to 1 (b > 1e16).
        p = math.exp(-1 / b)
        steps = -b * math.log(alpha * (1 + p) / 2)
        if not math.isfinite(steps):
            return math.inf
        return float(max(math.ceil(steps) - 1, 0))

    @property
    def std(self) -> float:
        return float(self.scale) * math.sqrt(2)


@dataclass(frozen=True, slots=True)
class Gaussian:
    """Additive Gaussian noise N(0, σ²) (discrete on integer-valued releases)."""

    sigma: Fraction

    def __post_init__(self) -> None:
        if self.sigma < 0:
            raise InternalError("negative Gaussian sigma")

    def rho(self, sens: Sensitivity) -> Fraction:
        """ρ = Δ₂² / (2σ²), exactly."""
        if sens.l2 == 0:
            return Fraction(0)
        if self.sigma == 0:
            raise InternalError("a zero-sigma Gaussian cannot release a sensitive value")
        return sens.l2 * sens.l2 / (2 * self.sigma * self.sigma)

    @classmethod
    def calibrate(cls, sens: Sensitivity, rho: Fraction) -> Gaussian:
        """σ = Δ₂ / √(2ρ), rounded up so that :meth:`rho` ≤ the given ρ."""
        if rho <= 0:
            raise PrivacyParameterError("ρ must be positive")
        sigma = sens.l2 / sqrt_down(2 * rho) if sens.l2 else Fraction(0)
        return cls(sigma)

    def half_width(self, alpha: float, *, integer: bool = False) -> float:
        """The two-sided (1 − α) quantile of |noise|: z·σ for the continuous Gaussian; for the
        discrete Gaussian the sub-Gaussian tail P(|X| ≥ t) ≤ 2e^{-t²/2σ²} (CKS 2020, Cor. 9)."""
        s = float(self.sigma)
        if integer:
            return math.ceil(s * math.sqrt(2 * math.log(2 / alpha)))
        from statistics import NormalDist  # the continuous Gaussian only (fast start)

        return s * NormalDist().inv_cdf(1 - alpha / 2)

    @property
    def std(self) -> float:
        return float(self.sigma)


#: A law a release is drawn from. Plans calibrate Laplace or Gaussian noise; a Laplace SUM may
#: be drawn as the staircase with the same ε (``release/noise.py``, ``mechanisms/staircase.py``).
Mechanism = Laplace | Gaussian | Staircase


def laplace_sum_half_width(scale: Fraction, alpha: float) -> float:
    """The smallest w with P(|Z₁ + Z₂| > w) ≤ α for Z₁, Z₂ independent Laplace(b), b = ``scale``
    (a count read off a joint mean, ``planning/derived.py``).

    The sum's density is (1 + |s|/b)·e^{−|s|/b}/(4b), so P(|Z₁ + Z₂| > u·b) = e^{−u}(1 + u/2),
    decreasing in u; the root is bracketed by bisection and the upper end returned (rounding
    toward a wider interval). α = 0.05 gives u ≈ 4.11, against 2·ln 40 ≈ 7.4 for a union bound
    over the two parts.

    >>> round(laplace_sum_half_width(Fraction(1), 0.05), 3)
    4.113
    """
    if not 0 < alpha < 1:
        raise InternalError("the level must lie in (0, 1)")
    b = float(scale)
    if b == 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while math.exp(-hi) * (1 + hi / 2) > alpha:
        lo, hi = hi, hi * 2
    for _ in range(80):
        mid = (lo + hi) / 2
        if math.exp(-mid) * (1 + mid / 2) > alpha:
            lo = mid
        else:
            hi = mid
    return math.nextafter(b * hi, math.inf)


def zcdp_to_approx(rho: Fraction, delta: Fraction) -> Fraction:
    """An upper bound on ε such that ρ-zCDP implies (ε, δ)-DP: ρ + 2√(ρ ln(1/δ))."""
    if rho == 0:
        return Fraction(0)
    if not 0 < delta < 1:
        raise PrivacyParameterError("converting zCDP to (ε, δ) needs 0 < δ < 1")
    return rho + 2 * sqrt_up(rho * ln_up(1 / delta))


def approx_to_zcdp(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest ρ (rounded down) whose (ε, δ) conversion stays within ``epsilon``.

    Solves ρ + 2√(ρL) = ε with L = ln(1/δ): √ρ = √(ε + L) − √L; checked with the conservative
    forward conversion and shrunk until it passes.
    """
    if epsilon <= 0 or not 0 < delta < 1:
        raise PrivacyParameterError("the Gaussian mechanism needs ε > 0 and 0 < δ < 1")
    big_l = ln_down(1 / delta)
    root = sqrt_down(epsilon + big_l) - sqrt_up(big_l)
    rho = root * root if root > 0 else epsilon * epsilon / (8 * ln_up(1 / delta) + 8)
    # Round down to about 60 significant bits to keep the fractions small.
    bits = 60 - (rho.numerator.bit_length() - rho.denominator.bit_length())
    if bits > 0:
        rho = Fraction(math.floor(rho * 2**bits), 2**bits)
    while zcdp_to_approx(rho, delta) > epsilon:
        rho = rho * Fraction(999_999, 1_000_000)
    return rho
