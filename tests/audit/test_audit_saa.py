"""Privacy audit of sample-and-aggregate (``reading/000`` definition 20): units hashed to
chunks, each chunk's statistic clipped, the mean of the k answers plus Laplace((u − l)/(kε))
(``tests/audit/harness.py``)."""

from __future__ import annotations

import functools
import hashlib
import statistics
from fractions import Fraction

from dpproxy.planning.plan import Method
from dpproxy.release import local as release
from dpproxy.sql.scope import AggKind
from dpproxy.values import Interval
from tests.audit.harness import (
    NOISE,
    Audit,
    Draw,
    Neighbours,
    assert_has_power,
    assert_laplace_scale,
    assert_within_claim,
    calibrate,
    claim,
    repeat,
    run_audit,
    tails,
)

CHUNKS = 20
LO, HI = Fraction(0), Fraction(1)
D_UNITS = {u: [0.0] for u in range(40)}  # D: 40 units of one row at lo


def chunk_of(unit: int) -> int:
    """A keyed hash of the privacy unit picks its chunk (all of a unit's rows go together)."""
    digest = hashlib.sha256(b"audit-key:" + str(unit).encode()).digest()
    return int.from_bytes(digest[:8], "big") % CHUNKS


def chunk_medians(units: dict[int, list[float]]) -> list[float | None]:
    """Each chunk's statistic (here its median), None for an empty chunk."""
    chunks: list[list[float]] = [[] for _ in range(CHUNKS)]
    for unit, values in units.items():
        chunks[chunk_of(unit)].extend(values)
    return [statistics.median(c) if c else None for c in chunks]


@functools.cache
def saa_audit() -> Audit:
    """ε = 1, k = 20 chunks, output range [0, 1]. D: 40 units of one row at lo. D': a new unit
    with 3 rows at hi, in a chunk that holds one or two of D's units: that chunk's median goes
    from lo to hi, so the mean of the 20 clipped answers moves by the full (hi − lo)/k the
    calibration allows for (true loss of the best tail event: exactly ε)."""
    plan = calibrate(
        Method.SAA,
        AggKind.MEDIAN,
        Interval(LO, HI),
        epsilon=Fraction(1),
        q=Fraction(1, 2),
        saa_chunks=CHUNKS,
    )
    sizes = [sum(1 for u in D_UNITS if chunk_of(u) == c) for c in range(CHUNKS)]
    newcomer = next(u for u in range(1000, 2000) if sizes[chunk_of(u)] in (1, 2))
    d2 = {**D_UNITS, newcomer: [1.0, 1.0, 1.0]}
    c1, c2 = chunk_medians(D_UNITS), chunk_medians(d2)
    assert [(a, b) for a, b in zip(c1, c2, strict=True) if a != b] == [(0.0, 1.0)]

    def on(chunks: list[float | None]) -> Draw:
        return repeat(lambda: release.sample_and_aggregate(chunks, LO, HI, plan.scale, NOISE))

    pair = Neighbours("sample-and-aggregate", on(c1), on(c2), *claim(plan))
    return run_audit(pair, pilot=2_000, main=15_000, candidates=tails)


def test_sample_and_aggregate_within_claim() -> None:
    assert_within_claim(saa_audit())


def test_sample_and_aggregate_audit_has_power() -> None:
    """Reaches ≈ 0.86·ε (sd ≈ 0.02 over repeated runs)."""
    assert_has_power(saa_audit(), 0.5)


def test_sample_and_aggregate_noise_scale() -> None:
    """D's chunks answer lo, its empty chunks the middle; the noise is Laplace((hi − lo)/(kε))."""
    chunks = chunk_medians(D_UNITS)
    centre = sum(0.5 if c is None else c for c in chunks) / CHUNKS
    assert_laplace_scale(saa_audit().first, centre, float(HI - LO) / CHUNKS)
