"""Clamps to bounds, written as CASE (:func:`clamp`): ``clamp_values`` clamps a numeric column
in a *value position* of a measure (not inside a condition) to its schema bounds, which makes
:mod:`dpproxy.analysis.bounds` sound; the guards of the same expressions are
:mod:`dpproxy.rewrite.guard`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.rewrite.nodes import as_double, number
from dpproxy.sql.types import clone
from dpproxy.values import float_down, float_up

_CONDITION = (exp.Predicate, exp.Not, exp.And, exp.Or, exp.Like, exp.ILike)


def _in_value_position(col: exp.Expression, root: exp.Expression) -> bool:
    n = col.parent
    child: exp.Expression = col
    while n is not None and child is not root:
        if isinstance(n, _CONDITION):
            return False
        if isinstance(n, exp.If) and child is n.this:
            return False
        if isinstance(n, exp.Nullif) and child is n.expression:
            return False
        child, n = n, n.parent  # type: ignore[assignment]
    return True


def clamp_bounds(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    """The bounds :func:`clamp` writes: integers as they are, others rounded outward to
    doubles. A clamped value lies exactly between them."""
    return (
        lo if lo.denominator == 1 else Fraction(float_down(lo)),
        hi if hi.denominator == 1 else Fraction(float_up(hi)),
    )


def clamp(
    make: Callable[[], exp.Expression], lo: Fraction | None, hi: Fraction | None
) -> exp.Expression:
    """``CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END``, bounds rounded outward.

    ``make`` builds a fresh ``v`` for each of its three uses (cheaper than deep copies).
    Written as CASE rather than LEAST/GREATEST because those skip NULLs in DuckDB and
    PostgreSQL (a NULL would become ``lo``); here NULL stays NULL, and NaN, which both engines
    order above every number, becomes ``hi``.
    """
    if lo is None or hi is None:  # one side only (a per-unit COUNT ∈ [0, ∞): sql/perunit.py)
        ifs = []
        if lo is not None:
            lo_num = lo if lo.denominator == 1 else Fraction(float_down(lo))
            ifs.append(
                exp.If(this=exp.LT(this=make(), expression=number(lo_num)), true=number(lo_num))
            )
        if hi is not None:
            hi_num = hi if hi.denominator == 1 else Fraction(float_up(hi))
            ifs.append(
                exp.If(this=exp.GT(this=make(), expression=number(hi_num)), true=number(hi_num))
            )
        return exp.Case(ifs=ifs, default=make())
    lo_num, hi_num = clamp_bounds(lo, hi)
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=make(), expression=number(lo_num)), true=number(lo_num)),
            exp.If(this=exp.GT(this=make(), expression=number(hi_num)), true=number(hi_num)),
        ],
        default=make(),
    )


def _double_column(name: str) -> Callable[[], exp.Expression]:
    return lambda: as_double(exp.column(name))


# (column name, lower, upper) → its clamp CASE, built once: a copy of it is the same tree
# as a new :func:`clamp` of the column (its nodes hold only the name and the two bounds); since
# the parser's copies got cheaper a copy costs about what building one does (16.4 against
# 16.9 µs, 2026-11-30), and the kept template carries its leaves' hashes (below). Never
# handed out itself, only copies. It is hashed when
# made: sqlglot's copy keeps the hash of each leaf (a column's name, a type, a bound; a
# function of the leaf alone, so the copy's own), and drops the inner nodes' as it sets their
# children, so an ``==`` on a copy (rewrite/ranges.py compares a clamp's three ``v``) hashes
# only those. sqlglot drops a node's hash, and its ancestors', whenever a child changes.
_COLUMN_CLAMPS: dict[tuple[str, Fraction | None, Fraction | None], exp.Expression] = {}


def column_clamp(name: str, lo: Fraction | None, hi: Fraction | None) -> exp.Expression:
    key = (name, lo, hi)
    template = _COLUMN_CLAMPS.get(key)
    if template is None:
        if len(_COLUMN_CLAMPS) >= 4096:  # schemas come and go in tests and reloads
            _COLUMN_CLAMPS.clear()
        template = _COLUMN_CLAMPS[key] = clamp(_double_column(name), lo, hi)
        hash(template)  # its copies keep their leaves' hashes (above)
    return clone(template)


def clamp_values(
    node: exp.Expression,
    table: Table,
    *,
    copy: bool = True,
    made: set[int] | None = None,
    cases: list[exp.Expression] | None = None,
) -> exp.Expression:
    """Numeric columns in value positions → clamped to their bounds, as DOUBLE.

    ``cases`` collects every CASE written, ``made`` its ``id``. Each is a fixed point of
    :func:`guard_row_expression` (:mod:`dpproxy.rewrite.guard`) against the same ``table``
    (which may then skip them): its nodes are the CASE, its WHENs, ``<``/``>`` comparisons,
    number literals (``-`` for negative ones) and ``CAST(column AS DOUBLE)`` of a numeric
    column of ``table``, and :func:`_guard_node` changes none of them — such a cast widens
    (:func:`_widening`), no node is a division, function or binary arithmetic, inside the
    CASE only a literal has an arithmetic parent (the ``-`` of a negative number) and
    literals are never promoted, and the CASE itself is a DOUBLE (:func:`is_double`: its ELSE
    is such a cast), so it is not promoted under arithmetic outside it either. It is a fixed
    point of ``parenthesise`` too: a comparison's operands are a cast and a number, which
    bind more tightly (a ``-`` more tightly still than a comparison), and a CASE is never
    parenthesised.

    >>> from dpproxy.catalog.model import Column, ColumnType
    >>> t = Table("t", True, (Column("age", ColumnType.INTEGER, Fraction(0), Fraction(9)),))
    >>> sql = clamp_values(exp.maybe_parse("CASE WHEN age > 3 THEN age END"), t).sql()
    >>> sql.replace("CAST(age AS DOUBLE)", "x")
    'CASE WHEN age > 3 THEN CASE WHEN x < 0 THEN 0 WHEN x > 9 THEN 9 ELSE x END END'
    """
    out = clone(node) if copy else node
    wrapper = exp.Paren(this=out)  # so that a bare column has a parent to be replaced in
    for col in list(out.find_all(exp.Column)):
        c = table.column(col.name)
        if c is None or not c.type.numeric or (c.lower is None and c.upper is None):
            continue  # a half-bounded column is clamped on its one side
        if not _in_value_position(col, wrapper):
            continue
        clamped = column_clamp(col.name, c.lower, c.upper)
        if made is not None:
            made.add(id(clamped))
        if cases is not None:
            cases.append(clamped)
        col.replace(clamped)
    result: exp.Expression = wrapper.this
    return result
