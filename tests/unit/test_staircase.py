"""The staircase law (``mechanisms/staircase.py``): its privacy condition checked exactly over
every shift, its exact sampler against its probabilities (OpenDP's draws, not a stand-in), its
error bound against the brute-force tail, and when ``release/noise.py`` draws it."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from dpproxy.catalog.model import Catalog
from dpproxy.mechanisms.base import Laplace
from dpproxy.mechanisms.noise import OpenDPNoise, discrete_laplace, lattice_exponent
from dpproxy.mechanisms.staircase import Staircase, draw_units, staircase_for
from dpproxy.release.noise import _noise_releases

SIGMAS = 6.0  # a chance failure ≈ 2·10⁻⁹ per check (OpenDP's draws cannot be seeded)


def level(n: int, m: int, r: int) -> int:
    """w(n) = β^level(n): the exponent of the law's weight, exactly."""
    g, j = divmod(n, m)
    return g + (1 if j >= r else 0)


@pytest.mark.parametrize("m", range(1, 8))
def test_every_shift_up_to_the_step_costs_at_most_one_level(m: int) -> None:
    """P(d | x)/P(d | x') = β^(level(|d|) − level(|d − t|)) ≤ β^-1 = e^ε for every integer
    shift |t| ≤ M and every output d, for every r: the privacy condition, exactly in integers.
    Teeth: a shift of M + 1 costs two levels somewhere, for every r."""
    for r in range(1, m + 1):
        worst = max(
            level(abs(d - t), m, r) - level(abs(d), m, r)
            for t in range(-m, m + 1)
            for d in range(-6 * m, 6 * m + 1)
        )
        assert worst == 1
        beyond = max(level(abs(d - m - 1), m, r) - level(abs(d), m, r) for d in range(-6 * m, 1))
        assert beyond == 2


def pmf(law: Staircase, d: int) -> float:
    b = math.exp(-1 / float(law.scale))
    _, _, _, total = law._parts()
    return b ** level(abs(d), law.shift, law.inner) / total


@pytest.mark.parametrize(("m", "r"), [(1, 1), (3, 1), (3, 2), (5, 3)])
def test_the_law_sums_to_one_and_its_tail_is_the_sum_of_its_probabilities(m: int, r: int) -> None:
    law = Staircase(m, r, Fraction(1), 0, Fraction(1))
    total = sum(pmf(law, d) for d in range(-60 * m, 60 * m + 1))
    assert total == pytest.approx(1, abs=1e-12)
    for n in range(1, 8 * m):
        brute = sum(pmf(law, d) for d in range(-60 * m, 60 * m + 1) if abs(d) >= n)
        assert law.tail(n) == pytest.approx(brute, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("m", "r", "s"), [(3, 2, Fraction(1)), (4, 1, Fraction(1, 2))])
@pytest.mark.parametrize("alpha", [0.05, 0.2, 0.5])
def test_the_error_bound_is_the_smallest_that_holds(
    m: int, r: int, s: Fraction, alpha: float
) -> None:
    """P(|D| > w) ≤ α at the returned w, and not at two lattice steps fewer (the bound adds
    one step of slack: never narrower than the law's)."""
    law = Staircase(m, r, s, 0, Fraction(1))
    w = law.half_width(alpha)
    t = math.floor(w)
    assert sum(pmf(law, d) for d in range(-80 * m, 80 * m + 1) if abs(d) > t) <= alpha
    assert sum(pmf(law, d) for d in range(-80 * m, 80 * m + 1) if abs(d) > t - 2) > alpha


def test_the_sampler_draws_the_law() -> None:
    """20,000 of OpenDP-backed draws (M = 3, r = 2, ε = 1): each |d| ≤ 8's frequency within
    six standard errors of its probability, and the signs balanced."""
    law = Staircase(3, 2, Fraction(1), 0, Fraction(1))
    n = 20_000
    drawn = draw_units(law, n, discrete_laplace)
    assert len(drawn) == n
    for d in range(-8, 9):
        p = pmf(law, d)
        seen = sum(1 for x in drawn if x == d) / n
        assert abs(seen - p) <= SIGMAS * math.sqrt(p * (1 - p) / n), (d, seen, p)
    positive = sum(1 for x in drawn if x > 0) / n
    p = sum(pmf(law, d) for d in range(1, 400))
    assert abs(positive - p) <= SIGMAS * math.sqrt(p * (1 - p) / n)


def test_the_production_source_adds_it_on_the_lattice_exactly() -> None:
    """x + 2^k·D: every noisy value minus x is a multiple of 2^k; the median |noise| is the
    law's (about r·2^k), below the Laplace's ln 2·b; 95% of |noise| within the bound."""
    b = Fraction(10)
    k = lattice_exponent(b, 48)
    law = staircase_for(Fraction(1), b, k, b, Fraction(2**60))
    assert law is not None and law.k == k
    x = 1.25
    noise = []
    for _ in range(100):
        noise += [v - x for v in OpenDPNoise().staircase([x] * 100, law)]
    assert all(math.ldexp(v, -k).is_integer() for v in noise)
    n = len(noise)
    below = sum(1 for v in noise if abs(v) <= law.median) / n
    assert abs(below - 0.5) <= SIGMAS * math.sqrt(0.25 / n)
    assert law.median < 0.85 * math.log(2) * float(b)
    outside = sum(1 for v in noise if abs(v) > law.half_width(0.05)) / n
    assert outside <= 0.05 + SIGMAS * math.sqrt(0.05 * 0.95 / n)
    assert abs(sum(v * v for v in noise) / n - law.std**2) <= 0.1 * law.std**2


def test_a_value_off_the_lattice_is_an_internal_error() -> None:
    from dpproxy.errors import InternalError

    law = Staircase(4, 2, Fraction(1), -2, Fraction(1))
    with pytest.raises(InternalError):
        OpenDPNoise().staircase([0.1], law)
    assert OpenDPNoise().staircase([], law) == []


def test_where_the_staircase_is_built() -> None:
    """ε = 1: γ = 1/(e − 1) and a median of 0.84× the Laplace's; its ε never above the plan's
    (1/s with s the double above 1/ε); none where it would not help (ε below about 0.73), where
    its 95% bound is over 1% wider (ε above about 3), where the step is below one lattice unit,
    or where the values' units could overflow."""
    b = Fraction(500_000)
    k = lattice_exponent(b, 40)
    law = staircase_for(Fraction(1), b + 1, k, b, Fraction(2**80))
    assert law is not None
    assert law.epsilon <= 1
    assert law.shift == math.floor((b + 1) / Fraction(2) ** k)
    assert law.inner / law.shift == pytest.approx(1 / (math.e - 1), rel=1e-9)
    assert law.median / (math.log(2) * float(b)) == pytest.approx(0.8395, abs=1e-3)
    three = staircase_for(Fraction(3), b, k, b / 3, Fraction(2**80))
    assert three is not None and three.epsilon <= 3
    assert three.median < 0.5 * math.log(2) * float(b / 3)
    assert staircase_for(Fraction(1, 3), b, k, 3 * b, Fraction(2**80)) is None
    # ε = 4: a median of 0.11× the Laplace's, but a 95% bound 1.25× as wide: not drawn
    assert staircase_for(Fraction(4), b, k, b / 4, Fraction(2**80)) is None
    for eps in (Fraction(3, 4), Fraction(1), Fraction(2), Fraction(3)):
        law = staircase_for(eps, b, k, b / eps, Fraction(2**80))
        assert law is not None
        assert law.half_width(0.05) <= 1.01 * float(b / eps) * math.log(20)
    assert staircase_for(Fraction(7, 10), b, k, b, Fraction(2**80)) is None
    assert staircase_for(Fraction(1), Fraction(1, 2**60), k, b, Fraction(2**80)) is None
    assert staircase_for(Fraction(1), b, k, b, Fraction(2) ** 1000) is None


def test_a_source_without_the_sampler_draws_the_laplace_it_replaces() -> None:
    """The tests' deterministic sources have no ``staircase``: they get the Laplace scale the
    staircase replaces, so their answers do not change."""
    from dpproxy.analysis.sensitivity import PrimitiveKind
    from dpproxy.planning.plan import Primitive, Release
    from dpproxy.values import Cost, Sensitivity

    asked = []

    class Recording:
        def laplace(self, values: list[float], scale: Fraction, *, integer: bool) -> list[float]:
            asked.append((scale, integer))
            return list(values)

    b = Fraction(10)
    law = staircase_for(Fraction(1), b, -48, b, Fraction(2**60))
    assert law is not None
    from sqlglot import exp

    r = Release(
        Primitive("s", PrimitiveKind.SUM, exp.column("x")),
        Sensitivity(b, b, b),
        law,
        Cost(Fraction(1)),
    )
    out = _noise_releases((r,), [()], lambda _k, _n: 2.5, Recording())  # type: ignore[arg-type]
    assert out == {"s": [2.5]} and asked == [(b, False)]
    assert Laplace(b).half_width(0.05) == pytest.approx(law.half_width(0.05), rel=1e-3)


def test_the_closed_form_bound_is_the_smallest_step_count_that_holds() -> None:
    """Over random laws (steps of 1 to 2^45 units) and levels: the bound's n has
    P(|D| ≥ n) ≤ α and P(|D| ≥ n − 1) > α (:meth:`Staircase.tail`, up to floats' rounding)."""
    import random

    rng = random.Random(3)
    for _ in range(3000):
        m = rng.choice([1, 2, 3, 5, 8, 50, 1000, 2**20, 2**45])
        s = Fraction(rng.choice([0.3, 0.5, 1, 2, 3]))
        law = Staircase(m, rng.randint(1, m), s, 0, Fraction(1))
        alpha = rng.choice([0.01, 0.05, 0.2, 0.5, 0.9])
        n = math.floor(law.half_width(alpha) / (1 + 1e-9))
        assert law.tail(n) <= alpha * (1 + 1e-12)
        assert n <= 1 or law.tail(n - 1) > alpha * (1 - 1e-12)


@pytest.mark.parametrize(
    ("rel", "changed", "at_four"),
    [("add_remove", 2, True), ("substitute", 4, False)],
    ids=["add_remove", "substitute"],
)
def test_a_grouped_sum_gives_each_changed_group_its_share(
    rel: str, changed: int, at_four: bool
) -> None:
    """A unit in up to two groups, one row in each. Add/remove: Δ∞ = 10, Δ₁ = 20, K = 2; at
    ε = 4 each coordinate's staircase gets ε/K = 2 (K·(1/s) ≤ the release's ε), built for the
    release's L∞ move plus the guard's h; at ε = 1 a share of 1/2 does not help: the Laplace.
    Substitution: Δ∞ = 20, Δ₁ = 40, K = 4: shares of ε/4 over moves of 20 lose to the Laplace
    over Δ₁ at both ε."""
    from dpproxy.catalog.load import parse_catalog
    from dpproxy.planning.planner import plan_query
    from dpproxy.release.guard import changed_coordinates, drawn_release
    from dpproxy.release.noise import drawn
    from dpproxy.sql.parse import parse
    from dpproxy.sql.validate import validate
    from tests.property.test_derived_bruteforce import SCHEMA

    text = SCHEMA.format(relation=rel, k=2, nullable="false").replace(
        "    max_rows_per_unit: 2\n",
        "    max_groups_per_unit: 2\n    max_rows_per_group_per_unit: 1\n",
    )
    assert "max_groups_per_unit" in text
    catalog = parse_catalog(text)
    sql = "SELECT g, SUM(x) FROM t GROUP BY g"
    query = validate(parse(sql), catalog, sql)
    for eps, wanted in ((Fraction(4), at_four), (Fraction(1), False)):
        plan = plan_query(query, catalog.policy, epsilon=eps, delta=Fraction(0))
        (r,) = plan.releases
        law = drawn(plan, r).mechanism
        assert changed_coordinates(plan) == changed
        assert isinstance(law, Staircase) is wanted
        if isinstance(law, Staircase):
            assert changed * law.epsilon <= r.cost.epsilon == eps
            g, _ = drawn_release(plan, r)
            assert g is not None
            move = r.sensitivity.linf + Fraction(2) ** g.step
            assert law.shift == math.floor(move / Fraction(2) ** law.k)
            laplace = Laplace(drawn_release(plan, r)[1].scale)  # type: ignore[union-attr]
            assert law.median < 0.98 * math.log(2) * float(laplace.scale)


@pytest.mark.parametrize(
    "eps", [Fraction(1, 10**9), Fraction(1, 3), Fraction(9, 2), Fraction(10**6), Fraction(10**400)]
)
def test_an_epsilon_where_it_never_wins_is_refused_without_float_trouble(eps: Fraction) -> None:
    """Found by the analyst corpus: a coordinate's ε of thousands (a SUM over a tiny move) made
    e^ε overflow while building the law, after the charge. Outside [1/2, 4] no staircase is
    built at all; inside, extreme moves and scales give a law or None, never an exception."""
    b = Fraction(10)
    assert staircase_for(eps, b, -40, b / eps, Fraction(2**60)) is None
    for move in (Fraction(1, 2**1000), Fraction(1), Fraction(2) ** 999, Fraction(2) ** 1100):
        for k in (-1074, -40, 0, 60):
            for e in (Fraction(1, 2), Fraction(1), Fraction(4)):
                law = staircase_for(e, move, k, move / e, Fraction(2) ** 900)
                if law is not None:
                    assert math.isfinite(law.median) and law.half_width(0.05) > 0
                    assert law.half_width(1e-300) > 0


def test_a_failure_working_out_the_drawn_law_is_raised_before_the_data(
    demo_db: Path, demo_catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine works out each release's drawn law while planning (``drawn_laws``): a bug
    there (here a stand-in that raises) is XX000 before the query runs, with nothing charged,
    not a failure after the charge (the corpus's overflow before the ε range was bounded)."""
    from dpproxy.accounting.memory import MemoryAccountant
    from dpproxy.backends.duckdb import DuckDBBackend
    from dpproxy.engine import Engine
    from dpproxy.errors import InternalError
    from dpproxy.release import noise as release_noise
    from dpproxy.values import Cost

    def broken(*_args: object) -> None:
        raise OverflowError("math range error")

    monkeypatch.setattr(release_noise, "staircase_for", broken)
    accountant = MemoryAccountant(Cost(Fraction(10), Fraction(1, 10**5)))
    engine = Engine(demo_catalog, DuckDBBackend(demo_db), accountant=accountant)
    try:
        with pytest.raises(InternalError, match="nothing was charged"):
            engine.run("SELECT SUM(capital_gain) FROM adult", analyst="alice")
        assert accountant.spent("alice") == Cost(Fraction(0), Fraction(0))
    finally:
        engine.close()
