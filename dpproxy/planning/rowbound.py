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
* GROUP BY (or DISTINCT) returns one row per distinct tuple of its keys, and the keys are
  functions of the rows of the FROM items whose columns they read: at most the product of
  those items' bounds (each plus one when an outer join may pair a row with NULLs);
* ``LIMIT n`` (a number): at most ``n``; OFFSET only removes rows;
* UNION [ALL]: the sum of its sides, INTERSECT: the smaller, EXCEPT: the left side.

The public path's allowlist (``planning/public.py``) has no window function, no ROLLUP or
GROUPING SETS, no set-returning function, no LATERAL and no recursive CTE, which could make
more rows than their inputs; any node this module does not know gives no bound (``None``), and
the query is refused unless its own top-level LIMIT bounds it."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpproxy.sql.ctes import cte_named

Sizes = Callable[[str], int | None]  # a public table's name → its rows (None: not known)
Columns = Callable[[str], set[str] | None]  # a public table's name → its columns, lower case

_PRODUCT_JOINS = frozenset({"", "INNER", "CROSS"})


def most_rows(tree: exp.Expression, sizes: Sizes, columns: Columns | None = None) -> int | None:
    """An upper bound on the rows ``tree`` returns whatever the released values in it
    (module docstring), or None when none is proved. ``sizes``: the rows of a table that is
    not one of the query's CTEs, by its name in lower case; ``columns``: its columns (lower
    case), which let GROUP BY and DISTINCT bound the groups by the FROM items they read.

    >>> from sqlglot import parse_one
    >>> most_rows(parse_one("SELECT a FROM t JOIN u ON t.k = u.k"), {"t": 3, "u": 4}.get)
    12
    >>> most_rows(parse_one("SELECT a FROM t LEFT JOIN u ON t.k = u.k LIMIT 5"), {}.get)
    5
    >>> most_rows(parse_one("SELECT COUNT(*) FROM t"), {}.get)
    1
    >>> grouped = parse_one("SELECT u.b FROM t JOIN u ON t.k = u.k GROUP BY u.b")
    >>> most_rows(grouped, {"t": 3, "u": 4}.get)
    4
    """
    return _Bound(sizes, columns or (lambda name: None)).of(tree)


class _Bound:
    def __init__(self, sizes: Sizes, columns: Columns) -> None:
        self.sizes = sizes
        self.columns = columns
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
        joins = select.args.get("joins") or []
        items: list[exp.Expr] = [source.this, *(j.this for j in joins)]
        bounds = [self.of(item) for item in items]
        rows = bounds[0]
        outer = False  # a join that may add rows with NULLs for one side
        for join, other in zip(joins, bounds[1:], strict=True):
            inner = not join.side and (join.kind or "").upper() in _PRODUCT_JOINS
            outer = outer or not inner
            if rows is not None and other is not None:
                rows = rows * other if inner else rows * other + rows + other
            else:
                rows = None
        group = select.args.get("group")
        keys = group.expressions if group is not None else None
        if keys is None and select.args.get("distinct"):
            keys = list(select.expressions)
        if keys is not None:  # each group is one tuple of the rows of the items its keys read
            read = self._read(select, keys, items)
            if read is not None and all(bounds[i] is not None for i in read):
                groups = 1
                for i in read:
                    groups *= (bounds[i] or 0) + (1 if outer else 0)  # NULLs of an outer join
                rows = groups if rows is None else min(rows, groups)
        return rows

    def _read(
        self, select: exp.Select, keys: list[exp.Expr], items: list[exp.Expr]
    ) -> set[int] | None:
        """The FROM items the key expressions read (every item a column may belong to), or
        None when that is not known (a subquery, ``*``, a column no item is known to have)."""
        read: set[int] = set()
        unknown = (exp.Subquery, exp.Select, exp.Star)
        for key in keys:
            expressions = [key]
            if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
                n = int(key.this)  # GROUP BY 1: the first output column
                if not 1 <= n <= len(select.expressions):
                    return None
                expressions = [select.expressions[n - 1]]
            elif isinstance(key, exp.Column) and not key.table:  # a column, or an output alias
                name = key.name.lower()
                expressions = [e for e in select.expressions if e.alias_or_name.lower() == name]
                owners = self._owners(key, items)
                if not owners and not expressions:
                    return None
                read |= owners  # both readings, when both are possible
            for expression in expressions:
                if any(isinstance(n, unknown) for n in expression.walk()):
                    return None
                for col in expression.find_all(exp.Column):
                    owners = self._owners(col, items)
                    if not owners:
                        return None
                    read |= owners
        return read

    def _owners(self, col: exp.Column, items: list[exp.Expr]) -> set[int]:
        name, qualifier = col.name.lower(), col.table.lower()
        if qualifier:
            return {i for i, item in enumerate(items) if item.alias_or_name.lower() == qualifier}
        found = set()
        for i, item in enumerate(items):
            names = self._names(item)
            if names is None or name in names:
                found.add(i)
        return found

    def _names(self, item: exp.Expr) -> set[str] | None:
        """The columns of a FROM item (lower case), or None when not known."""
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return {c.name.lower() for c in alias.columns}
        if isinstance(item, exp.Subquery):
            return _outputs(item.this)
        if isinstance(item, exp.Table):
            cte = cte_named(item)
            return _outputs(cte.this) if cte is not None else self.columns(item.name.lower())
        return None

    def _table(self, table: exp.Table) -> int | None:
        cte = cte_named(table)
        if cte is not None:
            key = id(cte)
            if key not in self.ctes:
                self.ctes[key] = None  # a CTE that reads itself (refused earlier): no bound
                self.ctes[key] = self.of(cte.this)
            return self.ctes[key]
        if table.args.get("db") is not None or not isinstance(table.this, exp.Identifier):
            return None
        return self.sizes(table.name.lower())


def _outputs(query: exp.Expr) -> set[str] | None:
    """The output column names of a query (lower case), or None when not known (``*``)."""
    while isinstance(query, exp.Subquery | exp.Paren):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _outputs(query.left)
    if not isinstance(query, exp.Select):
        return None
    if any(isinstance(e, exp.Star) or isinstance(e.this, exp.Star) for e in query.expressions):
        return None
    return {e.alias_or_name.lower() for e in query.expressions}


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
