"""``analysis/local._decay``: the decay u ≈ e^{−β} of the smooth sensitivity, summed in integers
(issue 21: the Fraction series took 2–4 ms per call), still brackets e^{−β} as documented:
e^{−β}·(1 + 2^-48) ≤ u ≤ e^{−β}·(1 + 2^-47).

The reference brackets e^{−β} with exact Fraction partial sums of the alternating series (one
ending on a negative term, a lower bound; one on a positive term, an upper bound), for β up to
1/2, and raises both to 2^h for larger β (the function halves β h times).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpproxy.analysis import local
from dpproxy.catalog.model import Neighbouring
from dpproxy.values import ln_up


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
