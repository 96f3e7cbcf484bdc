"""Check a parsed statement against the catalog and the supported subset → :class:`ValidQuery`.

The result expresses everything over the private table's own columns: row-wise CTEs and
subqueries are inlined (their projections substituted, their WHERE clauses collected), so the
analysis and the rewrite never see names the catalog does not know. The select list, HAVING
and ORDER BY become *post-processing expressions* in which every aggregate is replaced by a
placeholder column ``__agg_i`` and every group key by ``__key_j``; they are evaluated in the
proxy on the noisy values, never by the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from sqlglot import exp

from dpproxy.catalog.model import Catalog, ColumnType, Table
from dpproxy.errors import (
    DatatypeMismatch,
    Forbidden,
    GroupingError,
    UndefinedColumn,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.sql.types import COLUMN_TYPES, SqlType, raise_unsupported, type_of

MAX_PUBLIC_GROUPS = 10_000


class AggKind(Enum):
    COUNT_STAR = "count(*)"
    COUNT = "count"
    COUNT_UNITS = "count(distinct unit)"
    SUM = "sum"
    AVG = "avg"
    VAR_POP = "var_pop"
    VAR_SAMP = "var_samp"
    STDDEV_POP = "stddev_pop"
    STDDEV_SAMP = "stddev_samp"


_AGG_CLASSES: dict[type[exp.Expression], AggKind] = {
    exp.Sum: AggKind.SUM,
    exp.Avg: AggKind.AVG,
    exp.VariancePop: AggKind.VAR_POP,
    exp.Variance: AggKind.VAR_SAMP,
    exp.StddevPop: AggKind.STDDEV_POP,
    exp.StddevSamp: AggKind.STDDEV_SAMP,
    exp.Stddev: AggKind.STDDEV_SAMP,
}
_LATER = {
    "min": "MIN",
    "max": "MAX",
    "median": "MEDIAN",
    "percentilecont": "PERCENTILE_CONT",
    "percentiledisc": "PERCENTILE_DISC",
    "quantile": "QUANTILE",
    "mode": "MODE",
}
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
class Aggregate:
    """One aggregate call; ``measure`` is over base columns with any FILTER folded in."""

    kind: AggKind
    measure: exp.Expression | None


@dataclass(frozen=True, slots=True)
class GroupKey:
    expr: exp.Expression
    type: SqlType
    domain: tuple[Any, ...] | None  # public values (None: private keys)


@dataclass(frozen=True, slots=True)
class OutputItem:
    name: str
    expr: exp.Expression  # post-processing expression over __agg_i / __key_j
    type: SqlType
    is_key: bool


@dataclass(frozen=True, slots=True)
class OrderItem:
    expr: exp.Expression
    desc: bool
    nulls_first: bool


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

    @property
    def public_keys(self) -> bool:
        return all(k.domain is not None for k in self.keys)


@dataclass
class _Scope:
    """Visible names → expressions over the base table, plus collected row filters."""

    table: Table
    names: dict[str, exp.Expression]
    qualifiers: set[str]
    filters: list[exp.Expression]
    column_types: dict[str, SqlType]

    def resolve(self, node: exp.Expression) -> exp.Expression:
        """Substitute visible names by base expressions; refuse unknown names and constructs."""

        def sub(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column):
                if n.table and n.table.lower() not in self.qualifiers:
                    raise UndefinedTable(f'missing FROM-clause entry for table "{n.table}"')
                name = n.name.lower()
                if isinstance(n.this, exp.Star):
                    raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
                if name not in self.names:
                    raise UndefinedColumn(
                        f'column "{n.name}" does not exist',
                        hint=f"columns of {self.table.name}: "
                        + ", ".join(sorted(self.names))[:300],
                    )
                return _parenthesised(self.names[name].copy())
            if isinstance(n, exp.Star):
                raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
            return n

        out = node.copy().transform(sub, copy=False)
        type_of(out, self.column_types)
        return out


def _parenthesised(e: exp.Expression) -> exp.Expression:
    """Wrap a substituted subquery column so it keeps its precedence where it lands.

    sqlglot's generator prints trees as they are: ``Mul(Add(age, 1), 2)`` would print as
    ``age + 1 * 2``. Atomic expressions need no parentheses.
    """
    if isinstance(e, exp.Column | exp.Paren | exp.Literal | exp.Func | exp.Case | exp.Null
                  | exp.Boolean):
        return e
    return exp.Paren(this=e)


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
    ctes = _collect_ctes(tree)
    scope = _from_scope(tree, catalog, ctes)
    if where := tree.args.get("where"):
        _no_aggregates(where.this, "WHERE")
        cond = scope.resolve(where.this)
        _expect_bool(cond, scope, "WHERE")
        scope.filters.append(cond)
    return _aggregate_query(tree, scope, sql)


def _collect_ctes(tree: exp.Select) -> dict[str, exp.Expression]:
    ctes: dict[str, exp.Expression] = {}
    with_ = tree.args.get("with_") or tree.args.get("with")
    if with_ is not None:
        if with_.args.get("recursive"):
            raise UnsupportedQuery("recursive CTEs are not supported")
        for cte in with_.expressions:
            ctes[cte.alias_or_name.lower()] = cte.this
    return ctes


def _expect_bool(cond: exp.Expression, scope: _Scope, where: str) -> None:
    t = type_of(cond, scope.column_types)
    if t not in (SqlType.BOOLEAN, SqlType.NULL):
        raise DatatypeMismatch(f"argument of {where} must be type boolean, not {t.value}")


def _no_aggregates(node: exp.Expression, where: str) -> None:
    for n in node.walk():
        if isinstance(n, exp.AggFunc):
            raise GroupingError(f"aggregate functions are not allowed in {where}")
        if isinstance(n, exp.Window):
            raise UnsupportedQuery("window functions are not supported")


def _from_scope(
    select: exp.Select, catalog: Catalog, ctes: dict[str, exp.Expression], depth: int = 0
) -> _Scope:
    if depth > 16:
        raise UnsupportedQuery("subqueries are nested too deeply")
    if select.args.get("joins"):
        raise UnsupportedQuery(
            "joins are not supported yet", hint="query one private table at a time"
        )
    if select.args.get("laterals") or select.args.get("pivots"):
        raise UnsupportedQuery("LATERAL and PIVOT are not supported")
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise UnsupportedQuery("a query must read a table (FROM is missing)")
    source = from_.this
    if isinstance(source, exp.Table):
        if source.args.get("db") or source.args.get("catalog"):
            qualified = source.sql("postgres")
            if source.db.lower() not in ("public", "main"):
                raise UndefinedTable(f'relation "{qualified}" does not exist')
        name = source.name.lower()
        alias = source.alias_or_name.lower()
        if name in ctes and not source.db:
            inner = ctes[name]
            scope = _subquery_scope(inner, catalog, ctes, depth)
            scope.qualifiers = {alias}
            return scope
        table = catalog.table(name)
        if table is None:
            raise UndefinedTable(
                f'relation "{source.name}" does not exist',
                hint="tables: " + ", ".join(t.name for t in catalog.tables),
            )
        if not table.private:
            raise UnsupportedQuery(
                f'table "{table.name}" is public; queries over public tables alone are not '
                "answered by dpproxy yet"
            )
        names: dict[str, exp.Expression] = {
            c.name.lower(): exp.column(c.name) for c in table.columns
        }
        types = {c.name: COLUMN_TYPES[c.type] for c in table.columns}
        return _Scope(table, names, {alias, name}, [], types)
    if isinstance(source, exp.Subquery):
        scope = _subquery_scope(source.this, catalog, ctes, depth)
        scope.qualifiers = {source.alias_or_name.lower()} if source.alias else set()
        return scope
    raise UnsupportedQuery(f"unsupported FROM item: {source.sql('postgres')[:80]}")


def _subquery_scope(
    inner: exp.Expression, catalog: Catalog, ctes: dict[str, exp.Expression], depth: int
) -> _Scope:
    """A row-wise subquery (no aggregation, grouping, DISTINCT or LIMIT) inlined as a scope."""
    if isinstance(inner, exp.SetOperation):
        raise UnsupportedQuery("set operations (UNION, INTERSECT, EXCEPT) are not supported")
    if not isinstance(inner, exp.Select):
        raise UnsupportedQuery("only SELECT subqueries are supported")
    for key in ("group", "having", "distinct", "limit", "offset", "qualify"):
        if inner.args.get(key):
            raise UnsupportedQuery(
                f"subqueries must be row-wise; {key.upper()} in a subquery is not supported",
                hint="aggregate in the outer query only",
            )
    for proj in inner.expressions:
        _no_aggregates(proj, "a subquery (aggregate in the outer query)")
    local = {**ctes, **{k.lower(): v for k, v in _collect_ctes(inner).items()}}
    scope = _from_scope(inner, catalog, local, depth + 1)
    if where := inner.args.get("where"):
        _no_aggregates(where.this, "WHERE")
        cond = scope.resolve(where.this)
        _expect_bool(cond, scope, "WHERE")
        scope.filters.append(cond)
    names: dict[str, exp.Expression] = {}
    for proj in inner.expressions:
        if isinstance(proj, exp.Star):
            names.update(scope.names)
            continue
        if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star):
            names.update(scope.names)
            continue
        out_name = proj.alias_or_name.lower()
        if not out_name:
            raise UnsupportedQuery(f"give the subquery column {proj.sql('postgres')} a name (AS)")
        names[out_name] = scope.resolve(proj.unalias())
    scope.names = names
    return scope


def _aggregate_query(select: exp.Select, scope: _Scope, sql: str) -> ValidQuery:
    if select.args.get("distinct"):
        has_agg = any(isinstance(n, exp.AggFunc) for p in select.expressions for n in p.walk())
        if not has_agg:
            raise Forbidden("row-level reads are not allowed: SELECT DISTINCT returns rows")
        raise UnsupportedQuery("SELECT DISTINCT over aggregates is not supported")
    for key in ("qualify", "windows"):
        if select.args.get(key):
            raise UnsupportedQuery("window functions are not supported")
    for proj in select.expressions:
        if isinstance(proj, exp.Star) or (
            isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)
        ):
            raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
    aliases = {p.alias.lower(): p.unalias() for p in select.expressions if p.alias}
    keys = _group_keys(select, scope, aliases)
    aggregates: list[Aggregate] = []
    has_any_agg = any(isinstance(n, exp.AggFunc) for p in select.expressions for n in p.walk())
    if not keys and not has_any_agg:
        raise Forbidden(
            "row-level reads are not allowed: every column must be aggregated",
            hint="use COUNT, SUM, AVG, VAR or STDDEV, optionally with GROUP BY",
        )
    post = _PostBuilder(scope, keys, aggregates)
    outputs: list[OutputItem] = []
    for i, proj in enumerate(select.expressions):
        node = proj.unalias()
        expr = post.build(node)
        name = proj.alias or _default_name(node, i)
        is_key = isinstance(expr, exp.Column) and expr.name.startswith("__key_")
        outputs.append(OutputItem(name, expr, post.type_of(expr), is_key))
    having = None
    if h := select.args.get("having"):
        having = post.build(h.this, outputs)
    order: list[OrderItem] = []
    if o := select.args.get("order"):
        for item in o.expressions:
            target = item.this
            if isinstance(target, exp.Literal) and not target.is_string:
                pos = int(target.name)
                if not 1 <= pos <= len(outputs):
                    raise UndefinedColumn(f"ORDER BY position {pos} is not in select list")
                expr = outputs[pos - 1].expr.copy()
            else:
                expr = post.build(target, outputs)
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
    )


def _int_clause(node: exp.Expression | None, what: str) -> int | None:
    if node is None:
        return None
    value = node.args.get("expression") or node.this
    if not (isinstance(value, exp.Literal) and not value.is_string and value.name.isdigit()):
        raise UnsupportedQuery(f"{what} must be a non-negative integer literal")
    return int(value.name)


def _default_name(node: exp.Expression, i: int) -> str:
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.AggFunc | exp.Filter):
        inner = node.this if isinstance(node, exp.Filter) else node
        names = {
            exp.Stddev: "stddev",
            exp.Variance: "variance",
            exp.VariancePop: "var_pop",
            exp.StddevPop: "stddev_pop",
            exp.StddevSamp: "stddev_samp",
        }
        return str(names.get(type(inner), inner.key))
    return f"?column?{i}" if i else "?column?"


def _group_keys(
    select: exp.Select, scope: _Scope, aliases: dict[str, exp.Expression]
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
            pos = int(item.name)
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
        _no_aggregates(node, "GROUP BY")
        resolved = scope.resolve(node)
        if any(k.expr == resolved for k in keys):
            continue
        if (
            scope.table.privacy_unit
            and resolved.find(exp.Column)
            and all(c.name == scope.table.privacy_unit for c in resolved.find_all(exp.Column))
        ):
            raise Forbidden("grouping by the privacy unit would release one group per person")
        keys.append(
            GroupKey(
                resolved, type_of(resolved, scope.column_types), _domain(resolved, scope.table)
            )
        )
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


def _literal_value(node: exp.Expression) -> tuple[bool, Any]:
    if isinstance(node, exp.Paren):
        return _literal_value(node.this)
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
        ok, v = _literal_value(node.this)
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
            ok, v = _literal_value(b)
            if not ok:
                return None
            if v not in values:
                values.append(v)
        return tuple(values)
    if isinstance(expr, exp.Predicate | exp.Not | exp.And | exp.Or):
        return (False, True) + ((None,) if nullable else ())
    return None


class _PostBuilder:
    """Turns select-list, HAVING and ORDER BY expressions into post-processing expressions."""

    def __init__(self, scope: _Scope, keys: list[GroupKey], aggregates: list[Aggregate]) -> None:
        self.scope = scope
        self.keys = keys
        self.aggregates = aggregates
        self.key_index = {k.expr: i for i, k in enumerate(keys)}

    def build(
        self, node: exp.Expression, outputs: list[OutputItem] | None = None
    ) -> exp.Expression:
        if outputs and isinstance(node, exp.Column) and not node.table:
            name = node.name.lower()
            for out in outputs:
                if out.name.lower() == name and name not in self.scope.names:
                    return out.expr.copy()
        return self._walk(node)

    def _walk(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Window):
            raise UnsupportedQuery("window functions are not supported")
        if isinstance(node, exp.Filter) or isinstance(node, exp.AggFunc):
            return exp.column(f"__agg_{self._aggregate(node)}")
        if not any(isinstance(n, exp.Column) for n in node.walk()) and not any(
            isinstance(n, exp.AggFunc) for n in node.walk()
        ):
            if isinstance(node, exp.Star):
                raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
            _check_post_constant(node)
            return node.copy()
        if not any(isinstance(n, exp.AggFunc) for n in node.walk()):
            resolved = self.scope.resolve(node)
            index = self.key_index.get(resolved)
            if index is not None:
                return exp.column(f"__key_{index}")
            if isinstance(node, exp.Column):
                if not self.keys and not self.aggregates_in_query:
                    raise Forbidden("row-level reads are not allowed")
                raise GroupingError(
                    f'column "{node.name}" must appear in the GROUP BY clause or be used in an '
                    "aggregate function",
                    hint="row-level values are never released",
                )
        if not isinstance(node, _POST_NODES):
            raise_unsupported(node)
        args: dict[str, Any] = {}
        for key, value in node.args.items():
            if isinstance(value, exp.Expression):
                args[key] = self._walk(value)
            elif isinstance(value, list):
                args[key] = [self._walk(v) if isinstance(v, exp.Expression) else v for v in value]
            else:
                args[key] = value
        return type(node)(**args)

    aggregates_in_query = True

    def _aggregate(self, node: exp.Expression) -> int:
        condition = None
        if isinstance(node, exp.Filter):
            condition = node.expression.this
            node = node.this
            _no_aggregates(condition, "FILTER")
        kind, arg = self._classify(node)
        measure: exp.Expression | None = None
        if kind is AggKind.COUNT_UNITS:
            measure = exp.column(self.scope.table.privacy_unit or "")
        elif arg is not None:
            _no_aggregates(arg, "an aggregate argument")
            measure = self.scope.resolve(arg)
            t = type_of(measure, self.scope.column_types)
            if kind is not AggKind.COUNT and t not in (SqlType.NUMERIC, SqlType.NULL):
                raise DatatypeMismatch(
                    f"{kind.value.upper()} needs a numeric argument, not {t.value}",
                    hint="use CASE WHEN ... THEN 1 ELSE 0 END to count conditions",
                )
        if condition is not None:
            cond = self.scope.resolve(condition)
            _expect_bool(cond, self.scope, "FILTER")
            if kind is AggKind.COUNT_UNITS:
                raise UnsupportedQuery("COUNT(DISTINCT ...) FILTER is not supported")
            value = measure if measure is not None else exp.Literal.number(1)
            measure = exp.Case(ifs=[exp.If(this=cond, true=value)])
            if kind is AggKind.COUNT_STAR:
                kind = AggKind.COUNT
        for i, a in enumerate(self.aggregates):
            if a.kind is kind and a.measure == measure:
                return i
        self.aggregates.append(Aggregate(kind, measure))
        return len(self.aggregates) - 1

    def _classify(self, node: exp.Expression) -> tuple[AggKind, exp.Expression | None]:
        for inner in node.walk():
            if inner is not node and isinstance(inner, exp.AggFunc):
                raise GroupingError("aggregate function calls cannot be nested")
        if isinstance(node, exp.Count):
            arg = node.this
            if arg is None or isinstance(arg, exp.Star):
                return AggKind.COUNT_STAR, None
            if isinstance(arg, exp.Distinct):
                unit = self.scope.table.privacy_unit
                items = arg.expressions
                resolved = self.scope.resolve(items[0]) if len(items) == 1 else None
                if unit is not None and isinstance(resolved, exp.Column) and resolved.name == unit:
                    return AggKind.COUNT_UNITS, None
                raise UnsupportedQuery(
                    "COUNT(DISTINCT ...) is supported on the privacy unit column only",
                    hint=f"COUNT(DISTINCT {unit}) counts people",
                )
            return AggKind.COUNT, arg
        kind = _AGG_CLASSES.get(type(node))
        if kind is not None:
            arg = node.this
            if isinstance(arg, exp.Distinct):
                raise UnsupportedQuery(f"{node.key.upper()}(DISTINCT ...) is not supported")
            return kind, arg
        name = node.key.lower()
        if name in _LATER or isinstance(node, exp.WithinGroup):
            fn = _LATER.get(name, "PERCENTILE")
            raise UnsupportedQuery(
                f"{fn} is not supported yet: it needs a local-sensitivity plan",
                hint="AVG, SUM, COUNT, VAR and STDDEV are supported",
            )
        raise UnsupportedQuery(f"the aggregate {node.key.upper()} is not supported")

    def type_of(self, expr: exp.Expression) -> SqlType:
        types = {f"__agg_{i}": SqlType.NUMERIC for i in range(len(self.aggregates))}
        types.update({f"__key_{i}": k.type for i, k in enumerate(self.keys)})
        return type_of(expr, types)


_POST_NODES = (
    exp.Paren,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Neg,
    exp.Mod,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Is,
    exp.Case,
    exp.If,
    exp.Coalesce,
    exp.Greatest,
    exp.Least,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Cast,
    exp.Between,
    exp.Nullif,
    exp.In,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.DataType,
    exp.Column,
)


def _check_post_constant(node: exp.Expression) -> None:
    for n in node.walk():
        if not isinstance(n, _POST_NODES):
            raise_unsupported(n)  # type: ignore[arg-type]
