"""The SQL of a UNION ALL relation in FROM (``sql/unionrel.py``), built from the plan.

``(SELECT <unit> AS __unit_of_row, <output> AS <name>, … FROM <branch relation> WHERE <guarded
filters> UNION ALL SELECT …) AS __union``, printed as the FROM of ``__rows``
(``rewrite/rows.py``), where the union's rows are bounded per unit like any table's.

Totality: a branch's outputs are columns of its relation and constants CAST to the union
column's type (``sql/unionrel.py``: BIGINT to DOUBLE, a literal to its own type), none of which
can fail; its filters are guarded as in ``__rows`` (``guard_row_expression``,
``finite_arithmetic``) against the branch's own relation, whose columns they read. A branch over
a join reads that join's relation (``sql/joins.py``) as a subquery, as ``__rows`` does.
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.rewrite.floats import finite_arithmetic
from dpproxy.rewrite.guard import guard_row_expression
from dpproxy.rewrite.nodes import table as table_ref
from dpproxy.sql.perunit import UNIT_OF_ROW
from dpproxy.sql.unionrel import Branch, UnionRelation


def union_relation(union: UnionRelation) -> exp.Subquery:
    """The union as ``(… UNION ALL …) AS __union``, its columns in the relation's order."""
    selects = [_branch(b, union) for b in union.branches]
    tree: exp.Expression = selects[0]
    for s in selects[1:]:
        tree = exp.Union(this=tree, expression=s, distinct=False)
    return exp.Subquery(this=tree, alias=exp.TableAlias(this=exp.to_identifier("__union")))


def _branch(b: Branch, union: UnionRelation) -> exp.Select:
    select = exp.select(exp.alias_(b.unit.copy(), UNIT_OF_ROW, copy=False))
    for column, out in zip(union.columns, b.outputs, strict=True):
        select = select.select(exp.alias_(out.copy(), column.name, copy=False), copy=False)
    if b.source is not None:  # a join (sql/joins.py): its relation as a subquery
        source: exp.Expression = exp.Subquery(
            this=b.source.select.copy(), alias=exp.TableAlias(this=exp.to_identifier("__joined"))
        )
    else:
        source = table_ref(b.table.name)
    select = select.from_(source, copy=False)
    for f in b.filters:
        guarded = finite_arithmetic(guard_row_expression(f, b.table), b.table)
        select = select.where(exp.Paren(this=guarded), copy=False)
    return select
