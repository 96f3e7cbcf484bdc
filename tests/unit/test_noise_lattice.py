"""The lattice Laplace draw (``mechanisms/noise.py``, ``OpenDPNoise.laplace_lattice``) and its
use for fixed-point sums (``release/noise.py``) and JOINT means (``release/local.py``).

* the lattice is a function of the plan: k ≤ −bits (the values' grid) and 2^k ≤ scale·2^-50,
  checked exactly over many scales and grids;
* values off the lattice are refused (an internal error, never a silent fallback), and the
  noise added to values on it is a multiple of 2^k;
* the widened 95% half-width is at least the continuous one plus the lattice's steps;
* a JOINT mean computed on the grid (exact integer parts) equals the one computed from the
  float summary, without noise; and the engine's sums and means through the lattice path
  equal the exact answers without noise.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.errors import InternalError
from dpproxy.mechanisms.noise import (
    LATTICE_MARGIN,
    OpenDPNoise,
    laplace_on_lattice,
    lattice_exponent,
    lattice_half_width,
)
from dpproxy.mechanisms.staircase import Staircase
from dpproxy.release import local
from dpproxy.release.guard import guard_for
from dpproxy.values import Cost
from tests.noise import NoNoise


class LatticeNoNoise(NoNoise):
    """No noise, but through the lattice entry point, which checks the values are on it."""

    def laplace_lattice(self, values: Sequence[float], scale: Fraction, k: int) -> list[float]:
        self.calls.append(("lattice", len(values), scale, False))
        for v in values:
            assert math.ldexp(v, -k).is_integer(), (v, k)
        return [float(v) for v in values]

    def staircase(self, values: Sequence[float], law: Staircase) -> list[float]:
        """The staircase's entry point (an ungrouped SUM): on its lattice too."""
        self.calls.append(("staircase", len(values), law.laplace_scale, False))
        for v in values:
            assert math.ldexp(v, -law.k).is_integer(), (v, law.k)
        return [float(v) for v in values]


def test_the_lattice_is_on_the_values_grid_and_far_below_the_scale() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        scale = Fraction(rng.randint(1, 10**12), rng.randint(1, 10**12)) * Fraction(
            2
        ) ** rng.randint(-200, 200)
        bits = rng.randint(-60, 1000)
        k = lattice_exponent(scale, bits)
        assert k <= -bits
        assert k >= -1074  # OpenDP's finest granularity
        if scale >= Fraction(2) ** -1010:
            assert Fraction(2) ** k <= scale / Fraction(2) ** LATTICE_MARGIN


def test_a_subnormal_scale_is_drawn_on_the_finest_lattice_opendp_takes() -> None:
    """A SUM of a subnormal constant (found by the wire fuzz test: ``SUM(2.22507e-313)``) has
    a scale near 2^-1037; its lattice is 2^-1074 (OpenDP refuses a finer one), still on the
    values' grid, and the real sampler draws on it."""
    scale = Fraction(2.22507e-313)
    k = lattice_exponent(scale, 1000)
    assert k == -1074
    drawn = OpenDPNoise().laplace_lattice([2.22507e-313, 0.0], scale, k)
    assert all(math.isfinite(v) and math.ldexp(v, 1074).is_integer() for v in drawn)


def test_a_subnormal_constant_sum_is_answered(demo_db: Path, demo_catalog: Catalog) -> None:
    engine = Engine(
        demo_catalog,
        DuckDBBackend(demo_db),
        accountant=MemoryAccountant(Cost(Fraction(10**6), Fraction(1, 2))),
        noise=OpenDPNoise(),
    )
    try:
        rows = engine.run(
            "SELECT sex, COUNT(*), SUM(2.22507e-313) FROM adult GROUP BY sex", analyst="t"
        ).released.rows
    finally:
        engine.close()
    assert len(rows) == 2 and all(math.isfinite(r[2]) for r in rows)


def test_values_off_the_lattice_are_refused() -> None:
    with pytest.raises(InternalError):
        OpenDPNoise().laplace_lattice([0.5, 0.25 + 2**-50], Fraction(1), -40)


def test_the_noise_is_a_multiple_of_the_lattice_step() -> None:
    noise = OpenDPNoise()
    k = -20
    values = [0.0, 1.5, -3.25, 1000.0]
    for _ in range(50):
        drawn = noise.laplace_lattice(values, Fraction(3), k)
        for v, d in zip(values, drawn, strict=True):
            assert math.ldexp(d - v, -k).is_integer()  # exact here: |d| < 2^32
    assert noise.laplace_lattice([], Fraction(3), k) == []


def test_large_values_are_on_any_fine_lattice() -> None:
    """A double of magnitude 2^80 is a multiple of 2^28: accepted at k = −60."""
    drawn = OpenDPNoise().laplace_lattice([2.0**80, -(2.0**80)], Fraction(1, 3), -60)
    assert len(drawn) == 2


def test_values_whose_lattice_multiple_overflows_a_double_are_on_the_lattice() -> None:
    """v·2^-k beyond a double's range (math.ldexp raises OverflowError there, it does not
    return ±inf): a finite v that large is a multiple of 2^k, so it is drawn, not refused
    with a raw Python exception. Beside it an infinity is still refused."""
    big = [2.0**1000, -(2.0**1000), 0.5]
    drawn = OpenDPNoise().laplace_lattice(big, Fraction(1), -100)
    assert len(drawn) == 3 and all(math.isfinite(d) for d in drawn)
    with pytest.raises(InternalError):
        OpenDPNoise().laplace_lattice([2.0**1000, math.inf], Fraction(1), -100)


def test_sources_without_a_lattice_draw_get_the_continuous_call() -> None:
    src = NoNoise()
    assert laplace_on_lattice(src, [1.0, 2.0], Fraction(2), -50) == [1.0, 2.0]
    assert src.calls == [("laplace", 2, Fraction(2), False)]


def test_the_widened_half_width_covers_the_steps() -> None:
    for width, k, terms in ((2.996, -60, 1), (4.113e6, -30, 2), (1e-9, -100, 2)):
        step = math.ldexp(1.0, k)
        wide = lattice_half_width(width, step, terms)
        assert Fraction(wide) >= Fraction(width) + terms * Fraction(step)


def test_a_joint_mean_on_the_grid_equals_the_one_from_the_float_summary() -> None:
    """Equal up to the SUM guard (release/guard.py): parts past 2^53 grid units are rounded to
    h (here 1/8: b·ε·w = 2000 over C = 2 parts, ·2^-12), which moves the mean by < 2h/n."""
    rng = random.Random(3)
    lo, hi, bits = Fraction(0), Fraction(1000), 42
    h = float(Fraction(2) ** guard_for(Fraction(2000), Fraction(2)).step)
    centre = (lo + hi) / 2
    for _ in range(200):
        xs = [Fraction(rng.randint(0, 1000 * 2**bits), 2**bits) for _ in range(rng.randint(0, 40))]
        n = len(xs)
        total = sum((x - centre for x in xs), Fraction(0)) * 2**bits
        assert total.denominator == 1
        aw = int(total) + n * int((centre - lo) * 2**bits)
        scaled = [(aw, n * int((hi - lo) * 2**bits) - aw)]
        on_grid = local.joint_releases_on_grid(
            scaled, bits, lo, hi, Fraction(2), LatticeNoNoise(), epsilon=Fraction(1), changed=1
        )
        plain = local.joint_releases([(n, float(sum(xs)))], lo, hi, Fraction(2), NoNoise())
        tol = 2 * h / n if n else 1e-9
        assert on_grid[0][0] == pytest.approx(plain[0][0], rel=1e-12, abs=tol)
        assert on_grid[0][2] == pytest.approx(n, abs=h / 1000)  # (part errors ≤ h/2) / w
        exact_mean = sum(xs, Fraction(0)) / n if n else (lo + hi) / 2
        assert on_grid[0][0] == pytest.approx(float(exact_mean), rel=1e-12, abs=tol)


def test_the_joint_spans_are_widened_by_the_lattice_steps() -> None:
    lo, hi, scale = Fraction(0), Fraction(10), Fraction(2)
    scaled = [(10 * 2**48, 10 * 2**48)]  # A = B = 1
    (_, _, count, c_span) = local.joint_releases_on_grid(
        scaled, 48, lo, hi, scale, LatticeNoNoise(), epsilon=Fraction(1), changed=1
    )[0]
    (_, _, _, plain_span) = local.joint_releases([(2, 10.0)], lo, hi, scale, NoNoise())[0]
    assert count == 2.0
    assert c_span[0] < plain_span[0] and c_span[1] > plain_span[1]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT sex, AVG(age) FROM adult GROUP BY sex",
        "SELECT SUM(fnlwgt) FROM adult",
        "SELECT AVG(hours_per_week / 4.0), SUM(CAST(capital_loss AS DOUBLE) / 8) FROM adult",
    ],
)
def test_the_engine_draws_sums_and_means_on_the_lattice(
    sql: str, demo_db: Path, demo_catalog: Catalog
) -> None:
    """Real plans and real totals from DuckDB: every value reaches the lattice draw on its
    lattice (``LatticeNoNoise`` checks it), and without noise the answer is the exact one."""
    src = LatticeNoNoise()
    engine = Engine(
        demo_catalog,
        DuckDBBackend(demo_db),
        accountant=MemoryAccountant(Cost(Fraction(10**6), Fraction(1, 2))),
        noise=src,
    )
    try:
        got = engine.run(sql, analyst="t").released.rows
    finally:
        engine.close()
    assert any(c[0] in ("lattice", "staircase") for c in src.calls)
    with duckdb.connect(str(demo_db), read_only=True) as con:
        want = con.execute(sql).fetchall()
    assert sorted(got, key=str) == [
        tuple(v if isinstance(v, str) else pytest.approx(float(v), rel=1e-9) for v in row)
        for row in sorted(want, key=str)
    ]


def test_an_infinite_or_nan_value_and_one_off_the_lattice_late_in_the_vector_are_refused() -> None:
    """The one-pass check (``laplace_lattice``) refuses whatever the per-value test refuses,
    wherever the value sits in the vector."""
    ok = [float(i) for i in range(64)]
    for bad in (math.inf, -math.inf, math.nan, 0.5 + 2**-45):
        for at in (0, 31, 64):
            with pytest.raises(InternalError):
                OpenDPNoise().laplace_lattice([*ok[:at], bad, *ok[at:]], Fraction(1), -40)


def test_the_joint_outputs_are_the_reference_means_of_every_group() -> None:
    """``_joint_out`` (its per-group mean inlined) gives exactly the doubles of ``_mean`` read
    at the noisy parts and at the parts moved by the half-width, for parts below zero, at
    zero, both zero, and far beyond the bounds."""
    rng = random.Random(5)
    edges = [0.0, -0.0, -3.0, 1e-300, 2.5, 1e300, 700.0, -1e300]
    noisy = [rng.choice(edges) if rng.random() < 0.3 else rng.uniform(-50, 900) for _ in range(400)]
    lo, hi, scale = Fraction(-7), Fraction(1000), Fraction(5, 3)
    for step in (0.0, 2**-30):
        h, half, flo, fhi, w, mid = local._out_law(lo, hi, scale, step)
        got = local._joint_out(noisy, 200, lo, hi, scale, step)

        def m(x: float, y: float, law: tuple[float, ...] = (flo, fhi, w, mid)) -> float:
            return local._mean(x, y, *law)

        for i, (mean, (low, high), count, (c_lo, c_hi)) in enumerate(got):
            na, nb = noisy[2 * i], noisy[2 * i + 1]
            assert mean == m(na, nb) and count == na + nb
            assert low == (flo if na - half <= 0 else m(na - half, nb + half))
            assert high == (fhi if nb - half <= 0 else m(na + half, nb - half))
            assert (c_lo, c_hi) == (count - h, count + h)
    with pytest.raises(InternalError):
        local._joint_out(noisy[:3], 2, lo, hi, scale, 0.0)


def test_the_laws_kept_by_value_are_the_laws_computed_afresh() -> None:
    """``_grid_law``/``_out_law`` (kept by exact value, Fractions as numerator/denominator) and
    ``_scale_up`` return what a fresh computation returns, for equal rationals written
    differently and across the point where the kept entries are dropped (256)."""
    from dpproxy.mechanisms import noise as mn
    from dpproxy.values import float_up

    for i in range(1, 300):
        scale = Fraction(3 * i, 7 * i + 1)
        assert mn._scale_up(scale) == float_up(scale) >= scale
        lo, hi = Fraction(-i, 3), Fraction(1000 + i)
        law = local._grid_law(43, lo, hi, scale, Fraction(1, i), 2)
        assert law == local._grid_law.__wrapped__(43, lo, hi, scale, Fraction(1, i), 2)
        assert local._out_law(lo, hi, law[3], 2.0**-40) == local._out_law.__wrapped__(
            lo, hi, law[3], 2.0**-40
        )
    assert mn._scale_up(Fraction(2, 6)) == mn._scale_up(Fraction(1, 3)) == float_up(Fraction(1, 3))
    assert len(mn._SCALES) <= 256
