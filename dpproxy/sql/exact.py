"""Arithmetic on number constants alone, computed exactly before any data is read.

PostgreSQL reads ``0.06 + 0.01`` as numeric arithmetic: exactly 0.07. dpproxy computes row-level
arithmetic in DOUBLE (:mod:`dpproxy.rewrite.guard`), where ``0.06 + 0.01`` is
0.06999999999999999, so ``l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01`` (TPC-H Q6) would miss
every row whose discount is 0.07. So ``+``, ``-`` and ``*`` whose operands are number literals
(or negated ones) are replaced, while the query is typed, by the exact result as a decimal
literal — a constant like any other, which cannot fail (it is checked to be a finite double like
every literal). Results of 10¹⁵ or more in magnitude are left to DOUBLE arithmetic as before
(there both readings agree to the double's precision, and no integer literal beyond int64 is
introduced); ``/`` and ``%`` are left as they are (a quotient need not be a finite decimal).
"""

from __future__ import annotations

from decimal import Context, Decimal, InvalidOperation

from sqlglot import exp

# isinstance tuples built once: ``A | B`` written in the call builds a union of sqlglot
# classes at every call, a microsecond each (issue 21); a tuple tests the same classes
_RING = (exp.Add, exp.Sub, exp.Mul)

_LIMIT = Decimal(10) ** 15
_CONTEXT = Context(prec=200)


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _value(node: exp.Expression) -> Decimal | None:
    node = _unparen(node)
    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, _unparen(node.this)
    if not (isinstance(node, exp.Literal) and not node.is_string) or len(node.name) > 60:
        return None
    try:
        value = Decimal(node.name)
    except InvalidOperation:
        return None
    return sign * value if value.is_finite() and abs(value.adjusted()) < 60 else None


def fold_exact(node: exp.Expression) -> None:
    """Replace ``a + b``, ``a - b`` or ``a * b`` of number literals by its exact value.

    >>> tree = exp.Paren(this=exp.maybe_parse("0.06 + 0.01"))
    >>> fold_exact(tree.this); tree.sql()
    '(0.07)'
    >>> tree = exp.Paren(this=exp.maybe_parse("-0.5 * 3"))
    >>> fold_exact(tree.this); tree.sql()
    '(-1.5)'
    """
    if node.parent is None or not isinstance(node, _RING):
        return
    a, b = _value(node.this), _value(node.expression)
    if a is None or b is None:
        return
    if isinstance(node, exp.Add):
        result = _CONTEXT.add(a, b)
    elif isinstance(node, exp.Sub):
        result = _CONTEXT.subtract(a, b)
    else:
        result = _CONTEXT.multiply(a, b)
    if abs(result) >= _LIMIT:
        return
    text = format(abs(result).normalize(_CONTEXT), "f")
    literal = exp.Literal(this=text, is_string=False)
    node.replace(exp.Neg(this=literal) if result < 0 else literal)
