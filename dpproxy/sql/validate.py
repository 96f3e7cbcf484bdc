"""Check a parsed statement against the catalog and the supported subset → :class:`ValidQuery`.

The result expresses everything over the private table's own columns: row-wise CTEs and
subqueries are inlined (their projections substituted, their WHERE clauses collected: the FROM
clause is read by ``sql/fromclause.py``), so the analysis and the rewrite never see names the
catalog does not know. The select list, HAVING and ORDER BY become *post-processing
expressions* in which every aggregate is replaced by a placeholder column ``__agg_i`` and every
group key by ``__key_j``; they are evaluated in the proxy on the noisy values, never by the
database.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dpproxy.catalog.model import Catalog, ColumnType, Table
from dpproxy.errors import (
    DatatypeMismatch,
    Forbidden,
    SQLSyntaxError,
    UndefinedColumn,
    UnsupportedQuery,
    WindowingError,
)
from dpproxy.sql.aggregates import PostBuilder, default_name, rates_as_means
from dpproxy.sql.buckets import bucket_spec
from dpproxy.sql.ctes import unshadow_ctes
from dpproxy.sql.domains import listed_domain, narrow_domain
from dpproxy.sql.factor import factor_where
from dpproxy.sql.fromclause import collect_ctes, from_scope, where
from dpproxy.sql.joinparts import JoinSource
from dpproxy.sql.lift import lift_aggregate
from dpproxy.sql.scope import (
    AggKind,
    Aggregate,
    GroupKey,
    OrderItem,
    OutputItem,
    Scope,
    no_aggregates,
)
from dpproxy.sql.semijoins import SemiJoins
from dpproxy.sql.types import SqlType

# isinstance tuples built once (``A | B`` in the call builds a union at every call)
_CONDITIONS = (exp.Predicate, exp.Not, exp.And, exp.Or)
_AND_OR = (exp.And, exp.Or)
_NEVER_NULL = (exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ)

if TYPE_CHECKING:  # imported by the queries with such FROM items or window functions only
    from dpproxy.sql.perunit import PerUnit
    from dpproxy.sql.unionrel import UnionRelation
    from dpproxy.sql.windows import WindowItem

__all__ = [
    "AggKind",
    "Aggregate",
    "GroupKey",
    "OrderItem",
    "OutputItem",
    "ValidQuery",
    "validate",
]

MAX_PUBLIC_GROUPS = 10_000

_FORBIDDEN_STATEMENTS = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Merge,
    exp.TruncateTable,
    exp.Copy,
    exp.Grant,
    exp.Command,
)


@dataclass(frozen=True, slots=True)
class ValidQuery:
    sql: str
    table: Table
    filters: tuple[exp.Expression, ...]
    keys: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    outputs: tuple[OutputItem, ...]
    having: exp.Expression | None
    order: tuple[OrderItem, ...]
    limit: int | None
    offset: int
    source: JoinSource | None = None  # a join: the relation ``table`` describes
    windows: tuple[WindowItem, ...] = ()  # over the released rows (``sql/windows.py``)
    per_unit: PerUnit | None = None  # a per-unit subquery: the relation ``table`` describes
    union: UnionRelation | None = None  # a UNION ALL in FROM: the relation ``table`` describes

    @property
    def public_keys(self) -> bool:
        return all(k.domain is not None for k in self.keys)


def validate(tree: exp.Expression, catalog: Catalog, sql: str = "") -> ValidQuery:
    """Validate one parsed statement; see the module docstring. ``sql`` is the original text."""
    if isinstance(tree, _FORBIDDEN_STATEMENTS):
        raise Forbidden(
            f"{tree.key.upper()} statements are not allowed: dpproxy answers aggregate SELECTs only"
        )
    if isinstance(tree, exp.SetOperation):
        raise UnsupportedQuery("set operations (UNION, INTERSECT, EXCEPT) are not supported")
    if not isinstance(tree, exp.Select):
        raise UnsupportedQuery(
            f"{tree.key.upper()} statements are not supported; send an aggregate SELECT"
        )
    tree = lift_aggregate(tree)  # SELECT x FROM (SELECT COUNT(*) AS x …) AS virtual_table
    nodes = _nodes(tree)
    for ref in nodes:  # FROM adult AS t(a, b): not read as renamed
        if isinstance(ref, exp.Table):
            alias = ref.args.get("alias")
            if isinstance(alias, exp.TableAlias) and alias.columns:
                raise UnsupportedQuery(
                    f"a column list on a table ({ref.sql('postgres')}) is not supported",
                    hint="rename the columns in a subquery: (SELECT x AS a, … FROM t) AS t",
                )
    # Each step below returns its tree untouched without a WHERE, a CTE or a division (most
    # queries): then its own walk of the whole tree is skipped. Factoring a WHERE copies the
    # tree and changes conditions only; no step until the select list's makes a division.
    kinds = {type(n) for n in nodes}
    wheres = [n for n in nodes if isinstance(n, exp.Where)]  # in find_all's order
    if wheres:
        tree = factor_where(tree, wheres)  # (A AND B) OR (A AND C) → A AND (B OR C), first
    if any(issubclass(k, exp.CTE) for k in kinds):
        tree = unshadow_ctes(tree, (t.name for t in catalog.tables))  # one relation per name
    ctes = collect_ctes(tree)
    semis = SemiJoins(catalog, ctes)
    scope = from_scope(tree, catalog, ctes, semis=semis)
    _no_unit_groups(tree, scope)  # the DP obstacle first (TPC-H Q18), before the WHERE's
    where(tree, scope, semis)
    query = _aggregate_query(tree, scope, sql, any(issubclass(k, exp.Div) for k in kinds))
    if semis.hidden:  # the subqueries' columns, typed and guarded like the relation's own
        table = replace(query.table, columns=query.table.columns + tuple(semis.hidden))
        query = replace(query, table=table)
    return query


GROUP_BY_UNIT = "grouping by the privacy unit would release one group per person"
GROUP_BY_UNIT_HINT = (
    "group by a public attribute (a segment, a nation), or aggregate per person in a subquery "
    "and count people per value: SELECT n, COUNT(*) FROM (SELECT c_custkey, SUM(x) AS n ... "
    "GROUP BY c_custkey) t GROUP BY n"
)


def _no_unit_groups(select: exp.Select, scope: Scope) -> None:
    """A GROUP BY column that is the privacy unit is refused (42501) before anything else in
    the query is analysed: whatever the rest says, the answer would hold one group per person."""
    group = select.args.get("group")
    if group is None or not scope.table.privacy_unit:
        return
    for item in group.expressions:
        if isinstance(item, exp.Column) and item.name.lower() in scope.names:
            resolved = scope.names[item.name.lower()]
            if item.table:
                resolved = scope.names.get(f"{item.table.lower()}.{item.name.lower()}", resolved)
            cols = list(resolved.find_all(exp.Column))
            if cols and all(scope.table.is_unit(c.name) for c in cols):
                raise Forbidden(GROUP_BY_UNIT, hint=GROUP_BY_UNIT_HINT)


def _nodes(tree: exp.Expr) -> list[exp.Expr]:
    """Every node of ``tree`` in ``find_all``'s order (breadth first, each node's arguments in
    order: sqlglot's ``iter_expressions``), read in one loop over a list: a third of the time
    of sqlglot's walk, which :func:`validate` would otherwise take four times (issue 21)."""
    out: list[exp.Expr] = [tree]
    expr = exp.Expr
    for node in out:  # the list grows while it is read: the queue of a breadth-first walk
        for value in node.args.values():
            if isinstance(value, list):
                out.extend(v for v in value if isinstance(v, expr))
            elif isinstance(value, expr):
                out.append(value)
    return out


def _aggregate_query(
    select: exp.Select, scope: Scope, sql: str, divides: bool = True
) -> ValidQuery:
    """The query's aggregates, outputs, HAVING, ORDER BY and LIMIT; ``divides``: whether the
    tree may hold a division (without one no select item is a rate, ``rates_as_means``)."""
    if select.args.get("distinct"):
        has_agg = any(isinstance(n, exp.AggFunc) for p in select.expressions for n in p.walk())
        if not has_agg:
            raise Forbidden("row-level reads are not allowed: SELECT DISTINCT returns rows")
        raise UnsupportedQuery("SELECT DISTINCT over aggregates is not supported")
    if select.args.get("qualify"):
        raise UnsupportedQuery("QUALIFY is not supported", hint="filter in an outer query")
    if select.args.get("windows"):
        raise UnsupportedQuery(
            "named windows (WINDOW w AS ...) are not supported", hint="write OVER (...)"
        )
    for proj in select.expressions:
        if isinstance(proj, exp.Star) or (
            isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)
        ):
            raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
    aliases = {p.alias.lower(): p.unalias() for p in select.expressions if p.alias}
    keys = _group_keys(select, scope, aliases)
    aggregates: list[Aggregate] = []
    has_any_agg = any(_is_aggregate(n) for p in select.expressions for n in p.walk())
    if not keys and not has_any_agg:
        raise Forbidden(
            "row-level reads are not allowed: every column must be aggregated",
            hint="use COUNT, SUM, AVG, VAR or STDDEV, optionally with GROUP BY",
        )
    post = PostBuilder(scope, keys, aggregates)
    outputs: list[OutputItem] = []
    for i, proj in enumerate(select.expressions):
        node = proj.unalias()
        expr = post.build(rates_as_means(node) if divides else node)
        name = proj.alias or default_name(node, i)
        is_key = isinstance(expr, exp.Column) and expr.name.startswith("__key_")
        outputs.append(OutputItem(name, expr, post.type_of(expr), is_key))
    having = None
    if h := select.args.get("having"):
        if h.this.find(exp.Window):
            raise WindowingError("window functions are not allowed in HAVING")
        having = post.build(h.this, outputs)
        # Typed like a WHERE clause (string literals become typed constants here), so the
        # evaluation on released values (release/evaluation.py) never meets a type error.
        t = post.type_of(having)
        if t not in (SqlType.BOOLEAN, SqlType.NULL):
            raise DatatypeMismatch(f"argument of HAVING must be type boolean, not type {t.value}")
    order: list[OrderItem] = []
    if o := select.args.get("order"):
        for item in o.expressions:
            target = item.this
            if isinstance(target, exp.Literal) and not target.is_string:
                pos = _position(target, "ORDER BY")
                if not 1 <= pos <= len(outputs):
                    raise UndefinedColumn(f"ORDER BY position {pos} is not in select list")
                expr = outputs[pos - 1].expr.copy()
            else:
                expr = post.build(target, outputs, outputs_first=True)
                post.type_of(expr)  # typed like the select list
            desc = bool(item.args.get("desc"))
            nulls_first = item.args.get("nulls_first")
            order.append(
                OrderItem(expr, desc, bool(nulls_first) if nulls_first is not None else desc)
            )
    limit = _int_clause(select.args.get("limit"), "LIMIT")
    offset = _int_clause(select.args.get("offset"), "OFFSET") or 0
    return ValidQuery(
        sql=sql.strip().rstrip(";").strip() or select.sql("postgres"),
        table=scope.table,
        filters=tuple(scope.filters),
        keys=tuple(keys),
        aggregates=tuple(aggregates),
        outputs=tuple(outputs),
        having=having,
        order=tuple(order),
        limit=limit,
        offset=offset,
        source=scope.source,
        windows=tuple(post.windows),
        # only a PerUnitScope (sql/perunit.py) has ``per_unit``, only a UnionScope
        # (sql/unionrel.py) ``union``: neither module is imported for a query without them
        per_unit=getattr(scope, "per_unit", None),
        union=getattr(scope, "union", None),
    )


def _is_aggregate(node: exp.Expression) -> bool:
    """An aggregate call of the query; not the function of a window (``SUM(x) OVER ()``
    without GROUP BY reads rows, one value per row)."""
    if not isinstance(node, exp.AggFunc):
        return False
    return not (isinstance(node.parent, exp.Window) and node.arg_key == "this")


def _position(literal: exp.Literal, clause: str) -> int:
    """``GROUP BY 2`` / ``ORDER BY 2``: a select-list position (PostgreSQL's 42601 for any
    other number)."""
    if not (literal.name.isascii() and literal.name.isdigit()):
        raise SQLSyntaxError(f"non-integer constant in {clause}")
    return int(literal.name)


def _int_clause(node: exp.Expression | None, what: str) -> int | None:
    if node is None:
        return None
    value = node.args.get("expression") or node.this
    digits = isinstance(value, exp.Literal) and value.name.isascii() and value.name.isdigit()
    if not (digits and not value.is_string):
        raise UnsupportedQuery(f"{what} must be a non-negative integer literal")
    return int(value.name)


def _group_keys(
    select: exp.Select, scope: Scope, aliases: dict[str, exp.Expression]
) -> list[GroupKey]:
    group = select.args.get("group")
    if not group:
        return []
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        raise UnsupportedQuery("ROLLUP, CUBE and GROUPING SETS are not supported")
    keys: list[GroupKey] = []
    for item in group.expressions:
        node = item
        if isinstance(item, exp.Literal) and not item.is_string:
            pos = _position(item, "GROUP BY")
            if not 1 <= pos <= len(select.expressions):
                raise UndefinedColumn(f"GROUP BY position {pos} is not in select list")
            node = select.expressions[pos - 1].unalias()
        elif (
            isinstance(item, exp.Column)
            and not item.table
            and item.name.lower() not in scope.names
            and item.name.lower() in aliases
        ):
            node = aliases[item.name.lower()]
        no_aggregates(node, "GROUP BY")
        resolved, kind = scope.resolve_typed(node)
        if any(k.expr == resolved for k in keys):
            continue
        if (
            scope.table.privacy_unit
            and resolved.find(exp.Column)
            and all(scope.table.is_unit(c.name) for c in resolved.find_all(exp.Column))
        ):
            raise Forbidden(GROUP_BY_UNIT, hint=GROUP_BY_UNIT_HINT)
        domain = _domain(resolved, scope.table)
        if domain is None:  # key IN (1, 2, ...): the query's own public domain
            domain = listed_domain(resolved, scope.filters)
        if domain is not None:  # without the values the WHERE clause itself excludes
            domain = narrow_domain(resolved, domain, scope.filters)
        keys.append(GroupKey(resolved, kind, domain))  # the domain's reading changes no type
    if all(k.domain is not None for k in keys):
        size = 1
        for k in keys:
            assert k.domain is not None
            size *= len(k.domain)
        if size > MAX_PUBLIC_GROUPS:
            raise UnsupportedQuery(
                f"the public GROUP BY domain has {size} groups (limit {MAX_PUBLIC_GROUPS})",
                hint="group by fewer columns",
            )
    return keys


def literal_value(node: exp.Expression) -> tuple[bool, Any]:
    """(True, its value) for a literal (NULL, boolean, string, number, negated number, in
    parentheses or not); (False, None) for anything else."""
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Null):
        return True, None
    if isinstance(node, exp.Boolean):
        return True, node.this
    if isinstance(node, exp.Literal):
        if node.is_string:
            return True, node.name
        text = node.name
        return True, int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Neg):
        ok, v = literal_value(node.this)
        return (ok and isinstance(v, int | float)), (
            -v if ok and isinstance(v, int | float) else None
        )
    return False, None


def _domain(expr: exp.Expression, table: Table) -> tuple[Any, ...] | None:
    """The public set of values a group key can take, if the schema or the SQL fixes it."""
    nullable = any(
        (c := table.column(col.name)) is not None and c.nullable
        for col in expr.find_all(exp.Column)
    )
    if isinstance(expr, exp.Column):
        col = table.column(expr.name)
        assert col is not None
        if col.domain is not None:
            return col.domain + ((None,) if col.nullable else ())
        if col.type is ColumnType.BOOLEAN:
            return (False, True) + ((None,) if col.nullable else ())
        return None
    if isinstance(expr, exp.Case):
        values: list[Any] = []
        branches = [w.args["true"] for w in expr.args.get("ifs") or []]
        default = expr.args.get("default")
        branches.append(default if default is not None else exp.Null())
        for b in branches:
            ok, v = literal_value(b)
            if not ok:
                return None
            if v not in values:
                values.append(v)
        return tuple(values)
    if isinstance(expr, _CONDITIONS):
        return (False, True) + ((None,) if nullable and not _never_null(expr) else ())
    if isinstance(expr, exp.WidthBucket):  # 0 … n + 1 (sql/buckets.py)
        return tuple(range(bucket_spec(expr)[2] + 2)) + ((None,) if nullable else ())
    return None


def _never_null(expr: exp.Expression) -> bool:
    """Is this truth value never NULL? ``x IS NULL``, ``x IS DISTINCT FROM y`` and their
    negations are TRUE or FALSE on every row, whatever ``x`` holds."""
    inner = expr.unnest()
    if isinstance(inner, exp.Not):
        return _never_null(inner.this)
    if isinstance(inner, _AND_OR):
        return _never_null(inner.this) and _never_null(inner.expression)
    return isinstance(inner, _NEVER_NULL)
