r"""The staircase mechanism on a lattice: ε-DP noise with a smaller median than the Laplace's.

**Law.** On the lattice 2^k·ℤ, the noise is 2^k·D with D an integer of law P(D = d) ∝ w(|d|),
where, for n = g·M + j with g ≥ 0 and 0 ≤ j < M,

    w(n) = β^g if j < r,   w(n) = β^(g+1) if j ≥ r,      β = e^{−1/s}.

M ≥ 1 (:attr:`Staircase.shift`) is the most one neighbour can move the value, in lattice
units; 1 ≤ r ≤ M (:attr:`Staircase.inner`) is the inner part of each step; s
(:attr:`Staircase.scale`) sets the decay per step. This is the discrete staircase of Geng and
Viswanath ("The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf.
Theory 2016; Geng, Kairouz, Oh, Viswanath 2015 for the integer case): a Laplace whose density
is flattened into steps of width M, each step a high inner part and a low outer part.

**Privacy argument.** w is non-increasing in n and w(n + M) = β·w(n) for every n ≥ 0 (a
step further multiplies by β; the inner/outer pattern repeats). Take values x, x' on the
lattice with |x − x'| ≤ M·2^k, so the shift t = (x' − x)·2^-k is an integer with |t| ≤ M, and
any output y on the lattice (other outputs have probability 0 under both; the normaliser is
the same, as the law is a translation of one fixed law). With d = (y − x)·2^-k and
d' = d − t: ||d'| − |d|| ≤ |t| ≤ M. If |d'| ≤ |d| then w(|d'|) ≥ w(|d|); else
w(|d'|) ≥ w(|d| + M) = β·w(|d|) by monotonicity. Either way P(y | x) / P(y | x') =
w(|d|)/w(|d'|) ≤ 1/β = e^{1/s}: the release is (1/s)-DP for neighbours within M units. For a
vector, each coordinate gets independent noise: when one neighbour changes at most K
coordinates, each within M units, the ratio is a product of at most K such factors (the others
are 1), so the release is (K/s)-DP; ``release/noise.py`` takes 1/s ≤ ε/K. Rounding the result
to a double is post-processing.

**Why.** For the same ε and the same bound on a neighbour's move Δ = M·2^k, the Laplace's
median |noise| is ln 2·Δ/ε (0.693Δ at ε = 1); the staircase with r/M = γ = 1/(e^ε − 1) has
P(|D| < r) ≈ 1/2, so a median of about γΔ (0.582Δ at ε = 1: 0.84×). Its tail at whole steps is
the Laplace's: P(|D| ≥ g·M) ≈ β^g = e^{−gε}. It helps only where γ < ln 2/ε, i.e. ε above
about 0.7, and from ε ≈ 3 on its 95% bound is wider than the Laplace's (1.12× at ε = 3.5,
1.25× at 4): ``release/noise.py`` draws it only where its median is smaller and its 95% bound
at most 1% wider (:func:`staircase_for`).

**Sampling, exactly** (:func:`draw_units`). The level g is geometric, P(g) = (1 − β)·β^g: the
first non-negative value of OpenDP's discrete Laplace of scale s (P(Z = z) ∝ β^|z|, so
P(Z = g | Z ≥ 0) = (1 − β)β^g). Within the level, j is uniform on [0, M) from the operating
system's CSPRNG (:func:`secrets.randbelow`), kept when j < r and otherwise kept with
probability β (a geometric ≥ 1: P(G ≥ 1) = β), else redrawn: accepted j has P(j) ∝ 1 (j < r)
or β (j ≥ r). n = gM + j then has P(n) ∝ w(n), and a fair sign makes it symmetric, with
D = −0 rejected (the whole draw starts again) so that d = 0 keeps weight w(0), not 2w(0).
Every step is an exact draw; the number of draws used depends on the draws alone, never on
the data.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.errors import InternalError
from dpproxy.values import at_most, float_up

__all__ = ["Staircase", "draw_units", "staircase_for"]

#: The staircase is drawn only where its median is below this share of the Laplace's ...
GAIN = 0.98
#: ... and its 95% bound at most this multiple of the Laplace's (from ε ≈ 0.73 to 3 the ratio
#: wavers between 0.89 and 1.008 with where the 95% point falls in a step; 1.12 at ε = 3.5).
WIDER = 1.01
#: Only ε (a coordinate's share) in [1/2, 4] is tried: below about 0.73 the staircase has no
#: inner part to gain from, above about 3.03 its 95% bound is too wide; within, β = e^{−1/s} is
#: far from 0 and 1, so no float of :func:`staircase_for` overflows, underflows or divides by 0.
LOWEST, HIGHEST = Fraction(1, 2), Fraction(4)


@dataclass(frozen=True, slots=True)
class Staircase:
    """Additive staircase noise on the lattice 2^``k``·ℤ (the module's law): steps of
    ``shift`` units, inner parts of ``inner`` units, decay e^{−1/``scale``} per step.
    ``laplace_scale`` is the Laplace scale it replaces, drawn by a noise source without a
    staircase sampler (the deterministic sources of the tests)."""

    shift: int
    inner: int
    scale: Fraction
    k: int
    laplace_scale: Fraction

    def __post_init__(self) -> None:
        if not (1 <= self.inner <= self.shift and self.scale.numerator > 0):
            raise InternalError("a staircase needs 1 ≤ inner ≤ shift and a positive scale")

    @property
    def epsilon(self) -> Fraction:
        """1/s: the ε of a neighbour that moves one coordinate by at most ``shift`` units."""
        return 1 / self.scale

    def _parts(self) -> tuple[float, float, float, float]:
        """β, ln β, L = r + (M − r)β (one step's weight over β^g) and W, the total weight
        Σ_d w(|d|) = 2L/(1 − β) − 1, in floats."""
        ln_b = -1 / float(self.scale)
        b = math.exp(ln_b)
        m, r = float(self.shift), float(self.inner)
        step = r + (m - r) * b
        return b, ln_b, step, 2 * step / -math.expm1(ln_b) - 1

    def tail(self, n: int) -> float:
        """P(|D| ≥ n) for an integer n ≥ 1 (in lattice units), in floats:
        2·β^g·(the rest of step g from j + the steps after it)/W."""
        if n <= 0:
            return 1.0
        b, ln_b, step, total = self._parts()
        g, j = divmod(n, self.shift)
        m, r = self.shift, self.inner
        rest = (r - j) + (m - r) * b if j < r else (m - j) * b
        after = b * step / -math.expm1(ln_b)
        return math.exp(math.log(2.0) + g * ln_b + math.log(rest + after) - math.log(total))

    def half_width(self, alpha: float, *, integer: bool = False) -> float:
        """The smallest w with P(|noise| > w) ≤ α, in closed form: the smallest n ≥ 1 with
        P(|D| ≥ n) ≤ α (:meth:`tail`) lies in the last step g whose start still has
        P(|D| ≥ gM) = c·β^g > α, where the rest of the step's weight falls linearly in j (in
        two pieces, the inner and the outer part). Returned as n·2^k, one lattice step above
        the law's t = n − 1, widened by a relative 10⁻⁹ (far above the floats' rounding
        here), so never narrower than the law's."""
        if not 0 < alpha < 1:
            raise InternalError("the level must lie in (0, 1)")
        b, ln_b, step, total = self._parts()
        m, r = self.shift, self.inner
        after = b * step / -math.expm1(ln_b)
        c = 2 * (step + after) / total  # P(|D| ≥ gM) = c·β^g
        g = max(0, math.ceil(math.log(alpha / c) / ln_b) - 1) if c > alpha else 0
        # within step g: P(|D| ≥ gM + j) ≤ α ⇔ rest(j) ≤ room
        room = alpha * total / (2 * math.exp(g * ln_b)) - after
        outer = (m - r) * b
        if room >= outer:
            j = max(0, math.ceil(r + outer - room))
        else:
            j = min(m, max(r, math.ceil(m - room / b)))
        n = max(1, g * m + j)
        try:
            return math.nextafter(math.ldexp(float(n), self.k) * (1 + 1e-9), math.inf)
        except OverflowError:  # beyond the doubles (a tiny α on a step near 2^1000)
            return math.inf

    @property
    def std(self) -> float:
        """√E[noise²] of the continuous staircase with the same steps (γ = r/M, Δ = M·2^k),
        which the lattice law approaches as M grows (M ≥ 2^40 where it is drawn)."""
        b, _, _, _ = self._parts()
        gamma = self.inner / self.shift
        delta = math.ldexp(float(self.shift), self.k)
        weight = gamma + (1 - gamma) * b
        mean_u = (gamma * gamma / 2 + (1 - gamma) * b * (1 + gamma) / 2) / weight
        square_u = (gamma**3 / 3 + (1 - gamma) * b * (1 + gamma + gamma * gamma) / 3) / weight
        mean_g = b / (1 - b)
        square_g = b * (1 + b) / (1 - b) ** 2
        return delta * math.sqrt(square_g + 2 * mean_g * mean_u + square_u)

    @property
    def median(self) -> float:
        """About the median |noise|: r·2^k (P(|D| < r) is within 3/M of 1/2 at the chosen r)."""
        return math.ldexp(float(self.inner), self.k)


def _units(x: Fraction, k: int) -> tuple[int, int]:
    """x·2^-k as an unreduced pair (n, d) of integers with d > 0: its value n/d."""
    n, d = x.numerator, x.denominator
    return (n << -k, d) if k <= 0 else (n, d << k)


def staircase_for(
    epsilon: Fraction, move: Fraction, k: int, laplace_scale: Fraction, span: Fraction
) -> Staircase | None:
    """The staircase that replaces a Laplace(``laplace_scale``) release on the lattice 2^k,
    whose neighbours move one coordinate by at most ``move``, whose values lie within
    ±``span`` and whose plan charges ``epsilon`` for it; None where it would not lower the
    median |noise| by 2% (:data:`GAIN`) or ε is outside [1/2, 4] (:data:`LOWEST`, where it
    never does), where its 95% bound would be more than 1% wider than
    the Laplace's (:data:`WIDER`; ε above about 3: the median-optimal steps put most of the
    mass of the first step in its low outer part), or where a value's lattice units or the move
    could reach 2^1000 (then the exact conversion to units, or a bound, could overflow a
    double).

    The decay: s is the smallest double ≥ 1/ε, so 1/s ≤ ε (never more privacy loss than
    charged). M = ⌊move·2^-k⌋ (a neighbour's move is a whole number of lattice units).
    r = ⌈M/(e^{1/s} − 1)⌉ (the median-optimal step; any r in [1, M] is private, so floats
    suffice). A function of the plan alone."""
    # Exact comparisons on the integers of the fractions (denominators are positive), and
    # x·2^-k as an integer pair (:func:`_units`): the values of the Fraction expressions
    # ``LOWEST <= ε <= HIGHEST``, ``span/2^k >= 2^1000``, ``⌊move/2^k⌋``, ``⌈γ·M⌉``, without
    # building a Fraction for each (issue 21: a first query works out its laws while planning)
    if not (at_most(LOWEST, epsilon) and at_most(epsilon, HIGHEST)) or move.numerator <= 0:
        return None  # outside, it never wins; inside, every float below is finite and nonzero
    n, d = _units(span, k)
    if n >= d << 1000 or move.numerator >= move.denominator << 1000:
        return None
    s = Fraction(float_up(1 / epsilon))
    n, d = _units(move, k)
    shift = n // d
    if not 1 <= shift < 2**1000:  # a step in units a double holds (|values| ≤ span ≪ it)
        return None
    gamma = 1 / math.expm1(1 / float(s))
    g_n, g_d = gamma.as_integer_ratio()  # γ exactly: ⌈γ·M⌉ on integers
    inner = max(1, min(shift, -(-g_n * shift // g_d)))
    if inner >= shift:
        return None
    law = Staircase(shift, inner, s, k, laplace_scale)
    b = float(laplace_scale)
    if law.median >= GAIN * math.log(2) * b:
        return None
    # against the Laplace's 95% bound on the lattice (``lattice_half_width``)
    if law.half_width(0.05) > WIDER * (b * math.log(20) + math.ldexp(1.0, k)):
        return None
    return law


def draw_units(
    law: Staircase,
    n: int,
    integers: Callable[[float, int], list[int]],
    below: Callable[[int], int] = secrets.randbelow,
) -> list[int]:
    """``n`` independent draws of D (the module's exact sampler). ``integers(s, m)`` returns m
    independent draws of the discrete Laplace P(Z = z) ∝ e^{−|z|/s} (OpenDP's); ``below(m)``
    a uniform integer in [0, m) from a CSPRNG. The pool of Laplace draws is used once each
    and dropped with the call; it is filled about as far as the draws still to make need
    (about 2.2 a value at ε = 1: OpenDP's exact sampler costs 7-10 µs a value)."""
    s, m, r = float(law.scale), law.shift, law.inner
    pool: list[int] = []

    def geometric() -> int:
        nonlocal pool
        while True:
            if not pool:
                pool = integers(s, 2 * (n - len(out)) + 3)
            z = pool.pop()
            if z >= 0:
                return z

    out: list[int] = []
    while len(out) < n:
        g = geometric()
        while True:
            j = below(m)
            if j < r or geometric() >= 1:
                break
        d = g * m + j
        negative = below(2)
        if d == 0 and negative:
            continue
        out.append(-d if negative else d)
    return out
