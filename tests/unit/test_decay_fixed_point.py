"""``analysis/local._decay``: the decay u ≈ e^{−β} of the smooth sensitivity, summed in integers
(issue 21: the Fraction series took 2–4 ms per call), still brackets e^{−β} as documented:
e^{−β}·(1 + 2^-48) ≤ u ≤ e^{−β}·(1 + 2^-47).

The reference brackets e^{−β} with exact Fraction partial sums of the alternating series (one
ending on a negative term, a lower bound; one on a positive term, an upper bound), for β up to
1/2, and raises both to 2^h for larger β (the function halves β h times).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.analysis import local
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Neighbouring
from dpproxy.engine import Engine
from dpproxy.values import Cost, ln_up
from tests.noise import NoNoise


def _bracket(beta: Fraction) -> tuple[Fraction, Fraction]:
    b, halvings = beta, 0
    while b > Fraction(1, 2):
        b /= 2
        halvings += 1
    term, total = Fraction(1), Fraction(1)
    lower = upper = Fraction(1)
    for j in range(1, 60):
        term = term * b / j
        total += -term if j % 2 else term
        if j % 2:
            lower = total
        else:
            upper = total
    # Rounded outward to 2^-200 (far inside the 2^-48 slack), so powers of them stay small.
    one = 2**200
    lower = Fraction(math.floor(lower * one), one)
    upper = Fraction(math.ceil(upper * one), one)
    return lower ** (2**halvings), upper ** (2**halvings)


BETAS = (
    Fraction(1, 10**6),
    Fraction(7, 10**6),
    Fraction(1, 100),
    Fraction(1, 3),
    Fraction(1, 2),
    Fraction(2),
    Fraction(37, 10),
    # The β of the planner: ε / (2·ln_up(2/δ)), whose denominator has hundreds of digits.
    1 / (2 * ln_up(Fraction(2 * 10**6))),
    Fraction(1, 3) / (2 * ln_up(Fraction(2 * 32561**2))),
)


@pytest.mark.parametrize("beta", BETAS)
def test_decay_brackets_e_to_minus_beta(beta: Fraction) -> None:
    lower, upper = _bracket(beta)
    assert lower < upper
    m, e = local._decay(beta)
    u = Fraction(m) * Fraction(2) ** e
    assert lower * (1 + Fraction(1, 2**48)) <= u <= upper * (1 + Fraction(1, 2**47)), float(beta)


def test_decay_rejects_non_positive_beta() -> None:
    with pytest.raises(Exception, match="smoothing parameter"):
        local._decay(Fraction(0))


def test_mean_smooth_unchanged_at_the_planners_beta() -> None:
    """The released scale's input (``release/stats.py`` calls ``mean_smooth`` at release):
    at the planner's β and a small n, where the maximum is at k > 0 (so u^k matters), the
    value is the definition's max_k u^k·LS'(n − k) within the documented slack."""
    beta = Fraction(1, 4) / (2 * ln_up(Fraction(2 * 10**6)))
    n, w = 20, Fraction(50)
    lower, _ = _bracket(beta)
    s = local.mean_smooth(n, w, 1, Neighbouring.ADD_REMOVE, beta)
    by_def_low = max(
        lower**k * local.mean_local_bound(max(n - k, 0), w, 1, Neighbouring.ADD_REMOVE)
        for k in range(n + 2)
    )
    assert s > local.mean_local_bound(n, w, 1, Neighbouring.ADD_REMOVE)  # k > 0 wins here
    assert by_def_low <= s <= by_def_low * (1 + Fraction(1, 10**9))


def test_released_smooth_scale_is_exact(tmp_path: Path) -> None:
    """End to end: the Laplace scale the engine hands the sampler for a smooth-sensitivity AVG
    is the exact Fraction 2·S/ε, with S = ``mean_smooth`` at the released count and the plan's
    β, and S lies in the bracket of the definition built from exact partial sums of e^{−β}
    (so the integer series of ``_decay`` did not make the released noise smaller)."""
    path = tmp_path / "small.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (uid INTEGER PRIMARY KEY, x INTEGER)")
        con.execute("INSERT INTO t SELECT i, i % 40 FROM range(25) r(i)")
    schema = (
        "version: 1\ndataset: s\nprivacy: {epsilon: 1, delta: 1.0e-6}\ntables:\n  t:\n"
        "    privacy_unit: uid\n    max_rows_per_unit: 1\n    columns:\n"
        "      uid: {type: integer}\n      x: {type: integer, lower: 0, upper: 50}\n"
    )
    noise = NoNoise()
    engine = Engine(
        parse_catalog(schema),
        DuckDBBackend(path),
        noise=noise,
        accountant=MemoryAccountant(Cost(Fraction(100), Fraction(1, 10))),
    )
    try:
        sql = "SELECT /*+ dpproxy method=smooth */ AVG(x) FROM t"
        stat = engine.prepare(sql).plan.aggregates[0].stat
        assert stat is not None and stat.beta is not None
        engine.run(sql, analyst="a")
    finally:
        engine.close()
    scales = [scale for kind, _, scale, _ in noise.calls if kind == "laplace"]
    assert scales and all(type(s) is Fraction for s in scales)
    s = local.mean_smooth(25, Fraction(50), 1, Neighbouring.ADD_REMOVE, stat.beta)
    assert 2 * s / stat.epsilon in scales
    lower, upper = _bracket(stat.beta)
    rel = Neighbouring.ADD_REMOVE
    by_def = [local.mean_local_bound(max(25 - k, 0), Fraction(50), 1, rel) for k in range(27)]
    low = max(lower**k * v for k, v in enumerate(by_def))
    high = max(upper**k * v for k, v in enumerate(by_def))
    assert low <= s <= high * (1 + Fraction(1, 10**9))
