"""Audit of the batched draws: every group's noise in one call of the noise source.

``release/local.py``'s ``joint_releases`` noises the two parts of every group's JOINT mean in
one OpenDP call, and ``release/noise.py``'s ``_noise_releases`` noises every release that shares
a law (mechanism, scale, integer or not) in one call. Their privacy argument: OpenDP's vector
measurements add independent noise of the one scale to each coordinate, so a batch has the law
of one draw per group (or per release). Checked here with production noise (OpenDP):

* an ε audit of one group's mean released in a batch of five groups, on neighbours that differ
  in that group only (D: 500 units of K = 2 rows at lo; D': one more unit at hi; the other
  groups fixed), against the planner's claim for one group — as ``test_audit_mean.py`` does
  for one group drawn alone;
* the batch's coordinates: each has Laplace(b) noise of the planned scale (mean absolute
  deviation b), and neighbouring coordinates — within a group, across groups, and across two
  releases sharing a call — are uncorrelated (|r| within six standard errors of 0).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.mechanisms.base import Laplace
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

TARGET = 2  # the group whose mean the audit observes, in the middle of the batch
OTHERS = [(40.0, 120.0), (0.0, 0.0), (7.0, 3.5), (1000.0, 9000.0)]  # (n, Σx) of other groups


def batch_inputs(data_n: float, data_total: float) -> list[tuple[float, float]]:
    others = iter(OTHERS)
    return [(data_n, data_total) if g == TARGET else next(others) for g in range(5)]


@functools.cache
def batched_joint_audit() -> Audit:
    plan = joint_mean_plan()
    n = 500 * JM_ROWS
    on_d_inputs = batch_inputs(float(n), 0.0)  # every row at lo
    on_d2_inputs = batch_inputs(float(n + JM_ROWS), float(JM_ROWS * JM_HI))  # one unit at hi

    def mean_of_target(inputs: list[tuple[float, float]]) -> float:
        return release.joint_releases(inputs, JM_LO, JM_HI, plan.scale, NOISE)[TARGET][0]

    on_d = repeat(lambda: mean_of_target(on_d_inputs))
    on_d2 = repeat(lambda: mean_of_target(on_d2_inputs))
    pair = Neighbours("joint mean, batched", on_d, on_d2, *claim(plan))
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_batched_joint_mean_within_claim() -> None:
    assert_within_claim(batched_joint_audit())


def test_batched_joint_mean_audit_has_power() -> None:
    """The same neighbours as ``test_audit_mean``'s single-group audit: ≈ 0.85·ε there."""
    assert_has_power(batched_joint_audit(), 0.5)


def _uncorrelated(x: np.ndarray, y: np.ndarray) -> None:
    r = float(np.corrcoef(x, y)[0, 1])
    assert abs(r) <= SIGMAS / math.sqrt(len(x)), r  # sd of r is 1/√N under independence


def test_joint_batch_coordinates_are_independent_laplace() -> None:
    """All rows at lo in every group: A = 0, B = n exactly, so the count read off group g is
    n_g + Z_A + Z_B; with two groups per call, the counts' noise has variance 4b² each (two
    Laplace(b) parts) and the two groups' counts are uncorrelated."""
    plan = joint_mean_plan()
    b = float(plan.scale)
    draws = 6_000
    counts = np.empty((draws, 2))
    for i in range(draws):
        out = release.joint_releases([(100.0, 0.0), (300.0, 0.0)], JM_LO, JM_HI, plan.scale, NOISE)
        counts[i] = (out[0][2] - 100.0, out[1][2] - 300.0)
    se = 4 * b * b * math.sqrt(5 / draws)  # Var(Z₁+Z₂) = 4b², sd of its sample variance ≈ 4b²·√5/√N
    for g in (0, 1):
        assert abs(float(np.var(counts[:, g])) - 4 * b * b) <= SIGMAS * se
    _uncorrelated(counts[:, 0], counts[:, 1])


def _release(name: str, scale: Fraction, kind: PrimitiveKind) -> Release:
    one = Fraction(1)
    return Release(
        Primitive(name, kind, None if kind is PrimitiveKind.COUNT else exp.column("x")),
        Sensitivity(one, one, one),
        Laplace(scale),
        Cost(one / scale),
    )


def test_releases_sharing_a_law_are_drawn_independently() -> None:
    """Two integer releases of scale 4 (one call) and a float release of scale 3 (another):
    each coordinate has Laplace noise of its own release's scale, and coordinates sharing a
    call — the same group of two releases, and two groups of one — are uncorrelated."""
    releases = (
        _release("a", Fraction(4), PrimitiveKind.COUNT),
        _release("s", Fraction(3), PrimitiveKind.SUM),
        _release("b", Fraction(4), PrimitiveKind.COUNT),
    )
    keys = [("x",), ("y",)]
    exact = {"a": 10.0, "b": 500.0, "s": 2.5}
    draws = 5_000
    out = {name: np.empty((draws, 2)) for name in exact}
    for i in range(draws):
        noisy = _noise_releases(releases, keys, lambda _k, name: exact[name], NOISE)
        for name, values in noisy.items():
            out[name][i] = values
    for name, scale in (("a", 4.0), ("b", 4.0), ("s", 3.0)):
        for g in (0, 1):
            assert_laplace_scale(out[name][:, g], exact[name], scale)
    for name in ("a", "b"):
        assert np.all(out[name] == np.round(out[name]))  # discrete Laplace on integers
    _uncorrelated(out["a"][:, 0], out["b"][:, 0])  # two releases in one call
    _uncorrelated(out["a"][:, 0], out["a"][:, 1])  # two groups in one call
