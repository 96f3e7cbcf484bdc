"""An exact, hashable key of a sqlglot tree, for memoising pure functions of a tree.

sqlglot's own ``==`` compares hashes (two trees are equal when their 64-bit hashes are, so a
collision makes different trees equal), and some node classes hash their string arguments
lowercased. :func:`tree_key` keeps every argument as written: two trees with equal keys have
the same node classes, the same arguments in the same order, the same values (of the same
types) and the same comments, so any function that reads only the tree gives the same result
for both.

>>> from sqlglot import exp
>>> a, b = exp.maybe_parse("x + 1"), exp.maybe_parse("x + 1.0")
>>> tree_key(a) == tree_key(b), tree_key(a) == tree_key(a.copy())
(False, True)
"""

from __future__ import annotations

from collections.abc import Hashable

from sqlglot import exp

__all__ = ["tree_key"]


def tree_key(node: exp.Expression) -> Hashable | None:
    """The key of ``node``, or ``None`` when some argument is not hashable (not memoised)."""
    try:
        key = _key(node)
        hash(key)
    except TypeError:
        return None
    return key


def _key(node: exp.Expr) -> tuple[object, ...]:
    args: list[tuple[str, object]] = []
    for k, v in node.args.items():
        if isinstance(v, exp.Expr):
            args.append((k, _key(v)))
        elif type(v) is list:
            args.append((k, tuple(_key(x) if isinstance(x, exp.Expr) else (type(x), x) for x in v)))
        else:
            args.append((k, (type(v), v)))  # 1, 1.0 and True are equal in Python: not here
    comments = tuple(node.comments) if node.comments else None
    return (type(node), tuple(args), comments)
