"""Which statements are catalog queries: the (cached) parse and the allowlist check.

Step 3 of the no-leak argument (package docstring): :func:`check` accepts a statement only
if every relation it names is an emulated ``pg_catalog`` / ``information_schema`` relation
(or one of its own CTEs) and every function and operator is listed in :mod:`.functions`;
``SELECT ... INTO``, locking clauses, DML and DDL are refused. Pure functions of the tree and
the model's relation specs; :class:`~.emulator.CatalogEmulator` calls them before running
anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokenizer_core import TokenType

from dpproxy.errors import (
    DPProxyError,
    Forbidden,
    UndefinedFunction,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.server.catalog.cache import Cache
from dpproxy.server.catalog.functions import (
    BUILTINS,
    FUNCTION_CLASSES,
    HIDDEN_MACROS,
    INFO_MACROS,
    LITERALS,
    MACROS,
    SESSION_FUNCTIONS,
    operator_class,
)
from dpproxy.server.catalog.model import Relation
from dpproxy.sql.parse import parse_statements


class _Postgres(Postgres):
    """PostgreSQL as sqlglot reads it, except that ``oid`` and the ``reg*`` types are ordinary
    type names: sqlglot's OBJECT_IDENTIFIER token cannot take ``[]`` (``$1::oid[]``)."""

    class Tokenizer(Postgres.Tokenizer):
        KEYWORDS: ClassVar[dict[str, TokenType]] = {
            k: v
            for k, v in Postgres.Tokenizer.KEYWORDS.items()
            if v is not TokenType.OBJECT_IDENTIFIER
        }


_FORBIDDEN_NODES: Final = tuple(
    getattr(exp, n)
    for n in (
        "Insert",
        "Update",
        "Delete",
        "Merge",
        "Create",
        "Drop",
        "Alter",
        "Command",
        "Set",
        "Into",
        "Lock",
        "Copy",
        "TruncateTable",
        "Grant",
        "Use",
        "Pragma",
        "Transaction",
        "Commit",
        "Rollback",
        "LoadData",
        "Attach",
        "Detach",
        "Export",
        "Install",
    )
    if hasattr(exp, n)
)


_TREES: Cache[str, exp.Expression] = Cache(512)


def parse(sql: str) -> exp.Expression:
    """One statement, parsed once per process (the tree is shared: never mutate it)."""
    tree = _TREES.get(sql)
    if tree is None:
        tree = _parse_uncached(sql)
        _TREES.put(sql, tree)
    return tree


def _parse_uncached(sql: str) -> exp.Expression:
    trees = parse_statements(sql, _Postgres)  # within sql/parse.py's limits
    if len(trees) != 1 or not isinstance(trees[0], exp.Expression):
        raise UnsupportedQuery("send one catalog statement at a time")
    return trees[0]


def check(
    tree: exp.Expression, specs: Mapping[tuple[str, str], Relation], database: str
) -> DPProxyError | None:
    """Why ``tree`` is not a catalog query (an error to raise), or None if it is one."""
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return UnsupportedQuery("only SELECT and SHOW are answered from the catalog")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in tree.walk():
        problem: DPProxyError | None = None
        if isinstance(node, _FORBIDDEN_NODES) or (
            isinstance(node, exp.Select) and (node.args.get("into") or node.args.get("locks"))
        ):
            problem = Forbidden("catalog queries may only read")
        elif isinstance(node, exp.Table):
            problem = _check_table(node, ctes, specs, database)
        elif isinstance(node, exp.Operator) and operator_class(node) is None:
            problem = UndefinedFunction("operator does not exist in catalog queries")
        elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
            schema = node.this.name.lower() if isinstance(node.this, exp.Identifier) else ""
            fn = node.expression.name.lower()
            if schema != "pg_catalog" and not (
                schema == "information_schema" and fn in INFO_MACROS
            ):
                problem = UndefinedFunction(f"function {node.sql()}() does not exist")
        elif isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name in HIDDEN_MACROS or not (
                name in MACROS
                or name in INFO_MACROS
                or name in LITERALS
                or name in BUILTINS
                or name in SESSION_FUNCTIONS
                or (name == "pg_show_all_settings" and isinstance(node.parent, exp.Table))
            ):
                problem = UndefinedFunction(f"function {name}() does not exist")
        elif isinstance(node, exp.Func) and not isinstance(node, FUNCTION_CLASSES):
            problem = UndefinedFunction(
                f"function {node.sql_name().lower()}() is not available in catalog queries"
            )
        elif isinstance(node, exp.Column) and node.args.get("db") is not None:
            if node.db.lower() not in ("pg_catalog", "information_schema"):
                problem = UnsupportedQuery("only catalog relations can be queried here")
        if problem is not None:
            return problem
    return None


def _check_table(
    node: exp.Table, ctes: set[str], specs: Mapping[tuple[str, str], Relation], database: str
) -> DPProxyError | None:
    schema, name = node.db.lower(), node.name.lower()
    if node.catalog and node.catalog.lower() != database.lower():
        return UnsupportedQuery("cross-database references are not implemented")
    if isinstance(node.this, exp.Func):
        ok = schema in ("", "pg_catalog")
        return None if ok else UndefinedFunction(f"function {node.sql()} does not exist")
    if not schema and name in ctes:
        return None
    if schema in ("", "pg_catalog") and ("pgc", name) in specs:
        return None
    if schema == "information_schema" and ("pgis", name) in specs:
        return None
    if schema in ("pg_catalog", "information_schema") or name.startswith("pg_"):
        return UndefinedTable(f'relation "{node.sql(dialect="postgres")}" does not exist')
    return UnsupportedQuery("a query over schema tables is not a catalog query")
