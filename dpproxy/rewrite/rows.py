"""``__rows``, the first layer of the rewritten query (``rewrite/pipeline.py``): one row per
input row that passes the WHERE clauses and, for public group keys, lies in the public domain,
with the privacy unit, the group keys and every primitive's measure, guarded
(``rewrite/guard.py``) and clamped (``rewrite/clamps.py``); and the SELECT and WHERE builders
the other layers share.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.rewrite.aggregate import UNIT
from dpproxy.rewrite.bound import two_sided
from dpproxy.rewrite.clamps import clamp_values
from dpproxy.rewrite.context import RewriteContext, key_alias
from dpproxy.rewrite.guard import guard_row_expression, is_double
from dpproxy.rewrite.nodes import lit
from dpproxy.rewrite.nodes import table as table_ref
from dpproxy.rewrite.noop_clamps import mark_noop_clamps
from dpproxy.sql.treekey import TreeMemo
from dpproxy.sql.types import SqlType, type_of


def literal(v: Any) -> exp.Expression:
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, int | float):
        return lit(repr(v)) if isinstance(v, float) else lit(v)
    return exp.Literal.string(str(v))


def _domain_filter(key: exp.Expression, domain: tuple[Any, ...]) -> exp.Expression:
    """``(key IN (values) OR key IS NULL)``; the key is parenthesised because sqlglot's
    generator does not add parentheses for precedence (``a > 0 IN (...)`` would misparse).
    ``FALSE`` for an empty domain: the WHERE clause excluded every value of it
    (``sql/domains.py``: ``WHERE cat = 'zzz'`` beside ``GROUP BY cat`` with 'zzz' outside the
    domain), so no group is released, as SQL returns none; this was an assertion, XX000."""
    if not domain:
        return exp.false()
    values = [v for v in domain if v is not None]
    atomic = isinstance(key, exp.Column | exp.Paren | exp.Case | exp.Func | exp.Literal)
    operand = key if atomic else exp.Paren(this=key)
    cond: exp.Expression | None = None
    if values:
        cond = exp.In(this=operand.copy(), expressions=[literal(v) for v in values])
    if None in domain:
        is_null = exp.Is(this=operand.copy(), expression=exp.Null())
        cond = is_null if cond is None else exp.Or(this=cond, expression=is_null)
    assert cond is not None
    return exp.Paren(this=cond)


# row_measure is a pure function of the measure's tree and the table's columns (no data, no
# budget, no secret); so are the guarded group keys and row filters of rows_select.
_ROW_MEASURES = TreeMemo()
_GUARDED_KEYS = TreeMemo()
_GUARDED_FILTERS = TreeMemo()


def row_measure(measure: exp.Expression, ctx: RewriteContext) -> exp.Expression:
    """A measure as the database computes it per row: guarded, with its columns clamped.

    A numeric measure is a DOUBLE (``CAST`` when it is not one statically, as a CASE of
    integer literals is): the arithmetic that the rewrite builds on it — centring, squaring,
    cells of order statistics — then cannot overflow an integer type on any engine.

    Memoised on the measure's exact tree and the table (:class:`TreeMemo`; a per-unit
    relation's measures are not: their column types also come from the inner relation); a
    hit is a copy of the tree first built, and a measure refused is refused again each time."""
    table = ctx.plan.query.table
    types = ctx.column_types

    def make() -> exp.Expression:
        return _row_measure(measure, table, types)

    if ctx.plan.query.per_unit is not None:
        return make()
    return _ROW_MEASURES.get_or_make(measure, table, make)


def _row_measure(
    measure: exp.Expression, table: Table, column_types: dict[str, SqlType]
) -> exp.Expression:
    clamps: set[int] = set()
    cases: list[exp.Expression] = []  # the clamp CASEs, held: their ids stay theirs
    clamped = clamp_values(measure, table, made=clamps, cases=cases)
    mark_noop_clamps(cases, table)  # left out of the finished statement (rewrite/noop_clamps.py)
    guarded = guard_row_expression(clamped, table, copy=False, guarded=clamps)
    from dpproxy.rewrite.floats import finite_arithmetic  # not needed by COUNT(*) alone

    out = finite_arithmetic(guarded, table, cases)
    # is_double first: a DOUBLE needs no cast whatever the measure's type (the measure was
    # typed when validated; this only decides the cast, so it is read when it matters)
    if not is_double(out, table) and type_of(measure, column_types) is SqlType.NUMERIC:
        out = exp.Cast(this=out, to=exp.DataType(this=exp.DataType.Type.DOUBLE))
    return out


def rows_select(
    ctx: RewriteContext,
    measures: list[tuple[exp.Expression, str]],
    *,
    domain_filter: bool = True,
) -> exp.Select:
    """``__rows``: the unit, the group keys and the given measure columns of every row that
    passes the WHERE clauses (and, for public keys and ``domain_filter``, lies in the public
    domain; without it the caller keeps the domain's groups after aggregating)."""
    q = ctx.plan.query
    table = q.table
    columns: list[exp.Expr] = [exp.alias_(exp.column(table.privacy_unit or ""), UNIT, copy=False)]
    guarded_keys: list[exp.Expression] = []
    if q.keys:
        guarded_keys = [_guarded_key(k.expr, table) for k in q.keys]
    for i, key in enumerate(guarded_keys):
        columns.append(exp.alias_(key.copy(), key_alias(i), copy=False))
    for m, alias in measures:
        columns.append(exp.alias_(m, alias, copy=False))
    rows = select_from(columns)
    conditions = [guarded_filter(f, table) for f in q.filters]
    if q.source is not None and q.source.sides is not None:  # two units' rows joined
        joined = exp.Subquery(
            this=two_sided(ctx), alias=exp.TableAlias(this=exp.to_identifier("__joined"))
        )
        source: exp.Expression = joined
    elif q.source is not None:  # a join (sql/joins.py): its relation as a subquery
        used = {
            c.name
            for e in (*guarded_keys, *(m for m, _ in measures), *conditions)
            for c in e.find_all(exp.Column)
        }
        source = _joined(q.source.select, used | {table.privacy_unit or ""})
    elif q.per_unit is not None:  # one row per unit, aggregated (sql/perunit.py)
        from dpproxy.rewrite.perunit import per_unit_relation

        source = per_unit_relation(q.per_unit)
    elif q.union is not None:  # UNION ALL of private relations (sql/unionrel.py)
        from dpproxy.rewrite.unionrel import union_relation

        source = union_relation(q.union)
    else:
        source = table_ref(table.name)
    rows.set("from_", exp.From(this=source))
    if q.keys and q.public_keys and domain_filter:
        for k, key in zip(q.keys, guarded_keys, strict=True):
            assert k.domain is not None
            conditions.append(_domain_filter(key, k.domain))
    where_all(rows, [exp.Paren(this=c) for c in conditions])
    return rows


def _guarded_key(key: exp.Expression, table: Table) -> exp.Expression:
    """A group key with the guards of ``rewrite/guard.py`` and ``rewrite/floats.py``
    (memoised: a pure function of the key's tree and the table)."""
    from dpproxy.rewrite.floats import finite_arithmetic  # imported by the queries that use it

    def make() -> exp.Expression:
        return finite_arithmetic(guard_row_expression(key, table), table)

    return _GUARDED_KEYS.get_or_make(key, table, make)


def select_from(
    columns: list[exp.Expr],
    source: exp.Expression | None = None,
    conditions: list[exp.Expression] | None = None,
) -> exp.Select:
    """``SELECT columns [FROM source] [WHERE c₁ AND c₂ …]`` built directly: the tree that
    sqlglot's ``select(...).from_(...).where(...)`` builders make (``conditions`` as one
    ``where`` call each), without their argument parsing and checks."""
    select = exp.Select(expressions=columns)
    if source is not None:
        select.set("from_", exp.From(this=source))
    if conditions:
        where_all(select, conditions)
    return select


def where_all(select: exp.Select, conditions: list[exp.Expression]) -> None:
    """The WHERE of ``conditions`` as successive ``select.where(c, copy=False)`` calls build
    it on a SELECT without one: each AND-ed to what is there, with sqlglot's parentheses
    around either side that is itself a connective (AND, OR)."""
    where: exp.Expression | None = None
    for c in conditions:
        if where is None:
            where = c
        else:
            where = exp.And(
                this=exp.Paren(this=where) if isinstance(where, exp.Connector) else where,
                expression=exp.Paren(this=c) if isinstance(c, exp.Connector) else c,
            )
    if where is not None:
        select.set("where", exp.Where(this=where))


def guarded_filter(f: exp.Expression, table: Table) -> exp.Expression:
    """A row filter with the guards of ``rewrite/guard.py`` and ``rewrite/floats.py``.

    A semi-join filter (``[NOT] EXISTS (SELECT 1 FROM (…) AS __sqN WHERE …)``, built by
    ``sql/semijoins.py``) gets them on its WHERE, the only user expression in it: its columns
    are the outer relation's and the subquery's renamed ones, all columns of ``table``."""
    from dpproxy.rewrite.floats import finite_arithmetic  # imported by the queries that use it

    target = f.this if isinstance(f, exp.Not) else f
    if isinstance(target, exp.Exists):
        out = f.copy()
        select = (out.this if isinstance(out, exp.Not) else out).this
        where = select.args.get("where")
        if where is not None:
            where.set("this", finite_arithmetic(guard_row_expression(where.this, table), table))
        return out

    def make() -> exp.Expression:
        return finite_arithmetic(guard_row_expression(f, table), table)

    return _GUARDED_FILTERS.get_or_make(f, table, make)  # pure: memoised


def _joined(source: exp.Select, used: set[str]) -> exp.Subquery:
    """The join's relation with only the columns the query reads (shorter SQL to read)."""
    select = source.copy()
    select.set("expressions", [e for e in select.expressions if e.alias_or_name in used])
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier("__joined")))
