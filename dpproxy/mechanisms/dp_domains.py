"""Domains of text columns chosen with DP, for ``dpproxy schema init --dp-bounds``.

A schema's domain is the public list of a text column's values: a ``GROUP BY`` over the column
then releases exactly those groups, spending nothing on choosing them (schemas/README.md). Read
from the data, the list would leak it (a value only one person holds names that person). Chosen
by this mechanism it is a differentially private release, charged to the data steward's account
in the ledger with the bounds of ``mechanisms/dp_bounds.py``.

**The mechanism.** For one text column ``x`` of a table whose privacy unit is ``u``:

1. Each unit is reduced to one value ``v_u``: among the distinct non-NULL values of ``x`` over
   its rows, the one whose ``md5(x) || x`` is smallest (a fixed order that does not depend on
   the data and favours no value by its spelling; ``backends/opener.domain_sql``). NULLs and
   rows without a unit are ignored; a unit with no value has none.
2. For each value ``v`` some unit has, ``c_v = #{u : v_u = v}``, the number of units reduced
   to it.
3. Each ``c_v`` gets independent discrete Laplace noise ``Z_v`` of scale b = Δ₁/ε_d, Δ₁ =
   :data:`SENSITIVITY` = 2 (OpenDP's sampler, :meth:`NoiseSource.laplace` with
   ``integer=True``, which draws at ``float_up(b)``), and ``v`` is kept when
   ``c_v + Z_v > τ``, τ = ``selection_threshold(b, N, δ_d)`` (``mechanisms/selection.py``,
   derived from the law of the noise actually drawn), N = :data:`EXCLUSIVE` = 2.
4. Post-processing: if more than ``cap`` values are kept, the ``cap`` with the largest noisy
   counts stay (ties: the smaller value); the list is sorted. The noisy counts are dropped.

**Privacy argument.** Neighbouring datasets differ in all the rows of one unit w (added,
removed, or replaced). Step 1 maps w to at most one value, computed from w's rows alone, and
leaves every other unit's value as it is. So the count vectors ``c`` and ``c'`` differ by at
most 1 at ``v_w`` (add/remove) or by −1 at ``v_w`` and +1 at ``v'_w`` (substitution): their L1
distance is at most 2 = Δ₁, and at most 2 = N values have a positive count in one dataset and
none in the other, each with count exactly 1 there. (These three facts are checked by brute
force over every neighbour of small random tables, on the real SQL, in
``tests/property/test_dp_domains_bruteforce.py``.) Let S be the values both datasets hold. The noisy
counts on S are the Laplace mechanism at L1 sensitivity ≤ Δ₁ and scale Δ₁/ε_d, so ε_d-DP, and
which of them pass τ is post-processing. A value only one dataset holds has count 1 and is kept
with probability P(1 + Z > τ) = P(Z ≥ τ) ≤ δ_d/N (``selection_threshold``), so some of them
(at most N) is kept with probability ≤ δ_d; coupling the two runs on the noise of S, the
outputs differ beyond the ε_d-DP part only on that event. Each column's domain is therefore
(ε_d, δ_d)-DP under both neighbour relations (under add/remove alone, (ε_d/2, δ_d/2)-DP: Δ₁
and N are 1 there; the charge is the larger figure, so a schema may declare either relation).
Step 4 and writing the file are post-processing.

**Composition.** :func:`split` divides the steward's ``--epsilon E`` equally among the columns
that get a DP release: each of the ``b`` bounded columns and each of the ``t`` text columns gets
E/(b + t) (a bounded column spends it on its two choices, E/(2(b + t)) each), and each text
column gets δ/t of ``--delta δ``. By basic composition the draft is (E, δ)-DP, exactly (the
shares are Fractions that add up to E and δ; :func:`split` checks it). The column types, hence
which columns get a domain, are public as for the bounds (``mechanisms/dp_bounds.py``).

**What a released domain means.** Only values that enough units hold appear: a value held by
about τ units or fewer is likely missing (it is kept with probability P(Z ≥ τ − c + 1) at c
units). A ``GROUP BY`` over the column then releases exactly the listed values (and NULL when
the column is nullable), and the rows whose value is not listed are left out of that query's
groups; other queries still read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpproxy.mechanisms.noise import NoiseSource
from dpproxy.mechanisms.selection import selection_threshold

SENSITIVITY = 2  # Δ₁ of the count vector: −1 and +1 under substitution (module docstring)
EXCLUSIVE = 2  # N: values one neighbour holds and the other not, each with one unit


@dataclass(frozen=True, slots=True)
class Split:
    """How ``--epsilon`` and ``--delta`` are shared (module docstring, *Composition*)."""

    bound_each: Fraction  # ε′ of each of a bounded column's two choices (0: no bounded column)
    domain_epsilon: Fraction  # ε_d of each text column's domain (0: no text column)
    domain_delta: Fraction  # δ_d of each text column's domain


def split(epsilon: Fraction, delta: Fraction, bounded: int, text: int) -> Split:
    """Share (ε, δ) equally among ``bounded`` + ``text`` columns; the shares add up to exactly
    (ε, δ), or (ε, 0) without a text column.

    >>> s = split(Fraction(1), Fraction(1, 10**6), 2, 1)
    >>> s.bound_each, s.domain_epsilon, s.domain_delta
    (Fraction(1, 6), Fraction(1, 3), Fraction(1, 1000000))
    """
    columns = bounded + text
    if epsilon <= 0 or columns < 1 or (text and not 0 < delta < 1) or bounded < 0 or text < 0:
        raise ValueError("a DP draft needs ε > 0, a column, and 0 < δ < 1 for a domain")
    each = epsilon / columns
    out = Split(each / 2, each if text else Fraction(0), delta / text if text else Fraction(0))
    assert 2 * bounded * out.bound_each + text * out.domain_epsilon == epsilon
    assert text * out.domain_delta == (delta if text else 0)
    return out


def scale(epsilon: Fraction) -> Fraction:
    """b = Δ₁/ε_d, the planned scale of the counts' noise (drawn at ``float_up(b)``)."""
    if epsilon <= 0:
        raise ValueError("ε of a domain must be positive")
    return Fraction(SENSITIVITY) / epsilon


def threshold(epsilon: Fraction, delta: Fraction) -> int:
    """τ: a value only one neighbour holds (one unit) passes with probability ≤ δ_d/N."""
    return selection_threshold(scale(epsilon), EXCLUSIVE, delta)


@dataclass(frozen=True, slots=True)
class ChosenDomain:
    values: tuple[str, ...]  # sorted; empty when no value passed
    threshold: int  # τ
    capped: bool  # more than the cap passed: the cap with the largest noisy counts stayed


def choose_domain(
    counts: Sequence[tuple[str, int]],
    epsilon: Fraction,
    delta: Fraction,
    noise: NoiseSource,
    cap: int,
) -> ChosenDomain:
    """One column's domain from its exact counts ``(v, c_v)`` (every value with c_v ≥ 1, each
    once): (ε_d, δ_d)-DP, see the module docstring."""
    if cap < 1:
        raise ValueError("the cap of a domain must be positive")
    tau = threshold(epsilon, delta)
    noisy = noise.laplace([c for _, c in counts], scale(epsilon), integer=True)
    kept = [(n, v) for (v, _), n in zip(counts, noisy, strict=True) if n > tau]
    capped = len(kept) > cap
    if capped:
        kept = sorted(kept, key=lambda nv: (-nv[0], nv[1]))[:cap]
    return ChosenDomain(tuple(sorted(v for _, v in kept)), tau, capped)
