"""Conditions common to every branch of an OR, moved out of it: ``(A AND B) OR (A AND C)`` →
``A AND (B OR C)``.

:func:`dpproxy.sql.validate.validate` applies it to every WHERE clause before the join builder
(``sql/joins.py``) looks for join equalities among the WHERE's conjuncts: TPC-H Q19 repeats its
join equality ``p_partkey = l_partkey`` in each of three OR branches, and would otherwise be a
cross join. The rewrite is exact in SQL (argument in :func:`factor_or`).
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.sql.joinparts import conjuncts


def factor_or(cond: exp.Expression) -> exp.Expression:
    """Move the conjuncts common to every branch of each OR conjunct of ``cond`` out of it.

    ``(A AND B) OR (A AND C)`` is ``A AND (B OR C)`` in SQL's three-valued logic too: AND and
    OR are min and max over FALSE < NULL < TRUE, a total order, and min/max distribute over each
    other on any chain. Nothing is evaluated differently otherwise: every accepted row-level
    expression is total (cannot raise), so neither the order nor the number of evaluations
    shows. A branch left empty becomes TRUE (``A OR (A AND C)`` is ``A AND (TRUE OR C)``): C is
    kept, so it is still validated.

    >>> factor_or(exp.maybe_parse("(a = b AND x > 1) OR (a = b AND x < 0)")).sql()
    'a = b AND (x > 1 OR x < 0)'
    >>> factor_or(exp.maybe_parse("x > 1 OR a = b")).sql()
    'x > 1 OR a = b'
    """
    parts = conjuncts(cond)
    if not any(isinstance(bare(p), exp.Or) for p in parts):
        return cond
    out: list[exp.Expression] = []
    changed = False
    for p in parts:
        branches = _disjuncts(p)
        if len(branches) < 2:
            out.append(p)
            continue
        lists = [conjuncts(b) for b in branches]
        common = [c for c in lists[0] if all(any(c == d for d in other) for other in lists[1:])]
        if not common:
            out.append(p)
            continue
        changed = True
        out.extend(c.copy() for c in common)
        rest = [[c for c in cs if not any(c == k for k in common)] for cs in lists]
        ored = [and_all(cs) if cs else exp.true() for cs in rest]
        disjunction = ored[0]
        for b in ored[1:]:
            disjunction = exp.Or(this=disjunction, expression=b)
        out.append(exp.Paren(this=disjunction))
    return and_all(out) if changed else cond


def _factorable(cond: exp.Expression) -> bool:
    """Whether :func:`factor_or` would change ``cond`` (the same test, building nothing)."""
    for p in conjuncts(cond):
        branches = _disjuncts(p)
        if len(branches) < 2:
            continue
        lists = [conjuncts(b) for b in branches]
        if any(all(any(c == d for d in other) for other in lists[1:]) for c in lists[0]):
            return True
    return False


def bare(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _disjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = bare(node)
    if isinstance(node, exp.Or):
        return _disjuncts(node.this) + _disjuncts(node.expression)
    return [node]


def and_all(parts: list[exp.Expression]) -> exp.Expression:
    def wrap(p: exp.Expression) -> exp.Expression:
        return exp.Paren(this=p.copy()) if isinstance(bare(p), exp.Or) and p is bare(p) else p

    result = wrap(parts[0])
    for p in parts[1:]:
        result = exp.And(this=result, expression=wrap(p))
    return result


def factor_where(tree: exp.Select, wheres: list[exp.Where] | None = None) -> exp.Select:
    """A copy of ``tree`` with :func:`factor_or` applied to every WHERE clause in it, or
    ``tree`` itself when no WHERE has an OR whose branches share a conjunct (almost every
    query: copying the whole tree for nothing was a tenth of a cold plan, issue 21). ``wheres``:
    the tree's WHERE nodes in ``find_all``'s order, from a caller that walked it already.

    >>> t = exp.maybe_parse("SELECT COUNT(*) FROM t WHERE x > 1 OR y = 2")
    >>> factor_where(t) is t
    True
    >>> t = exp.maybe_parse("SELECT COUNT(*) FROM t WHERE (a = b AND x > 1) OR (a = b AND x < 0)")
    >>> factor_where(t).sql()
    'SELECT COUNT(*) FROM t WHERE a = b AND (x > 1 OR x < 0)'
    >>> t.sql()
    'SELECT COUNT(*) FROM t WHERE (a = b AND x > 1) OR (a = b AND x < 0)'
    """
    found = tree.find_all(exp.Where) if wheres is None else wheres  # the caller's walk's
    if not any(_factorable(where.this) for where in found):
        return tree
    out = tree.copy()
    for where in list(out.find_all(exp.Where)):
        where.set("this", factor_or(where.this))
    return out
