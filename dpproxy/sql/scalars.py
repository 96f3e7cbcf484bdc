"""Scalar subqueries in comparisons: found, checked, and replaced by constants (pure).

``WHERE c_acctbal > (SELECT AVG(c_acctbal) FROM customer WHERE ...)`` (TPC-H Q22) and
``COUNT(*) FILTER (WHERE age > (SELECT AVG(age) FROM adult))`` compare each row with one
number computed over *everybody's* rows. dpproxy answers them in two steps
(``planning/scalars.py`` plans them, ``engine.py`` runs them):

1. each scalar subquery is its own query — an ungrouped aggregate, so one number — released
   first with differential privacy by the normal planner and mechanisms;
2. the released number is written into the outer query as a numeric constant, and the outer
   query is planned, rewritten and released as any other query.

This module does the tree work: :func:`find_scalars` lists the scalar subqueries of a query
(every depth: a derived table, an OR, a FILTER, a CASE), :func:`check_scalar` refuses what
the two steps cannot answer, and :func:`substitute` writes constants in their place.

What is accepted, and why each restriction:

* **one side of a comparison** (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``) — there a
  constant changes only which rows match, never a type, a bound or a totality argument, so
  the outer plan is the same whatever value is released (``planning/scalars.py`` checks it
  anyway). As an operand of arithmetic (``age - (SELECT AVG(age) ...)``) the value would move
  the clamping bounds of the outer aggregate, hence its noise, after the budget was reserved;
  such a subquery is left to the validator, which refuses it. Arithmetic over the outer
  query's *aggregates* (in a select-list, HAVING or ORDER BY item of an aggregating SELECT,
  outside every aggregate's argument: ``COUNT(*) * 1.0 / (SELECT COUNT(*) FROM adult)``) is
  computed by dpproxy on released numbers (post-processing, :func:`post_processed`): there
  the value never reaches a row, a bound or the plan, and is accepted too;
* **uncorrelated**, or correlated on a public table: a subquery that reads a column of the
  outer row is an aggregate over *other people's* rows computed once per outer row: adding one
  person changes that aggregate, hence the filter of every other person's rows. When it equates
  its own columns with columns of one public table (TPC-H Q17's ``l_partkey = p_partkey``, Q20)
  it is released once per key of that table's public rows instead (``sql/correlated.py``,
  ``planning/keyed.py``); otherwise it is refused (0A000) naming that obstacle;
* **exactly one aggregate and no GROUP BY**: its answer is then exactly one row, and one
  number (``SELECT 0.2 * AVG(x)`` is post-processing of that number and is fine);
* **no scalar subquery inside a scalar subquery** (not needed by any query we know of).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dpproxy.catalog.model import Catalog
from dpproxy.errors import UnsupportedQuery

COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
CORRELATED_HINT = (
    "an uncorrelated scalar subquery (one that reads no column of the outer query, such as "
    "x > (SELECT AVG(x) FROM t WHERE ...)) is released first with noise and compared as a "
    "constant, and one correlated on columns of a public table once per key; for a per-group "
    "average, GROUP BY the correlating column in a query of its own"
)


def _shorten(node: exp.Expr) -> str:
    text = node.sql("postgres")
    return text if len(text) <= 80 else text[:77] + "…"


def compared(node: exp.Subquery) -> bool:
    """Is ``node`` (through parentheses) one side of a comparison?"""
    child: exp.Expression = node
    parent = node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    if isinstance(parent, exp.Between):
        return child.arg_key in ("low", "high")
    return isinstance(parent, COMPARISONS) and child.arg_key in ("this", "expression")


def post_processed(node: exp.Subquery) -> bool:
    """Is ``node`` an operand of arithmetic over released aggregates only — in a select-list,
    HAVING or ORDER BY item of an aggregating SELECT that holds an aggregate, outside every
    aggregate's argument (``COUNT(*) * 1.0 / (SELECT COUNT(*) FROM adult)``)? There its value
    is computed with on released numbers (post-processing) and never reaches a row."""
    child: exp.Expr = node
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if isinstance(parent, exp.AggFunc | exp.Window | exp.Subquery):
            return False
        child, parent = parent, parent.parent
    if parent is None or child is node:
        return False
    clause = child.arg_key
    if clause not in ("expressions", "having", "order"):
        return False
    aggregating = parent.args.get("group") is not None or any(
        isinstance(n, exp.AggFunc) for e in parent.expressions for n in e.walk()
    )
    own = any(isinstance(n, exp.AggFunc) for n in child.walk() if not _inside(n, node))
    return aggregating and own


def refuse_arithmetic(tree: exp.Expression) -> None:
    """A scalar subquery as an operand of arithmetic or of a function is refused (0A000):
    there its released value would move the outer query's clamping bounds, hence its noise,
    after the budget was reserved."""
    for node in tree.find_all(exp.Subquery):
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if (
            isinstance(node.this, exp.Select)
            and (
                isinstance(parent, exp.Func | exp.Neg)
                or (isinstance(parent, exp.Binary) and not isinstance(parent, exp.Connector))
            )
            and not isinstance(parent, (*COMPARISONS, exp.In, exp.Exists))
            and not post_processed(node)
        ):
            raise UnsupportedQuery(
                f"a scalar subquery is supported only as one side of a comparison (in "
                f"{_shorten(parent)})",
                hint="x > (SELECT AVG(x) FROM t WHERE ...) is, and so is arithmetic over the "
                "outer query's aggregates (COUNT(*) * 1.0 / (SELECT COUNT(*) FROM t)); as an "
                "operand of row-level arithmetic, its noisy value would change the bounds, hence "
                "the noise, of the outer query",
            )


def find_scalars(tree: exp.Expression) -> list[exp.Subquery]:
    """The scalar subqueries of ``tree`` that stand as one side of a comparison, outermost
    first, in a fixed order (the same for a copy of the tree); those inside another one are
    not listed (:func:`check_scalar` refuses them)."""
    found: list[exp.Subquery] = []
    for node in tree.walk():
        if (
            isinstance(node, exp.Subquery)
            and isinstance(node.this, exp.Select)
            and (compared(node) or post_processed(node))
            and not any(node is not f and _inside(node, f) for f in found)
        ):
            found.append(node)
    return found


def _inside(node: exp.Expr, outer: exp.Expr) -> bool:
    p = node.parent
    while p is not None:
        if p is outer:
            return True
        p = p.parent
    return False


def check_scalar(node: exp.Subquery, catalog: Catalog, *, correlated: bool = False) -> exp.Select:
    """The subquery's SELECT when it can be released first on its own (``correlated``: or
    once per key, ``planning/keyed.py``); else refused."""
    select = node.this
    assert isinstance(select, exp.Select)
    text = _shorten(node)
    if find_scalars(select):
        raise UnsupportedQuery(
            f"a scalar subquery inside a scalar subquery is not supported (in {text})",
            hint="compute the inner value with a query of its own and write it as a constant",
        )
    outer = _outer_column(select, catalog, node.root())
    if outer is not None and not correlated:
        raise UnsupportedQuery(
            f"a scalar subquery that reads a column of the outer query ({outer}) is not "
            f"supported (in {text}): it is an aggregate over other people's rows, computed "
            "again for every outer row, and one person's influence on such an answer has no "
            "bounded sensitivity",
            hint=CORRELATED_HINT,
        )
    if select.args.get("group") is not None or len(select.expressions) != 1:
        raise UnsupportedQuery(
            f"a scalar subquery must compute one aggregate with no GROUP BY (in {text})",
            hint="write it as SELECT AVG(x) FROM t WHERE ...",
        )
    limit = select.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    keeps_its_row = limit is None or (
        isinstance(count, exp.Literal) and count.is_int and int(count.name) >= 1
    )
    # HAVING, OFFSET or LIMIT 0 may leave no row (the value NULL): not applied when released
    clause = next((c for c in ("having", "offset", "qualify") if select.args.get(c)), None)
    if clause is not None or not keeps_its_row:
        written = (clause or "limit").upper()
        raise UnsupportedQuery(
            f"{written} in a scalar subquery is not supported (in {text})",
            hint="write the condition in the outer query",
        )
    if not any(isinstance(n, exp.AggFunc) for n in select.expressions[0].walk()):
        raise UnsupportedQuery(
            f"a scalar subquery over private data must compute an aggregate (in {text}): "
            "a single person's value cannot be released",
            hint="compare with an aggregate, such as (SELECT AVG(x) FROM t WHERE ...)",
        )
    return select


def _outer_column(select: exp.Select, catalog: Catalog, root: exp.Expr) -> str | None:
    """The first of :func:`outer_columns`, as written, else None."""
    found = outer_columns(select, catalog, root)
    if not found:
        return None
    col = found[0]
    return f"{col.table}.{col.name}" if col.table else col.name


def outer_columns(select: exp.Select, catalog: Catalog, root: exp.Expr) -> list[exp.Column]:
    """The columns of ``select`` that belong to no relation named inside it but to one of the
    query ``root``. Qualified columns are checked against the names and aliases of the tables
    and derived tables inside; unqualified ones against the schema's columns of the tables
    inside (not checked when a derived table or CTE is read, nor when no table of the query
    has the column: the validator finds those)."""
    names: set[str] = set()
    columns: set[str] = set()
    derived = False
    known = {
        c.name.lower()
        for t in root.find_all(exp.Table)
        if (table := catalog.table(t.name.lower())) is not None
        for c in table.columns
    }
    for n in select.walk():
        if isinstance(n, exp.Table):
            names.add(n.name.lower())
            if n.alias:
                names.add(n.alias.lower())
            table = catalog.table(n.name.lower())
            if table is None:
                derived = True  # a CTE, or an unknown table (refused by the validator)
            else:
                columns.update(c.name.lower() for c in table.columns)
        elif isinstance(n, exp.Subquery | exp.CTE) and n.alias:
            names.add(n.alias.lower())
            derived = True
    found = []
    for col in select.find_all(exp.Column):
        qualifier = col.table.lower()
        if qualifier:
            if qualifier not in names:
                found.append(col)
        elif not derived and col.name.lower() not in columns and col.name.lower() in known:
            found.append(col)
    return found


def placeholder() -> exp.Expression:
    """The constant the outer query is planned with before the scalar values are known."""
    return exp.Literal.number(0)


def constant(value: object) -> exp.Expression:
    """A released number as a SQL constant; NULL when there is none (a comparison with it is
    unknown: no row matches, as in the plain SQL when the subquery reads no rows), and when
    post-processing made it ±inf or NaN (``SUM(x) * 1e308 * 1e308``): whether it overflows
    depends on the released value, so it must not fail (an error here came after the charge)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a scalar subquery released a {type(value).__name__}")
    if isinstance(value, int) and abs(value) >= 10**15:  # no longer than a float's text
        try:
            value = float(value)
        except OverflowError:  # beyond ±1.8e308: not finite, as below
            return exp.Null()
    text = repr(float(value)) if isinstance(value, float) else str(value)
    if text.lower() in ("nan", "inf", "-inf"):
        return exp.Null()
    number = exp.Literal.number(text.lstrip("-"))
    return exp.Paren(this=exp.Neg(this=number)) if text.startswith("-") else number


def substitute(tree: exp.Expression, values: Sequence[exp.Expression]) -> exp.Expression:
    """A copy of ``tree`` with its scalar subqueries (:func:`find_scalars`) replaced by
    ``values``, in order."""
    copy = tree.copy()
    found = find_scalars(copy)
    if len(found) != len(values):
        raise ValueError("one value per scalar subquery")
    for node, value in zip(found, values, strict=True):
        node.replace(value.copy())
    return copy
