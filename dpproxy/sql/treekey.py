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

import typing
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sqlglot import exp

from dpproxy.sql.types import clone

__all__ = ["TreeMemo", "ValueMemo", "tree_key"]

T = TypeVar("T")


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


class ValueMemo(Generic[T]):
    """Values that a pure function computes from (a tree, an owner such as a table), for
    values nobody changes (intervals, booleans, ``None``).

    Keyed by :func:`tree_key` and the owner's identity (the owner is kept with its value, so
    its ``id`` is not reused while the entry lives). A value is kept the second time its key
    is asked for: the first time only the key is noted, so a tree seen once (a cold query)
    costs its key and no copy. Nothing is kept when ``make`` raises, and everything is dropped
    at ``limit`` entries (schemas come and go in tests and reloads).
    """

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._values: dict[tuple[int, Hashable], tuple[object, object]] = {}

    def get_or_make(self, node: exp.Expression, owner: object, make: Callable[[], T]) -> T:
        tree = tree_key(node)
        if tree is None:
            return make()
        key = (id(owner), tree)
        known = self._values.get(key)
        if known is not None and known[0] is owner:
            if known[1] is not _SEEN:
                return self._out(typing.cast(T, known[1]))
            out = make()  # asked for again: kept from now on
            self._values[key] = (owner, self._out(out))
            return out
        out = make()
        if len(self._values) >= self._limit:
            self._values.clear()
        self._values[key] = (owner, _SEEN)
        return out

    def _out(self, value: T) -> T:
        return value

    def clear(self) -> None:
        self._values.clear()


_SEEN = object()  # a key asked for once: its value is not kept yet


class TreeMemo(ValueMemo[exp.Expression]):
    """Trees that a pure function makes of (a tree, an owner such as a table), kept as
    templates and handed out as copies (callers may change what they get)."""

    def _out(self, value: exp.Expression) -> exp.Expression:
        return clone(value)
