"""A SELECT of the outputs of one ungrouped aggregate subquery, planned as that subquery.

BI tools wrap the query behind a chart or a "virtual dataset" as a derived table and select
its columns: Superset sends ``SELECT x FROM (SELECT COUNT(*) AS x FROM adult) AS
virtual_table LIMIT 1000``. The subquery is an aggregate without GROUP BY, so it has exactly
one row, and the outer query only picks, renames and limits its columns: the answer is the
subquery's own, with the outer query's names and its LIMIT/OFFSET. :func:`lift_aggregate`
rewrites it so, before validation; anything else the outer query does (a WHERE, a join, an
aggregate, DISTINCT, an expression over the columns) leaves the tree as it is, to be planned or
refused as before. The rewrite is exact: ORDER BY over one row changes nothing and is dropped,
and LIMIT and OFFSET, applied by the planner to the released rows, keep their meaning.
"""

from __future__ import annotations

from sqlglot import exp

_OUTER_CLAUSES = ("joins", "where", "group", "having", "distinct", "qualify", "with_")
_INNER_CLAUSES = ("group", "distinct", "limit", "offset", "qualify")


def lift_aggregate(tree: exp.Select) -> exp.Select:
    """``tree`` with a SELECT of the columns of one ungrouped aggregate subquery replaced by
    that subquery (the module docstring), or ``tree`` itself.

    >>> from sqlglot import parse_one
    >>> q = "SELECT n AS total FROM (SELECT COUNT(*) AS n FROM t WHERE a > 1) AS v LIMIT 10"
    >>> lift_aggregate(parse_one(q)).sql()
    'SELECT COUNT(*) AS total FROM t WHERE a > 1 LIMIT 10'
    """
    if any(tree.args.get(k) for k in _OUTER_CLAUSES):
        return tree
    source = tree.args.get("from_")
    sub = source.this if isinstance(source, exp.From) else None
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return tree
    alias = sub.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return tree  # a column list renames the outputs: planned as before
    inner = sub.this
    if any(inner.args.get(k) for k in _INNER_CLAUSES):
        return tree
    if not any(isinstance(n, exp.AggFunc) for p in inner.expressions for n in p.walk()):
        return tree  # a row-wise subquery
    outputs: dict[str, exp.Expr] = {}
    for p in inner.expressions:
        name = p.alias_or_name.lower()
        if not name or name in outputs:
            return tree  # an output without a name, or two of one name
        outputs[name] = p
    qualifier = sub.alias_or_name.lower()
    picked: list[exp.Expr] = []
    for p in tree.expressions:
        target = p.unalias()
        if isinstance(target, exp.Star):
            picked += [o.copy() for o in inner.expressions]
            continue
        if not isinstance(target, exp.Column) or target.table.lower() not in ("", qualifier):
            return tree
        if isinstance(target.this, exp.Star):  # t.*
            picked += [o.copy() for o in inner.expressions]
            continue
        found = outputs.get(target.name.lower())
        if found is None:
            return tree  # not a column of the subquery: refused as before
        picked.append(exp.alias_(found.unalias().copy(), p.alias_or_name, copy=False))
    lifted = inner.copy()
    lifted.set("expressions", picked)
    for clause in ("limit", "offset"):
        if tree.args.get(clause) is not None:
            lifted.set(clause, tree.args[clause].copy())
    return lifted
