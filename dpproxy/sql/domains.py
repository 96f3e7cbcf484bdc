"""Public GROUP BY domains narrowed by the query's own WHERE clause.

A group key with a public domain (declared in the schema, a boolean, a CASE of literals) is
released for every value of the domain, zero-filled when no row has it, so that the set of
groups says nothing about the data. A WHERE conjunct that restricts the key itself —
``key = v``, ``key IN (v, …)``, ``key IS [NOT] NULL``, ``key <> v``, ``key NOT IN (…)`` — makes
some of those groups empty *by the query's text*, not by the data: SQL would never return them.
Releasing them as zeros (and an AVG over no rows as the middle of its bounds) surprises an
analyst, and ranks or LIMITs over the groups would pick them up.

**Privacy argument:** the narrowed domain is a function of the query text and the schema only
(the literals the analyst wrote, intersected with the declared domain), never of the data, so
the released set of groups is still data-independent. A conjunct that cannot be read exactly
(another expression, a value of another type) narrows nothing: the full domain stays, which is
the previous, equally private behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sqlglot import exp

__all__ = ["listed_domain", "narrow_domain"]


def narrow_domain(
    key: exp.Expression, domain: tuple[Any, ...], filters: Iterable[exp.Expression]
) -> tuple[Any, ...]:
    """``domain`` without the values that the conjuncts of ``filters`` exclude for ``key``.

    >>> col = exp.column("sex")
    >>> narrow_domain(col, ("F", "M", None), [exp.maybe_parse("sex IN ('M', 'X')")])
    ('M',)
    >>> narrow_domain(col, ("F", "M", None), [exp.maybe_parse("sex IS NOT NULL AND age > 3")])
    ('F', 'M')
    >>> narrow_domain(col, ("F", "M", None), [exp.maybe_parse("sex = 'M' OR age > 3")])
    ('F', 'M', None)
    """
    kept = list(domain)
    for cond in _conjuncts(filters):
        allowed = _allowed(key, cond, kept)
        if allowed is not None:
            kept = _within(kept, allowed, True)
    return tuple(kept)


def listed_domain(key: exp.Expression, filters: Iterable[exp.Expression]) -> tuple[int, ...] | None:
    """The integers of a WHERE conjunct ``key IN (1, 2, …)`` (or ``key = 1``) for a group key
    (a column or an expression) with no declared domain: a public domain too, by the argument
    of the module docstring (every row the WHERE keeps has its key among the literals the
    query wrote, so the set of groups is a function of the query text). dpproxy's own parts
    released over a public key domain (``planning/keyed.py``, ``planning/relations.py``) are
    written this way; integers only (the keys of public tables), so a value's type never varies.

    >>> listed_domain(exp.column("k"), [exp.maybe_parse("k IN (3, 1, 3) AND x > 0")])
    (3, 1)
    >>> listed_domain(exp.column("k"), [exp.maybe_parse("k IN (1, 'a')")]) is None
    True
    """
    for cond in _conjuncts(filters):
        nodes: list[exp.Expression] | None = None
        if isinstance(cond, exp.In) and cond.this == key and not cond.args.get("query"):
            nodes = list(cond.expressions)
        elif isinstance(cond, exp.EQ) and (other := _other_side(cond, key)) is not None:
            nodes = [other]
        values = _literals(nodes) if nodes else None
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return tuple(dict.fromkeys(values))
    return None


def _conjuncts(filters: Iterable[exp.Expression]) -> Iterator[exp.Expression]:
    for f in filters:
        node = f
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            yield from _conjuncts([node.this, node.expression])
        else:
            yield node


def _within(values: list[Any], allowed: list[Any], inside: bool) -> list[Any]:
    """The ``values`` that are (``inside``) or are not members of ``allowed``, in time linear
    in both (a domain of 10,000 keys is narrowed by an IN list of the same 10,000, as in
    ``planning/keyed.py``): by a set of the values' :func:`_norm` forms, which are equal
    exactly when :func:`_same` holds; by pairs when a value is not hashable or NaN."""
    try:
        if any(isinstance(v, float) and v != v for v in (*values, *allowed)):
            raise TypeError("NaN")
        index = {_norm(a) for a in allowed}
        return [v for v in values if (_norm(v) in index) == inside]
    except TypeError:
        return [v for v in values if _member(v, allowed) == inside]


def _norm(v: Any) -> tuple[Any, ...]:
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int | float):
        return ("number", v)  # 1 == 1.0, and their hashes are equal
    return ("other", type(v), v)


def _member(v: Any, allowed: list[Any]) -> bool:
    return any(_same(v, a) for a in allowed)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _allowed(key: exp.Expression, cond: exp.Expression, domain: list[Any]) -> list[Any] | None:
    """The domain values ``cond`` lets through for ``key`` (None: it says nothing exact)."""
    negated = False
    node = cond
    if isinstance(node, exp.Not):
        negated, node = True, node.this
        while isinstance(node, exp.Paren):
            node = node.this
    values: list[Any] | None = None
    if isinstance(node, exp.Is) and node.this == key and isinstance(node.expression, exp.Null):
        # IS NULL keeps the NULL group; IS NOT NULL (sqlglot: negate=True) every other one
        negated = negated != bool(node.args.get("negate"))
        return [v for v in domain if (v is None) != negated]
    if isinstance(node, exp.EQ | exp.NEQ):
        other = _other_side(node, key)
        if other is None:
            return None
        values = _literals([other])
        if values is None:
            return None
        negated = negated != isinstance(node, exp.NEQ)
    elif isinstance(node, exp.In) and node.this == key and not node.args.get("query"):
        values = _literals(node.expressions)
    if values is None:
        return None
    if negated:
        # x <> v and x NOT IN (…) are NULL (not true) for a NULL x: the NULL group goes too;
        # and NOT IN a list holding NULL is never true
        if None in values:
            return []
        return [v for v in _within(domain, values, False) if v is not None]
    return [v for v in values if v is not None]  # x = NULL is never true


def _other_side(node: exp.Expression, key: exp.Expression) -> exp.Expression | None:
    left: exp.Expression = node.args["this"]
    right: exp.Expression = node.args["expression"]
    if left == key:
        return right
    if right == key:
        return left
    return None


def _literals(nodes: list[exp.Expression]) -> list[Any] | None:
    out: list[Any] = []
    for n in nodes:
        ok, v = _literal_value(n)
        if not ok:
            return None
        out.append(v)
    return out


def _literal_value(node: exp.Expression) -> tuple[bool, Any]:
    if isinstance(node, exp.Paren):
        return _literal_value(node.this)
    if isinstance(node, exp.Null):
        return True, None
    if isinstance(node, exp.Boolean):
        return True, bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return True, node.name
        text = node.name
        try:
            return True, int(text) if text.lstrip("-").isdigit() else float(text)
        except ValueError:
            return False, None
    if isinstance(node, exp.Neg):
        ok, v = _literal_value(node.this)
        if ok and isinstance(v, int | float) and not isinstance(v, bool):
            return True, -v
    return False, None
