"""Exact sums on a fixed-point grid: what SUM adds up, and how the proxy reads the total back.

A floating-point SUM is not a sound basis for a sensitivity: the database adds the clamped
doubles in some order, rounding every partial sum, so with many rows changing one value can
move the total by far more than the value itself, and the same rows in another order give
another total (Casacuberta et al., "Widespread Underestimation of Sensitivity in
Differentially Private Libraries and How to Fix It", CCS 2022). So every noisy SUM primitive
(a plain SUM, an AVG's or VAR's centred sum, a VAR's sum of squares) is summed in integers:

* **The grid.** For a primitive whose planned interval is I = [lo, hi], with M = max(|lo|, |hi|)
  and e the least integer with M ≤ 2^e, the grid is 2^-k with k = min(52 − e, 1000) — the finest
  on which every value of I is an integer of at most 52 bits. When the measure is
  integer-valued (:func:`integer_valued`) and its centre c is a dyadic a/2^j, every row's value
  already lies on the grid 2^-j (2^-2j for squares): then k is that j (k = 0 for an integer
  SUM) whenever it is at most 52 − e, and no value is rounded at all. M = 0 gives k = 0.
* **The grid's interval.** Q_lo = ⌈lo·2^k⌉ and Q_hi = ⌊hi·2^k⌋, so that [Q_lo·2^-k, Q_hi·2^-k]
  ⊆ I: the grid points inside I (if I holds none — it is then narrower than 2^-k and excludes
  0 — both are the grid point between I and 0). |Q_lo|, |Q_hi| ≤ M·2^k ≤ 2^52.
* **Each row** adds the BIGINT q = Q_lo if s < Q_lo·2^-k, Q_hi if s > Q_hi·2^-k (NaN too: both
  engines order it above every number), else y = s·2^k rounded to an integer, where s is the
  measure's value (centred and squared as planned) in double precision; for k < 0 also 0 when
  |s| < 2^(-k-2). y is rounded to the nearest integer, ties to even: by the engine's own
  ``CAST(y AS BIGINT)`` on DuckDB (``nearbyint``) and PostgreSQL (``rint``), and by
  ``CAST(RINT(y) AS BIGINT)`` on Spark, whose cast truncates (Java's ``Math.rint``). So the
  three engines compute the same q. (Until 2026-11-28 this was ``CAST(FLOOR(y + 0.5) AS
  BIGINT)``: the same bounds, but it rounds a y just below ½ up, and DuckDB spends about
  0.1–0.3 ms more binding and planning it at 1,000 rows, docs/performance.md.)
  A NULL stays NULL. When the value is known to lie in [Q_lo·2^-k, Q_hi·2^-k] already (a
  clamped column, or arithmetic over clamped columns; :func:`computed_range`), the
  comparisons are left out.
* **The engine** sums the BIGINTs: DuckDB into a HUGEINT, PostgreSQL into a NUMERIC.
* **The proxy** turns the integer total T back into T·2^-k exactly (:func:`unscale`) before
  the noise (``release/noise.py``).

Privacy argument.

1. *Every row's term lies in the grid's interval.* The first two branches give Q_lo or Q_hi.
   In the last, Q_lo ≤ s·2^k ≤ Q_hi, and each operation is exact: a product by a power of
   two is exact unless it overflows or underflows, and here |s·2^k| ≤ 2^52 (no overflow) and
   either k ≥ 0 or |s·2^k| ≥ ¼ (no underflow, which PostgreSQL would raise as an error, and
   the skipped values round to 0 anyway). Rounding to the nearest integer (computed from y
   exactly by ``nearbyint``, ``rint`` and ``Math.rint``) is monotone and leaves integers as
   they are, so Q_lo ≤ round(y) ≤ Q_hi as both are integers. |round(y)| ≤ 2^52, far inside
   the BIGINT range, so the cast cannot fail, and a BIGINT cast of an integral double is
   exact. Where the comparisons are left out, s ∈ [Q_lo·2^-k, Q_hi·2^-k] was proved for every row
   (:func:`computed_range`: the exact range of the clamped column, or the interval of doubles
   ``rewrite/ranges.row_range`` proves for the row expression, pushed through the IEEE
   subtraction and squaring the database performs, which are monotone), and the same steps
   apply. So row i contributes x_i = q_i·2^-k ∈ [lo, hi] — or, for an interval I without
   grid points, a value between I and 0.
2. *The released sum has sensitivity at most the planned Δ.* ``analysis/sensitivity.py``
   derives Δ (L1, L2 and L∞; add/remove or substitution) from I through max|x| and through
   min(0, K·lo) and max(0, K·hi) only; every x_i lies in hull(I ∪ {0}), which has the same
   three quantities. The terms are clamped onto the grid *inside* I, so no widening is
   needed: Δ is computed on the planned bounds, exactly as before.
3. *The engine's sum is exact.* |q_i| ≤ 2^52 and a relation has fewer than 2^63 rows (the
   most either engine can count: COUNT is a BIGINT), so |Σ q_i| < 2^115: far inside DuckDB's
   HUGEINT (|·| < 2^127), which it accumulates SUM(BIGINT) in, and PostgreSQL's NUMERIC
   (arbitrary precision; SUM(bigint) accumulates in 128-bit integers or NUMERIC). Integer
   addition is associative: the total is the same for every order, thread count and engine.
4. *Scaling back is exact.* T·2^-k is computed as a :class:`~fractions.Fraction`, so the
   value the noise is added to is exactly Σ x_i, whose sensitivity step 2 bounds; the
   scaling is a fixed bijection chosen before any data is read (a function of the plan), i.e.
   the release is a post-processing of a release of T with sensitivity Δ·2^k and noise 2^k
   times larger — the same mechanism.

What the grid costs in accuracy: with rounding (k = 52 − e) each value moves by at most
2^-(k+1) ≤ M·2^-52, a relative error of one double's precision per row, the same in every
order (integer-valued measures are not rounded at all).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from sqlglot import exp

from dpproxy.analysis.bounds import integral
from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.rewrite.clamps import clamp_bounds
from dpproxy.rewrite.nodes import lit, number
from dpproxy.sql.types import clone
from dpproxy.sql.validate import literal_value

if TYPE_CHECKING:
    from dpproxy.catalog.model import Table
    from dpproxy.planning.plan import Primitive, QueryPlan

TOP_BITS = 52  # |q| ≤ 2^52: s·2^k + ½ is exact in double precision
MAX_BITS = 1000  # 2^k and every grid point stay (normal or subnormal) doubles
_EXACT_DOUBLE = Fraction(2**53)
_EXACT_INT = 2**53  # the same bound, for comparing ints and floats (exactly, as Python does)
_FLUSH_BELOW = Fraction(1, 10**100)  # a centre this close to 0 flushes tiny squared terms

_INTEGER_TYPES = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
}


@dataclass(frozen=True, slots=True)
class Grid:
    """A SUM primitive's grid: row terms are integers in [low, high], worth ``q·2^-bits``."""

    bits: int
    low: int
    high: int

    def point(self, q: int) -> Fraction:
        """``unscale(q, bits)``, built as one Fraction."""
        return Fraction(q, 1 << self.bits) if self.bits >= 0 else Fraction(q << -self.bits)


def pow2(e: int) -> Fraction:
    """2^e as a Fraction: the value of ``Fraction(2) ** e``, from one shift (also the SUM
    guard's step, ``release/guard.py``)."""
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def _ceil_log2(m: Fraction) -> int:
    """The least integer e with m ≤ 2^e (m > 0), compared on m's integers n/d."""
    n, d = m.numerator, m.denominator

    def within(e: int) -> bool:  # m ≤ 2^e
        return n <= d << e if e >= 0 else n << -e <= d

    e = n.bit_length() - d.bit_length()
    while not within(e):
        e += 1
    while within(e - 1):
        e -= 1
    return e


def integer_valued(node: exp.Expression, table: Table) -> bool:
    """Is every value of ``node``, as the rewritten SQL computes it, an integer (or NULL)?

    Integer columns (whose bounds are integers, so their clamps are too), integer literals,
    and ``+ − ×``, ``ABS``, ``FLOOR``/``CEIL``/``ROUND`` without digits, casts to integer types,
    ``CASE``/``COALESCE``/``GREATEST``/``LEAST``/``NULLIF`` of such values. Computed in
    doubles they stay integers: rounding a real on the grid 2^-j (here j = 0) to a double
    gives a double on that grid (where the rounding is coarser than 2^-j, the doubles there
    are multiples of a larger power of two). NaN and ±inf are left to the clamp.
    """
    if integral(node, table) or isinstance(node, exp.Null):
        return True
    if isinstance(node, exp.Paren | exp.Neg | exp.Abs):
        return integer_valued(node.this, table)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        return integer_valued(node.this, table) and integer_valued(node.expression, table)
    if isinstance(node, exp.Floor | exp.Ceil | exp.Round):
        return node.args.get("decimals") is None
    if isinstance(node, exp.Cast | exp.TryCast):
        return node.to.this in _INTEGER_TYPES
    if isinstance(node, exp.Case):
        results = [i.args.get("true") for i in node.args.get("ifs") or []]
        results.append(node.args.get("default"))
        return all(r is None or integer_valued(r, table) for r in results)
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return all(integer_valued(e, table) for e in (node.this, *node.expressions))
    if isinstance(node, exp.Nullif):
        return integer_valued(node.this, table)
    return False


def _natural_bits(p: Primitive, table: Table) -> int | None:
    """j (2j for squares) when every value of ``p`` lies on the grid 2^-j, else ``None``."""
    assert p.measure is not None
    den = p.center.denominator
    if den & (den - 1) or not integer_valued(p.measure, table):
        return None
    j = den.bit_length() - 1
    return 2 * j if p.squared else j


def grid(p: Primitive, table: Table) -> Grid:
    """The grid a SUM primitive is summed on (the module docstring says how it is chosen)."""
    assert p.kind is PrimitiveKind.SUM and p.values is not None
    lo, hi = p.values.lo, p.values.hi
    assert lo is not None and hi is not None
    if not (lo.numerator or hi.numerator):  # M = 0
        return Grid(0, 0, 0)
    m = p.values.max_abs()  # max(|lo|, |hi|), compared on integers
    natural = _natural_bits(p, table)
    bits = min(TOP_BITS - _ceil_log2(m), MAX_BITS)
    if natural is not None and natural <= bits:
        bits = natural
    low, high = _ceil_scaled(lo, bits), _floor_scaled(hi, bits)
    if low > high:  # I holds no grid point: the one between I and 0
        low = high = high if lo > 0 else low
    return Grid(bits, low, high)


def _floor_scaled(x: Fraction, bits: int) -> int:
    """⌊x·2^bits⌋ on the integers of x (no Fraction is built)."""
    n, d = x.numerator, x.denominator
    return (n << bits) // d if bits >= 0 else n // (d << -bits)


def _ceil_scaled(x: Fraction, bits: int) -> int:
    """⌈x·2^bits⌉."""
    return -_floor_scaled(-x, bits)


def sum_grids(plan: QueryPlan) -> dict[str, int]:
    """``bits`` of every SUM primitive of a plan, by primitive name."""
    table = plan.query.table
    return {p.name: grid(p, table).bits for p in plan.primitives if p.kind is PrimitiveKind.SUM}


def unscale(raw: int | float | Decimal | Fraction | None, bits: int) -> Fraction:
    """The exact value of an integer total ``raw`` on the grid 2^-bits (``None``: 0).

    ``raw`` is what the backend returns: an int (DuckDB's HUGEINT; PostgreSQL's NUMERIC, which
    ``backends/postgres.py`` turns into an int), or a Decimal or float, converted exactly."""
    if raw is None:
        return Fraction(0)
    value = Fraction(raw)
    return value / (1 << bits) if bits >= 0 else value * (1 << -bits)


# ----------------------------------------------------------------------------- the SQL


def _double(v: Fraction) -> exp.Expression:
    """An SQL literal whose value, as a double, is exactly ``v`` (a grid point or 2^k)."""
    if v.denominator == 1 and abs(v) <= _EXACT_DOUBLE:
        return number(v)
    f = float(v)
    assert Fraction(f) == v, "a grid literal that is not a double"
    text = lit(repr(abs(f)))
    return exp.Neg(this=text) if f < 0 else text


def _integer(q: int) -> exp.Expression:
    """:func:`~dpproxy.rewrite.nodes.number` of an integer, without building a Fraction."""
    return exp.Neg(this=lit(-q)) if q < 0 else lit(q)


def summand(
    p: Primitive,
    column: str,
    table: Table,
    *,
    dialect: str = "duckdb",
    centred: bool = False,
    row: tuple[float, float] | None = None,
) -> exp.Expression:
    """What SUM adds up for primitive ``p`` whose measure is ``column``: the BIGINT q of the
    module docstring (centred, squared and clamped onto the grid as planned), rounded to the
    nearest integer, ties to even, as ``dialect``'s SQL writes it: ``CAST(y AS BIGINT)`` on
    DuckDB and PostgreSQL, ``CAST(RINT(y) AS BIGINT)`` on Spark (whose cast truncates).
    ``centred``: ``column`` holds the measure minus ``p.center`` already
    (:func:`centred_measures`). ``row``: an interval of doubles holding every value of the
    measure's row expression (``rewrite/ranges.row_range``), for :func:`computed_range`."""
    assert p.values is not None and p.values.lo is not None and p.values.hi is not None
    assert p.measure is not None
    g = grid(p, table)
    # one literal, cloned where it is used
    centre = number(p.center) if p.center and not centred else None
    # (the flush is read for squares only; ``integral`` is a pure test of the tree)
    flush = p.squared and abs(p.center) < _FLUSH_BELOW and not integral(p.measure, table)

    def value() -> exp.Expression:
        base: exp.Expression = exp.column(column)
        if centre is not None:
            base = exp.Sub(this=base, expression=clone(centre))
        if p.squared and flush:
            # PostgreSQL raises on a product that underflows (rewrite/floats.py): with a
            # centre of about 0 a fractional measure can be tiny, so |base| < 1e-100 → 0
            # first (the sum changes by less than n·1e-200). Otherwise |base| ≥ ulp(centre).
            tiny = exp.LT(this=exp.Abs(this=clone(base)), expression=lit("1e-100"))
            flushed = exp.Case(ifs=[exp.If(this=tiny, true=lit("0.0"))], default=base)
            return exp.Mul(this=flushed, expression=clone(flushed))
        if p.squared:
            return exp.Mul(this=exp.Paren(this=base), expression=exp.Paren(this=clone(base)))
        return base

    def scaled() -> exp.Expression:
        v = value()
        if g.bits:
            v = exp.Mul(this=operand(v), expression=_double(pow2(g.bits)))
        # The type built directly: DataType.build parses its text (≈ 0.1 ms per call).
        bigint = exp.DataType(this=exp.DataType.Type.BIGINT, nested=False)
        if dialect == "spark":  # Java's Math.rint: to nearest, ties to even, as a double
            v = exp.Anonymous(this="RINT", expressions=[v])
        return exp.Cast(this=v, to=bigint)  # DuckDB, PostgreSQL: the cast rounds so itself

    if g.bits >= 0:
        span = _computed_doubles(p, table, row)
        if span is not None and _on_grid(g, span):
            return scaled()  # the comparisons could never hold
    low, high = g.point(g.low), g.point(g.high)
    if g.bits == 0:  # the grid's ends are integers of at most 52 bits: _double is number
        low_sql, high_sql = _integer(g.low), _integer(g.high)
    else:
        low_sql, high_sql = _double(low), _double(high)
    ifs = [
        exp.If(this=exp.LT(this=value(), expression=low_sql), true=_integer(g.low)),
        exp.If(this=exp.GT(this=value(), expression=high_sql), true=_integer(g.high)),
    ]
    if g.bits < 0:  # |s·2^k| < ¼ rounds to 0; skipping the product avoids its underflow
        tiny = exp.LT(this=exp.Abs(this=value()), expression=_double(pow2(-g.bits - 2)))
        ifs.append(exp.If(this=tiny, true=lit(0)))
    return exp.Case(ifs=ifs, default=scaled())


def centred_measures(
    primitives: Iterable[Primitive], skip: Collection[exp.Expression]
) -> dict[exp.Expression, Fraction]:
    """The DOUBLE measures whose row value may be written centred, measure − c, once for all
    their sums (a VAR's Σ(x − c) and Σ(x − c)²), measure → c: every primitive reading the
    measure is a COUNT or a SUM, none DISTINCT, at least two are SUMs, all with the same
    centre c ≠ 0. Measures in ``skip`` (the whole-number ones, ``rewrite/wholesum.py``) are
    left out.

    Why it is the same number and total. Each term computed ``(m − c)`` from the row's value
    m; the row value is now that very double, ``(m) − c`` with the same literal c (the
    parentheses keep m's own evaluation), computed once per row instead of once per term:
    IEEE subtraction is deterministic, so every term, its comparisons and its rounding see
    the same value as before. m − c is NULL exactly when m is, so each COUNT is unchanged.
    It cannot fail: every term already computed it on every row. Not for DISTINCT: m ↦ m − c
    is not injective on doubles, so distinct values could merge. 1,000 rows on DuckDB
    (``VARIANCE(amount), STDDEV(age)``): the SQL alone took 2.03 ms with the subtraction in
    each term and 1.84 ms with it folded (1,000 interleaved runs; 0.99 ms raw)."""
    centre: dict[exp.Expression, Fraction | None] = {}
    sums: dict[exp.Expression, int] = {}
    for p in primitives:
        m = p.measure
        if m is None or m in skip or p.kind is PrimitiveKind.COUNT:
            continue
        mine: Fraction | None = None
        if p.kind is PrimitiveKind.SUM and not p.distinct and p.center:
            mine = p.center
            sums[m] = sums.get(m, 0) + 1
        if m in centre and centre[m] != mine:
            mine = None
        centre[m] = mine
    return {m: c for m, c in centre.items() if c is not None and sums.get(m, 0) >= 2}


def operand(v: exp.Expression) -> exp.Expression:
    """``v`` as an operand of an arithmetic operator: parenthesised unless atomic."""
    atomic = isinstance(v, exp.Column | exp.Paren | exp.Case | exp.Func | exp.Literal)
    return v if atomic else exp.Paren(this=v)


# ---------------------------------------------------------------- values known in advance


def exact_range(measure: exp.Expression, table: Table) -> tuple[Fraction, Fraction] | None:
    """The exact [lo, hi] of a measure's row values as the database computes them, when it
    is known without rounding: a bounded numeric column (clamped to its bounds, rounded
    outward as :func:`~dpproxy.rewrite.clamps.clamp` writes them), or a CASE whose every result
    is a number literal (NULL allowed). ``None`` for anything else (its floating-point value
    may stray from the interval arithmetic's bounds, so it keeps its clamp)."""
    if isinstance(measure, exp.Column):
        col = table.column(measure.name)
        if col is None or not col.type.numeric or not col.bounded:
            return None
        assert col.lower is not None and col.upper is not None
        return clamp_bounds(col.lower, col.upper)
    if isinstance(measure, exp.Case):
        results = [i.args.get("true") for i in measure.args.get("ifs") or []]
        results.append(measure.args.get("default"))
        numbers: list[Fraction] = []
        for r in results:
            ok, v = literal_value(r) if r is not None else (True, None)
            if not ok or isinstance(v, bool | str) or (isinstance(v, float) and not v.is_integer()):
                return None
            if v is not None:
                numbers.append(Fraction(v))
        if numbers:
            return min(numbers), max(numbers)
    return None


def _on_grid(g: Grid, span: tuple[float, float]) -> bool:
    """Is [a, b] = ``span`` within [low·2^-bits, high·2^-bits] (``bits`` ≥ 0)? Compared
    exactly on integers (a double is n/d with d a power of two), as the Fractions of
    :func:`computed_range` and :meth:`Grid.point` compare, without building them."""
    n, d = span[0].as_integer_ratio()
    if g.low * d > n << g.bits:
        return False
    n, d = span[1].as_integer_ratio()
    return n << g.bits <= g.high * d


def computed_range(
    p: Primitive, table: Table, row: tuple[float, float] | None = None
) -> tuple[Fraction, Fraction] | None:
    """An exact interval holding every value of ``measure − centre`` (squared, if so planned)
    as the database computes it, or ``None`` when that is not known in advance.

    Computed in IEEE doubles, as the database does: the centre as written (:func:`number`),
    both ends of the measure's exact range (:func:`exact_range`, else ``row``: doubles that
    bound every value of the measure's row expression, ``rewrite/ranges.py``), and rounding
    being monotone, so every value in between lands between the two results (1 M rows:
    leaving out the clamp of an AVG's centred sum over a clamped column takes 4.5 ms against
    7.9 ms on DuckDB). Any doubt (a range not known exactly, integers past 2⁵³) gives
    ``None``."""
    doubles = _computed_doubles(p, table, row)
    if doubles is None:
        return None
    return Fraction(doubles[0]), Fraction(doubles[1])


def _computed_doubles(
    p: Primitive, table: Table, row: tuple[float, float] | None
) -> tuple[float, float] | None:
    """:func:`computed_range` as the two doubles it is made of (each converts exactly)."""
    assert p.measure is not None
    span = exact_range(p.measure, table)
    if span is not None:
        if any(abs(v) > _EXACT_DOUBLE for v in span):
            return None
        ends = (float(span[0]), float(span[1]))
    elif row is not None:  # doubles: compared with 2^53 exactly, as their Fractions were
        if abs(row[0]) > _EXACT_INT or abs(row[1]) > _EXACT_INT:
            return None
        ends = row
    else:
        return None
    if p.center.denominator == 1:  # an integer centre is written as it is
        if abs(p.center.numerator) > _EXACT_INT:
            return None
        centre = float(p.center.numerator)
    else:  # written as a double (nodes.number), which is what the database subtracts
        centre = float(p.center)
        if abs(centre) > _EXACT_INT:
            return None
    low = ends[0] - centre
    high = ends[1] - centre
    if p.squared:  # x·x rounds monotonically in |x|: the largest square is at an end
        return 0.0, max(low * low, high * high)
    return low, high
