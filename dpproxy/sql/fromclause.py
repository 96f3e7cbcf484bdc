"""The FROM clause of a query over private data as one :class:`Scope`, with its WHERE clauses.

A table, a row-wise subquery or CTE (inlined: its projections substituted, its WHERE collected),
a join (``sql/joins.py``), a subquery grouped by the privacy unit (``sql/perunit.py``) or a
UNION ALL (``sql/unionrel.py``) becomes the scope in which the rest of the query is resolved.
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.catalog.model import Catalog
from dpproxy.errors import UndefinedColumn, UndefinedTable, UnsupportedQuery
from dpproxy.sql.joins import JoinBuilder, needs_join
from dpproxy.sql.scope import Scope, expect_bool, no_aggregates, table_scope
from dpproxy.sql.semiforms import split_where
from dpproxy.sql.semijoins import SemiJoins
from dpproxy.sql.types import COLUMN_TYPES


def where(select: exp.Select, scope: Scope, semis: SemiJoins) -> None:
    """The WHERE clause as row filters: its plain conditions, resolved and typed, and each
    EXISTS / NOT EXISTS / [NOT] IN (SELECT …) condition as a semi-join filter."""
    where = select.args.get("where")
    if where is None:
        return
    plain, subqueries = split_where(where.this)
    if plain is not None:
        no_aggregates(plain, "WHERE")
        cond, kind = scope.resolve_typed(plain)
        expect_bool(cond, scope, "WHERE", kind)
        scope.filters.append(cond)
    for node in subqueries:
        scope.filters.append(semis.filter(node, scope))


def collect_ctes(tree: exp.Select) -> dict[str, exp.Expression]:
    ctes: dict[str, exp.Expression] = {}
    with_ = tree.args.get("with_") or tree.args.get("with")
    if with_ is not None:
        if with_.args.get("recursive"):
            raise UnsupportedQuery("recursive CTEs are not supported")
        for cte in with_.expressions:
            ctes[cte.alias_or_name.lower()] = cte.this
    return ctes


def from_scope(
    select: exp.Select,
    catalog: Catalog,
    ctes: dict[str, exp.Expression],
    depth: int = 0,
    *,
    semis: SemiJoins,
) -> Scope:
    if depth > 16:
        raise UnsupportedQuery("subqueries are nested too deeply")
    if select.args.get("laterals") or select.args.get("pivots"):
        raise UnsupportedQuery("LATERAL and PIVOT are not supported")
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        # a column of this SELECT, not one a subquery reads from its own FROM
        found = (c for p in select.expressions for c in p.find_all(exp.Column))
        column = next((c for c in found if c.find_ancestor(exp.Select) is select), None)
        if column is not None:  # as PostgreSQL (and dpproxy serve's catalog emulation)
            raise UndefinedColumn(
                f'column "{column.name}" does not exist',
                hint="a query must read a table (FROM is missing)",
            )
        raise UnsupportedQuery("a query must read a table (FROM is missing)")
    if needs_join(select, catalog):
        return _join_scope(select, catalog, ctes)
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
            scope = _subquery_scope(inner, catalog, ctes, depth, semis, name, _listed(inner))
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
                f'table "{table.name}" is public: a query answered with differential privacy '
                "must read a private table in its FROM",
                hint="a query that reads public tables only (no private table in any subquery "
                "or CTE either) is answered exactly, at no cost",
            )
        scope = table_scope(table)
        scope.qualifiers = {alias, name}
        return scope
    if isinstance(source, exp.Subquery):
        table_alias = source.args.get("alias")
        columns = [c.name for c in table_alias.columns] if table_alias is not None else []
        name = source.alias_or_name or "subquery"
        scope = _subquery_scope(source.this, catalog, ctes, depth, semis, name, columns)
        scope.qualifiers = {source.alias_or_name.lower()} if source.alias else set()
        return scope
    raise UnsupportedQuery(f"unsupported FROM item: {source.sql('postgres')[:80]}")


def _listed(body: exp.Expression) -> list[str]:
    """The column list of the CTE whose body is ``body`` (``WITH t(a, b) AS (…)``)."""
    cte = body.parent
    alias = cte.args.get("alias") if isinstance(cte, exp.CTE) else None
    return [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []


def _join_scope(select: exp.Select, catalog: Catalog, ctes: dict[str, exp.Expression]) -> Scope:
    """Several tables (or a table whose unit is reached through references) as one relation."""
    from dpproxy.sql.outer import build_relation

    builder = JoinBuilder(select, catalog, ctes)
    table, source, names, ambiguous = build_relation(builder, select)
    types = {c.name: COLUMN_TYPES[c.type] for c in table.columns}
    qualifiers = {i.alias for i in builder.instances if not i.hidden}
    scope = Scope(table, names, qualifiers, [], types, source, ambiguous, True)
    for cond in builder.filters:  # ON conditions other than the join equalities
        no_aggregates(cond, "JOIN conditions")
        resolved, kind = scope.resolve_typed(cond)
        expect_bool(resolved, scope, "JOIN/ON", kind)
        scope.filters.append(resolved)
    return scope


def _subquery_scope(
    inner: exp.Expression,
    catalog: Catalog,
    ctes: dict[str, exp.Expression],
    depth: int,
    semis: SemiJoins,
    name: str = "subquery",
    columns: list[str] | None = None,
) -> Scope:
    """A row-wise subquery (no aggregation, grouping, DISTINCT or LIMIT) inlined as a scope,
    or one grouped by the privacy unit as a derived relation (``sql/perunit.py``)."""
    if isinstance(inner, exp.Union) and not inner.args.get("distinct"):
        from dpproxy.sql.unionrel import union_scope

        local = dict(ctes)
        return union_scope(
            inner,
            name,
            columns or [],
            lambda s: from_scope(s, catalog, local, depth + 1, semis=semis),
        )
    if isinstance(inner, exp.SetOperation):
        _set_operation_in_from(inner)
    if not isinstance(inner, exp.Select):
        raise UnsupportedQuery("only SELECT subqueries are supported")
    if inner.args.get("group"):
        from dpproxy.sql.perunit import per_unit_scope

        local = {**ctes, **{k.lower(): v for k, v in collect_ctes(inner).items()}}
        return per_unit_scope(
            inner,
            name,
            columns or [],
            lambda s: from_scope(s, catalog, local, depth + 1, semis=semis),
        )
    for key in ("group", "having", "distinct", "limit", "offset", "qualify"):
        if inner.args.get(key):
            raise UnsupportedQuery(
                f"subqueries must be row-wise; {key.upper()} in a subquery is not supported",
                hint="aggregate in the outer query only",
            )
    for proj in inner.expressions:
        no_aggregates(proj, "a subquery (aggregate in the outer query)")
    local = {**ctes, **{k.lower(): v for k, v in collect_ctes(inner).items()}}
    scope = from_scope(inner, catalog, local, depth + 1, semis=semis)
    where(inner, scope, semis)
    names: dict[str, exp.Expression] = {}
    listed = columns or []  # t(a, b): the outputs renamed by position, as SQL does
    twice: set[str] = set()
    if len(listed) > len(inner.expressions):
        raise UnsupportedQuery(
            f'table "{name}" has {len(inner.expressions)} columns available but '
            f"{len(listed)} columns specified"
        )
    for i, proj in enumerate(inner.expressions):
        if isinstance(proj, exp.Star) or (
            isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)
        ):
            if listed:
                raise UnsupportedQuery(
                    f'a column list on "{name}" over SELECT * is not supported',
                    hint="name the columns in the subquery's select list (AS)",
                )
            names.update(scope.names)
            continue
        out_name = (listed[i] if i < len(listed) else proj.alias_or_name).lower()
        if not out_name:
            raise UnsupportedQuery(f"give the subquery column {proj.sql('postgres')} a name (AS)")
        if out_name in names:  # two outputs of one name: a reference to it is ambiguous
            twice.add(out_name)
        names[out_name] = scope.resolve(proj.unalias())
    scope.names = {k: v for k, v in names.items() if "." not in k}
    scope.ambiguous = twice
    scope.joined_names = False
    return scope


def _set_operation_in_from(node: exp.SetOperation) -> None:
    """Refuse a set operation used as a relation in FROM, naming the operator written."""
    top = "the aggregates of each branch at top level (SELECT COUNT(*) FROM a UNION ALL "
    hint = top + "SELECT COUNT(*) FROM b) are answered"
    op = "UNION" if isinstance(node, exp.Union) else node.key.upper()
    raise UnsupportedQuery(
        f"{op} in FROM is not supported: it compares rows of different privacy units",
        hint=hint,
    )
