"""A SUM's exact fixed-point total → the double its noise is added to, with no rounding.

The database returns a SUM primitive's total as an integer N on the grid 2^-bits
(``rewrite/fixed.py``); the samplers take doubles. ``float(N·2^-bits)`` rounds once |N| > 2^53
by ulp/2, an amount that grows with the total, so neighbouring totals S, S' would be noised
around centres up to Δ + ulp(S)/2 + ulp(S')/2 apart, not Δ: an unbounded excess. Instead the
total x = N·2^-bits goes through the public map (h = 2^j, T = 2^p·h, p = 53, j from the plan
only: :func:`drawn_release`)

    f(x) = r_p(clamp(x, −T, T)),

r_p rounding to the nearest number with p significant bits (ties to even: for p = 53 exactly
the rounding ``float`` does), computed in Python integers (:func:`guarded`); the result has at
most 53 significant bits and lies within ±T < 2^1024, so the double handed to the sampler *is*
f(x), exactly.

Privacy argument. With c(x) = clamp(x, −T, T), 1-Lipschitz: |c(x)| ≤ T = 2^(j+p), where
numbers of p significant bits are at most 2^j = h apart, so |f(x) − c(x)| ≤ h/2 for every x.
Hence for neighbouring datasets with exact per-group totals x, x': |f(x_g) − f(x'_g)| ≤
|x_g − x'_g| + h on a coordinate that changed, and 0 on one that did not (f is a function).
A neighbour changes at most K coordinates of a release's vector: K = 1 ungrouped; grouped, a
unit touches at most ``stability.groups`` groups, twice that under substitution (the removed
unit's and the added unit's groups). So the L1 distance of f(x) and f(x') is at most
Δ₁ + K·h and the L2 distance at most Δ₂ + √K·h (the excess is a vector of ≤ K entries each
≤ h; √K bounded above exactly, ``values.sqrt_up``). The noise is calibrated for that inflated
sensitivity at the same ε (ρ): the drawn scale is b·(Δ + c·h)/Δ with c = K (Laplace) or a
rational c ≥ √K (Gaussian), exact fractions, then rounded up to a float by the sampler.
ε = Δ₁/b = (Δ₁ + K·h)/b' and ρ = Δ₂²/2σ² = (Δ₂ + c·h)²/2σ'²: the plan's cost holds unchanged.
j is the largest integer with 2^j ≤ Δ/c·2^-12, so the drawn scale is at most (1 + 2^-12)
times the plan's, and T = 2^(j+53) > 2^40·Δ/c (but j ≥ −1074: for a subnormal Δ/c the scale
grows more, see :func:`guard_for`). For Laplace Δ₁/K is at least one row's largest
term (Δ₁ counts every row a unit may have, K only the groups they fall in), so a total is
clamped only beyond about 2^40 (10^12) rows at the bound; the 95% intervals do not cover the
clamping of such a total (docs/mechanisms.md). Below T the value is the one ``float`` gave
before (relative error ≤ 2^-53).

Values stay on the noise lattice: f(x) is x (a multiple of 2^-bits) when |N| ≤ 2^p, else a
multiple of a power of two ≥ 2^-bits; the lattice exponent is ≤ −bits
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
from dpproxy.rewrite.fixed import pow2
from dpproxy.values import sqrt_up

#: h ≤ (Δ/c)·2^-STEP_BITS: the drawn scale is at most (1 + 2^-STEP_BITS) times the plan's.
STEP_BITS = 12
#: T = 2^SPAN_BITS·h, and the value is rounded to SPAN_BITS (≤ 53: a double) significant bits,
#: which within ±T moves it by at most h/2.
SPAN_BITS = 53
_FLOAT_SAFE = 1 << 1023  # float() of a smaller integer neither overflows nor saturates


@dataclass(frozen=True, slots=True)
class SumGuard:
    """The public map of a SUM release: clamp to ±2^(step + ``span``), then round to
    ``span`` significant bits (so to within 2^step/2)."""

    step: int
    span: int = SPAN_BITS


def _floor_log2(n: int, d: int) -> int:
    """The largest e with 2^e ≤ n/d (n, d > 0; not necessarily in lowest terms), exactly:
    2^e ≤ n/d is d·2^e ≤ n."""
    e = n.bit_length() - d.bit_length()
    return e if (d << e <= n if e >= 0 else d <= n << -e) else e - 1


def guard_for(
    sens: Fraction,
    changed: Fraction,
    step_bits: int = STEP_BITS,
    span_bits: int = SPAN_BITS,
) -> SumGuard:
    """The guard of a release whose neighbours move it by ``sens`` (its mechanism's norm) over
    at most ``changed`` (c: K, or a bound on √K) coordinates: 2^j ≤ sens/c·2^-step_bits, but
    never below 2^-1074, the smallest double: a SUM of a subnormal constant such as
    ``SUM(1e-320)`` gets h = 2^-1074, and its drawn scale grows by more than 2^-12 (for
    ``SUM(4.9e-324)``, twice the plan's) — more noise, never less, and still a function of the
    plan alone."""
    if sens.numerator <= 0 or changed.numerator <= 0 or not 0 < span_bits <= 53:
        raise InternalError("a SUM guard needs a positive sensitivity")
    # ⌊log₂(sens/changed)⌋ on the integers of the quotient (no Fraction built: signs above)
    ratio = (sens.numerator * changed.denominator, sens.denominator * changed.numerator)
    j = max(_floor_log2(*ratio) - step_bits, -1074)
    if j + span_bits >= 1024:  # a plan outside a double's range: never data
        raise InternalError("a SUM guard outside the range of a double")
    return SumGuard(j, span_bits)


def _significant(m: int, p: int) -> int:
    """m rounded to the nearest integer with at most p significant bits, ties to even."""
    a = -m if m < 0 else m
    shift = a.bit_length() - p
    if shift <= 0:
        return m
    q, rest = divmod(a, 1 << shift)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and q & 1):
        q += 1
    return -(q << shift) if m < 0 else q << shift


def guarded(total: int, bits: int, g: SumGuard) -> float:
    """f(total·2^-bits) (the module's docstring) as a double, exactly: the clamp and the
    rounding in Python integers on the grid (or, for a clamp below one grid step, in exact
    fractions), then a conversion of at most 53 significant bits, exact: no overflow
    (T < 2^1024, :func:`guard_for`), no subnormal (bits ≤ 1000, ``rewrite/fixed.py``)."""
    e = g.step + g.span + bits  # T = 2^e grid units
    if e < 0 or bits > 1000:
        if g.span < 53:  # float() below rounds to 53 bits: only the production precision
            raise InternalError("a reduced-precision guard below one grid step")
        t = Fraction(2) ** (g.step + g.span)
        x = max(-t, min(t, Fraction(total) / Fraction(2) ** bits))
        return float(x)  # correctly rounded: within h/2 (|x| ≤ T)
    cap = 1 << e
    m = cap if total > cap else -cap if total < -cap else total
    if g.span == SPAN_BITS and -_FLOAT_SAFE < m < _FLOAT_SAFE:
        # float() of an int below 2^1023 rounds it to 53 significant bits, ties to even
        # (correctly rounded, never overflowing): _significant's map, without its Python
        return math.ldexp(float(m), -bits)
    # Built as one exact Fraction, so no intermediate float of the grid units can overflow
    # (they stay far below 2^1023 while rows hold ≤ 2^52 units each, but nothing here needs it)
    r = _significant(m, g.span)
    return float(Fraction(r, 1 << bits) if bits >= 0 else Fraction(r << -bits))


def guarded_many(totals: list[int], bits: int, g: SumGuard) -> list[float]:
    """``[guarded(t, bits, g) for t in totals]``, the same doubles, with the checks that
    depend on the plan alone (the grid, the precision, T) made once for the whole vector, not
    once per value: on the production path (53 bits, T within ±2^1023 grid units, every
    total within ±T) the values are ``ldexp(float(t), -bits)`` — float() rounds each int once
    to 53 significant bits, ties to even (:func:`guarded`'s fast path) — else each value goes
    through :func:`guarded`. (About 1 µs a value saved, 100 values for a 50-group mean.)"""
    e = g.step + g.span + bits
    if e < 0 or bits > 1000 or g.span != SPAN_BITS or e >= 1023 or not totals:
        return [guarded(t, bits, g) for t in totals]
    cap = 1 << e  # < 2^1023: every clamped value is float-safe
    if -cap <= min(totals) and max(totals) <= cap:  # no clamp: one pass
        ldexp = math.ldexp
        return [ldexp(float(t), -bits) for t in totals]
    return [guarded(t, bits, g) for t in totals]


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
    if isinstance(m, Laplace):  # signs by numerator (a Fraction's denominator is positive)
        sens, c = r.sensitivity.l1, k
        if sens.numerator <= 0 or m.scale.numerator <= 0:
            return None, m
        g = guard_for(sens, c)
        return g, Laplace(m.scale * (sens + c * pow2(g.step)) / sens)
    if isinstance(m, Gaussian):
        sens, c = r.sensitivity.l2, sqrt_up(k)
        if sens.numerator <= 0 or m.sigma.numerator <= 0:
            return None, m
        g = guard_for(sens, c)
        return g, Gaussian(m.sigma * (sens + c * pow2(g.step)) / sens)
    raise InternalError("unknown mechanism")
