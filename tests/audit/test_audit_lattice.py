"""Audit of the lattice draws: fixed-point sums and JOINT means noised on the grid 2^k·ℤ.

``OpenDPNoise.laplace_lattice`` (``mechanisms/noise.py``) draws Laplace noise on a lattice 2^k·ℤ,
k ≤ −bits, for values that are exact multiples of 2^-bits: the SUM releases of
``release/noise.py`` and the JOINT means of ``release/local.py`` (``joint_releases_on_grid``).
Its privacy argument is the continuous Laplace's, on the lattice. Checked here with production
noise (OpenDP):

* an ε audit of a JOINT mean on the grid, on the neighbours of ``test_audit_mean.py`` (D: 500
  units of K = 2 rows at lo; D': one more unit at hi), against the planner's claim;
* an ε audit of a SUM release drawn on the lattice by ``_noise_releases`` (Δ = 10, b = 10);
* the draw's scale (mean absolute deviation b) and the coverage of its widened 95% bound.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.mechanisms.base import Laplace
from dpproxy.mechanisms.noise import lattice_exponent, lattice_half_width
from dpproxy.planning.plan import Primitive, Release
from dpproxy.release import local as release
from dpproxy.release.noise import _noise_releases
from dpproxy.values import Cost, Sensitivity
from tests.audit.harness import (
    NOISE,
    SIGMAS,
    Audit,
    Neighbours,
    assert_has_power,
    assert_laplace_scale,
    assert_within_claim,
    claim,
    repeat,
    run_audit,
    tails,
)
from tests.audit.test_audit_mean import JM_HI, JM_LO, JM_ROWS, joint_mean_plan

BITS = 48  # the grid rewrite/fixed.py gives [0, 10]: 10 ≤ 2^4, k = 52 − 4


@functools.cache
def joint_on_grid_audit() -> Audit:
    plan = joint_mean_plan()
    unit = 2**BITS
    n = 500 * JM_ROWS
    w = int(JM_HI - JM_LO)
    on_d_parts = [(0, n * w * unit)]  # every row at lo: Σ(x − lo) = 0, Σ(hi − x) = n·w
    on_d2_parts = [(JM_ROWS * w * unit, n * w * unit)]  # one more unit, its rows at hi

    def mean(parts: list[tuple[int, int]]) -> float:
        out = release.joint_releases_on_grid(
            parts, BITS, JM_LO, JM_HI, plan.scale, NOISE, epsilon=plan.epsilon, changed=1
        )
        return out[0][0]

    on_d = repeat(lambda: mean(on_d_parts))
    on_d2 = repeat(lambda: mean(on_d2_parts))
    pair = Neighbours("joint mean on the grid", on_d, on_d2, *claim(plan))
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_joint_mean_on_the_grid_within_claim() -> None:
    assert_within_claim(joint_on_grid_audit())


def test_joint_mean_on_the_grid_audit_has_power() -> None:
    assert_has_power(joint_on_grid_audit(), 0.5)


SUM_SCALE = Fraction(10)


def _sum_release() -> Release:
    one = Fraction(1)
    return Release(
        Primitive("s", PrimitiveKind.SUM, exp.column("x")),
        Sensitivity(Fraction(10), Fraction(10), Fraction(10)),
        Laplace(SUM_SCALE),
        Cost(one),
    )


def _sum_draw(exact: float) -> float:
    r = _sum_release()
    noisy = _noise_releases((r,), [()], lambda _k, _n: exact, NOISE, {"s": BITS})
    return noisy["s"][0]


@functools.cache
def sum_on_lattice_audit() -> Audit:
    """Δ = 10, b = 10 (ε = 1): D sums to 0, D' to 10 (one more unit at hi)."""
    on_d = repeat(lambda: _sum_draw(0.0))
    on_d2 = repeat(lambda: _sum_draw(10.0))
    pair = Neighbours("sum on the lattice", on_d, on_d2, 1.0, 0.0)
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_sum_on_the_lattice_within_claim() -> None:
    assert_within_claim(sum_on_lattice_audit())


def test_sum_on_the_lattice_audit_has_power() -> None:
    assert_has_power(sum_on_lattice_audit(), 0.5)


def test_the_lattice_draw_has_the_planned_scale_and_covers_its_bound() -> None:
    """MAD = b; P(|noise| > the widened 95% bound) ≤ 5% (within six standard errors)."""
    b = Fraction(3, 7)
    k = lattice_exponent(b, BITS)
    draws = 20_000
    exact = [1.25] * 100
    noise = np.concatenate(
        [np.array(NOISE.laplace_lattice(exact, b, k)) - 1.25 for _ in range(draws // 100)]
    )
    assert_laplace_scale(noise, 0.0, float(b))
    bound = lattice_half_width(Laplace(b).half_width(0.05), math.ldexp(1.0, k))
    outside = float(np.mean(np.abs(noise) > bound))
    assert outside <= 0.05 + SIGMAS * math.sqrt(0.05 * 0.95 / draws), outside
