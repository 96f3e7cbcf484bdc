"""The types clients see of a catalog query: result column names and type OIDs, parameters.

DuckDB names a result column after its expression and types it in DuckDB's terms;
PostgreSQL's clients expect FigureColname's names (``?column?``, ``case``, ``bool``...) and
the catalog's own types (``name``, ``"char"``, ``oid``). :class:`~.emulator.CatalogEmulator`
asks these functions for the names and type hints of a query's select list
(:func:`output_name`, :func:`type_hint`) and maps DuckDB's result types
(:func:`result_oid`). :func:`parameter_types` answers ParameterDescription.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlglot import exp

from dpproxy.server.catalog.functions import LITERAL_CLASSES, LITERALS
from dpproxy.server.catalog.model import Relation
from dpproxy.server.catalog.nodes import is_function, pg_type_name


def output_name(node: exp.Expression) -> str | None:
    """The column name PostgreSQL gives a select-list item (None for ``*``)."""
    if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.is_star):
        return None
    return _figure_colname(node)[0]


_FUNCTION_NAMES: Final = {
    exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.CurrentVersion: "version",
    exp.ArraySize: "array_length",
    exp.Explode: "unnest",
    exp.Greatest: "greatest",
    exp.Least: "least",
    exp.Nullif: "nullif",
}


def _figure_colname(node: exp.Expression) -> tuple[str, int]:
    """PostgreSQL's FigureColname: (name, strength); 2 a real name, 1 a type or keyword."""
    if isinstance(node, exp.Alias):
        ident = node.args.get("alias")
        quoted = isinstance(ident, exp.Identifier) and ident.quoted
        return (node.alias if quoted else node.alias.lower()), 2
    if isinstance(node, exp.Column):
        return (node.name if node.this.args.get("quoted") else node.name.lower()), 2
    if isinstance(node, exp.Dot):
        return node.expression.name.lower(), 2
    if isinstance(node, exp.Paren | exp.Bracket):
        return _figure_colname(node.this)
    if isinstance(node, exp.Cast):
        name, strength = _figure_colname(node.this)
        return (name, strength) if strength > 1 else (pg_type_name(node.to).lstrip("_"), 1)
    if isinstance(node, exp.Boolean):
        return "bool", 1
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        items = node.this.expressions
        return _figure_colname(items[0]) if items else ("?column?", 0)
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        name, strength = _figure_colname(default) if default is not None else ("case", 1)
        return (name, strength) if strength > 1 else ("case", 1)
    if isinstance(node, exp.If):
        return "case", 1
    if isinstance(node, exp.Array):
        return "array", 2 if node.find(exp.Select) else 1
    if isinstance(node, exp.Anonymous):
        return node.name.lower(), 2
    for cls, name in _FUNCTION_NAMES.items():
        if isinstance(node, cls):
            return name, 2
    if isinstance(node, exp.Func) and not isinstance(node, exp.Connector):
        return node.sql_name().lower(), 2
    return "?column?", 0


def first_select(tree: exp.Expression) -> exp.Select | None:
    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def result_oid(duck: str, elem_array: Mapping[int, int]) -> int:
    """PostgreSQL type OID for a DuckDB result type."""
    if duck.endswith("[]"):
        return elem_array.get(result_oid(duck[:-2], elem_array), 1009)
    if duck.startswith("DECIMAL"):
        return 1700
    return {
        "BOOLEAN": 16,
        "TINYINT": 21,
        "SMALLINT": 21,
        "INTEGER": 23,
        "BIGINT": 20,
        "UTINYINT": 21,
        "USMALLINT": 23,
        "UINTEGER": 26,
        "UBIGINT": 1700,
        "HUGEINT": 1700,
        "FLOAT": 700,
        "DOUBLE": 701,
        "VARCHAR": 25,
        "BLOB": 17,
        "DATE": 1082,
        "TIME": 1083,
        "TIMESTAMP": 1114,
        "TIMESTAMP WITH TIME ZONE": 1184,
        "INTERVAL": 1186,
        "UUID": 2950,
        "JSON": 114,
    }.get(duck, 25)


WIRE_AS_TEXT: Final = {"name": 19, "varchar": 1043}  # same bytes as text, text or binary
_NAME_FUNCTIONS: Final = frozenset({*LITERALS, "pg_get_userbyid", "pg_encoding_to_char"}) - {
    "version"
}


def relations_by_alias(
    select: exp.Select, specs: Mapping[tuple[str, str], Relation]
) -> dict[str, Relation]:
    """The catalog relations in ``select``'s FROM and JOINs, by alias."""
    out: dict[str, Relation] = {}
    joins = select.args.get("joins") or []
    for source in (select.args.get("from_") or select.args.get("from"), *joins):
        table = source.this if isinstance(source, exp.From | exp.Join) else None
        if isinstance(table, exp.Table) and not isinstance(table.this, exp.Func):
            schema = "pgis" if table.db.lower() == "information_schema" else "pgc"
            rel = specs.get((schema, table.name.lower()))
            if rel is not None:
                out[table.alias_or_name.lower()] = rel
    return out


def type_hint(
    node: exp.Expression,
    sources: Mapping[str, Relation],
    specs: Mapping[tuple[str, str], Relation],
    column_types: Mapping[str, str],
) -> int | None:
    """The PostgreSQL type of a text result DuckDB only knows as VARCHAR: a catalog column
    of type name, "char" or varchar, a function returning name, or arrays of names.

    ``sources`` are the relations of the select by alias (:func:`relations_by_alias`),
    ``specs`` every catalog relation, ``column_types`` the type of each catalog column name.
    """
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Dot) and is_function(node.expression):
        node = node.expression
    if isinstance(node, exp.Column):
        name = node.name.lower()
        if not node.table and name in LITERALS:
            return 19  # the keywords user, current_user, ...
        rel = (
            sources.get(node.table.lower())
            if node.table
            else next((r for r in sources.values() if any(c == name for c, _ in r.columns)), None)
        )
        types = dict(rel.columns) if rel is not None else column_types
        return {"char": 18, **WIRE_AS_TEXT}.get(types.get(name, ""))
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        inner = node.this
        first = inner.expressions[0].unalias() if inner.expressions else None
        return (
            type_hint(first, relations_by_alias(inner, specs), specs, column_types)
            if first is not None
            else None
        )
    if isinstance(node, exp.Array | exp.ArrayAgg):
        sub = node.find(exp.Select)
        if isinstance(node, exp.ArrayAgg):
            hint = type_hint(node.this, sources, specs, column_types)
        elif sub is not None and sub.expressions:
            hint = type_hint(
                sub.expressions[0].unalias(), relations_by_alias(sub, specs), specs, column_types
            )
        else:
            hint = None
        return {19: 1003, 18: 1002}.get(hint or 0)
    if (isinstance(node, tuple(LITERAL_CLASSES)) and not isinstance(node, exp.CurrentVersion)) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in _NAME_FUNCTIONS
    ):
        return 19
    return None


def parameter_types(
    tree: exp.Expression,
    regtype: Mapping[str, int],
    array_of: Mapping[int, int],
    column_types: Mapping[str, str],
) -> list[int]:
    """Type OIDs for ``$1``... (ParameterDescription): from casts and compared columns."""
    found: dict[int, int] = {}
    for p in tree.find_all(exp.Parameter):
        if not p.name.isdigit():
            continue
        oid, parent = 25, p.parent
        if isinstance(parent, exp.Cast):
            oid = regtype.get(pg_type_name(parent.to).lstrip("_"), 25)
            if pg_type_name(parent.to).startswith("_"):
                oid = array_of.get(oid, 1009)
        elif isinstance(parent, exp.Binary | exp.In):
            other = parent.this if parent.this is not p else parent.args.get("expression")
            if isinstance(other, exp.Column) and other.name in column_types:
                pg = column_types[other.name]
                oid = regtype.get(pg, 25) if not pg.startswith("_") else 25
        found.setdefault(int(p.name), oid)
    return [found.get(i, 25) for i in range(1, max(found, default=0) + 1)]
