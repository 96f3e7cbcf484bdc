"""Beyond global sensitivity: the candidate plans of one aggregate, their predicted errors, the
choice between them, and the calibration of the chosen one (a :class:`StatPlan`).

Every prediction uses public information only — the schema's bounds, ε, δ, the contribution
bound and a *reference size* n (the table's declared ``public_rows`` when the query neither
filters nor groups, else :data:`REFERENCE_ROWS`) — so the choice never depends on the data.
Predictions are *typical* 95% errors, not guarantees: where a method's error also depends on
the data, they assume a mean near the middle of the bounds (GS, JOINT) or values spread evenly
over the bounds (order statistics), and say so. ``benchmarks/LOCAL.md`` compares them with
measured errors.

Privacy arguments, per method, for one group (``rows`` = R rows of one unit in the group; a
unit touches at most ``groups`` = G groups, so the plan costs G times the per-group figures by
basic composition; neighbours are those of the schema, add/remove or substitute one unit):

* **JOINT** (AVG; Kulesza–Suresh–Wang, ``reading/003``). With y = (x − lo)/w ∈ [0, 1] the pair
  (Σy, Σ(1 − y)) moves by y + (1 − y) = 1 in L1 per row added or removed, so the vector over all
  groups moves by at most the unit's total rows K (2K under substitution). Laplace(K/ε) on each
  coordinate is ε-DP (Dwork et al. 2006); the mean lo + w·A/(A + B) is post-processing.
* **PTR** (AVG, order statistics; Dwork–Lei 2009, ``reading/000`` definition 18). d(x) is a
  lower bound on the number of unit steps to a dataset whose local sensitivity exceeds the
  proposed bound b (``analysis/local.py``), an integer with sensitivity 1. The test releases
  d + Z with Z *discrete* Laplace of scale 1/ε_t (ε_t-DP for an integer of sensitivity 1) and
  passes when d + Z ≥ m, for the smallest integer m with P(Z ≥ m) = p^m/(1 + p) ≤ δ at the
  scale the sampler actually draws (``mechanisms/selection.py``'s exact tail, the same law as
  partition selection's): a dataset with d = 0 passes with probability at most δ. The plan
  stores τ = m − 1 and refuses when d + Z ≤ τ. When d ≥ 1 every neighbour's value is within b,
  so the value plus Laplace(b/ε_r) is ε_r-DP. Together (ε_t + ε_r, δ)-DP, charged whether or
  not it refuses. (The continuous-Laplace threshold ln(1/(2δ))/ε_t used before bounds
  continuous noise, not the integer comparison; the teaching text's ln(2/δ)/(2ε) passes a
  d = 0 dataset with probability ½·(δ/2)^{1/2}, far above δ.)
* **SMOOTH** (AVG, order statistics; Nissim–Raskhodnikova–Smith 2007, Lemma 2.6 and
  Corollary 2.4; ``reading/000`` definition 19). S(x) = max_k e^{−βk}·Ā(x, k) with Ā an upper
  bound on the local sensitivity at distance k that satisfies Ā(x, k) ≤ Ā(x′, k + 1) for
  neighbours, so S is a β-smooth upper bound on LS. Laplace noise of scale 2S/ε with
  β ≤ ε/(2 ln(2/δ)) is (ε, δ)-DP.
* **EXPONENTIAL** (order statistics; McSherry–Talwar 2007, ``reading/001``). The domain is cut
  into cells; each cell's score (its distance in rank from the requested quantile q) moves by at
  most Δ = R·max(q, 1 − q) when a unit is added or removed, Δ = R under substitution
  (``analysis/local.score_sensitivity``) between neighbours.
  Report-noisy-min with exponential noise of scale 2Δ/ε (OpenDP's ``make_noisy_max``; in
  distribution, permute-and-flip, McKenna & Sheldon 2020) is ε-DP like the exponential
  mechanism, and never less accurate; counts per cell come from a GROUP BY in SQL. (The
  tests/audit estimate stayed below ε/2 for medians at Δ = R: the scores move together.)
* **SAA** (sample-and-aggregate, ``reading/000`` definition 20). A keyed hash of the privacy unit
  sends all of a unit's rows (in a group) to one of k chunks; each chunk's statistic is clipped
  to [l, u] (an empty chunk counts as the middle), so one unit moves the mean of the k chunk
  answers by at most (u − l)/k: Laplace((u − l)/(kε)) is ε-DP. Without GROUP BY no contribution
  bound is needed at all (the unit is in one chunk whatever its number of rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpproxy.analysis import local
from dpproxy.catalog.model import Neighbouring
from dpproxy.errors import InvalidParameter, PrivacyParameterError, UnsupportedQuery
from dpproxy.mechanisms.selection import selection_threshold
from dpproxy.planning.plan import Candidate, Method, StatPlan
from dpproxy.sql.scope import AggKind, Aggregate
from dpproxy.values import Interval, ln_up

REFERENCE_ROWS = 1000  # n for predictions when the table declares no public size
DEFAULT_CHUNKS = 100  # SAA's k unless a hint sets it
# Chunk statistics (CORR/REGR/AVG sum squares) and cell indices ((x − lo)·B/w) are computed
# on the clamped arguments: PostgreSQL raises on a float overflow, and an error that depends
# on a row's value would leak it, so the arguments must stay far from the double range.
SAA_ARGUMENT_LIMIT = Fraction(10) ** 100
DEFAULT_BINS = 1000  # exponential mechanism: cells over a real interval
INTEGER_CELLS = 10_000  # integer bounds this narrow get one cell per integer
_Z95 = math.log(20)  # Laplace: P(|X| > b·ln 20) = 5%
_LAPLACE_DIFFERENCE_95 = 4.12  # two Laplace(1): P(|X − Y| > 4.12) < 5%

_MEAN_METHODS = (Method.GS, Method.JOINT, Method.PTR, Method.SMOOTH, Method.SAA)
_QUANTILE_METHODS = (Method.EXPONENTIAL, Method.PTR, Method.SMOOTH, Method.SAA)


@dataclass(frozen=True, slots=True)
class MethodOptions:
    """What an analyst may ask for, per session (``SET dpproxy.mechanism``) or per query (a
    ``/*+ dpproxy ... */`` hint). ``None`` everywhere: the planner decides."""

    method: Method | None = None
    ptr_bound: Fraction | None = None
    saa_chunks: int | None = None
    saa_lower: Fraction | None = None
    saa_upper: Fraction | None = None
    bins: int | None = None
    # Rows per unit: a fixed bound, or the cap and target coverage of the DP choice.
    max_rows: int | None = None
    max_rows_cap: int | None = None
    coverage: Fraction | None = None
    join_rows: int | None = None  # DropExcess(T) of a join between two units' rows
    max_groups: int | None = None  # with max_rows_per_group: a G × R bound instead of rows
    max_rows_per_group: int | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    """The share of one aggregate: ε and δ for the whole aggregate, and the group structure."""

    epsilon: Fraction
    delta: Fraction
    groups: int  # G: groups one unit can touch (1 without GROUP BY)
    rows: int  # R: rows of one unit in one group
    total_rows: int  # K: rows of one unit over all groups (L1 of vector releases)
    neighbouring: Neighbouring
    reference_rows: int  # n used for predictions, per group
    public_size: bool  # reference_rows comes from the schema's public_rows
    gaussian: bool  # the schema's noise for GS primitives is Gaussian
    integral: bool = False  # the measure takes integer values only
    arguments_tame: bool = True  # every argument is bounded within ±SAA_ARGUMENT_LIMIT
    # (ε/G, δ/G): read by every candidate and calibration, so divided once.
    per_group: tuple[Fraction, Fraction] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        g = self.groups  # (x / 1 is x: no division when the query has no GROUP BY)
        shares = (self.epsilon, self.delta) if g == 1 else (self.epsilon / g, self.delta / g)
        object.__setattr__(self, "per_group", shares)


def weight(kind: AggKind) -> int:
    """How many budget shares an aggregate gets: the number of primitives of its GS plan."""
    if kind is AggKind.AVG:
        return 2
    if kind in (AggKind.VAR_POP, AggKind.VAR_SAMP, AggKind.STDDEV_POP, AggKind.STDDEV_SAMP):
        return 3
    return 1


def methods_for(kind: AggKind) -> tuple[Method, ...]:
    if kind is AggKind.AVG:
        return _MEAN_METHODS
    if kind in (AggKind.MIN, AggKind.MAX):
        return (Method.EXPONENTIAL,)
    if kind.quantile:
        return _QUANTILE_METHODS
    if kind.bivariate:
        return (Method.SAA,)
    return (Method.GS,)


def quantile_form(kind: AggKind) -> str:
    """Order statistics that interpolate ("cont") or pick a value ("disc")."""
    return "cont" if kind in (AggKind.MEDIAN, AggKind.PERCENTILE_CONT) else "disc"


def _saa_output(agg: Aggregate, bounds: Interval | None, opts: MethodOptions) -> Interval | None:
    lo, hi = opts.saa_lower, opts.saa_upper
    if (lo is None) != (hi is None):
        raise InvalidParameter("give both saa_lower and saa_upper, or neither")
    if lo is not None and hi is not None:
        if not lo < hi:
            raise InvalidParameter("saa_lower must be below saa_upper")
        return Interval(lo, hi)
    if agg.kind is AggKind.CORR:
        return Interval(Fraction(-1), Fraction(1))
    if agg.kind.bivariate:
        return None
    return bounds


def _ptr_pieces(budget: Budget) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """(ε_t, ε_r, test threshold τ, per-group δ) for one group's PTR: ε split evenly."""
    eps, dlt = budget.per_group
    eps_t = eps_r = eps / 2
    if dlt <= 0:
        raise PrivacyParameterError("propose-test-release needs δ > 0")
    # pass iff d + Z ≥ m, i.e. d + Z > m − 1, with P(Z ≥ m) ≤ δ for discrete Laplace Z
    threshold = Fraction(selection_threshold(1 / eps_t, 1, dlt) - 1)
    return eps_t, eps_r, threshold, dlt


def _beta(budget: Budget) -> Fraction:
    eps, dlt = budget.per_group
    if dlt <= 0:
        raise PrivacyParameterError("smooth sensitivity needs δ > 0")
    return eps / (2 * ln_up(2 / dlt))


def _predicted_mean_smooth(
    n: int, w: float, rows: int, rel: Neighbouring, eps: float, dlt: Fraction
) -> float:
    """The smooth bound S of a mean at n rows, in floats: what :func:`local.mean_smooth` gives
    at the β of :func:`_beta`, for *ranking* the SMOOTH plan only (issue 21: the exact
    computation, with β's 1,000-bit denominator, was a fifth of planning an AVG).

    Same formula and the same O(1) candidates k ∈ {0, k_f − 1, k_f} as ``mean_smooth``
    (LS'(m) = min(w, K·w/m), w at m = 0; k_f = ⌈(n − K)/K⌉), with e^{−βk} for the exact
    method's u^k and β = ε/(2·ln(2/δ)) in floats. Direction and size of the difference:
    u ≥ e^{−β} by at most a relative 2^-47 and ln_up exceeds ln by a relative 10⁻⁹ (so the
    exact β is smaller and its e^{−βk} larger): the exact S is at least this value and above
    it by a relative βk·10⁻⁹ + k·2^-47 at most, plus a few ulps; βk ≤ ln n wherever term k is
    the maximum (else e^{−βk}·w < w/n ≤ the k = 0 term), so below 3·10⁻⁸ for n ≤ 10⁶
    (tests/unit/test_planning_speed_equivalence.py checks 3,000 random budgets). A prediction
    is all it is: the plan chosen is calibrated exactly by :func:`stat_plan` (β from
    :func:`_beta`) and released with the exact ``mean_smooth`` of the released count, so no
    privacy figure depends on this value; the ranking can differ from the exact prediction's
    only between candidates whose predictions are that close, and the shown figure (4
    digits) only at a rounding boundary.
    """
    ck, k_rows = local.row_radius(rel, rows), local.size_step(rel, rows)  # as mean_smooth

    def ls(m: int) -> float:
        return w if m <= 0 else min(w, ck * w / m)

    beta = eps / (2 * (math.log(2 * dlt.denominator) - math.log(dlt.numerator)))  # ln(2/δ)
    best = ls(n)
    k_flat = max(0, -((ck - n) // k_rows))
    for k in {k_flat - 1, k_flat} - {0, -1}:
        best = max(best, math.exp(-beta * k) * ls(n - k * k_rows))
    return best


def _auto_ptr_bound(
    budget: Budget,
    width: Fraction,
    pieces: tuple[Fraction, Fraction, Fraction, Fraction] | None = None,
) -> Fraction | None:
    """A bound the test passes with probability ≥ 95% at the public size, or None
    (``pieces``: ``_ptr_pieces(budget)`` when the caller has it already)."""
    if not budget.public_size:
        return None
    eps_t, _, threshold, _ = pieces or _ptr_pieces(budget)
    step = local.size_step(budget.neighbouring, budget.rows)
    margin = math.ceil(float(threshold) + _Z95 / float(eps_t)) + 1
    smallest = budget.reference_rows - step * margin
    if smallest <= 0:
        return None
    return local.mean_local_bound(smallest, width, budget.rows, budget.neighbouring)


def candidates(
    agg: Aggregate, bounds: Interval | None, budget: Budget, opts: MethodOptions
) -> tuple[Candidate, ...]:
    """Every method that could answer ``agg``, with its predicted 95% error."""
    return tuple(_candidate(m, agg, bounds, budget, opts) for m in methods_for(agg.kind))


def _candidate(
    m: Method, agg: Aggregate, bounds: Interval | None, budget: Budget, opts: MethodOptions
) -> Candidate:
    n = budget.reference_rows
    eps, dlt = budget.per_group
    if (
        m is not Method.SAA
        and agg.kind is not AggKind.COUNT_STAR
        and (bounds is None or not bounds.bounded)
    ):
        return Candidate(m, None, "", False, "the measure has no finite bounds")
    constant = bounds is not None and bounds.bounded and bounds.lo == bounds.hi
    if constant and m in (Method.JOINT, Method.PTR, Method.SMOOTH):
        # Their local sensitivities and tests need a range of values (lo < hi).
        return Candidate(m, None, "", False, "the measure is a constant (its bounds are equal)")
    if m is not Method.GS and not budget.arguments_tame:
        return Candidate(
            m, None, "", False, "needs arguments with bounds within ±1e100 in the schema"
        )
    if m is Method.SAA:
        out = _saa_output(agg, bounds, opts)
        if out is None or not out.bounded:
            return Candidate(
                m, None, "", False, "needs an output range: /*+ dpproxy saa_lower=… saa_upper=… */"
            )
        assert out.lo is not None and out.hi is not None
        k = opts.saa_chunks or DEFAULT_CHUNKS
        err = float(out.hi - out.lo) / (k * float(eps)) * _Z95
        return Candidate(
            m, err, f"±{err:.4g}", True, f"k = {k} chunks; plus the chunks' sampling error"
        )
    if m is Method.GS:
        return Candidate(m, None, "", True, "")  # filled in by the planner (explain.py formula)
    assert bounds is not None and bounds.lo is not None and bounds.hi is not None
    width = bounds.hi - bounds.lo
    w = float(width)
    size = f" at n = {n:,}" + ("" if budget.public_size else " (reference size)")
    if m is Method.JOINT:
        if budget.gaussian:
            return Candidate(m, None, "", False, "the schema asks for Gaussian noise")
        sens = budget.total_rows * (2 if budget.neighbouring is Neighbouring.SUBSTITUTE else 1)
        # With A ≈ B ≈ n/2 the mean's error is w·(e_A − e_B)/(2n); the difference of two
        # Laplace(b) variables exceeds t with probability e^{−t/b}(1 + t/2b): below 5% at t = 4.12b.
        c = w * sens / float(budget.epsilon) * _LAPLACE_DIFFERENCE_95 / 2
        return Candidate(m, c / n, f"≈ ±{c:.4g}/n", True, size + ", mean mid-range")
    if m is Method.PTR:
        if dlt <= 0:
            return Candidate(m, None, "", False, "needs δ > 0")
        pieces = _ptr_pieces(budget)
        eps_r = pieces[1]
        b = opts.ptr_bound
        if b is None and agg.kind is AggKind.AVG:
            b = _auto_ptr_bound(budget, width, pieces)
        if b is None:
            why = "needs a proposed bound: /*+ dpproxy ptr_bound=… */"
            if agg.kind is AggKind.AVG and not budget.public_size:
                why += " (no public table size to choose one)"
            return Candidate(m, None, "", False, why)
        err = float(b / eps_r) * _Z95
        return Candidate(m, err, f"±{err:.4g}", True, f"b = {float(b):.4g}; refuses when unstable")
    if m is Method.SMOOTH:
        if dlt <= 0:
            return Candidate(m, None, "", False, "needs δ > 0")
        if agg.kind is AggKind.AVG:
            s_f = _predicted_mean_smooth(n, w, budget.rows, budget.neighbouring, float(eps), dlt)
            err = 2 * s_f / float(eps) * _Z95
            return Candidate(m, err, f"≈ ±{err * n:.4g}/n", True, size)
        beta = _beta(budget)
        radius = local.row_radius(budget.neighbouring, budget.rows)
        kmax, _ = local.smooth_window(radius, beta)
        gap = w / max(n, 1)
        spread = max(
            math.exp(-float(beta) * k) * min(w, (2 * (k + 1) * radius + 1) * gap)
            for k in range(0, kmax + 1)
        )
        err = 2 * spread / float(eps) * _Z95
        return Candidate(m, err, f"≈ ±{err * n:.4g}/n", True, size + ", evenly spread values")
    # EXPONENTIAL
    cells = _cells(bounds, budget, opts)
    delta_score = local.score_sensitivity(budget.neighbouring, budget.rows, agg.q)
    ranks = 2 * delta_score / float(eps) * math.log(cells.count / 0.05)
    rounding = 0.0 if cells.integer else float(cells.width) / 2
    err = ranks * w / max(n, 1) + rounding
    formula = f"≈ ±{ranks * w:.4g}/n" + (f" + {rounding:.4g}" if rounding else "")
    return Candidate(m, err, formula, True, size + ", evenly spread values")


MAX_CELL_SCALE = Fraction(10) ** 250  # cells per unit of the value, at most


def _cells(bounds: Interval, budget: Budget, opts: MethodOptions) -> local.Cells:
    assert bounds.lo is not None and bounds.hi is not None
    integer = budget.integral and bounds.lo.denominator == 1 and bounds.hi.denominator == 1
    integer = integer and bounds.hi - bounds.lo <= INTEGER_CELLS and opts.bins is None
    cells = local.quantile_cells(bounds.lo, bounds.hi, integer, opts.bins or DEFAULT_BINS)
    if not cells.integer and 1 / cells.width > MAX_CELL_SCALE:
        # The rewrite scales (x − lo) by bins / (hi − lo) (rewrite/stats.py); that factor
        # must be a finite double on every engine, decided here before any data is read.
        raise UnsupportedQuery(
            f"the bounds of this order statistic are too close together "
            f"(width {float(bounds.hi - bounds.lo):.3g}) to cut into cells",
            hint="widen the column's bounds in the schema, or scale the value up",
        )
    return cells


def choose(
    cands: tuple[Candidate, ...], forced: Method | None, kind: AggKind
) -> tuple[Method, str]:
    """The forced method, or the applicable one with the lowest predicted error.

    SAA is chosen automatically only when nothing else applies: its chunk sampling error is
    not predictable from public information.
    """
    if forced is not None:
        for c in cands:
            if c.method is forced:
                if not c.applicable:
                    raise InvalidParameter(
                        f"{forced.value} cannot answer {kind.value.upper()} here: {c.note}"
                    )
                return forced, "forced by the session or a hint"
    usable = [c for c in cands if c.applicable]
    if not usable:
        notes = "; ".join(f"{c.method.value}: {c.note}" for c in cands)
        raise UnsupportedQuery(f"no plan can answer {kind.value.upper()}: {notes}")
    ranked = [c for c in usable if c.method is not Method.SAA and c.error95 is not None]
    if not ranked:
        only = usable[0]
        return only.method, "the only applicable plan"
    best = min(ranked, key=lambda c: c.error95 or 0.0)
    return best.method, "lowest predicted 95% error"


def stat_plan(
    method: Method,
    agg: Aggregate,
    bounds: Interval | None,
    budget: Budget,
    opts: MethodOptions,
    *,
    name: str,
    bounded: bool,
    count: str | None = None,
    total: str | None = None,
    center: Fraction = Fraction(0),
) -> StatPlan:
    """Calibrate ``method`` for ``agg`` (see the module docstring for each argument)."""
    assert agg.measure is not None
    eps, dlt = budget.per_group
    # The fields every method shares; each method's own are added below and the plan is
    # built once (dataclasses.replace of a 25-field plan re-ran __init__ per change: issue 21).
    base: dict[str, Any] = {
        "method": method,
        "name": name,
        "kind": agg.kind,
        "measure": agg.measure,
        "second": agg.second,
        "bounds": bounds if bounds is not None else Interval(None, None),
        "epsilon": eps,
        "delta": Fraction(0),
        "rows": budget.rows,
        "groups": budget.groups,
        "neighbouring": budget.neighbouring,
        "bounded": bounded,
        "q": agg.q,
        "count": count,
        "total": total,
        "center": center,
    }
    if method is Method.JOINT:
        sens = budget.total_rows * (2 if budget.neighbouring is Neighbouring.SUBSTITUTE else 1)
        base.update(epsilon=budget.epsilon, groups=1, scale=Fraction(sens) / budget.epsilon)
        return StatPlan(**base)
    if method is Method.SAA:
        out = _saa_output(agg, bounds, opts)
        assert out is not None and out.lo is not None and out.hi is not None
        k = opts.saa_chunks or DEFAULT_CHUNKS
        return StatPlan(**base, chunks=k, output=out, scale=(out.hi - out.lo) / (k * eps))
    assert bounds is not None and bounds.lo is not None and bounds.hi is not None
    width = bounds.hi - bounds.lo
    radius = local.row_radius(budget.neighbouring, budget.rows)
    if method is Method.EXPONENTIAL:
        cells = _cells(bounds, budget, opts)
        delta_score = local.score_sensitivity(budget.neighbouring, budget.rows, agg.q)
        return StatPlan(
            **base,
            cells=cells.count,
            integer_cells=cells.integer,
            scale=2 * Fraction(delta_score) / eps,
        )
    if method is Method.PTR:
        pieces = _ptr_pieces(budget)
        eps_t, eps_r, threshold, dlt_g = pieces
        b = opts.ptr_bound
        if b is None and agg.kind is AggKind.AVG:
            b = _auto_ptr_bound(budget, width, pieces)
        if b is None or b <= 0:
            raise InvalidParameter("propose-test-release needs a positive ptr_bound")
        base.update(
            delta=dlt_g, bound=b, test_scale=1 / eps_t, threshold=threshold, scale=b / eps_r
        )
        if agg.kind.quantile:
            kmax = max(1, math.ceil(float(threshold) * 2 + _Z95 / float(eps_t)))
            base.update(kmax=kmax, window=(kmax + 1) * radius)
        return StatPlan(**base)
    # SMOOTH
    beta = _beta(budget)
    base.update(delta=dlt, beta=beta, scale=2 / eps)
    if agg.kind.quantile:
        kmax, window = local.smooth_window(radius, beta)
        base.update(kmax=kmax, window=window)
    return StatPlan(**base)
