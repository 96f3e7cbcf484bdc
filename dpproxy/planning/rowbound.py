"""An upper bound on the rows a query over public tables and released relations returns, from
its text and the sizes of the tables it reads, before it runs.

A query planned in parts (``planning/scalars.py``) whose outer query reads public tables and
released rows is answered exactly by the public path, whose answers are capped at the engine's
``public_max_rows`` (53400 beyond: an answer is refused rather than cut short). How many rows
that outer query returns can depend on the released rows (which keys' noisy counts survive,
which released values pass a WHERE), so the cap could only be checked once the parts were
released and charged: the analyst paid for a refusal. ``composed.check_outer_rows`` instead
bounds the rows before the budget is reserved, with :func:`most_rows` over the outer query
with every released relation at its largest (every key of its public domain kept), and
refuses (53400, nothing charged) when the bound exceeds the cap.

The bound holds for every released value, because every rule below holds for any rows:

* a public table: its number of rows (counted before the charge; ``sizes``), a released
  relation's ``VALUES``: its number of rows, a CTE or derived table: its own bound;
* ``FROM a JOIN b``: ``a·b`` for an inner or cross join, ``a·b + a + b`` for any other (an
  outer join adds at most the unmatched rows of each side; a semi or anti join keeps at most
  ``a``), a list of FROM items: their product;
* WHERE, GROUP BY, HAVING and DISTINCT only remove rows; a SELECT with an aggregate of its own
  and no GROUP BY returns one row (none with HAVING), one without FROM one row;
* ``LIMIT n`` (a number): at most ``n``; OFFSET only removes rows;
* UNION [ALL]: the sum of its sides, INTERSECT: the smaller, EXCEPT: the left side.

The public path's allowlist (``planning/public.py``) has no window function, no ROLLUP or
GROUPING SETS, no set-returning function, no LATERAL and no recursive CTE, which could make
more rows than their inputs; any node this module does not know gives no bound (``None``), and
the query is refused unless its own top-level LIMIT bounds it."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

Sizes = Callable[[str], int | None]  # a public table's name → its rows (None: not known)

_PRODUCT_JOINS = frozenset({"", "INNER", "CROSS"})


def most_rows(tree: exp.Expression, sizes: Sizes) -> int | None:
    """An upper bound on the rows ``tree`` returns whatever the released values in it
    (module docstring), or None when none is proved. ``sizes``: the rows of a table that is
    not one of the query's CTEs, by its name in lower case.

    >>> from sqlglot import parse_one
    >>> most_rows(parse_one("SELECT a FROM t JOIN u ON t.k = u.k"), {"t": 3, "u": 4}.get)
    12
    >>> most_rows(parse_one("SELECT a FROM t LEFT JOIN u ON t.k = u.k LIMIT 5"), {}.get)
    5
    >>> most_rows(parse_one("SELECT COUNT(*) FROM t"), {}.get)
    1
    """
    return _Bound(sizes).of(tree)


class _Bound:
    def __init__(self, sizes: Sizes) -> None:
        self.sizes = sizes
        self.ctes: dict[int, int | None] = {}  # id of a CTE → its bound, computed once

    def of(self, node: exp.Expr) -> int | None:
        if isinstance(node, exp.Subquery | exp.Paren):
            inner = self.of(node.this)
            return _limited(node, inner)
        if isinstance(node, exp.Select):
            return _limited(node, self._select(node))
        if isinstance(node, exp.Union | exp.Intersect | exp.Except):
            left, right = self.of(node.left), self.of(node.right)
            if isinstance(node, exp.Except):
                rows = left
            elif isinstance(node, exp.Intersect):
                known = [r for r in (left, right) if r is not None]
                rows = min(known) if known else None
            else:
                rows = None if left is None or right is None else left + right
            return _limited(node, rows)
        if isinstance(node, exp.Values):
            return len(node.expressions)
        if isinstance(node, exp.Table):
            return self._table(node)
        return None

    def _select(self, select: exp.Select) -> int | None:
        if select.args.get("group") is None and _aggregates_here(select):
            return 1  # one row, none when HAVING removes it
        source = select.args.get("from_")
        if source is None:
            return 1  # SELECT of constants: one row
        rows = self.of(source.this)
        for join in select.args.get("joins") or ():
            other = self.of(join.this)
            if rows is None or other is None:
                return None
            inner = not join.side and (join.kind or "").upper() in _PRODUCT_JOINS
            rows = rows * other if inner else rows * other + rows + other
        return rows

    def _table(self, table: exp.Table) -> int | None:
        cte = _cte_named(table)
        if cte is not None:
            key = id(cte)
            if key not in self.ctes:
                self.ctes[key] = None  # a CTE that reads itself (refused earlier): no bound
                self.ctes[key] = self.of(cte.this)
            return self.ctes[key]
        if table.args.get("db") is not None or not isinstance(table.this, exp.Identifier):
            return None
        return self.sizes(table.name.lower())


def _limited(node: exp.Expr, rows: int | None) -> int | None:
    """``rows`` under the node's own LIMIT, when it is a number."""
    limit = node.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    if isinstance(count, exp.Literal) and not count.is_string and count.this.isdigit():
        n = int(count.this)
        return n if rows is None else min(rows, n)
    return rows


def _aggregates_here(select: exp.Select) -> bool:
    """Does a projection of ``select`` hold an aggregate of its own (not of a subquery)?"""
    for projection in select.expressions:
        for node in projection.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Select)):
            if isinstance(node, exp.AggFunc) and not isinstance(node.parent, exp.Window):
                return True
    return False


def _cte_named(table: exp.Table) -> exp.CTE | None:
    """The CTE a table reference names: the nearest enclosing WITH that defines it (in a
    WITH, only the CTEs before the one being defined), or None for a table of the database."""
    if table.args.get("db") is not None:
        return None
    name = table.name.lower()
    passed: set[int] = set()  # the ancestors on the way up
    node: exp.Expr | None = table
    while node is not None:
        passed.add(id(node))
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if id(cte) in passed:
                    break  # a CTE sees only those defined before it
                if isinstance(cte, exp.CTE) and cte.alias_or_name.lower() == name:
                    return cte
        node = node.parent
    return None
