"""Exact per-group primitives + plan + noise source → noisy groups (and partition selection).

This is the only place that sees exact aggregates; it hands on noisy values only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpproxy.errors import InternalError
from dpproxy.mechanisms.base import Gaussian, Laplace, Mechanism, Staircase
from dpproxy.mechanisms.noise import (
    NoiseSource,
    laplace_on_lattice,
    lattice_exponent,
    lattice_half_width,
)
from dpproxy.mechanisms.staircase import staircase_for
from dpproxy.planning.plan import QueryPlan, Release
from dpproxy.release.exact import ExactResult, norm
from dpproxy.release.guard import SumGuard, changed_coordinates, drawn_release, guarded
from dpproxy.release.memo import per_plan
from dpproxy.rewrite.fixed import pow2, sum_grids, unscale
from dpproxy.values import at_most

if TYPE_CHECKING:  # release/stats.py is imported by a plan with stats only (apply_noise)
    from dpproxy.release.stats import StatValues

__all__ = ["ExactResult", "NoisyGroup", "apply_noise", "derived_name", "drawn_laws"]


@dataclass(frozen=True, slots=True)
class NoisyGroup:
    key: tuple[Any, ...]
    values: dict[str, float | None]  # primitive or stat name → noisy value (None: refused)
    spans: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # stats' 95%


def derived_name(stat: str) -> str:
    """The key of the count read off JOINT stat ``stat`` in a :class:`NoisyGroup`."""
    return f"{stat}.count"


_sum_grids = per_plan(sum_grids)  # a product of the plan alone (release/memo.py)


def _drawn(plan: QueryPlan) -> dict[str, tuple[SumGuard | None, Release]]:
    """Every release's guard (``release/guard.py``) and the release with the mechanism its
    noise is actually drawn from (the plan's, inflated for a SUM's guard, or the staircase
    that replaces it: :func:`_staircase`), by primitive."""
    out: dict[str, tuple[SumGuard | None, Release]] = {}
    grids = _sum_grids(plan)
    for r in plan.releases:
        g, m = drawn_release(plan, r)
        m = _staircase(plan, r, g, m, grids) or m
        out[r.primitive.name] = (g, r if m is r.mechanism else replace(r, mechanism=m))
    return out


def _staircase(
    plan: QueryPlan, r: Release, g: SumGuard | None, m: Mechanism, grids: dict[str, int]
) -> Staircase | None:
    """The staircase a guarded Laplace SUM release is drawn from instead (None: the Laplace
    ``m``), where it lowers the median |noise| (``mechanisms/staircase.py``).

    Privacy argument. One neighbour changes at most K coordinates of the release (K = 1
    ungrouped; grouped, the groups a unit touches, twice that under substitution:
    :func:`changed_coordinates`), each guarded value f(x) by at most Δ∞ + h
    (``release/guard.py``: |x − x'| ≤ Δ∞, the release's L∞ sensitivity, and the rounding adds
    ≤ h), the ``move`` each coordinate's staircase is built for, on the lattice 2^k of the
    Laplace it replaces (k ≤ −bits). Each coordinate's noise is independent and
    (1/s)-DP for its move, so the release is K/s-DP (basic composition over the changed
    coordinates; an unchanged one has the same law under both neighbours), with
    1/s ≤ ε/K, ε = Δ₁/b the plan's Laplace's (b the plan's scale, not the guard's wider one:
    the staircase takes the guard's h into its step instead), never above the release's
    charged cost. So K·(1/s) ≤ ε. A function of the plan alone."""
    bits = grids.get(r.primitive.name)
    plain = r.mechanism
    if g is None or bits is None or not isinstance(m, Laplace) or not isinstance(plain, Laplace):
        return None
    epsilon = plain.epsilon(r.sensitivity)
    if not epsilon or not at_most(epsilon, r.cost.epsilon):
        return None
    changed = changed_coordinates(plan)
    k = lattice_exponent(m.scale, bits)
    h = pow2(g.step)
    span = pow2(g.step + g.span)
    return staircase_for(epsilon / changed, r.sensitivity.linf + h, k, m.scale, span)


_drawn_releases = per_plan(_drawn)


def drawn_laws(plan: QueryPlan) -> None:
    """Work out (and keep, per plan object) the law each release of ``plan`` is drawn from:
    the engine calls it while planning, so that a failure in it (a bug: it depends on the plan
    alone) is raised before any data is read and nothing is charged."""
    _drawn_releases(plan)


def _domain_product(plan: QueryPlan) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every group of a plan with public keys, in the domain's order, and each normalised
    as the backend's rows are (``exact.norm``): a product of the plan alone."""
    domains = [k.domain for k in plan.query.keys]
    keys = [tuple(combo) for combo in itertools.product(*domains)]  # type: ignore[arg-type]
    return keys, [tuple(norm(v) for v in k) for k in keys]


_domain_keys = per_plan(_domain_product)


def drawn(plan: QueryPlan, r: Release) -> Release:
    """``r`` with the mechanism its noise is actually drawn from: what the error bars and
    ``explain`` report, and what :func:`apply_noise` draws (one place, ``release/guard.py``)."""
    got = _drawn_releases(plan).get(r.primitive.name)
    return r if got is None or got[1].primitive is not r.primitive else got[1]


def _key_order(key: tuple[Any, ...]) -> tuple[tuple[int, str, Any], ...]:
    """A total order on group keys of mixed types with NULLs first."""
    return tuple((0, "", 0) if v is None else (1, type(v).__name__, v) for v in key)


def _lattice(r: Release, grids: dict[str, int]) -> int | None:
    """The exponent k of the lattice 2^k·ℤ a release's noise is drawn on, or None (OpenDP's
    default grid or the integers): a Laplace SUM release, whose exact value is a multiple of
    2^-bits (``rewrite/fixed.py``), is noised on that grid or finer (``mechanisms/noise.py``,
    :meth:`~dpproxy.mechanisms.noise.OpenDPNoise.laplace_lattice`, which has the privacy
    argument). Public: the plan's grid and scale only."""
    m = r.mechanism
    bits = grids.get(r.primitive.name)
    if r.integer or bits is None or not isinstance(m, Laplace) or m.scale <= 0:
        return None
    return lattice_exponent(m.scale, bits)


def drawn_half_width(plan: QueryPlan, r: Release, alpha: float) -> float:
    """The (1 − α) bound of the noise release ``r`` actually draws: its mechanism's, widened
    by the lattice step where the noise is drawn on a lattice (:func:`lattice_half_width`;
    a batch's lattice is the finest of its releases', never coarser than ``r``'s own)."""
    r = drawn(plan, r)
    width = r.half_width(alpha)
    k = _lattice(r, _sum_grids(plan))
    return width if k is None else lattice_half_width(width, math.ldexp(1.0, k))


def _add_noise(
    r: Release, exact: list[float], noise: NoiseSource, k: int | None = None
) -> list[float]:
    m = r.mechanism
    if isinstance(m, Staircase):
        return _staircase_noise(noise, exact, m)
    if isinstance(m, Laplace):
        if k is not None:
            return laplace_on_lattice(noise, exact, m.scale, k)
        return noise.laplace(exact, m.scale, integer=r.integer)
    if isinstance(m, Gaussian):
        return noise.gaussian(exact, m.sigma, integer=r.integer)
    raise InternalError("unknown mechanism")


def _staircase_noise(noise: NoiseSource, values: list[float], law: Staircase) -> list[float]:
    """``noise.staircase`` where the source has it (the production sources), else its
    continuous ``laplace`` at the scale the staircase replaces (the tests' sources, which add
    no noise or a fixed shift)."""
    draw = getattr(noise, "staircase", None)
    if draw is None:
        return noise.laplace(values, law.laplace_scale, integer=False)
    drawn: list[float] = draw(values, law)
    return drawn


def _noise_releases(
    releases: tuple[Release, ...],
    keys: list[tuple[Any, ...]],
    exact_value: Callable[[tuple[Any, ...], str], float],
    noise: NoiseSource,
    grids: dict[str, int] | None = None,
) -> dict[str, list[float]]:
    """Every release's noisy values, one per group; releases that share a mechanism, scale
    and domain (integer or not) are noised together in **one** call of the noise source.

    Privacy: the same as one call per release. The noise source adds independent noise of
    the given law to each coordinate of the vector it is given (OpenDP's ``make_laplace`` /
    ``make_gaussian`` over a vector domain), so concatenating the vectors of releases with the
    same law and splitting the result gives each coordinate exactly the noise one call per
    release would: the planner's calibration is per release and per group, and holds
    unchanged. What the batch saves is OpenDP's fixed cost per call (about 0.1 ms).

    A batch of Laplace SUM releases is drawn on the finest of their lattices (:func:`_lattice`):
    every value of the batch is a multiple of its own release's 2^k, hence of the finest."""
    return _draw_batches(_batches(releases, grids), keys, exact_value, noise)


Batch = tuple[Release, tuple[str, ...], int | None]


def _batches(releases: tuple[Release, ...], grids: dict[str, int] | None) -> list[Batch]:
    """:func:`_noise_releases`' batches: per law (mechanism, scale, integer or not), the
    release whose law is drawn, the names of its releases in order, and the finest lattice
    (None: no lattice). A function of the releases and grids alone, so of the plan
    (:func:`apply_noise` keeps it per plan: the grouping hashes each scale, a Fraction)."""
    batches: dict[tuple[Any, ...], list[Release]] = {}
    for r in releases:
        m = r.mechanism
        if not isinstance(m, Laplace | Gaussian | Staircase):
            raise InternalError("unknown mechanism")
        law = m.scale if isinstance(m, Laplace) else m.sigma if isinstance(m, Gaussian) else m
        batches.setdefault((type(m), law, r.integer), []).append(r)
    out = []
    for batch in batches.values():
        lattices = [_lattice(r, grids or {}) for r in batch]
        fine = None if None in lattices else min(k for k in lattices if k is not None)
        out.append((batch[0], tuple(r.primitive.name for r in batch), fine))
    return out


def _draw_batches(
    batches: list[Batch],
    keys: list[tuple[Any, ...]],
    exact_value: Callable[[tuple[Any, ...], str], float],
    noise: NoiseSource,
) -> dict[str, list[float]]:
    """Each batch's values (release by release, group by group) noised in one call, split
    back by release."""
    noisy: dict[str, list[float]] = {}
    n = len(keys)
    for first, names, fine in batches:
        values = [exact_value(k, name) for name in names for k in keys]
        drawn = _add_noise(first, values, noise, fine)
        if len(drawn) != len(values):
            raise InternalError("the noise source returned an unexpected number of values")
        for i, name in enumerate(names):
            noisy[name] = drawn[i * n : (i + 1) * n]
    return noisy


def _plan_batches(plan: QueryPlan) -> list[Batch]:
    laws = _drawn_releases(plan)
    return _batches(tuple(laws[r.primitive.name][1] for r in plan.releases), _sum_grids(plan))


_batches_of = per_plan(_plan_batches)


def apply_noise(
    plan: QueryPlan,
    exact: ExactResult | None,
    noise: NoiseSource,
    extras: dict[str, ExactResult] | None = None,
) -> list[NoisyGroup]:
    """Noise every released primitive of every group; drop groups that fail selection; release
    every other aggregate (``release/stats.py``) for the groups that remain.

    ``exact`` is the main statement's result (``None`` when the plan has no primitives);
    ``extras`` the result of each stat statement, by stat name."""
    q = plan.query
    nk = len(q.keys)
    expected = nk + len(plan.primitives)
    if exact is None:
        if plan.primitives:
            raise InternalError("the main statement's result is missing")
        exact = ExactResult(tuple(f"__key_{i}" for i in range(nk)), ())
    elif len(exact.columns) != expected:
        raise InternalError("the backend returned an unexpected shape")
    by_key: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    if nk == 1:
        for row in exact.rows:
            by_key[(norm(row[0]),)] = row
    else:
        for row in exact.rows:
            by_key[tuple(norm(v) for v in row[:nk])] = row
    names = [p.name for p in plan.primitives]
    keys: list[tuple[Any, ...]]
    found: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
    if not q.keys:
        keys = [()]
    elif q.public_keys:
        # Exactly the domain's groups, in the domain's order; any other group the database
        # returns (the SQL of text and boolean keys has no domain filter: rewrite/pipeline.py,
        # groups_left_to_release) is never read.
        keys, normalised = _domain_keys(plan)
        found = {k: by_key.get(n) for k, n in zip(keys, normalised, strict=True)}
    else:
        # Sorted by value: the database's output order could depend on groups that partition
        # selection then suppresses, so it must not reach the analyst.
        returned = [tuple(row[:nk]) for row in exact.rows]
        keys = sorted(returned, key=_key_order)
        found = {k: by_key.get(tuple(norm(v) for v in k)) for k in returned}

    grids = _sum_grids(plan)  # sums come back as integers on a grid 2^-k (rewrite/fixed.py)

    column: dict[str, int] = {}
    for i, name in enumerate(names):
        column.setdefault(name, nk + i)

    def row_of(key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The key's row (None: absent), its key normalised once, not once per primitive."""
        try:
            return found[key]
        except KeyError:
            row = found[key] = by_key.get(tuple(norm(v) for v in key))
            return row

    def exact_value(key: tuple[Any, ...], name: str) -> float:
        row = row_of(key)
        if row is None:
            return 0.0  # a public group absent from the data: zero-filled
        v = row[column[name]]
        if v is None:
            return 0.0
        bits = grids.get(name)
        if bits is None:
            return float(v)
        if type(v) is int:
            # float(T·2^-bits) exactly as float(unscale(v, bits)) rounds it: the int rounds
            # once to the nearest double, and scaling a double by a power of two is exact
            # (|bits| ≤ 1000 and |T| < 2^115: no overflow, no subnormal).
            return math.ldexp(float(v), -bits)
        return float(unscale(v, bits))  # exact, then rounded once

    def exact_scaled(key: tuple[Any, ...], name: str) -> int:
        """A SUM primitive's total as the integer T of its grid (0: absent or NULL)."""
        row = row_of(key)
        v = None if row is None else row[column[name]]
        if v is None:
            return 0
        if type(v) is int:
            return v
        t = Fraction(v)  # a Decimal or float of an integer total (other backends)
        if t.denominator != 1:
            raise InternalError("a fixed-point total that is not an integer")
        return t.numerator

    laws = _drawn_releases(plan)

    def noised_value(key: tuple[Any, ...], name: str) -> float:
        """What release ``name`` is noised around: a guarded SUM's exact total through its
        public map, as an exact double (``release/guard.py``); else :func:`exact_value`."""
        g = laws[name][0]
        if g is None:
            return exact_value(key, name)
        return guarded(exact_scaled(key, name), grids[name], g)

    noisy = _draw_batches(_batches_of(plan), keys, noised_value, noise)  # _noise_releases
    keep = [True] * len(keys)
    if plan.selection is not None:
        sel = plan.selection
        if sel.shared:  # the released count's own noise (planning/selfselect.py)
            noisy_units = noisy[sel.release.primitive.name]
        else:
            units = [exact_value(k, sel.release.primitive.name) for k in keys]
            noisy_units = _add_noise(sel.release, units, noise)
        # Integer noisy counts against the integer threshold, compared exactly (a float holds
        # every count): the event whose probability the plan bounds (mechanisms/selection.py).
        keep = [u > sel.threshold for u in noisy_units]
    kept = [k for i, k in enumerate(keys) if keep[i]]
    stats: dict[str, StatValues] = {}
    if plan.stats:  # order statistics, PTR, SAA...: release/stats.py, imported for them only
        from dpproxy.release.stats import release_stats

        stats = release_stats(plan, kept, exact_value, extras or {}, noise, exact_scaled, grids)
    out = []
    named = [(name, derived_name(name), sv) for name, sv in stats.items()]  # once, not per group
    for i, k in enumerate(keys):
        if not keep[i]:
            continue
        released: dict[str, float | None] = {name: vals[i] for name, vals in noisy.items()}
        spans: dict[str, tuple[float, float] | None] = {}
        for name, count_name, sv in named:
            released[name] = sv.values.get(k)
            spans[name] = sv.spans.get(k)
            if k in sv.counts:  # a JOINT mean's A + B (planning/derived.py)
                released[count_name], spans[count_name] = sv.counts[k]
        out.append(NoisyGroup(k, released, spans))
    return out
