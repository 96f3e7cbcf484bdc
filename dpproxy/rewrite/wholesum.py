"""Fixed-point sums of whole numbers computed in integers: no DOUBLE, no FLOOR, the same terms.

``rewrite/fixed.py`` sums every SUM primitive as integers q on a grid 2^-k, computing each q
from the measure in double precision: ``CAST(FLOOR(s·2^k + ½) AS BIGINT)`` of the clamped
DOUBLE. When the measure's values are whole numbers known exactly in advance — a bounded
``integer`` column with whole bounds, or a CASE whose results are integer literals
(:func:`~dpproxy.rewrite.fixed.exact_range`, :func:`~dpproxy.rewrite.fixed.integer_valued`)
— and the sum uses its natural grid (the centre a dyadic a/2^j, k = j, or 2j for squares), q
is an integer expression of the row's value x:

    q = x·2^j − a          (squared: (x·2^j − a)·(x·2^j − a))

so the measure is written as a BIGINT (the column clamped in its own integer type, then cast)
and q in BIGINT arithmetic. At 1 M rows on DuckDB this takes the clamped SUM(income) from
≈ 5.3 ms to ≈ 2.9 ms (raw SUM: 1.2 ms): the casts to DOUBLE and back and the FLOOR per row
and term are gone.

Why it is the same function, and total.

1. *The row value.* A column's clamp ``CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x
   END`` compares in the column's own integer type (the schema's ``integer`` type is an
   integer type or a DECIMAL of scale 0 in the database: ``catalog/draft.py``, checked when
   the engine opens), exactly; the DOUBLE clamp compared the rounded value against the same
   whole bounds, and rounding is monotone and exact on whole numbers below 2^53, so both give
   the same value (NULL stays NULL: no branch holds). The result lies in [lo, hi], so its cast
   to BIGINT cannot fail (|lo|, |hi| ≤ 2^62 is checked). A CASE of integer literals is cast as
   it is: its values are those literals (NULL included), checked the same way.
2. *The term.* For a whole x and c = a/2^j, (x − c)·2^j = x·2^j − a exactly; the double path
   computed the same number exactly whenever it lay on the grid's interval (|q| ≤ 2^52), and
   outside it both clamp to the same grid end (fixed.py: a double comparison that rounds onto
   the end gives that end anyway). Every intermediate (x·2^j, x·2^j − a, its square) is bounded
   from the measure's exact range before the SQL is written and must stay within 2^62: BIGINT
   arithmetic cannot overflow on any engine. When that range is not inside the grid's
   interval, the term keeps its two comparisons, in integers.
3. *The sum.* Each q is a BIGINT (an explicit ``CAST``, which Spark's pass recognises as a
   fixed-point term and sums in 21-bit parts: ``rewrite/spark.py``), summed exactly as before.

Only without contribution bounding (the bounding's row hash reads the measure's value, whose
text would change with its type) and only when every primitive reading the measure's column
can read a BIGINT: its COUNTs, COUNT(DISTINCT)s and SUMs that all take this path.

*The clamp is left out* of a column the database's CHECK constraint keeps within its schema
bounds (``Column.in_bounds``, ``backends/checks.py``), or whose rows in a DuckDB file held
read-only all lie within them (``Column.scanned``, ``backends/scanned.py``; EXPLAIN shows the
clamp): the clamp is then the identity on every row the table holds (NULL included); the
bounds of point 1 still hold, so the cast and the terms are unchanged.

*The clamp stays a CASE.* Other forms of the same clamp of a BIGINT column, SUM(clamp(income))
over the 1 M rows of benchmarks/compare on DuckDB 2.0.1 (41 interleaved runs; raw SUM 1.1 ms,
the CASE 2.7 ms): GREATEST(LEAST(x, hi), lo) 5.5 ms (and NULL becomes hi on both engines),
IF(...) 2.8, BETWEEN first 2.9, nested CASEs 3.6, 0/1 products of the comparisons 2.9 (15 ms
when values are clamped). ``WHEN x < lo OR x > hi`` first took 2.1 ms when DuckDB's column
statistics show every value inside the bounds, but 3.3 against 2.9 when two values lie outside.
On DuckDB a column whose table declares ``public_rows`` ≥ 300,000 is summed without it: the
raw sum plus a correction over the rows outside the bounds (``rewrite/unclamp.py``, which
reads the marks :func:`whole_row` and :func:`whole_summand` leave in the nodes' ``meta``).

*Folded CASEs* (opt-in: ``whole_measures(..., folds=...)`` and ``whole_row(..., fold=...)``).
When the measure is a CASE of integer literals and every SUM on it has the same term
x·2^j − a (an AVG's or VAR's centred sums: the same centre), the row value can be that term
itself: each literal v of the CASE is written as v·2^j − a (computed here, exactly; NULL stays
NULL), and the sums add the column (its square for VAR) with no arithmetic per row. COUNT of the
column is unchanged (NULL-ness is kept). A column read by two or more such SUMs (a VAR's) is
folded the same way, its row value written ``CAST(x AS BIGINT)·2^j − a`` once (point 2 bounds
every intermediate within 2^62, so the BIGINT arithmetic cannot overflow; the value is the one
each term computed before). Only the caller knows which SUMs read a measure, so it
asks for the fold and passes it to both functions; without it nothing changes. 1 M rows on
DuckDB (benchmarks/compare Q13, AVG of a 0/1 CASE; 41 interleaved runs, load 1.3-2.4): the
rewritten SQL alone took 1.29-1.38x the raw AVG's time unfolded, 1.05-1.13x folded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.rewrite.clamps import clamp
from dpproxy.rewrite.fixed import _natural_bits, exact_range, grid
from dpproxy.rewrite.nodes import lit, number
from dpproxy.rewrite.unclamp import CLAMPED, TERM
from dpproxy.sql.validate import literal_value

if TYPE_CHECKING:
    from dpproxy.catalog.model import Table
    from dpproxy.planning.plan import Primitive

_LIMIT = 1 << 62  # every intermediate stays this far inside BIGINT


def _bigint(e: exp.Expression) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType(this=exp.DataType.Type.BIGINT, nested=False))


@dataclass(frozen=True, slots=True)
class WholeTerm:
    """q = (x·scale − offset), squared if so planned, clamped to [low, high] if ``clamped``."""

    scale: int
    offset: int
    squared: bool
    low: int
    high: int
    clamped: bool
    folded: bool = False  # the row value is already x·scale − offset (a folded CASE)


def whole_term(p: Primitive, table: Table) -> WholeTerm | None:
    """The integer form of SUM primitive ``p``'s term, or ``None`` when it has none."""
    if p.measure is None or p.values is None:
        return None
    span = exact_range(p.measure, table)
    if span is None or any(v.denominator != 1 for v in span):
        return None  # (before _natural_bits, a walk of the measure: pure, so not needed)
    natural = _natural_bits(p, table)
    if natural is None:
        return None
    g = grid(p, table)
    if g.bits != natural or g.bits < 0:
        return None
    den = p.center.denominator  # 2^j
    offset = p.center.numerator  # a
    xl, xh = int(span[0]), int(span[1])
    lo, hi = xl * den - offset, xh * den - offset
    if any(abs(v) > _LIMIT for v in (xl, xh, xl * den, xh * den, lo, hi)):
        return None
    if p.squared:
        top = max(lo * lo, hi * hi)
        if top > _LIMIT:
            return None
        bottom = 0 if lo <= 0 <= hi else min(lo * lo, hi * hi)
        lo, hi = bottom, top
    return WholeTerm(den, offset, p.squared, g.low, g.high, not (g.low <= lo and hi <= g.high))


def whole_measures(
    primitives: Iterable[Primitive],
    table: Table,
    terms: dict[int, WholeTerm | None] | None = None,
    folds: dict[exp.Expression, tuple[int, int]] | None = None,
) -> set[exp.Expression]:
    """The measures whose column may be a BIGINT: read only by COUNT, COUNT(DISTINCT) and SUMs
    with a :func:`whole_term` each (at least one SUM). ``terms`` collects the term of each
    SUM primitive by its ``id`` (for :func:`whole_summand`: computed once per rewrite).

    ``folds`` (with ``terms``): collects the CASE measures whose row value is folded (the
    module docstring), measure → (scale, offset), and marks their SUMs' terms ``folded``; the
    caller must then pass each measure's fold to :func:`whole_row`."""
    bad: set[exp.Expression] = set()
    summed: set[exp.Expression] = set()
    primitives = tuple(primitives)
    for p in primitives:
        if p.measure is None:
            continue
        if p.kind is PrimitiveKind.COUNT or (p.kind is PrimitiveKind.DISTINCT and not p.distinct):
            continue
        term = None
        if p.kind is PrimitiveKind.SUM:
            term = whole_term(p, table)
            if terms is not None:
                terms[id(p)] = term
        elif p.kind is PrimitiveKind.DISTINCT:
            term = whole_term(replace(p, kind=PrimitiveKind.SUM), table)
        if term:
            summed.add(p.measure)
        else:
            bad.add(p.measure)
    whole = summed - bad
    if folds is not None:
        assert terms is not None, "a fold marks the terms whole_summand reads"
        _fold_cases(primitives, table, whole, terms, folds)
    return whole


def _fold_cases(
    primitives: tuple[Primitive, ...],
    table: Table,
    whole: set[exp.Expression],
    terms: dict[int, WholeTerm | None],
    folds: dict[exp.Expression, tuple[int, int]],
) -> None:
    """The folds of :func:`whole_measures`: a CASE measure of ``whole`` whose primitives are
    COUNTs and SUMs of one (scale, offset) other than (1, 0); no COUNT(DISTINCT) (the fold is
    injective, but its terms are built by another path: left as they are). A column measure
    likewise when at least two SUMs read it (a VAR's Σ(x − c) and Σ(x − c)²: x·scale − offset
    computed once per row instead of once per term; 1,000 rows on DuckDB, ``VARIANCE(amount),
    STDDEV(age)``: its SQL alone 2.18 → 2.03 ms). With one SUM it gains nothing, and that SUM
    is the one ``rewrite/unclamp.py`` may rewrite, which reads the unfolded form."""
    shape: dict[exp.Expression, tuple[int, int] | None] = {}
    sums: dict[exp.Expression, int] = {}
    for p in primitives:
        m = p.measure
        if m is None or m not in whole or not isinstance(m, exp.Case | exp.Column):
            continue
        if p.kind is PrimitiveKind.COUNT:
            continue
        t = terms.get(id(p)) if p.kind is PrimitiveKind.SUM and not p.distinct else None
        mine = (t.scale, t.offset) if t is not None else None
        if m in shape and shape[m] != mine:
            mine = None
        shape[m] = mine
        sums[m] = sums.get(m, 0) + 1
    for p in primitives:
        m = p.measure
        fold = shape.get(m) if m is not None else None
        if m is None or fold is None or fold == (1, 0):
            continue
        if isinstance(m, exp.Column) and sums[m] < 2:
            continue
        span = exact_range(m, table)
        assert span is not None  # a whole CASE measure has one
        if any(abs(int(v) * fold[0] - fold[1]) > _LIMIT for v in span):
            continue
        folds[m] = fold
        t = terms.get(id(p))
        if t is not None:
            terms[id(p)] = replace(t, folded=True)


def whole_row(
    measure: exp.Expression,
    double: exp.Expression,
    table: Table,
    fold: tuple[int, int] | None = None,
) -> exp.Expression | None:
    """The BIGINT row value of a measure of :func:`whole_measures`; ``double`` is the DOUBLE
    row value ``rows.row_measure`` wrote for it (a CASE's guarded conditions are kept).
    ``None`` when that value is not of the expected shape (the caller keeps the DOUBLE).
    ``fold``: the measure's (scale, offset) from :func:`whole_measures`' ``folds``, if any."""
    if isinstance(measure, exp.Column):
        col = table.column(measure.name)
        if col is None or col.lower is None or col.upper is None:
            return None
        name = measure.name
        if col.in_bounds or col.scanned:  # the clamp is the identity on every row the table
            # holds: by a CHECK constraint (backends/checks.py) or by its read-only rows
            # (backends/scanned.py)
            value = _bigint(exp.column(name))
        else:
            value = _bigint(clamp(lambda: exp.column(name), col.lower, col.upper))
            if col.bigint and fold is None:  # rewrite/unclamp.py may sum it unclamped plus
                value.meta[CLAMPED] = name  # a correction
        return value if fold is None else _scaled(value, *fold)
    if isinstance(double, exp.Cast) and isinstance(double.this, exp.Case):
        if fold is None:
            return _bigint(double.this)
        return _folded(double.this, *fold)
    return None


def _folded(case: exp.Case, scale: int, offset: int) -> exp.Expression | None:
    """``case`` with every literal result v written as v·scale − offset (exact integers);
    ``None`` if a result is not a number literal or NULL."""
    out = case.copy()
    for node, key in [(i, "true") for i in out.args.get("ifs") or []] + [(out, "default")]:
        r = node.args.get(key)
        if r is None or isinstance(r, exp.Null):
            continue
        ok, v = literal_value(r)
        if not ok or isinstance(v, bool | str) or (isinstance(v, float) and not v.is_integer()):
            return None
        node.set(key, number(Fraction(int(v) * scale - offset)))
    return _bigint(out)


def _scaled(value: exp.Expression, scale: int, offset: int) -> exp.Expression:
    """``value·scale − offset`` in BIGINT arithmetic (a folded column: :func:`_fold_cases`
    bounded it, and its product, within 2^62)."""
    v = value if scale == 1 else exp.Mul(this=value, expression=lit(scale))
    if offset > 0:
        return exp.Sub(this=v, expression=lit(offset))
    if offset < 0:
        return exp.Add(this=v, expression=lit(-offset))
    return v


def whole_summand(
    p: Primitive, column: str, table: Table, known: WholeTerm | None = None
) -> exp.Expression:
    """What SUM adds up for ``p`` over the BIGINT column ``column`` (:func:`whole_row`);
    ``known``: its :func:`whole_term` when the caller has it."""
    t = known if known is not None else whole_term(p, table)
    assert t is not None

    def value() -> exp.Expression:
        v: exp.Expression = exp.column(column)
        if t.folded:  # the row value is x·scale − offset already
            if t.squared:
                v = exp.Mul(this=v, expression=exp.column(column))
            return v
        if t.scale != 1:
            v = exp.Mul(this=v, expression=lit(t.scale))
        if t.offset > 0:
            v = exp.Sub(this=v, expression=lit(t.offset))
        elif t.offset < 0:
            v = exp.Add(this=v, expression=lit(-t.offset))
        if t.squared:
            v = exp.Mul(this=exp.Paren(this=v), expression=exp.Paren(this=v.copy()))
        return v

    term = _bigint(value())
    if not t.clamped:
        if not (t.squared or t.folded):  # linear in x: rewrite/unclamp.py
            term.meta[TERM] = (column, t.scale, t.offset)
        return term
    low, high = number(Fraction(t.low)), number(Fraction(t.high))
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=value(), expression=low), true=low.copy()),
            exp.If(this=exp.GT(this=value(), expression=high), true=high.copy()),
        ],
        default=term,
    )
