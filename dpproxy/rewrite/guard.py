"""Rules that make row-level expressions total: they can never raise a data-dependent error.

An error raised by the database for one row's value (a division by zero, a failed cast, an
integer overflow) would be an output that no noise covers. So, in every expression the
rewritten SQL evaluates per row:

* ``guard_row_expression``, in one pass: ``a / b`` → ``a / NULLIF(b, 0)`` (also ``//`` and
  ``%``); ``CAST`` → ``TRY_CAST`` (NULL instead of an error); an integer-valued operand of
  arithmetic is computed as DOUBLE, which overflows to ±inf instead of raising;
* ``clamp_values``: a numeric column in a *value position* of a measure (not inside a
  condition) is clamped to its schema bounds, which makes :mod:`dpproxy.analysis.bounds` sound.

Both are pure functions ``(expression, table) -> expression`` that copy their input by default.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.values import float_down, float_up

_ARITH = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Neg,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
)
_CONDITION = (exp.Predicate, exp.Not, exp.And, exp.Or, exp.Like, exp.ILike)


def lit(v: object) -> exp.Literal:
    """A numeric literal built directly (``exp.Literal.number`` re-validates its text)."""
    return exp.Literal(this=str(v), is_string=False)


def table(name: str) -> exp.Table:
    """A table reference built without parsing."""
    return exp.Table(this=exp.Identifier(this=name, quoted=False))


def number(v: Fraction) -> exp.Expression:
    """An exact SQL literal for a rational: integers as integers, others as a float literal."""
    text, negative = _number_text(v)
    literal = lit(text)
    return exp.Neg(this=literal) if negative else literal


@functools.lru_cache(maxsize=4096)
def _number_text(v: Fraction) -> tuple[str, bool]:
    if v.denominator == 1:
        return str(abs(v.numerator)), v < 0
    return repr(abs(float(v))), v < 0


def _as_double(col: exp.Expression) -> exp.Expression:
    return exp.Cast(this=col, to=exp.DataType(this=exp.DataType.Type.DOUBLE))


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


def clamp(make: Callable[[], exp.Expression], lo: Fraction, hi: Fraction) -> exp.Expression:
    """``CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END``, bounds rounded outward.

    ``make`` builds a fresh ``v`` for each of its three uses (cheaper than deep copies).
    Written as CASE rather than LEAST/GREATEST because those skip NULLs in DuckDB and
    PostgreSQL (a NULL would become ``lo``); here NULL stays NULL, and NaN, which both engines
    order above every number, becomes ``hi``.
    """
    lo_num = lo if lo.denominator == 1 else Fraction(float_down(lo))
    hi_num = hi if hi.denominator == 1 else Fraction(float_up(hi))
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=make(), expression=number(lo_num)), true=number(lo_num)),
            exp.If(this=exp.GT(this=make(), expression=number(hi_num)), true=number(hi_num)),
        ],
        default=make(),
    )


def _double_column(name: str) -> Callable[[], exp.Expression]:
    return lambda: _as_double(exp.column(name))


def clamp_values(node: exp.Expression, table: Table, *, copy: bool = True) -> exp.Expression:
    """Numeric columns in value positions → clamped to their bounds, as DOUBLE.

    >>> from dpproxy.catalog.model import Column, ColumnType
    >>> t = Table("t", True, (Column("age", ColumnType.INTEGER, Fraction(0), Fraction(9)),))
    >>> sql = clamp_values(exp.maybe_parse("CASE WHEN age > 3 THEN age END"), t).sql()
    >>> sql.replace("CAST(age AS DOUBLE)", "x")
    'CASE WHEN age > 3 THEN CASE WHEN x < 0 THEN 0 WHEN x > 9 THEN 9 ELSE x END END'
    """
    out = node.copy() if copy else node
    wrapper = exp.Paren(this=out)  # so that a bare column has a parent to be replaced in
    for col in list(out.find_all(exp.Column)):
        c = table.column(col.name)
        if c is None or not c.type.numeric or not c.bounded:
            continue
        if not _in_value_position(col, wrapper):
            continue
        assert c.lower is not None and c.upper is not None
        col.replace(clamp(_double_column(col.name), c.lower, c.upper))
    result: exp.Expression = wrapper.this
    return result


def _guard_node(n: exp.Expression, table: Table) -> exp.Expression:
    """The three guards of this module applied to one node (for a single-pass transform)."""
    if isinstance(n, exp.Div | exp.IntDiv | exp.Mod):
        rhs = n.expression
        if not (isinstance(rhs, exp.Literal) and not rhs.is_string and float(rhs.name) != 0):
            n.set("expression", exp.Nullif(this=rhs, expression=lit(0)))
        return n
    out = exp.TryCast(this=n.this, to=n.to) if type(n) is exp.Cast else n
    if isinstance(n.parent, _ARITH) and _integer_valued(out, table):
        return _as_double(out)
    return out


_INTEGER_TYPES = {
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.TINYINT,
}


def _integer_valued(n: exp.Expression, table: Table) -> bool:
    """Could ``n`` be an integer-typed value whose arithmetic overflows with an error?"""
    if isinstance(n, exp.Column):
        c = table.column(n.name)
        return c is not None and c.type.numeric
    if isinstance(n, exp.Cast | exp.TryCast):
        return n.to.this in _INTEGER_TYPES
    return isinstance(n, exp.Length | exp.Extract)


def guard_row_expression(
    node: exp.Expression, table: Table, *, copy: bool = True
) -> exp.Expression:
    """Division, cast and overflow guards for WHERE clauses, group keys and measures.

    >>> from dpproxy.catalog.model import Column, ColumnType
    >>> t = Table("t", True, (Column("n", ColumnType.INTEGER),))
    >>> guard_row_expression(exp.maybe_parse("CAST(s AS INT) / (n - 1)"), t).sql()
    'CAST(TRY_CAST(s AS INT) AS DOUBLE) / NULLIF((CAST(n AS DOUBLE) - 1), 0)'
    """

    def rule(n: exp.Expression) -> exp.Expression:
        return _guard_node(n, table)

    out: exp.Expression = node.transform(rule, copy=copy)
    return out
