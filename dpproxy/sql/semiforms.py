"""The subquery conditions of a WHERE clause: which of its AND-ed conditions are the semi- and
anti-joins that ``sql/semijoins.py`` builds (``[NOT] EXISTS (SELECT …)``, ``x [NOT] IN (SELECT
…)``), and their form; a subquery anywhere else in the WHERE is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.factor import and_all, bare
from dpproxy.sql.joinparts import conjuncts
from dpproxy.sql.scope import SUBQUERY_HINT

SUPPORTED = SUBQUERY_HINT


def has_subquery(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.Subquery | exp.Select | exp.Exists) for n in node.walk())


def split_where(cond: exp.Expression) -> tuple[exp.Expression | None, list[exp.Expression]]:
    """(the WHERE without its subquery conditions, the subquery conditions); a subquery in any
    other place of the WHERE is refused."""
    if not has_subquery(cond):
        return cond, []
    plain: list[exp.Expression] = []
    semis: list[exp.Expression] = []
    for c in conjuncts(cond):
        if not has_subquery(c):
            plain.append(c)
        elif subquery_form(c) is not None:
            semis.append(c)
        else:
            raise UnsupportedQuery(
                f"a subquery inside a WHERE expression is not supported (in {shorten(c)})",
                hint=SUPPORTED + "; a scalar subquery or one inside OR is not",
            )
    return (and_all(plain) if plain else None), semis


def shorten(node: exp.Expression) -> str:
    text = node.sql("postgres")
    return text if len(text) <= 80 else text[:77] + "…"


@dataclass(frozen=True, slots=True)
class SubqueryForm:
    negated: bool
    select: exp.Select
    operand: exp.Expression | None  # x of ``x IN (…)``; None for EXISTS
    word: str  # how the user wrote it, for messages


def subquery_form(node: exp.Expression) -> SubqueryForm | None:
    node = bare(node)
    negated = isinstance(node, exp.Not)
    inner = bare(node.this) if negated else node
    if isinstance(inner, exp.Exists) and isinstance(inner.this, exp.Select):
        return SubqueryForm(negated, inner.this, None, "NOT EXISTS" if negated else "EXISTS")
    query = inner.args.get("query") if isinstance(inner, exp.In) else None
    if isinstance(inner, exp.In) and query is not None:
        select = query.this if isinstance(query, exp.Subquery) else query
        if isinstance(select, exp.Select) and not inner.expressions:
            operand = inner.this
            if has_subquery(operand):
                return None
            return SubqueryForm(negated, select, operand, "NOT IN" if negated else "IN")
    return None
