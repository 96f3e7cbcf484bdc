"""Which CTE a table reference names, by SQL's scoping rules, and CTEs given names of their own
where one hides another relation of the same name from the rest of the query.

In ``WITH adult AS (SELECT * FROM adult WHERE age > 30) SELECT COUNT(*) FROM adult`` the
``adult`` inside the CTE is the table (a CTE that is not RECURSIVE does not see itself, nor
the CTEs after it in its WITH), the one after it the CTE: PostgreSQL, DuckDB and Spark read it
so. The validator resolves names through one map of the statement's CTEs, which read the
inner ``adult`` as the CTE again (refused: "nested too deeply"); :func:`unshadow_ctes` first
renames such a CTE and the references that name it, so that every name means one relation."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from sqlglot import exp

_E = TypeVar("_E", bound=exp.Expression)


def cte_named(table: exp.Table) -> exp.CTE | None:
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


def unshadow_ctes(tree: _E, taken: Iterable[str] = ()) -> _E:
    """``tree`` (changed in place) with each CTE whose name means another relation somewhere
    in the query (a table its own body or an earlier CTE reads, a CTE of a nested WITH)
    renamed ``<name>_<n>`` (a name neither ``taken``, such as the catalog's tables, nor used
    in the query), and every reference to it renamed too; a reference without an alias keeps
    the old name as its alias, so columns qualified by it still resolve. Nothing changes in a
    query without such a CTE.

    >>> from sqlglot import parse_one
    >>> unshadow_ctes(parse_one("WITH t AS (SELECT * FROM t) SELECT t.a FROM t")).sql()
    'WITH t_1 AS (SELECT * FROM t) SELECT t.a FROM t_1 AS t'
    """
    ctes = list(tree.find_all(exp.CTE))
    if not ctes:
        return tree  # most queries: one walk
    tables = list(tree.find_all(exp.Table))
    named = {id(t): cte_named(t) for t in tables}
    shadowing = [  # a CTE whose name also means another relation somewhere in the query
        cte
        for cte in ctes
        if any(
            t.name.lower() == cte.alias_or_name.lower() and named[id(t)] is not cte
            for t in tables
        )
    ]
    if not shadowing:
        return tree
    used = {n.lower() for n in taken} | {t.name.lower() for t in tables}
    used |= {c.alias_or_name.lower() for c in ctes}
    renames = [(cte, [t for t in tables if named[id(t)] is cte]) for cte in shadowing]
    for cte, references in renames:
        name, n = cte.alias_or_name, 1
        while f"{name}_{n}".lower() in used:
            n += 1
        fresh = f"{name}_{n}"
        used.add(fresh.lower())
        alias = cte.args.get("alias")
        if isinstance(alias, exp.TableAlias):
            alias.set("this", exp.to_identifier(fresh))
        for ref in references:
            if not ref.alias:  # as it was written (quoted or not)
                ref.set("alias", exp.TableAlias(this=ref.this.copy()))
            ref.set("this", exp.to_identifier(fresh))
    return tree
