"""Audit of the noise drawn through OpenDP's C interface (``mechanisms/opendp_ffi.py``).

``OpenDPNoise`` calls OpenDP's vector measurements through the library's C functions with the
types known, instead of ``Measurement.__call__`` (the same sampler, the same arguments; about
60 µs less a call). Checked here with production noise, one call per released value as the
engine makes it for an ungrouped query:

* an ε audit of a COUNT released with discrete Laplace noise of scale 1/ε (ε = 1, Δ = 1) on
  neighbours 100 and 101, against the claim ε = 1, and that the audit has power;
* an ε audit of a SUM drawn on the lattice 2^-50·ℤ (Δ = 10, b = 10: ε = 1) on neighbours
  0 and 10, against the same claim.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from tests.audit.harness import (
    NOISE,
    Audit,
    Neighbours,
    assert_has_power,
    assert_within_claim,
    repeat,
    run_audit,
    tails,
)


@functools.cache
def count_audit() -> Audit:
    def count(n: int) -> float:
        return NOISE.laplace([n], Fraction(1), integer=True)[0]

    pair = Neighbours(
        "count, direct call", repeat(lambda: count(100)), repeat(lambda: count(101)), 1.0, 0.0
    )
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


@functools.cache
def lattice_sum_audit() -> Audit:
    def total(x: float) -> float:
        return NOISE.laplace_lattice([x], Fraction(10), -50)[0]

    pair = Neighbours(
        "lattice sum, direct call",
        repeat(lambda: total(0.0)),
        repeat(lambda: total(10.0)),
        1.0,
        0.0,
    )
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_count_drawn_directly_within_claim() -> None:
    assert_within_claim(count_audit())


def test_count_drawn_directly_audit_has_power() -> None:
    assert_has_power(count_audit(), 0.5)


def test_lattice_sum_drawn_directly_within_claim() -> None:
    assert_within_claim(lattice_sum_audit())
