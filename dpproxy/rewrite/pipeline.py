"""ValidQuery + QueryPlan → the only SQL that reaches the backend.

The rewritten query has three layers, built as sqlglot trees (never by pasting user text):

1. ``__rows`` (``rewrite/rows.py``): one row per input row that passes the WHERE clauses
   and, for public group keys, lies in the public domain; it carries the privacy unit, the
   group keys and every primitive's measure, guarded (``rewrite/guard.py``) and clamped to the
   planned interval (``rewrite/clamps.py``).
2. ``__bounded``: contribution bounding (``rewrite/bound.py``), or ``__rows`` itself when the
   backend proved the unit column unique.
3. the exact per-group primitives: ``COUNT``/``SUM``/``COUNT(DISTINCT unit)``, every SUM over
   BIGINTs on a fixed-point grid (``rewrite/fixed.py``).

The result is exact; the proxy scales sums back and adds noise (``release/noise.py``). On
DuckDB, without bounding, ``rewrite/inline.py`` then writes ``__rows`` in place (shorter SQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from dpproxy.analysis.sensitivity import PrimitiveKind
from dpproxy.planning.plan import Primitive, QueryPlan
from dpproxy.rewrite.aggregate import primitive_aggregate
from dpproxy.rewrite.bound import bounding_ctes, count_per_unit, counted_rows
from dpproxy.rewrite.context import RewriteContext, key_alias
from dpproxy.rewrite.dialect import to_postgres
from dpproxy.rewrite.fixed import centred_measures, operand
from dpproxy.rewrite.inline import inline_rows
from dpproxy.rewrite.nodes import lit, number
from dpproxy.rewrite.nodes import table as table_ref
from dpproxy.rewrite.noop_clamps import drop_noop_clamps
from dpproxy.rewrite.ranges import row_range
from dpproxy.rewrite.rows import literal, row_measure, rows_select, select_from, where_all
from dpproxy.rewrite.unclamp import unclamp
from dpproxy.rewrite.wholesum import WholeTerm, whole_measures, whole_row
from dpproxy.sql.parse import dialect_of
from dpproxy.sql.qualify import qualify_tables, read_wide_tables
from dpproxy.sql.types import SqlType, type_of
from dpproxy.sql.widenum import duckdb_double

DIALECTS = ("duckdb", "postgres", "spark")


def measure_alias(p: Primitive) -> str:
    return f"{p.name}_m"


def _raw_measure(p: Primitive, ctx: RewriteContext) -> exp.Expression | None:
    """The row-level value a primitive aggregates: guarded, with its columns clamped."""
    if p.measure is None:
        return None
    return row_measure(p.measure, ctx)


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
                expressions=[exp.Tuple(expressions=[literal(v)]) for v in values],
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
    where_all(query, conditions)
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
