"""Statistical tests: OpenDPNoise draws from the distribution, at the scale, that the plan claims.

OpenDP samples from the operating system's CSPRNG and cannot be seeded, so these tests cannot be
made deterministic. Instead every test fails only when a p-value falls below ``P_FAIL = 1e-7``
(or an estimate leaves a band of 6 standard errors, probability ≈ 2·10⁻⁹ under the normal
approximation), and the module runs fewer than ten such checks: the chance that a correct
implementation fails this module is below 10⁻⁶ per run. A wrong family, a scale off by 10 %
(b for b·√2, σ² for σ, a rounding down) or a noise not centred on the value is caught with
near certainty; a scale off by 2 % gives p ≈ 10⁻³–10⁻⁸ and is caught only sometimes.

Distributions (``dpproxy/mechanisms/noise.py``):

* integer Laplace = discrete Laplace, P(k) ∝ exp(−|k|/b) (Canonne–Kamath–Steinke 2020);
* float Laplace ≈ Laplace(0, b) (OpenDP samples a discrete Laplace on a fine grid);
* integer Gaussian = discrete Gaussian, P(k) ∝ exp(−k²/(2σ²));
* float Gaussian ≈ N(0, σ²).

Runtime: about 600,000 draws in total (OpenDP takes ≈ 7–30 µs per element).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpproxy.mechanisms import noise as noise_module
from dpproxy.mechanisms.noise import OpenDPNoise
from dpproxy.values import float_up

pytestmark = pytest.mark.slow

P_FAIL = 1e-7  # per-check false-failure probability
SIGMAS = 6.0  # standard errors allowed for a moment estimate (two-sided ≈ 2e-9)
N_DISCRETE = 100_000
N_FLOAT = 30_000
MIN_EXPECTED = 20  # chi-square bins hold at least this many expected samples


def draw(kind: str, value: float, scale: Fraction, n: int, *, integer: bool) -> np.ndarray:
    src = OpenDPNoise()
    out = getattr(src, kind)([value] * n, scale, integer=integer)
    assert len(out) == n
    return np.asarray(out, dtype=float)


def discrete_laplace_pmf(b: float, ks: np.ndarray) -> np.ndarray:
    p = math.exp(-1 / b)
    return (1 - p) / (1 + p) * np.power(p, np.abs(ks))


def discrete_gaussian_pmf(sigma: float, ks: np.ndarray) -> np.ndarray:
    support = np.arange(-int(40 * sigma) - 10, int(40 * sigma) + 11)
    norm = np.exp(-(support.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(ks.astype(float) ** 2) / (2 * sigma**2)) / norm


def chi_square_p(samples: np.ndarray, pmf: Any, n: int) -> tuple[float, int]:
    """Goodness of fit against an integer pmf, tails pooled so that every bin expects ≥ 20."""
    assert np.all(samples == np.round(samples)), "integer noise returned a non-integer"
    k_max = 0
    while n * pmf(np.array([k_max + 1]))[0] >= MIN_EXPECTED:
        k_max += 1
    inner = np.arange(-k_max + 1, k_max)
    p_inner = pmf(inner)
    p_tail = (1 - p_inner.sum()) / 2  # the pmfs are symmetric
    expected = np.concatenate([[p_tail], p_inner, [p_tail]]) * n
    ks = samples.astype(np.int64)
    observed = np.concatenate([
        [np.sum(ks <= -k_max)],
        [np.sum(ks == k) for k in inner],
        [np.sum(ks >= k_max)],
    ])
    assert observed.sum() == n
    assert expected.min() >= MIN_EXPECTED * 0.5
    return float(stats.chisquare(observed, expected * n / expected.sum()).pvalue), len(observed)


def within_band(estimate: float, target: float, standard_error: float) -> bool:
    return abs(estimate - target) <= SIGMAS * standard_error


@pytest.fixture(scope="module")
def integer_laplace() -> dict[float, np.ndarray]:
    """100,000 integer-Laplace draws around 1000 for each scale (shared by the tests below)."""
    return {b: draw("laplace", 1000.0, Fraction(b), N_DISCRETE, integer=True) - 1000.0
            for b in (0.5, 1.0, 3.7)}


@pytest.mark.parametrize("b", [0.5, 1.0, 3.7])
def test_integer_laplace_is_discrete_laplace(integer_laplace: dict[float, np.ndarray],
                                             b: float) -> None:
    """Chi-square goodness of fit against P(k) = (1−p)/(1+p)·p^|k|, p = e^(−1/b), on 10⁵
    draws; fails with probability < 1e-7 if the distribution is right."""
    p, bins = chi_square_p(integer_laplace[b], lambda ks: discrete_laplace_pmf(b, ks),
                           N_DISCRETE)
    assert bins >= 3
    assert p > P_FAIL, f"chi-square p = {p:.3g} over {bins} bins"


@pytest.mark.parametrize("b", [0.5, 1.0, 3.7])
def test_integer_laplace_mean_and_variance(integer_laplace: dict[float, np.ndarray],
                                           b: float) -> None:
    """Noise is centred on the value (mean 0 after subtracting it) with variance 2p/(1−p)²,
    both within 6 standard errors (the errors from the exact second and fourth moments)."""
    x = integer_laplace[b]
    p = math.exp(-1 / b)
    var = 2 * p / (1 - p) ** 2
    ks = np.arange(-400, 401)
    m4 = float(np.sum(discrete_laplace_pmf(b, ks) * ks.astype(float) ** 4))
    n = len(x)
    assert within_band(float(x.mean()), 0.0, math.sqrt(var / n)), x.mean()
    assert within_band(float(x.var()), var, math.sqrt((m4 - var**2) / n)), (x.var(), var)


def test_float_laplace_matches_scipy() -> None:
    """Kolmogorov–Smirnov against scipy.stats.laplace(scale=b) on draws around 12.5; the test
    fails with probability < 1e-7 when the distribution is right."""
    for b in (Fraction(1, 2), Fraction(37, 10)):
        x = draw("laplace", 12.5, b, N_FLOAT, integer=False) - 12.5
        assert np.all(np.isfinite(x))
        p = stats.kstest(x, stats.laplace(scale=float(b)).cdf).pvalue
        assert p > P_FAIL, f"KS p = {p:.3g} at b = {b}"
        var = 2 * float(b) ** 2
        assert within_band(float(x.var()), var, math.sqrt((24 * float(b) ** 4 - var**2) / len(x)))


def test_float_gaussian_matches_scipy() -> None:
    """KS against N(0, σ²) on draws around −7.25 (failure probability < 1e-7 if right)."""
    sigma = Fraction(5, 2)
    x = draw("gaussian", -7.25, sigma, N_FLOAT, integer=False) + 7.25
    assert np.all(np.isfinite(x))
    p = stats.kstest(x, stats.norm(scale=float(sigma)).cdf).pvalue
    assert p > P_FAIL, f"KS p = {p:.3g}"
    n, var = len(x), float(sigma) ** 2
    assert within_band(float(x.mean()), 0.0, math.sqrt(var / n))
    assert within_band(float(x.var()), var, math.sqrt(2 * var**2 / n))


def test_integer_gaussian_is_discrete_gaussian() -> None:
    """Chi-square against the discrete Gaussian pmf ∝ exp(−k²/(2σ²)) around 40 (failure
    probability < 1e-7 if right)."""
    sigma = 2.3
    x = draw("gaussian", 40.0, Fraction(23, 10), 50_000, integer=True) - 40.0
    p, bins = chi_square_p(x, lambda ks: discrete_gaussian_pmf(sigma, ks), len(x))
    assert p > P_FAIL, f"chi-square p = {p:.3g} over {bins} bins"


def test_scale_is_rounded_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given b = 1/3 (whose nearest float lies *below* 1/3), OpenDP is asked for the next float
    up, and the draws fit the discrete Laplace at that scale (failure probability < 1e-7)."""
    seen: list[tuple[str, float, bool]] = []
    real = noise_module._measurement

    def spy(kind: str, scale: float, integer: bool) -> Any:
        seen.append((kind, scale, integer))
        return real(kind, scale, integer)

    monkeypatch.setattr(noise_module, "_measurement", spy)
    third = Fraction(1, 3)
    x = draw("laplace", 0.0, third, 50_000, integer=True)
    draw("gaussian", 0.0, third, 10, integer=False)
    assert [s[1] for s in seen] == [float_up(third)] * 2
    assert Fraction(seen[0][1]) > third
    assert Fraction(math.nextafter(seen[0][1], 0)) < third
    p, bins = chi_square_p(x, lambda ks: discrete_laplace_pmf(seen[0][1], ks), len(x))
    assert p > P_FAIL, f"chi-square p = {p:.3g} over {bins} bins"


def test_zero_scale_and_empty_input() -> None:
    src = OpenDPNoise()
    assert src.laplace([3, 4.5], Fraction(0), integer=False) == [3.0, 4.5]
    assert src.gaussian([], Fraction(1), integer=True) == []
    with pytest.raises(ValueError):
        src.laplace([1.0], Fraction(-1), integer=False)


def _opendp_reference(kind: str, scale: float, n: int, *, integer: bool) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if integer:
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
        return np.asarray(dp.m.make_laplace(*space, scale=scale)([0] * n), dtype=float)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    return np.asarray(dp.m.make_laplace(*space, scale=scale)([0.0] * n), dtype=float)


def test_float_laplace_agrees_with_opendp_directly() -> None:
    """Two-sample KS between OpenDPNoise and a directly built opendp make_laplace (failure
    probability < 1e-7 when both draw from the same distribution)."""
    b = Fraction(3, 2)
    ours = draw("laplace", 0.0, b, 20_000, integer=False)
    ref = _opendp_reference("laplace", float(b), 20_000, integer=False)
    p = stats.ks_2samp(ours, ref).pvalue
    assert p > P_FAIL, f"two-sample KS p = {p:.3g}"


def test_integer_laplace_agrees_with_opendp_directly(
    integer_laplace: dict[float, np.ndarray],
) -> None:
    """Chi-square test of homogeneity between OpenDPNoise (b = 3.7) and opendp's own integer
    make_laplace, bins pooled to ≥ 20 expected (failure probability < 1e-7 if equal)."""
    ours = integer_laplace[3.7]
    ref = _opendp_reference("laplace", 3.7, 50_000, integer=True)
    edges = [-math.inf, *np.arange(-15.5, 16.5, 1.0), math.inf]
    table = np.array([np.histogram(ours, edges)[0], np.histogram(ref, edges)[0]])
    assert table.sum(axis=0).min() >= MIN_EXPECTED
    p = stats.chi2_contingency(table).pvalue
    assert p > P_FAIL, f"homogeneity p = {p:.3g}"
