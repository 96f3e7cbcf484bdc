"""Releases beyond noisy primitives: joint mean, propose-test-release, smooth sensitivity,
the exponential mechanism and sample-and-aggregate.

Each function takes exact values computed by the database, the calibration decided by the
planner (``planning/methods.py``, which holds the privacy argument of each) and a noise source;
it returns a noisy value (or ``None`` where PTR refuses). Nothing else about the data leaves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import lru_cache, wraps
from typing import Any, TypeVar

from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import laplace_sum_half_width
from dpproxy.mechanisms.noise import (
    NoiseSource,
    laplace_on_lattice,
    lattice_exponent,
    lattice_half_width,
)
from dpproxy.release.guard import SumGuard, guard_for, guarded_many
from dpproxy.values import float_up


def joint_mean(
    n: float, total: float, lo: Fraction, hi: Fraction, scale: Fraction, noise: NoiseSource
) -> float:
    """Kulesza–Suresh–Wang: noisy A = Σ(x − lo)/w and B = Σ(hi − x)/w = n − A, one Laplace(scale)
    each; the mean is lo + w·A/(A + B), clipped to [lo, hi] (``reading/003``)."""
    return joint_mean_with_span(n, total, lo, hi, scale, noise)[0]


def joint_mean_with_span(
    n: float, total: float, lo: Fraction, hi: Fraction, scale: Fraction, noise: NoiseSource
) -> tuple[float, tuple[float, float]]:
    """:func:`joint_mean` and a 95% interval for the noiseless mean (post-processing of the
    noisy parts: each part is within b·ln 40 of its true value with probability 97.5%, and the
    mean is increasing in A and decreasing in B)."""
    return joint_release(n, total, lo, hi, scale, noise)[:2]


def joint_release(
    n: float, total: float, lo: Fraction, hi: Fraction, scale: Fraction, noise: NoiseSource
) -> tuple[float, tuple[float, float], float, tuple[float, float]]:
    """:func:`joint_mean_with_span`, and the count A + B read off the same two noisy parts
    with its 95% interval from the exact law of Z_A + Z_B (``planning/derived.py``)."""
    return joint_releases([(n, total)], lo, hi, scale, noise)[0]


def joint_releases(
    inputs: Sequence[tuple[float, float]],
    lo: Fraction,
    hi: Fraction,
    scale: Fraction,
    noise: NoiseSource,
) -> list[tuple[float, tuple[float, float], float, tuple[float, float]]]:
    """:func:`joint_release` for many groups (each an exact ``(n, total)``), with every group's
    two parts noised in **one** call of the noise source.

    Privacy: the same release as one :func:`joint_release` per group. ``noise.laplace`` adds
    independent Laplace(scale) noise to each coordinate of the vector it is given (OpenDP's
    ``make_laplace`` over a vector domain samples every coordinate independently at the one
    scale), so the 2·G noisy parts have exactly the joint law of G separate two-part draws: the
    planner's calibration, which is per part and per group, holds unchanged. What the batch
    saves is OpenDP's fixed cost per call (about 0.1 ms), G − 1 times."""
    if not inputs:
        return []
    w = float(hi - lo)
    parts: list[float] = []
    for n, total in inputs:
        a = (total - n * float(lo)) / w
        parts += (a, n - a)
    noisy = noise.laplace(parts, scale, integer=False)
    return _joint_out(noisy, len(inputs), lo, hi, scale, 0.0)


def joint_releases_on_grid(
    scaled: Sequence[tuple[int, int]],
    bits: int,
    lo: Fraction,
    hi: Fraction,
    scale: Fraction,
    noise: NoiseSource,
    *,
    epsilon: Fraction,
    changed: int,
) -> list[tuple[float, tuple[float, float], float, tuple[float, float]]]:
    """:func:`joint_releases` for parts given exactly on the fixed-point grid 2^-bits
    (``rewrite/fixed.py``): each group's ``(Σ(x − lo), Σ(hi − x))·2^bits`` as integers, which
    ``release/stats.py`` computes when lo and hi lie on that grid.

    Privacy: A = Σ(x − lo)/w and B = Σ(hi − x)/w each with Laplace(b) noise, b = ``scale``, is
    the same release as w·A and w·B each with Laplace(w·b) noise, divided by w afterwards
    (post-processing): the L1 distance of (wA, wB) between neighbours is w times that of
    (A, B), and so is the scale. w·A and w·B are exact multiples of 2^-bits, so they are noised
    on a lattice 2^k·ℤ, k ≤ −bits (``OpenDPNoise.laplace_lattice``, which has the privacy
    argument; k from ``lattice_exponent``, public). The 95% intervals are widened by the
    lattice's step (``lattice_half_width``): by 2^k/w per part, in A's units.

    The parts reach the sampler as exact doubles through the SUM guard (``release/guard.py``:
    clamped to a public ±T = 2^53·h, h = 2^j, and rounded to a double, in integers), which
    moves each part by at most h/2. The planner calibrates the parts so that
    their vector over the groups moves by D ≤ b·ε·w between neighbours (b = ``scale``, ε =
    ``epsilon``, the per-part calibration; ``tests/property/test_lattice_bruteforce.py``);
    a neighbour changes at most C = 2·``changed`` parts (two per group it touches), so the
    guarded vector moves by at most D + C·h, and the noise is drawn at w·b' with
    b' = b + C·h/(ε·w), exactly: (D + C·h)/(w·b') ≤ (b·ε·w + C·h)/(w·b + C·h/ε) = ε. h is
    the largest power of two ≤ b·ε·w/C·2^-12, so b' ≤ b·(1 + 2^-12). The spans are those of
    the law drawn (b')."""
    if not scaled:
        return []
    guard, wide, k, per_part = _grid_law(bits, lo, hi, scale, epsilon, changed)
    # exact doubles, multiples of 2^-bits or of 2^j > 2^-bits, hence of 2^k; (A₁, B₁, A₂, …)
    parts = guarded_many([t for pair in scaled for t in pair], bits, guard)
    drawn = laplace_on_lattice(noise, parts, wide, k)
    wf = float(hi - lo)
    noisy = [x / wf for x in drawn]
    # 2^k/w in A's units, doubled to absorb the rounding of w and of the quotient
    return _joint_out(noisy, len(scaled), lo, hi, per_part, 2 * math.ldexp(1.0, k) / wf)


_T = TypeVar("_T")


def _kept_by_value(fn: Callable[..., _T]) -> Callable[..., _T]:
    """``functools.lru_cache`` for a pure function of a plan's numbers, keyed by their exact
    values with each Fraction as (numerator, denominator) — the same rational, the same key —
    because hashing a Fraction costs 1-4 µs (a modular inverse), several times a query. At
    most 256 entries (then all are dropped and computed again)."""
    kept: dict[tuple[Any, ...], _T] = {}

    @wraps(fn)
    def cached(*args: Any) -> _T:
        key = tuple([(a.numerator, a.denominator) if type(a) is Fraction else a for a in args])
        try:
            return kept[key]
        except KeyError:
            pass
        if len(kept) >= 256:
            kept.clear()
        value = kept[key] = fn(*args)
        return value

    return cached


@_kept_by_value
def _grid_law(
    bits: int, lo: Fraction, hi: Fraction, scale: Fraction, epsilon: Fraction, changed: int
) -> tuple[SumGuard, Fraction, int, Fraction]:
    """:func:`joint_releases_on_grid`'s law, exactly, from the plan's numbers alone (kept:
    about 0.1 ms of Fraction arithmetic a query): the parts' guard, the scale w·b' they are
    drawn at, the lattice exponent k, and b' (the scale in A's units)."""
    w = hi - lo
    c = 2 * changed
    guard = guard_for(scale * epsilon * w, Fraction(c))
    wide = scale * w + c * Fraction(2) ** guard.step / epsilon
    return guard, wide, lattice_exponent(wide, bits), wide / w


@lru_cache(maxsize=256)
def _sum_half_width(scale: Fraction) -> float:
    """The count's 95% half-width (a bisection of 80 steps): a function of the scale alone."""
    return laplace_sum_half_width(scale, 0.05)


def _joint_out(
    noisy: list[float], groups: int, lo: Fraction, hi: Fraction, scale: Fraction, step: float
) -> list[tuple[float, tuple[float, float], float, tuple[float, float]]]:
    """Each group's mean, its span, the count A + B and its span, from the noisy parts
    (A₁, B₁, A₂, B₂, …); ``step`` (0 off a lattice) bounds the lattice's step in A's units."""
    if len(noisy) != 2 * groups:
        raise InternalError("the noise source returned an unexpected number of values")
    h, half, flo, fhi, w, mid = _out_law(lo, hi, scale, step)
    out = []
    # :func:`_mean` inlined, the same operations in the same order (so the same doubles): it
    # runs three times a group, and a call costs more than its arithmetic.
    for na, nb in zip(noisy[0::2], noisy[1::2], strict=True):
        count = na + nb
        x, y = max(na, 0.0), max(nb, 0.0)
        s = x + y
        mean = mid if s <= 0 else min(max(flo + w * x / s, flo), fhi)
        if na - half <= 0:
            low = flo
        else:
            x, y = na - half, nb + half
            x, y = max(x, 0.0), max(y, 0.0)
            s = x + y
            low = mid if s <= 0 else min(max(flo + w * x / s, flo), fhi)
        if nb - half <= 0:
            high = fhi
        else:
            x, y = na + half, nb - half
            x, y = max(x, 0.0), max(y, 0.0)
            s = x + y
            high = mid if s <= 0 else min(max(flo + w * x / s, flo), fhi)
        out.append((mean, (low, high), count, (count - h, count + h)))
    return out


@_kept_by_value
def _out_law(
    lo: Fraction, hi: Fraction, scale: Fraction, step: float
) -> tuple[float, float, float, float, float, float]:
    """:func:`_joint_out`'s constants, from the plan's numbers alone: the count's and each
    part's 95% half-width (widened by the lattice step, if any), lo, hi, w and the middle."""
    h = _sum_half_width(scale)
    half = float(scale) * math.log(40)
    if step:
        h, half = lattice_half_width(h, step, 2), lattice_half_width(half, step)
    return h, half, float(lo), float(hi), float(hi - lo), float((lo + hi) / 2)


def _mean(x: float, y: float, lo: float, hi: float, w: float, mid: float) -> float:
    """lo + w·A/(A + B) at noisy parts A = ``x``, B = ``y`` (each at least 0), clipped to
    [lo, hi]; ``mid`` when both are 0. :func:`_joint_out` reads each group's mean and its span
    (the parts each within ``half`` of their true values, the mean increasing in A and
    decreasing in B) off it, with the bounds as floats converted once per call, not per group."""
    x, y = max(x, 0.0), max(y, 0.0)
    if x + y <= 0:
        return mid
    return min(max(lo + w * x / (x + y), lo), hi)


def ptr(
    value: float,
    distance: int | None,
    test_scale: Fraction,
    threshold: Fraction,
    release_scale: Fraction,
    noise: NoiseSource,
) -> float | None:
    """Propose-test-release: release ``value`` + Laplace(release_scale) when the distance to
    instability (an integer) plus *discrete* Laplace(test_scale) noise exceeds ``threshold``
    (``planning/methods.py`` derives it from that law); ``None`` otherwise. ``distance`` ``None``
    means no dataset exceeds the proposed bound (the test always passes)."""
    if distance is not None:
        (noisy,) = noise.laplace([float(distance)], test_scale, integer=True)
        if noisy <= float_up(threshold):
            return None
    (released,) = noise.laplace([value], release_scale, integer=False)
    return released


def smooth(value: float, sensitivity: Fraction, epsilon: Fraction, noise: NoiseSource) -> float:
    """Smooth sensitivity with Laplace noise of scale 2S/ε (NRS 2007, Lemma 2.6 / ``reading/000``
    definition 19)."""
    (released,) = noise.laplace([value], 2 * sensitivity / epsilon, integer=False)
    return released


def exponential_index(scores: Sequence[Fraction], scale: Fraction, noise: NoiseSource) -> int:
    """The exponential mechanism over candidates with the given scores (lower is better).

    Scores are scaled by their common denominator to integers, which floats hold exactly up to
    2⁵³, so no rounding changes their sensitivity; the scale is scaled alike."""
    common = math.lcm(*(Fraction(s).denominator for s in scores))
    exact = [Fraction(s) * common for s in scores]
    if any(abs(s) >= 2**53 for s in exact):
        raise InternalError("quantile scores too large for exact selection")
    return noise.noisy_min_index([float(s) for s in exact], scale * common)


def sample_and_aggregate(
    chunks: Sequence[float | None],
    lo: Fraction,
    hi: Fraction,
    scale: Fraction,
    noise: NoiseSource,
) -> float:
    """Sample-and-aggregate (``reading/000`` definition 20): each chunk's statistic clipped to
    [lo, hi] (an empty chunk or a NULL statistic counts as the middle of the range), their
    mean, and Laplace(scale) noise."""
    mid = float((lo + hi) / 2)
    clipped = [mid if v is None else min(max(float(v), float(lo)), float(hi)) for v in chunks]
    mean = sum(clipped) / len(clipped)
    (released,) = noise.laplace([mean], scale, integer=False)
    return released
