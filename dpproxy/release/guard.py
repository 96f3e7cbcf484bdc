"""A SUM's exact fixed-point total → the double its noise is added to, with no rounding.

The database returns a SUM primitive's total as an integer N on the grid 2^-bits
(``rewrite/fixed.py``); the samplers take doubles. ``float(N·2^-bits)`` rounds once |N| ≥ 2^53,
by a data-dependent amount, so neighbouring totals S, S' would be noised around centres up to
Δ + ulp(S)/2 + ulp(S')/2 apart, not Δ. Instead the total x = N·2^-bits goes through the
public map (h = 2^j, T = 2^53·h (2^span·h), j from the plan only: :func:`drawn_release`)

    f(x) = x                          when |N| ≤ 2^53 and |x| ≤ T (x is a double already),
    f(x) = clamp(round_h(x), −T, T)   otherwise,

computed exactly in integers (:func:`guarded`): round_h rounds to the nearest multiple of h
(halves up), and every multiple of h in [−T, T] is m·2^j with |m| ≤ 2^53, an exact double, so
the value handed to the sampler *is* f(x), exactly.

Privacy argument. With c(x) = clamp(x, −T, T), 1-Lipschitz: |f(x) − c(x)| ≤ h/2 for every x
(round_h moves a value by at most h/2 and commutes with the clamp, T being a multiple of h;
in the first case c(x) = x). Hence for neighbouring datasets with exact per-group totals
x, x': |f(x_g) − f(x'_g)| ≤ |x_g − x'_g| + h on a coordinate that changed, and 0 on one that
did not (f is a function). A neighbour changes at most K coordinates of a release's vector:
K = 1 ungrouped; grouped, a unit touches at most ``stability.groups`` groups, twice that under
substitution (the removed unit's and the added unit's groups). So the L1 distance of f(x) and
f(x') is at most Δ₁ + K·h and the L2 distance at most Δ₂ + √K·h (the rounding errors form a
vector of ≤ K entries each ≤ h; √K bounded above exactly, ``values.sqrt_up``). The noise is
calibrated for that inflated sensitivity at the same ε (ρ): the drawn scale is
b·(Δ + c·h)/Δ with c = K (Laplace) or a rational c ≥ √K (Gaussian), exact fractions, then
rounded up to a float by the sampler. ε = Δ₁/b = (Δ₁ + K·h)/b' and
ρ = Δ₂²/2σ² = (Δ₂ + c·h)²/2σ'²: the plan's cost holds unchanged. j is the largest integer
with 2^j ≤ Δ/c·2^-12, so the drawn scale is at most (1 + 2^-12) times the plan's, and
T = 2^(j+53) > 2^40·Δ/c. For Laplace Δ₁/K is at least one row's largest term (Δ₁ counts
every row a unit may have, K only the groups they fall in), so a total is clamped only
beyond about 2^40 (10^12) rows at the bound; the 95% intervals do not cover the clamping of
such a total (docs/mechanisms.md).

Values stay on the noise lattice: f(x) is a multiple of 2^-bits, or of 2^j > 2^-bits when it
was rounded, and the lattice exponent is ≤ −bits
(``mechanisms/noise.py``, :func:`~dpproxy.mechanisms.noise.lattice_exponent`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace, Mechanism
from dpproxy.planning.plan import QueryPlan, Release
from dpproxy.values import sqrt_up

#: h ≤ (Δ/c)·2^-STEP_BITS: the drawn scale is at most (1 + 2^-STEP_BITS) times the plan's.
STEP_BITS = 12
#: T = 2^SPAN_BITS·h: every multiple of h within ±T is an exact double while SPAN_BITS ≤ 53.
SPAN_BITS = 53


@dataclass(frozen=True, slots=True)
class SumGuard:
    """The public map of a SUM release: round to 2^``step``, clamp to ±2^(step + ``span``)."""

    step: int
    span: int = SPAN_BITS
    keep: int = 53  # |N| ≤ 2^keep (≤ 2^53, an exact double) within ±T is left as it is


def _floor_log2(x: Fraction) -> int:
    """The largest e with 2^e ≤ x (x > 0), exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def guard_for(
    sens: Fraction,
    changed: Fraction,
    step_bits: int = STEP_BITS,
    span_bits: int = SPAN_BITS,
    keep_bits: int = 53,
) -> SumGuard:
    """The guard of a release whose neighbours move it by ``sens`` (its mechanism's norm) over
    at most ``changed`` (c: K, or a bound on √K) coordinates: 2^j ≤ sens/c·2^-step_bits."""
    if sens <= 0 or changed <= 0 or not 0 < span_bits <= 53 or not 0 <= keep_bits <= 53:
        raise InternalError("a SUM guard needs a positive sensitivity")
    j = _floor_log2(sens / changed) - step_bits
    if j < -1074 or j + span_bits >= 1024:  # a plan outside a double's range: never data
        raise InternalError("a SUM guard outside the range of a double")
    return SumGuard(j, span_bits, keep_bits)


def guarded(total: int, bits: int, g: SumGuard) -> float:
    """f(total·2^-bits) (the module's docstring) as a double, exactly: either total·2^-bits
    with |total| ≤ 2^53 (bits ≤ 1074 − 53 and < 1024: ``rewrite/fixed.py``), or the integer
    m with f = m·2^step computed in Python integers, |m| ≤ 2^span ≤ 2^53, and m·2^step a
    double (2^-1074 ≤ 2^step, m·2^step < 2^1024: :func:`guard_for`)."""
    s = g.step + bits  # h in grid units is 2^s
    cap = 1 << g.span  # T in units of h
    if s <= 0:
        m = total << -s  # on the grid, hence a multiple of h: round_h is the identity
    elif abs(total) <= 1 << g.keep and abs(total) <= cap << s:
        return math.ldexp(float(total), -bits)  # exact, within ±T: f(x) = x = c(x)
    else:
        m = (total + (1 << (s - 1))) >> s  # ⌊x/h + 1/2⌋: nearest, halves up
    m = cap if m > cap else -cap if m < -cap else m
    return math.ldexp(float(m), g.step)


def changed_coordinates(plan: QueryPlan) -> int:
    """K: how many groups' totals one neighbour can change (the module's docstring)."""
    if not plan.query.keys:
        return 1
    k = plan.stability.groups
    return 2 * k if plan.neighbouring is Neighbouring.SUBSTITUTE else k


def drawn_release(plan: QueryPlan, r: Release) -> tuple[SumGuard | None, Mechanism]:
    """A release's guard (None: not a SUM, or nothing to protect) and the law its noise is
    actually drawn from: the plan's, inflated for the guard's rounding (module docstring).
    A function of the plan alone."""
    m = r.mechanism
    if r.primitive.kind is not PrimitiveKind.SUM:
        return None, m
    k = Fraction(changed_coordinates(plan))
    if isinstance(m, Laplace):
        sens, c = r.sensitivity.l1, k
        if sens <= 0 or m.scale <= 0:
            return None, m
        g = guard_for(sens, c)
        return g, Laplace(m.scale * (sens + c * Fraction(2) ** g.step) / sens)
    if isinstance(m, Gaussian):
        sens, c = r.sensitivity.l2, sqrt_up(k)
        if sens <= 0 or m.sigma <= 0:
            return None, m
        g = guard_for(sens, c)
        return g, Gaussian(m.sigma * (sens + c * Fraction(2) ** g.step) / sens)
    raise InternalError("unknown mechanism")
