"""Parentheses that the generated SQL needs, whatever shape the expression tree has.

sqlglot prints a tree as it is: ``EQ(flag, LT(TRUE, flag))`` prints as ``flag = TRUE < flag``,
which both engines refuse as a chained comparison (and which the parser had read from that
very text), and ``Mul(Add(a, b), c)`` prints as ``a + b * c``, which means something else. An
accepted query must not reach the database as SQL that fails to parse or changes meaning, so
every row-level expression passes through :func:`parenthesise` before it is printed: a child
binds less tightly than its parent, or as tightly on the side where the operator does not
associate, gets parentheses.
"""

from __future__ import annotations

import typing

from sqlglot import exp

from dpproxy.sql.types import COMPARISONS

# ``x LIKE p ESCAPE e`` (rewrite/guard.py adds the ESCAPE) is one comparison: an Escape node
# binds like the LIKE inside it, which it never parenthesises.
_COMPARE = (*COMPARISONS, exp.Is, exp.Like, exp.ILike, exp.Escape, exp.Between, exp.In)
# PostgreSQL's precedence, loosest first; comparisons do not associate.
_LEVELS: tuple[tuple[type[exp.Expression], ...], ...] = (
    (exp.Or,),
    (exp.And,),
    (exp.Not,),
    _COMPARE,
    (exp.DPipe,),
    (exp.Add, exp.Sub),
    (exp.Mul, exp.Div, exp.IntDiv, exp.Mod),
    (exp.Neg,),
)
_NON_ASSOCIATIVE = {3}  # the comparisons


_LEVEL_OF: dict[type, int | None] = {}  # by node class: isinstance against _LEVELS, once


def _level(n: exp.Expression) -> int | None:
    kind = type(n)
    try:
        return _LEVEL_OF[kind]
    except KeyError:
        pass
    level = next((i for i, kinds in enumerate(_LEVELS) if issubclass(kind, kinds)), None)
    _LEVEL_OF[kind] = level
    return level


def parenthesise(node: exp.Expression, fixed: set[int] | None = None) -> exp.Expression:
    """``node`` (modified in place) with parentheses wherever its tree needs them.

    ``fixed``: ids of subtrees of ``node`` that need none (``rewrite/clamps.py``'s clamp CASEs:
    comparisons of a CAST column with number literals, no operand a connective or a
    comparison), and that bind as tightly as an atom (no level here); each is visited but
    not walked into. The caller keeps the subtrees alive, so their ids are still theirs.

    >>> from sqlglot import exp
    >>> a, b = exp.column("a"), exp.column("b")
    >>> parenthesise(exp.EQ(this=a, expression=exp.LT(this=exp.true(), expression=b))).sql()
    'a = (TRUE < b)'
    >>> total = exp.Add(this=a.copy(), expression=b.copy())
    >>> parenthesise(exp.Mul(this=total, expression=b.copy())).sql()
    '(a + b) * b'
    """
    level_of = _LEVEL_OF
    walk = node.walk(prune=lambda n: id(n) in fixed) if fixed else node.walk()
    for visited in list(walk):
        n = typing.cast(exp.Expression, visited)
        outer = level_of[type(n)] if type(n) in level_of else _level(n)
        if outer is None:
            continue
        args = n.args
        for key in ("this", "expression"):
            child = args.get(key)
            if not isinstance(child, exp.Expression):
                continue
            inner = level_of[type(child)] if type(child) in level_of else _level(child)
            if inner is None:
                continue
            right = key == "expression" or isinstance(n, exp.Not | exp.Neg)
            if inner < outer or (
                inner == outer and (right or outer in _NON_ASSOCIATIVE) and not _chain(n, child)
            ):
                n.set(key, exp.Paren(this=child))
    return node


def _chain(parent: exp.Expression, child: exp.Expression) -> bool:
    """AND of ANDs and OR of ORs associate both ways: no parentheses needed; nor does the LIKE
    of ``LIKE … ESCAPE``, which is part of the same construct."""
    if isinstance(parent, exp.Escape) and isinstance(child, exp.Like | exp.ILike):
        return True
    return type(parent) is type(child) and isinstance(parent, exp.And | exp.Or)
