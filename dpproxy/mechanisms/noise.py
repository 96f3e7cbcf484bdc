"""Where noise comes from: the :class:`NoiseSource` protocol and its production implementation.

Production noise is drawn by OpenDP (``opendp.measurements.make_laplace`` / ``make_gaussian``):
exact discrete sampling from the operating system's cryptographic generator, immune to the
floating-point attack of Mironov (2012) that naive ``numpy.random.laplace`` falls to. Counts use
the integer (discrete) distributions; sums use OpenDP's float mechanisms, which sample a discrete
distribution on a fine grid and round — at OpenDP's default grid 2^-1074, or, for values that lie on
a coarser public lattice 2^k·ℤ (the fixed-point sums of ``rewrite/fixed.py``), on that lattice
(:meth:`OpenDPNoise.laplace_lattice`, about 4x faster per value). Scales arrive as exact fractions
and are rounded *up* to a float, so the noise is never smaller than planned.

Deterministic sources for tests live in ``tests/``, never here.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from fractions import Fraction
from functools import lru_cache, wraps
from itertools import repeat
from types import ModuleType
from typing import Any, Protocol

from dpproxy.errors import InternalError
from dpproxy.mechanisms.staircase import Staircase, draw_units
from dpproxy.values import float_up


class NoiseSource(Protocol):
    """Adds noise to a vector of exact values. ``scale``/``sigma`` are exact; round them up.

    The production sources also have ``laplace_lattice`` and ``staircase``; a source without
    them gets those releases as ``laplace`` at the scale drawn (``release/noise.py``), still
    private, but a staircase release's reported 95% bound is then the staircase's, within a few
    percent of that Laplace's (``mechanisms/staircase.py``)."""

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        """Add independent Laplace(scale) noise (discrete Laplace on integers if ``integer``)."""
        ...

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        """Add independent N(0, sigma²) noise (discrete Gaussian on integers if ``integer``)."""
        ...

    def noisy_min_index(self, scores: Sequence[float], scale: Fraction) -> int:
        """The index of the smallest score after independent noise of the given scale
        (report-noisy-min): ε-DP with ε = 2Δ/scale when every score moves by at most Δ."""
        ...


#: Set by the ``dpproxy`` command for its one-shot subcommands (``query``, ``explain``): the
#: process is ours alone, single-threaded, and never uses numpy. See :func:`_without_numpy`.
ONE_SHOT_PROCESS = False


@contextmanager
def _without_numpy() -> Iterator[None]:
    """Keep OpenDP from importing numpy, in a one-shot ``dpproxy`` command only.

    OpenDP imports numpy when it can (``opendp.typing`` maps numpy scalar types; its vector
    conversions check for ``numpy.ndarray``), but treats it as optional: without it every call
    dpproxy makes works the same, since dpproxy passes Python lists of ints and floats only.
    numpy's import is about 80 ms of CPU, a sixth of a small ``dpproxy query``
    (benchmarks/STARTUP.md). So while OpenDP is imported or called in such a process and numpy
    is not already loaded, ``sys.modules["numpy"]`` is ``None`` (which makes ``import numpy``
    raise ImportError, the case OpenDP handles) and the entry is removed afterwards. Never in a
    library or server process: other code in it may import numpy at the same time, and OpenDP
    used directly by the caller should see numpy's types.
    """
    if not ONE_SHOT_PROCESS or "numpy" in sys.modules:
        yield
        return
    sys.modules["numpy"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if sys.modules.get("numpy", 0) is None:
            del sys.modules["numpy"]


def _deprecated(*args: Any, **kwargs: Any) -> Any:
    """Stands in for ``deprecated.sphinx.deprecated`` while OpenDP is imported (see below):
    the function it marks calls the real decorator's wrapper, imported at its first call."""
    if len(args) == 1 and callable(args[0]) and not kwargs:  # used bare: @deprecated
        return _deprecated()(args[0])

    def mark(func: Any) -> Any:
        @wraps(func)
        def deferred(*a: Any, **k: Any) -> Any:
            real = importlib.import_module("deprecated.sphinx").deprecated
            return real(*args, **kwargs)(func)(*a, **k)

        return deferred

    return mark


_DEPRECATED_STAND_IN = ModuleType("deprecated.sphinx", "Stands in while OpenDP is imported.")
_DEPRECATED_STAND_IN.deprecated = _deprecated  # type: ignore[attr-defined]


@contextmanager
def _deprecated_on_demand() -> Iterator[None]:
    """Let OpenDP's sampler modules import ``deprecated.sphinx`` without loading it, in a
    one-shot ``dpproxy`` command only (like :func:`_without_numpy`).

    Each OpenDP module imports that decorator at its top; of the functions dpproxy imports,
    it marks one, ``make_report_noisy_max_gumbel``, which dpproxy never calls. Importing it
    costs about 0.03 s of CPU, a twentieth of a small ``dpproxy query``: it imports ``wrapt``,
    which imports ``asyncio`` and ``ssl``. So while OpenDP is imported,
    ``sys.modules["deprecated.sphinx"]`` is a stand-in whose decorator defers the real one to
    the marked function's first call (which then warns as it always does); the entry is
    removed afterwards, so any later import gets the real module. (OpenDP imports more of
    itself on its first calls, e.g. ``opendp._data`` at the first domain built: hence
    :func:`_one_shot_imports` around the calls too.)
    """
    if not ONE_SHOT_PROCESS or "deprecated.sphinx" in sys.modules:
        yield
        return
    sys.modules["deprecated.sphinx"] = _DEPRECATED_STAND_IN
    try:
        yield
    finally:
        if sys.modules.get("deprecated.sphinx") is _DEPRECATED_STAND_IN:
            del sys.modules["deprecated.sphinx"]


@contextmanager
def _one_shot_context() -> Iterator[None]:
    with _without_numpy(), _deprecated_on_demand():
        yield


_NOTHING = nullcontext()


def _one_shot_imports() -> AbstractContextManager[None]:
    """Around OpenDP's imports and calls (some of its calls import more of OpenDP). Outside a
    one-shot process both guards do nothing, so a shared no-op context stands in for them:
    entering two generator-based contexts costs about 5 µs, on every noise call."""
    return _one_shot_context() if ONE_SHOT_PROCESS else _NOTHING


@lru_cache(maxsize=1)
def _opendp() -> Any:
    """OpenDP's constructors, imported at the first noise drawn (never at dpproxy's import).

    The four modules the samplers need rather than ``opendp.prelude``, which also imports
    OpenDP's scikit-learn, polars and MBI extras: a third of OpenDP's import time, for code
    dpproxy never calls (benchmarks/STARTUP.md).
    """
    with _one_shot_imports():
        return _import_opendp()


def _import_opendp() -> Any:
    from types import SimpleNamespace

    import opendp.domains as domains
    import opendp.measurements as measurements
    import opendp.measures as measures
    import opendp.metrics as metrics
    from opendp.mod import enable_features

    enable_features("contrib")
    return SimpleNamespace(
        m=measurements,
        vector_domain=domains.vector_domain,
        atom_domain=domains.atom_domain,
        l1_distance=metrics.l1_distance,
        l2_distance=metrics.l2_distance,
        linf_distance=metrics.linf_distance,
        max_divergence=measures.max_divergence,
    )


@lru_cache(maxsize=1)
def _invoker() -> Any:
    """:func:`dpproxy.mechanisms.opendp_ffi.invoke` where this OpenDP has what it needs, else
    None (then measurements are called through OpenDP's public interface)."""
    _opendp()
    from dpproxy.mechanisms import opendp_ffi

    return opendp_ffi.invoke if opendp_ffi.AVAILABLE else None


def _call(m: Any, values: list[int] | list[float], integer: bool) -> list[Any]:
    """``m(values)``, a measurement over ``Vec<i64>`` (``integer``) or ``Vec<f64>``, through
    OpenDP's C interface with the types known (``mechanisms/opendp_ffi.py``: the same sampler
    called with the same arguments, without OpenDP's per-call type inference, about 60 µs a
    call); floats come back as floats."""
    invoke = _invoker()
    if invoke is None:  # pragma: no cover - another OpenDP version
        public = m(values)
        return list(public) if integer else [float(x) for x in public]
    drawn: list[Any] = invoke(m, values, integer)
    return drawn


_SCALES: dict[tuple[int, int], float] = {}


def _scale_up(scale: Fraction) -> float:
    """:func:`float_up` of a plan's noise scale, kept: a query's scales are the plan's, the
    same at every run, and rounding one exactly costs a few µs of Fraction arithmetic. Kept
    by (numerator, denominator), which is the same rational exactly: hashing a Fraction (an
    lru_cache key) costs 1-4 µs (a modular inverse), hashing the pair of ints a fraction of
    that. At most 256 scales (then all are dropped and computed again)."""
    key = (scale.numerator, scale.denominator)
    up = _SCALES.get(key)
    if up is None:
        if len(_SCALES) >= 256:
            _SCALES.clear()
        up = _SCALES[key] = float_up(scale)
    return up


@lru_cache(maxsize=256)
def _measurement(kind: str, scale: float, integer: bool) -> Any:
    dp = _opendp()
    if integer:
        domain = dp.vector_domain(dp.atom_domain(T="i64"))
        metric = dp.l1_distance(T="i64") if kind == "laplace" else dp.l2_distance(T="i64")
    else:
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        metric = dp.l1_distance(T=float) if kind == "laplace" else dp.l2_distance(T=float)
    make = dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian
    return make(domain, metric, scale=scale)


#: Below this magnitude OpenDP's i64 draw is the discrete Laplace value itself.
T = 2**62


def discrete_laplace(scale: float, n: int, threshold: int = T) -> list[int]:
    """``n`` independent draws of the discrete Laplace law P(D = d) ∝ e^{-|d|/scale}, exactly,
    as Python integers: OpenDP's i64 sampler, each value of magnitude ≥ ``threshold``
    completed through the memoryless tail (``dpproxy/prefetch.py`` has the argument).
    ``threshold`` is a parameter for the tests only (≤ 2^62: below it, OpenDP's saturated
    output is exact)."""
    if not 0 < threshold <= T:
        raise ValueError("the threshold must lie in (0, 2^62]")
    m = _measurement("laplace", scale, True)
    drawn: list[int] = _call(m, [0] * n, True)
    if all(-threshold < v < threshold for v in drawn):
        return drawn
    more = _stream(m)
    return [v if -threshold < v < threshold else _tail(v, more, threshold) for v in drawn]


def _stream(m: Any) -> Iterator[int]:
    """Further independent draws of the same law, eight per OpenDP call."""
    while True:
        yield from _call(m, [0] * 8, True)


def _tail(v: int, more: Iterator[int], threshold: int) -> int:
    """D given that the drawn value ``v`` says |D| ≥ threshold, with D's sign: ±(threshold + G)."""
    g = 0
    while True:
        step = next(x for x in more if x >= 0)  # geometric: the first non-negative draw
        if step < threshold:
            g += step
            break
        g += threshold  # that draw is ≥ the threshold: memoryless again
    return (1 if v > 0 else -1) * (threshold + g)


@lru_cache(maxsize=256)
def _lattice_measurement(scale: float, k: int, size: int) -> Any:
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale, k=k)


#: The lattice is at least this many binary orders of magnitude finer than the noise scale:
#: its step is then at most a few units in the last place of a double at the noise's scale,
#: and the integer scale b·2^-k stays within what ``dpproxy/prefetch.py`` draws ahead (2^56)
#: unless the values' own grid is finer.
LATTICE_MARGIN = 50
#: OpenDP's float Laplace refuses a granularity below 2^-1074 (the smallest subnormal).
MIN_LATTICE_EXPONENT = -1074


@lru_cache(maxsize=256)
def lattice_exponent(scale: Fraction, bits: int) -> int:
    """The exponent k of the lattice 2^k·ℤ a Laplace(``scale``) draw on values that are
    multiples of 2^-``bits`` is made on (:meth:`OpenDPNoise.laplace_lattice`): the values' own
    grid or finer (k ≤ −bits), and 2^k ≤ scale·2^-50, so the lattice's step is far below both
    the noise and a double's precision at its scale — but never below 2^-1074, the finest step
    OpenDP accepts (and every double's last bit): a scale under about 2^-1014 (a SUM of a
    subnormal constant) is drawn on 2^-1074, still ≤ −bits since ``rewrite/fixed.py`` caps
    bits at 1000. A function of the plan only (the scale and the fixed-point grid), never of
    the data."""
    if scale <= 0:
        raise ValueError("the lattice needs a positive scale")
    # 2^e ≤ scale: numerator ≥ 2^(bits−1), denominator < 2^bits
    e = scale.numerator.bit_length() - scale.denominator.bit_length() - 1
    return max(min(-bits, e - LATTICE_MARGIN), MIN_LATTICE_EXPONENT)


def lattice_half_width(width: float, step: float, terms: int = 1) -> float:
    """A (1 − α) bound ``width`` of |L| (the sum of ``terms`` independent continuous Laplace
    variables, whose law the caller's ``width`` is computed for), widened to hold for the
    same sum drawn on a lattice of step h ≤ ``step`` instead: ``width`` + terms·step, rounded
    up.

    Why: with E₁, E₂ independent exponentials of mean b and h = 2^k, h·⌊E/h⌋ is geometric on
    hℤ with ratio p = e^{-h/b}, and the difference of two such is exactly the lattice Laplace
    P(Z = hz) ∝ p^|z| that :meth:`OpenDPNoise.laplace_lattice` draws, while E₁ − E₂ is the
    continuous Laplace(b). Coupled that way |Z − (E₁ − E₂)| < h, so P(|ΣZ| > w + terms·h) ≤
    P(|ΣL| > w)."""
    return math.nextafter(width + terms * step, math.inf)


def laplace_on_lattice(
    noise: NoiseSource, values: Sequence[float], scale: Fraction, k: int
) -> list[float]:
    """``noise.laplace_lattice`` where the source has it (the production source), else its
    continuous ``laplace`` (test sources, which add no noise or a fixed shift)."""
    draw = getattr(noise, "laplace_lattice", None)
    if draw is None:
        return noise.laplace(values, scale, integer=False)
    drawn: list[float] = draw(values, scale, k)
    return drawn


def lattice_double(units: int, k: int) -> float:
    """units·2^k rounded to the nearest double (ties to even; ±inf beyond the largest)."""
    try:
        return units / (1 << -k) if k <= 0 else float(units << k)
    except OverflowError:
        return math.inf if units > 0 else -math.inf


def scaled_to_lattice(values: Sequence[float], k: int) -> list[float] | None:
    """``math.ldexp(v, -k)`` of each value when every one is an integral double, else None
    (a value off the lattice, NaN, ±inf, or a product beyond the doubles): one pass of C-level
    maps, the common case of :meth:`OpenDPNoise.laplace_lattice`'s check and of
    ``dpproxy/prefetch.lattice_units_many``."""
    try:
        scaled = list(map(math.ldexp, values, repeat(-k, len(values))))
    except (OverflowError, TypeError):
        return None
    return scaled if all(map(float.is_integer, scaled)) else None


@lru_cache(maxsize=256)
def _selector(scale: float, size: int) -> Any:
    """OpenDP's report-noisy-min (``make_noisy_max``, ``negate=True``, pure DP): exponential
    noise on each score, which is permute-and-flip in distribution (McKenna & Sheldon 2020),
    sampled exactly (no floating-point inversion of a CDF)."""
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    metric = dp.linf_distance(T=float, monotonic=False)
    return dp.m.make_noisy_max(domain, metric, dp.max_divergence(), scale=scale, negate=True)


class OpenDPNoise:
    """The production noise source, backed by OpenDP's exact samplers."""

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        return self._apply("laplace", values, scale, integer)

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        return self._apply("gaussian", values, sigma, integer)

    def noisy_min_index(self, scores: Sequence[float], scale: Fraction) -> int:
        if scale <= 0:
            raise ValueError("the exponential mechanism needs a positive scale")
        if not scores:
            raise ValueError("no candidates to choose from")
        with _one_shot_imports():
            chosen = _selector(float_up(scale), len(scores))([float(s) for s in scores])
        return int(chosen)

    def laplace_lattice(self, values: Sequence[float], scale: Fraction, k: int) -> list[float]:
        """Add independent Laplace(``scale``) noise on the lattice 2^k·ℤ to values that are
        all multiples of 2^k (``k`` from :func:`lattice_exponent`: public, from the plan).

        Privacy argument. OpenDP's ``make_laplace`` over ``vector_domain(atom_domain(f64),
        size=n)`` with granularity ``k`` rounds each coordinate to the nearest multiple of
        2^k, adds 2^k·D_i with D_i independent discrete Laplace, P(D = d) ∝ e^{-|d|·2^k/b}
        (b the float scale, ≥ ``scale``: rounded up), in exact arithmetic, and rounds the
        result to a double. The values are checked to be multiples of 2^k already (a failure
        is an internal error, never a fallback: the law must not depend on the data), so the
        rounding is the identity and the output is x + Z with Z on the lattice 2^k·ℤⁿ,
        P(Z = z) ∝ e^{-‖z‖₁/b}. For neighbours x, x' on the lattice (x − x' ∈ 2^k·ℤⁿ) and any
        y ∈ x + 2^k·ℤⁿ, P(x + Z = y)/P(x' + Z = y) = e^{(‖y − x'‖₁ − ‖y − x‖₁)/b} ≤
        e^{‖x − x'‖₁/b} (the normaliser is the same: the lattice is translation invariant), and
        y ∉ x + 2^k·ℤⁿ has probability 0 for both. So ε = Δ₁/b, the calibration of the
        continuous Laplace, with the same exact Δ₁ (OpenDP's own privacy map adds n·2^k to Δ₁
        because it cannot assume the inputs are on the lattice). The final rounding to a
        double is post-processing. The error bars use the law drawn: see
        :func:`lattice_half_width`.

        Why: OpenDP's float Laplace at its default granularity (2^-1074) costs about 23 µs a
        value here, on a lattice near the values' scale about 6 µs."""
        if scale <= 0:
            raise ValueError("the lattice draw needs a positive scale")
        if not values:
            return []
        # One pass of C-level map for the common case (every v·2^-k an integral double);
        # only a vector with a value that is not goes through the exact per-value test.
        if scaled_to_lattice(values, k) is None:  # the loop below meets an error again, in order
            for v in values:
                try:
                    on_lattice = math.ldexp(v, -k).is_integer()  # False for NaN and ±inf
                except OverflowError:
                    # |v·2^-k| ≥ 2^1024, so a finite v has |v| ≥ 2^(1024+k) and its last bit,
                    # ≥ 2^(1024+k−52), is a multiple of 2^k (math.ldexp raises, not ±inf)
                    on_lattice = math.isfinite(v)
                if not on_lattice:
                    raise InternalError("a value off the noise lattice")
        with _one_shot_imports():
            m = _lattice_measurement(_scale_up(scale), k, len(values))
            return _call(m, list(map(float, values)), False)

    def staircase(self, values: Sequence[float], law: Staircase) -> list[float]:
        """Add independent staircase noise (``mechanisms/staircase.py``, which has the privacy
        argument) on the lattice 2^k·ℤ to values that are all multiples of 2^k: x + 2^k·D
        computed exactly in integers, then rounded to a double (post-processing)."""
        if not values:
            return []
        k = law.k
        scaled = scaled_to_lattice(values, k)
        if scaled is None:  # the law must not depend on the data: never a fallback
            raise InternalError("a value off the noise lattice")
        with _one_shot_imports():
            drawn = draw_units(law, len(values), discrete_laplace)
        return [lattice_double(int(u) + d, k) for u, d in zip(scaled, drawn, strict=True)]

    @staticmethod
    def _apply(kind: str, values: Sequence[float], scale: Fraction, integer: bool) -> list[float]:
        if scale.numerator < 0:  # the sign of a Fraction (or int), without a comparison
            raise ValueError("negative noise scale")
        if not values:
            return []
        if not scale:
            return [float(v) for v in values]
        with _one_shot_imports():
            m = _measurement(kind, _scale_up(scale), integer)
            if integer:
                return [float(x) for x in _call(m, [int(v) for v in values], True)]
            return _call(m, [float(v) for v in values], False)
