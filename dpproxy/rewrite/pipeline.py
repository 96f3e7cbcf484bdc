"""ValidQuery + QueryPlan → the only SQL that reaches the backend.

The rewritten query has three layers, built as sqlglot trees (never by pasting user text):

1. ``__rows``: one row per input row that passes the WHERE clauses and, for public group
   keys, lies in the public domain; it carries the privacy unit, the group keys and every
   primitive's measure, guarded (``rewrite/guard.py``) and clamped to the planned interval.
2. ``__bounded``: contribution bounding (``rewrite/bound.py``), or ``__rows`` itself when the
   backend proved the unit column unique.
3. the exact per-group primitives: ``COUNT``/``SUM``/``COUNT(DISTINCT unit)``, every SUM over
   BIGINTs on a fixed-point grid (``rewrite/fixed.py``).

The result is exact; the proxy scales sums back and adds noise (``release/noise.py``). On
DuckDB, without bounding, ``rewrite/inline.py`` then writes ``__rows`` in place (shorter SQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.catalog.model import ColumnType, Table
from dpproxy.planning.plan import Primitive, QueryPlan
from dpproxy.rewrite.aggregate import UNIT, primitive_aggregate
from dpproxy.rewrite.bound import bounding_ctes, count_per_unit, counted_rows, two_sided
from dpproxy.rewrite.clamps import clamp_values
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.fixed import centred_measures, operand
from dpproxy.rewrite.guard import guard_row_expression, is_double
from dpproxy.rewrite.inline import inline_rows
from dpproxy.rewrite.nodes import lit, number
from dpproxy.rewrite.nodes import table as table_ref
from dpproxy.rewrite.noop_clamps import drop_noop_clamps, mark_noop_clamps
from dpproxy.rewrite.ranges import row_range
from dpproxy.rewrite.unclamp import unclamp
from dpproxy.rewrite.wholesum import WholeTerm, whole_measures, whole_row
from dpproxy.sql.parse import dialect_of
from dpproxy.sql.qualify import qualify_tables, read_wide_tables
from dpproxy.sql.treekey import TreeMemo
from dpproxy.sql.types import COLUMN_TYPES, SqlType, type_of
from dpproxy.sql.widenum import duckdb_double

DIALECTS = ("duckdb", "postgres", "spark")


@dataclass(frozen=True, slots=True)
class RewriteContext:
    plan: QueryPlan
    secret: int  # per-query key of the hash that picks which rows a unit keeps
    dialect: str = "duckdb"
    portable_hash: bool = False  # rewrite/dialect.py: the same rows on every engine
    # PostgreSQL: {lower-case table name: its schema} (sql/qualify.py); empty elsewhere
    schemas: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    # Every column's SQL type, computed once (read-only: callers never change it).
    column_types: dict[str, SqlType] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        q = self.plan.query
        inner = q.per_unit.inner if q.per_unit is not None else None
        object.__setattr__(self, "column_types", _column_types(q.table, inner))

    @property
    def unit_kind(self) -> SqlType | None:
        """How the unit column enters the portable hash (``None``: its text as is)."""
        column = self.plan.query.table.column(self.plan.query.table.privacy_unit or "")
        if column is None or column.type in (ColumnType.INTEGER, ColumnType.DATE):
            return None
        return COLUMN_TYPES[column.type]


# (table, per-unit inner table) → their columns' SQL types: a pure function of the two schema
# objects (kept with the value, so that their ids stay theirs), shared read-only by every
# RewriteContext of those tables instead of a dict built per query.
_COLUMN_TYPES: dict[tuple[int, int], tuple[Table, Table | None, dict[str, SqlType]]] = {}


def _column_types(table: Table, inner: Table | None) -> dict[str, SqlType]:
    key = (id(table), id(inner))
    hit = _COLUMN_TYPES.get(key)
    if hit is None or hit[0] is not table or hit[1] is not inner:
        # A per-unit relation's inner columns too (sql/perunit.py: no name with two types).
        columns = (inner.columns if inner is not None else ()) + table.columns
        if len(_COLUMN_TYPES) >= 256:  # schemas come and go in tests and reloads
            _COLUMN_TYPES.clear()
        hit = _COLUMN_TYPES[key] = (table, inner, {c.name: COLUMN_TYPES[c.type] for c in columns})
    return hit[2]


def key_alias(i: int) -> str:
    return f"__key_{i}"


def measure_alias(p: Primitive) -> str:
    return f"{p.name}_m"


def _literal(v: Any) -> exp.Expression:
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
        cond = exp.In(this=operand.copy(), expressions=[_literal(v) for v in values])
    if None in domain:
        is_null = exp.Is(this=operand.copy(), expression=exp.Null())
        cond = is_null if cond is None else exp.Or(this=cond, expression=is_null)
    assert cond is not None
    return exp.Paren(this=cond)


def _raw_measure(p: Primitive, ctx: RewriteContext) -> exp.Expression | None:
    """The row-level value a primitive aggregates: guarded, with its columns clamped."""
    if p.measure is None:
        return None
    return row_measure(p.measure, ctx)


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
    _where_all(rows, [exp.Paren(this=c) for c in conditions])
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
        _where_all(select, conditions)
    return select


def _where_all(select: exp.Select, conditions: list[exp.Expression]) -> None:
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


def rewrite(
    plan: QueryPlan,
    secret: int,
    dialect: str = "duckdb",
    *,
    portable_hash: bool = False,
    schemas: Mapping[str, str] | None = None,
) -> str:
    """The backend SQL for a plan; pure and deterministic for a given secret.

    ``portable_hash`` picks the md5-based row hash that every engine computes identically
    (``rewrite/dialect.py``); by default each engine uses its faster native hash. ``schemas``:
    PostgreSQL's tables' schemas (``sql/qualify.py``).
    """
    return rewrite_sql(RewriteContext(plan, secret, dialect, portable_hash, schemas or {}))


def rewrite_sql(ctx: RewriteContext) -> str:
    """:func:`rewrite` of a context (the engine builds one for the statistics' statements too)."""
    if ctx.dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {ctx.dialect!r}; expected one of {DIALECTS}")
    plan, dialect = ctx.plan, ctx.dialect
    tree = build(ctx)
    tree = for_dialect(tree, ctx)
    if dialect == "duckdb":  # the rows CTE written in place: shorter SQL to bind
        tree = inline_rows(tree)
    q = plan.query
    if (
        q.source is None  # one table's rows only
        and q.per_unit is None
        and q.union is None
        and any(c.scanned or c.in_bounds for c in q.table.columns)  # else nothing is marked
    ):
        tree = drop_noop_clamps(tree)  # rewrite/noop_clamps.py: the last change to the tree
    return tree.sql(dialect=dialect_of(dialect), copy=False)


def for_dialect(tree: exp.Select, ctx: RewriteContext) -> exp.Select:
    """The dialect pass of the backend: ``rewrite/dialect.py`` and the tables' schemas
    (``sql/qualify.py``) for PostgreSQL, ``rewrite/spark.py`` for Spark; DuckDB's tree as
    built but for ``rewrite/unclamp.py`` and its wide columns read as DOUBLE (``sql/widenum``)."""
    if ctx.dialect == "postgres":
        return qualify_tables(to_postgres(tree, ctx.column_types), ctx.schemas)
    if ctx.dialect == "spark":
        from dpproxy.rewrite.spark import to_spark

        return to_spark(tree, ctx.column_types)
    return read_wide_tables(unclamp(tree, ctx.plan.query.table), ctx.schemas, duckdb_double)


def build(ctx: RewriteContext) -> exp.Select:
    q = ctx.plan.query
    measures: dict[exp.Expression, str] = {}  # measure → its column alias (shared when equal)
    alias_of: dict[str, str] = {}  # primitive name → measure column alias
    columns: list[tuple[exp.Expression, str]] = []
    # Whole-number measures summed in BIGINT arithmetic (rewrite/wholesum.py): no bounding.
    table = q.table
    terms: dict[int, WholeTerm | None] = {}  # SUM primitive's id → its whole_term
    folds: dict[exp.Expression, tuple[int, int]] = {}  # CASE measures written as their term
    whole = (
        set()
        if ctx.plan.needs_bounding
        else whole_measures(ctx.plan.primitives, table, terms, folds)
    )
    whole_aliases: set[str] = set()
    # DOUBLE measures written centred once for all their sums (rewrite/fixed.py)
    centred = {} if ctx.plan.needs_bounding else centred_measures(ctx.plan.primitives, whole)
    centred_aliases: set[str] = set()
    ranges: dict[str, tuple[float, float]] = {}  # measure column → its rows' values' range
    for p in ctx.plan.primitives:
        if p.measure is None:
            continue
        if p.measure not in measures:
            w = None
            if p.measure in whole and isinstance(p.measure, exp.Column):
                # a column's BIGINT value is its own clamp: its DOUBLE one is not needed
                w = whole_row(p.measure, p.measure, table, folds.get(p.measure))
            m = w if w is not None else _raw_measure(p, ctx)
            assert m is not None
            if w is None and p.measure in whole and not isinstance(p.measure, exp.Column):
                w = whole_row(p.measure, m, table, folds.get(p.measure))
                if w is not None:
                    m = w
            if w is None and _fixed_sums(p.measure, ctx.plan.primitives):
                found = row_range(m, table)  # before centring: summand centres the range
                if found is not None:
                    ranges[measure_alias(p)] = found
            if w is not None:
                whole_aliases.add(measure_alias(p))
            elif p.measure in centred:
                m = exp.Sub(this=operand(m), expression=number(centred[p.measure]))
                centred_aliases.add(measure_alias(p))
            measures[p.measure] = measure_alias(p)
            columns.append((m, measure_alias(p)))
        alias_of[p.name] = measures[p.measure]
    # Without contribution bounding each group's aggregates depend only on its own rows, so the
    # public domain can be applied to the groups instead of to every row: the same groups,
    # the same values. On DuckDB a per-row IN over text costs several times the GROUP BY itself
    # (1 M rows: 26 ms against 6 ms; benchmarks/compare/RESULTS.md); with bounding the rows a
    # unit keeps must be chosen among in-domain rows only, so the filter stays on the rows.
    # Only for keys whose domain values the engines type like the key in a VALUES list (a date
    # written as text would be compared as text there: PostgreSQL refuses date = text).
    late_domain = bool(
        q.keys
        and q.public_keys
        and not ctx.plan.needs_bounding
        and all(type_of(k.expr, ctx.column_types) in _LATE_TYPES for k in q.keys)
    )
    rows = rows_select(ctx, columns, domain_filter=not late_domain)
    source = "__rows"
    ctes: list[tuple[str, exp.Expression]] = [("__rows", rows)]
    if ctx.plan.needs_bounding and not q.keys and not measures:
        # Rows without keys or measures are indistinguishable to the query: the bounded count
        # is Σ_u min(n_u, K), computed from per-unit counts with no ranking at all.
        ctes.append(("__per_unit", count_per_unit()))
        counted = [
            exp.alias_(
                counted_rows(p.kind is PrimitiveKind.UNITS, ctx.plan.stability.rows),
                p.name,
                copy=False,
            )
            for p in ctx.plan.primitives
        ]
        return _with(select_from(counted, table_ref("__per_unit")), ctes)
    if ctx.plan.needs_bounding:  # the measures' types: read by the bounding CTEs only
        types = ctx.column_types
        measure_columns = [(alias, type_of(m, types)) for m, alias in measures.items()]
        ctes.extend(bounding_ctes(ctx, measure_columns))
        source = "__bounded"
    outputs: list[exp.Expr] = [exp.column(key_alias(i)) for i in range(len(q.keys))]
    for p in ctx.plan.primitives:
        outputs.append(
            exp.alias_(
                primitive_aggregate(
                    p,
                    alias_of,
                    ctx.plan,
                    whole_aliases,
                    terms,
                    dialect=ctx.dialect,
                    centred=centred_aliases,
                    ranges=ranges,
                ),
                p.name,
                copy=False,
            )
        )
    query = select_from(outputs, table_ref(source))
    if q.keys:
        query.set(
            "group", exp.Group(expressions=[exp.column(key_alias(i)) for i in range(len(q.keys))])
        )
    if late_domain and not groups_left_to_release(ctx):
        query = _in_domain_groups(query, q.keys)
    return _with(query, ctes)


def _fixed_sums(measure: exp.Expression, primitives: tuple[Primitive, ...]) -> bool:
    """Is ``measure`` summed on the fixed-point grid (a SUM primitive of it) and not a bare
    column (whose range ``fixed.exact_range`` knows without walking a tree)?"""
    if isinstance(measure, exp.Column):
        return False
    return any(p.kind is PrimitiveKind.SUM and p.measure == measure for p in primitives)


def groups_left_to_release(ctx: RewriteContext) -> bool:
    """Public text and boolean keys without contribution bounding: no domain filter in the
    SQL at all. The release reads exactly the domain's groups (``release/noise.py``,
    ``apply_noise``) and ignores the others, which cannot stand in for a domain value (GROUP
    BY returns each key once, and Python compares these as the engines do); each group's
    values depend on its own rows only. A filter of any form costs DuckDB 0.6-1 ms to bind
    and plan, more than the GROUP BY over 1,000 rows. A numeric key keeps it
    (1.0000000000000001 would be read as the domain's 1)."""
    q = ctx.plan.query
    return bool(
        q.keys
        and q.public_keys
        and not ctx.plan.needs_bounding
        and all(type_of(k.expr, ctx.column_types) in _UNFILTERED_TYPES for k in q.keys)
    )


# UNKNOWN: a CASE of string literals, text on both engines, like the VALUES list's strings.
_LATE_TYPES = (SqlType.TEXT, SqlType.UNKNOWN, SqlType.BOOLEAN, SqlType.NUMERIC)
_UNFILTERED_TYPES = (SqlType.TEXT, SqlType.UNKNOWN, SqlType.BOOLEAN)


def _in_domain_groups(grouped: exp.Select, keys: Any) -> exp.Select:
    """``SELECT * FROM (grouped) WHERE key IN (SELECT v FROM (VALUES …))`` for every key.

    The domain is a subquery rather than an IN list on purpose: engines push a plain IN on a
    group key below the GROUP BY (back to a per-row filter), but not a semi-join."""
    query = select_from(
        [exp.Star()],
        exp.Subquery(this=grouped, alias=exp.TableAlias(this=exp.to_identifier("__groups"))),
    )
    conditions: list[exp.Expression] = []
    for i, k in enumerate(keys):
        assert k.domain is not None
        values = [v for v in k.domain if v is not None]
        cond: exp.Expression | None = None
        if values:
            table = exp.Values(
                expressions=[exp.Tuple(expressions=[_literal(v)]) for v in values],
                alias=exp.TableAlias(
                    this=exp.to_identifier("__domain"), columns=[exp.to_identifier("v")]
                ),
            )
            cond = exp.In(
                this=exp.column(key_alias(i)),
                query=exp.Subquery(this=select_from([exp.column("v")], table)),
            )
        if None in k.domain:
            is_null = exp.Is(this=exp.column(key_alias(i)), expression=exp.Null())
            cond = is_null if cond is None else exp.Or(this=cond, expression=is_null)
        assert cond is not None
        conditions.append(exp.Paren(this=cond))
    _where_all(query, conditions)
    return query


def with_ctes(query: exp.Select, ctes: list[tuple[str, exp.Expression]]) -> exp.Select:
    return _with(query, ctes)


def _with(query: exp.Select, ctes: list[tuple[str, exp.Expression]]) -> exp.Select:
    query.set(
        "with_",
        exp.With(
            expressions=[
                exp.CTE(this=cte, alias=exp.TableAlias(this=exp.to_identifier(name)))
                for name, cte in ctes
            ]
        ),
    )
    return query


def truncation_sql(
    plan: QueryPlan, dialect: str = "duckdb", schemas: Mapping[str, str] | None = None
) -> str:
    """The statement behind a DP choice of rows per unit (``planning/truncation.py``): how many
    units have their row count in each bin ``g_{j-1} < n ≤ g_j`` of the candidates (bin L: above
    the largest). It reads the same rows as the query (joins, WHERE, public domain) and needs
    no secret: nothing is truncated yet."""
    trunc = plan.truncation
    assert trunc is not None and trunc.grid
    ctx = RewriteContext(plan, 0, dialect, schemas=schemas or {})
    rows = rows_select(ctx, [])
    bins = exp.Case(
        ifs=[
            exp.If(this=exp.LTE(this=exp.column("__n"), expression=lit(g)), true=lit(j))
            for j, g in enumerate(trunc.grid)
        ],
        default=lit(len(trunc.grid)),
    )
    query = (
        exp.select(exp.alias_(bins, "__bin", copy=False))
        .select(exp.alias_(exp.Count(this=exp.Star()), "__units", copy=False), copy=False)
        .from_(table_ref("__per_unit"), copy=False)
        .group_by(exp.column("__bin"), copy=False)
    )
    tree = _with(query, [("__rows", rows), ("__per_unit", count_per_unit())])
    tree = for_dialect(tree, ctx)
    return tree.sql(dialect=dialect, copy=False)
