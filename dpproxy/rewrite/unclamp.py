"""DuckDB: a whole-number column's clamped sum as its raw sum plus a correction for the
rows outside the bounds, which DuckDB's statistics usually prove absent.

``rewrite/wholesum.py`` clamps a bounded ``integer`` column per row,
``CAST(CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x END AS BIGINT)``, and sums its
terms x·s − a. Over 1 M rows the CASE costs about as much again as the raw SUM. For whole
numbers the clamped sum is exactly

    Σ c(x) = Σ x + (Σ_{x<lo ∨ x>hi} c(x) − Σ_{x<lo ∨ x>hi} x)

and Σ (c(x)·s − a) = s·Σ c(x) − a·COUNT(x). So the row value becomes x itself (no CASE,
no CAST), its SUM is the raw sum, and the correction is a scalar subquery over a copy of the
same rows' SELECT (same FROM, joins, WHERE and domain filter: the copy of one tree) with
``x < lo OR x > hi`` added to its WHERE. DuckDB pushes that filter into the scan and, when
the table's statistics show every value of x within [lo, hi] (the usual case), plans the
subquery as an empty result without reading a row; otherwise it reads only the row groups
whose min/max admit such a value.

Why it is the same number, and total. NULL: counted by neither side (x IS NULL fails both
comparisons; SUM and COUNT skip it; c(NULL) is NULL). The correction's rows are exactly
those the clamp changes, and on them its CASE is the clamp itself (``lo`` or ``hi``). Every
sum is exact: only a column the database stores in a type that BIGINT holds is summed
unclamped (``Column.bigint``, set by the DuckDB backend: ``backends/checks.py``: TINYINT to
BIGINT, UTINYINT to UINTEGER), and DuckDB sums every one of those types into HUGEINT
(2^127): Σ x, the two correction sums and their difference stay below 2^63 per row, below
2^127 for fewer than 2^63 rows. No arithmetic is done per row on the unclamped x, not even a
cast: the CAST to BIGINT the clamp had (``CAST(x AS BIGINT)`` would give the same HUGEINT
sums and COUNT) costs a narrower column ≈ 0.2-0.3 ms per 1 M rows (INTEGER: COUNT and SUM
1.61 → 1.35 ms CPU, SMALLINT 1.37 → 1.16; on BIGINT it is a no-op). Σ c(x) is at most
count·max(|lo|, |hi|), and whole_term bounded max|c|·s ≤ 2^62, so s·Σ c(x) fits HUGEINT;
a·COUNT(x) is written ``CAST(a AS HUGEINT) * COUNT(x)`` (|a| ≤ 2^62). The result is the
HUGEINT the clamped SUM gave, equal to it exactly (``tests/property/test_unclamp.py``).

When. Only DuckDB (PostgreSQL has no zone maps: the correction would read the whole table
again); only a column clamp written by ``wholesum.whole_row`` and read by COUNTs and exactly
one SUM whose term is linear, x·s − a (``wholesum.whole_summand`` marks both nodes in their
``meta``); only an ungrouped query over the rows' CTE itself (no contribution bounding, no
GROUP BY); only when every reference to the column in the outer query is one of those.
Anything else and the tree is left as it was: the clamp stays, which is always correct.
Only when the table declares ``public_rows`` ≥ :data:`MIN_ROWS`: the subquery costs DuckDB
a fixed ≈ 0.5-0.9 ms to bind and plan, the CASE ≈ 1.3-2 ns a row (1 M rows: ≈ 1.3-2 ms).

Other forms, measured (Q05, AVG(income) over the 1 M rows of benchmarks/compare, DuckDB
2.0.1, CPU ms, 61 interleaved runs, load ≈ 2: raw 2.2, the CASE 3.4-5.0, no clamp at all 2.5):
this form 3.4 (its correction alone ≈ 0.5-0.9: binding and planning a second scan, even an
empty one; ``COUNT(*)`` as the correction 3.0); the correction in the same scan as
``SUM(m) FILTER (WHERE m > hi)`` 5.9 (the CASE 5.0 in that run); the rows as a UNION ALL of
the in-bounds rows and the bounds of the others 4.3 (against 3.1); two subqueries, one per
side, ≈ 0.3 slower than one; the subquery over the ``__rows`` CTE itself made DuckDB
materialise the CTE (1 M rows). Cost by size (persisted tables, CPU ms, CASE → this form):
10 k rows 1.40 → 2.10, 100 k 1.72 → 2.29, 200 k 2.28 → 2.50, 400 k 3.20 → 2.87: hence
:data:`MIN_ROWS`.

Where the rest goes, and what did not help (Q05's SQL alone on a plain connection to the
1 M-row file of ``benchmarks/compare/speed_1m.py``, BIGINT columns, DuckDB 2.0.1, CPU ms,
medians of 41-151 interleaved runs, 2026-11-27, load 3-9: raw AVG 1.19-1.38, this form
1.90-2.10, without the correction 1.39-1.50). DuckDB's profiler: binding 0.33 ms against
the raw query's 0.08, optimising 0.47 against 0.23; a second scan costs that whether or not
it reads a row (``(SELECT 0)`` alone ≈ 0.2, ``(SELECT SUM(x) FROM t WHERE false)``
≈ 0.25). Within ±0.05 of this form: ``IF(x < lo, lo, hi)`` for the CASE, ``NOT BETWEEN``,
one ``SUM(IF(…) − CAST(x AS HUGEINT))``, the two aggregates as a cross join of derived
tables, the rows CTE written in place (−0.09 to +0.05 over 101-151 runs: not kept). The centring
``− CAST(a AS HUGEINT) * COUNT(x)`` costs ≈ 0.1 in every form tried (even a BIGINT product).
``PREPARE``/``EXECUTE`` gains nothing: DuckDB rebinds at each EXECUTE. ``stats(x)`` in the
CASE: 9.8 (evaluated per row). Disabling DuckDB's ``common_subplan`` optimiser: −0.07, for
every query of the connection: not done. MIN/MAX of x in the same scan to test the bounds:
+0.5. An exact check read once when the read-only file is opened lets the SQL leave out
both the CASE and the correction (≈ 1.4): ``backends/scanned.py`` does that, and this
correction remains for a column with some value outside its bounds. ``EXPLAIN`` then plans
without that check (``Engine.canonical``), since SQL chosen by the data's minimum and
maximum, shown, would disclose whether some person's value lies outside the bounds.

Timing. The statement's duration now depends on whether some values lie outside the
bounds (the correction reads row groups then). The outcome does not: the released value is
the same exact number. This is a timing side channel only, out of scope as SECURITY.md's
"Timing and other side channels" says.
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.rewrite.nodes import lit, number

CLAMPED = "dpproxy_unclampable"  # meta of whole_row's CAST(CASE …): the column's name
TERM = "dpproxy_linear_term"  # meta of whole_summand's term: (column alias, s, a)
MIN_ROWS = 300_000  # public_rows from which the correction is cheaper than the CASE
_ROWS = "__rows"


def _hugeint(e: exp.Expression) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType(this=exp.DataType.Type.INT128, nested=False))


def _clamp_parts(
    cast: exp.Expression,
) -> tuple[exp.Case, exp.Expression, exp.Expression, exp.Column] | None:
    """(the CASE, ``x < lo``, ``x > hi``, x) of a marked ``CAST(CASE … AS BIGINT)``, or
    ``None`` when it is not of exactly that shape."""
    if not isinstance(cast, exp.Cast) or not isinstance(cast.this, exp.Case):
        return None
    case = cast.this
    ifs = case.args.get("ifs") or []
    x = case.args.get("default")
    if len(ifs) != 2 or not isinstance(x, exp.Column) or x.name != cast.meta.get(CLAMPED):
        return None
    low, high = ifs[0].this, ifs[1].this
    if not (isinstance(low, exp.LT) and isinstance(high, exp.GT)):
        return None
    if low.this != x or high.this != x or case.args.get("this") is not None:
        return None
    return case, low, high, x


def _outer_nodes(tree: exp.Select) -> list[exp.Expr]:
    """Every node of ``tree`` outside its WITH clause."""
    out: list[exp.Expr] = []
    for key, value in tree.args.items():
        if key == "with_" or value is None:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, exp.Expression):
                out.extend(v.walk())
    return out


def _rows_cte(tree: exp.Select) -> exp.Select | None:
    """The SELECT of the ``__rows`` CTE when ``tree`` is an ungrouped aggregate over it."""
    with_ = tree.args.get("with_")
    source = tree.args.get("from_") or tree.args.get("from")
    if with_ is None or source is None or not isinstance(source.this, exp.Table):
        return None
    if source.this.name != _ROWS or source.this.args.get("db") is not None:
        return None
    for key in ("joins", "where", "group", "having", "qualify", "order", "limit", "distinct"):
        if tree.args.get(key):
            return None
    if len(with_.expressions) != 1 or with_.args.get("recursive"):
        return None  # no other CTE may read the rows' (unclamped) values
    cte = with_.expressions[0]
    if cte.alias != _ROWS or not isinstance(cte.this, exp.Select):
        return None
    rows = cte.this
    for key in ("group", "having", "qualify", "limit", "distinct", "with_"):
        if rows.args.get(key):
            return None
    return rows


def unclamp(tree: exp.Select, table: Table) -> exp.Select:
    """``tree`` (DuckDB) with the marked clamps it may leave out replaced as the module
    docstring says; changed in place and returned."""
    if table.public_rows is None or table.public_rows < MIN_ROWS:
        return tree
    rows = _rows_cte(tree)
    if rows is None:
        return tree
    outer = _outer_nodes(tree)
    for projection in rows.expressions:
        if not isinstance(projection, exp.Alias) or CLAMPED not in projection.this.meta:
            continue
        parts = _clamp_parts(projection.this)
        if parts is None:
            continue
        alias = projection.alias
        refs = [n for n in outer if isinstance(n, exp.Column) and n.name == alias]
        terms = [n for n in outer if n.meta.get(TERM, (None,))[0] == alias]
        if len(terms) != 1:
            continue
        term = terms[0]
        total = term.parent if isinstance(term.parent, exp.Sum) else None
        if (
            total is None
            or not isinstance(total.parent, exp.Alias)
            or total.parent.parent is not tree
        ):
            continue
        inside = {id(n) for n in term.walk() if isinstance(n, exp.Column)}
        counted = [r for r in refs if isinstance(r.parent, exp.Count) and r.parent.this is r]
        if len(refs) != len(counted) + sum(id(r) in inside for r in refs):
            continue
        _, scale, offset = term.meta[TERM]
        total.replace(_corrected(rows, parts, alias, scale, offset))
        projection.set("this", parts[3].copy())  # x: its SUM is a HUGEINT already
        outer = _outer_nodes(tree)
    return tree


def _corrected(
    rows: exp.Select,
    parts: tuple[exp.Case, exp.Expression, exp.Expression, exp.Column],
    alias: str,
    scale: int,
    offset: int,
) -> exp.Expression:
    """(SUM(m) + COALESCE((correction), 0))·s − CAST(a AS HUGEINT)·COUNT(m): NULL when no
    row has a value, as the clamped SUM it replaces (``aggregate.primitive_aggregate``) is."""
    case, low, high, x = parts
    fix = rows.copy()
    fix.set(
        "expressions",
        [exp.Sub(this=exp.Sum(this=case.copy()), expression=exp.Sum(this=x.copy()))],
    )
    fix.where(exp.Paren(this=exp.Or(this=low.copy(), expression=high.copy())), copy=False)
    total: exp.Expression = exp.Paren(
        this=exp.Add(
            this=exp.Sum(this=exp.column(alias)),
            expression=exp.Coalesce(this=exp.Subquery(this=fix), expressions=[lit(0)]),
        )
    )
    if scale != 1:
        total = exp.Mul(this=total, expression=lit(scale))
    if offset != 0:
        count = exp.Mul(
            this=_hugeint(number(Fraction(offset))), expression=exp.Count(this=exp.column(alias))
        )
        total = exp.Sub(this=total, expression=count)
    return total
