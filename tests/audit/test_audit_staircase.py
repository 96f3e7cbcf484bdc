"""Audit of the staircase (``mechanisms/staircase.py``): a SUM release drawn from it by
``release/noise.py``, with production noise (OpenDP's discrete Laplace and the CSPRNG).

* an ε audit of the release on neighbours whose exact totals differ by the whole step
  (x = 0 and x' = Δ + h, Δ = 10, ε = 1) against the ε its plan charges, which must also
  reach most of that claim (the tails below 0 carry the whole e^ε, as for the Laplace);
* the median |noise| of the release is the staircase's, 0.84× the Laplace's at the same ε.

The exact condition over every shift, and its failure one unit beyond the step, are checked
in ``tests/unit/test_staircase.py``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from dpproxy.mechanisms.noise import lattice_exponent
from dpproxy.mechanisms.staircase import Staircase, staircase_for
from dpproxy.planning.plan import Release
from dpproxy.release.noise import _noise_releases
from tests.audit.harness import (
    NOISE,
    SIGMAS,
    Audit,
    Neighbours,
    assert_has_power,
    assert_within_claim,
    repeat,
    run_audit,
    tails,
)
from tests.audit.test_audit_lattice import SUM_SCALE, _sum_release

BITS = 48
SENS = SUM_SCALE  # the release's Δ (and Laplace scale: ε = 1)
H = Fraction(1, 2**30)  # a guard's rounding step: the staircase's step covers Δ + h


def _law() -> Staircase:
    k = lattice_exponent(SENS, BITS)
    law = staircase_for(Fraction(1), SENS + H, k, SENS, Fraction(2**40))
    assert law is not None
    return law


def _release() -> Release:
    """``test_audit_lattice.py``'s SUM release (Δ = 10, ε = 1), drawn from the staircase."""
    return replace(_sum_release(), mechanism=_law())


def _draw(exact: float) -> float:
    noisy = _noise_releases((_release(),), [()], lambda _k, _n: exact, NOISE, {"s": BITS})
    return noisy["s"][0]


@functools.cache
def staircase_audit() -> Audit:
    law = _law()
    far = math.ldexp(float(law.shift), law.k)  # the whole step: Δ + h, on the lattice
    on_d, on_d2 = repeat(lambda: _draw(0.0)), repeat(lambda: _draw(far))
    pair = Neighbours("staircase sum", on_d, on_d2, 1.0, 0.0)
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_the_staircase_sum_is_within_its_claim() -> None:
    assert_within_claim(staircase_audit())


def test_the_staircase_audit_has_power() -> None:
    assert_has_power(staircase_audit(), 0.5)


def test_its_median_is_the_staircases() -> None:
    """On D's main sample: P(|noise| ≤ the law's median) = 1/2 within six standard errors,
    and that median is 0.84× the Laplace's ln 2·Δ/ε."""
    sample = staircase_audit().first
    law = _law()
    n = len(sample)
    inside = float(np.mean(np.abs(sample) <= law.median))
    assert abs(inside - 0.5) <= SIGMAS * math.sqrt(0.25 / n)
    assert law.median == pytest.approx(0.582 * float(SENS + H), rel=1e-3)
