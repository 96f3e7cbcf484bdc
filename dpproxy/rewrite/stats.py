"""The backend SQL of aggregates answered by order statistics, cells or chunks.

One statement per :class:`StatPlan` that needs data beyond the shared primitives (the mean
methods JOINT, PTR and SMOOTH read the exact count and sum of the main statement). Each reads
``__rows`` (built like the main statement's, with the aggregate's measure as ``__v`` and, for
two-argument statistics, ``__w``), contribution-bounded when the plan says so, and returns a
*bounded* amount of data:

* EXPONENTIAL: ``keys, __cell, __n, __lo, __hi`` — rows, least and greatest value per cell of
  the domain (a GROUP BY, no sort);
* PTR/SMOOTH on order statistics: ``keys, __cnt, __rn, __v`` — only the ranks within the
  plan's window around the requested quantile (``2·window + 3`` rows per group at most);
* SAA: ``keys, __chunk, __stat`` — the statistic of each of the k chunks, a chunk being the
  units whose keyed hash falls in it (each unit in exactly one chunk).
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from dpproxy.errors import InternalError
from dpproxy.planning.plan import Method, StatPlan
from dpproxy.rewrite.aggregate import UNIT
from dpproxy.rewrite.bound import bounding_ctes
from dpproxy.rewrite.clamps import clamp
from dpproxy.rewrite.context import RewriteContext, key_alias
from dpproxy.rewrite.dialect import row_hash
from dpproxy.rewrite.nodes import lit, number, table
from dpproxy.rewrite.pipeline import DIALECTS, for_dialect, with_ctes
from dpproxy.rewrite.rows import row_measure, rows_select
from dpproxy.sql.scope import AggKind
from dpproxy.sql.types import type_of

_SAA_FUNCTIONS = {
    AggKind.AVG: "AVG",
    AggKind.CORR: "CORR",
    AggKind.COVAR_POP: "COVAR_POP",
    AggKind.COVAR_SAMP: "COVAR_SAMP",
    AggKind.REGR_SLOPE: "REGR_SLOPE",
    AggKind.REGR_INTERCEPT: "REGR_INTERCEPT",
}


def stat_statements(ctx: RewriteContext) -> tuple[tuple[str, str], ...]:
    """(stat name, SQL) for every stat of the plan that needs its own statement."""
    if ctx.dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {ctx.dialect!r}")
    out = []
    for stat in ctx.plan.stats:
        if stat.count is not None:
            continue  # reads the main statement's exact count and sum
        tree = _statement(ctx, stat)
        tree = for_dialect(tree, ctx)
        out.append((stat.name, tree.sql(dialect=ctx.dialect, copy=False)))
    return tuple(out)


def _statement(ctx: RewriteContext, stat: StatPlan) -> exp.Select:
    measures = [(_clamped(stat, ctx), "__v")]
    if stat.second is not None:
        measures.append((row_measure(stat.second, ctx), "__w"))
    rows = rows_select(ctx, measures)
    ctes: list[tuple[str, exp.Expression]] = [("__rows", rows)]
    source = "__rows"
    if stat.bounded and ctx.plan.needs_bounding:
        types = ctx.column_types
        kinds = [(alias, type_of(m, types)) for m, alias in measures]
        ctes.extend(bounding_ctes(ctx, kinds))
        source = "__bounded"
    keys: list[exp.Expression] = [exp.column(key_alias(i)) for i in range(len(ctx.plan.query.keys))]
    if stat.method is Method.EXPONENTIAL:
        query = _cells(stat, source, keys)
    elif stat.method in (Method.PTR, Method.SMOOTH) and _bucketable(ctx, stat, keys):
        query, more = _bucketed_window(stat, source)
        ctes.extend(more)
    elif stat.method in (Method.PTR, Method.SMOOTH):
        query = _window(stat, source, keys, joined_count=ctx.dialect == "duckdb")
    elif stat.method is Method.SAA:
        query = _chunks(ctx, stat, source, keys)
    else:
        raise InternalError(f"no statement for the {stat.method.value} method")
    return with_ctes(query, ctes)


def _clamped(stat: StatPlan, ctx: RewriteContext) -> exp.Expression:
    m = row_measure(stat.measure, ctx)
    b = stat.bounds
    if stat.method is Method.SAA or b.lo is None or b.hi is None:
        return m
    if isinstance(stat.measure, exp.Column):
        return m  # clamp_values already clamped the column to these bounds
    return clamp(lambda: m.copy(), b.lo, b.hi)


def _not_null(*names: str) -> exp.Expression:
    conds = [exp.Not(this=exp.Is(this=exp.column(n), expression=exp.Null())) for n in names]
    out: exp.Expression = conds[0]
    for c in conds[1:]:
        out = exp.And(this=out, expression=c)
    return out


def _cells(stat: StatPlan, source: str, keys: list[exp.Expression]) -> exp.Select:
    """Rows per cell with their least and greatest clamped value (``__n, __lo, __hi``, which
    ``mechanisms/quantile.py`` scores): integer cells are the integers lo..hi; real cells
    [c_i, c_{i+1}) of width w/B with the last cell B = {hi} (``analysis/local.py``,
    ``quantile_cells``), the offset v − lo taken as at least half a cell."""
    lo, hi = stat.bounds.lo, stat.bounds.hi
    assert lo is not None and hi is not None
    v = exp.column("__v")
    if stat.integer_cells:
        offset = exp.Sub(this=v, expression=number(lo))
        cell: exp.Expression = exp.Cast(
            this=exp.Round(this=offset), to=exp.DataType.build("BIGINT")
        )
    else:
        # The offset is at least half a cell: a subnormal offset times a scale below 1 is an
        # underflow error on PostgreSQL (22003) for the row holding it. Its cell is 0 either
        # way (an offset below half a cell scales to less than 1/2).
        bins = stat.cells - 1
        offset = exp.Sub(this=v, expression=number(lo))
        half_cell = number((hi - lo) / (2 * bins))
        scaled = exp.Mul(
            this=exp.Anonymous(this="GREATEST", expressions=[offset, half_cell]),
            expression=number(Fraction(bins) / (hi - lo)),
        )
        floor = exp.Cast(this=exp.Floor(this=scaled), to=exp.DataType.build("BIGINT"))
        cell = exp.Anonymous(this="LEAST", expressions=[floor, lit(bins)])
    query = exp.select(*[k.copy() for k in keys])
    query = query.select(exp.alias_(cell, "__cell", copy=False), copy=False)
    query = query.select(exp.alias_(exp.Count(this=exp.Star()), "__n", copy=False), copy=False)
    query = query.select(exp.alias_(exp.Min(this=v.copy()), "__lo", copy=False), copy=False)
    query = query.select(exp.alias_(exp.Max(this=v.copy()), "__hi", copy=False), copy=False)
    query = query.from_(table(source), copy=False).where(_not_null("__v"), copy=False)
    return query.group_by(*[k.copy() for k in keys], exp.column("__cell"), copy=False)


def _window(
    stat: StatPlan, source: str, keys: list[exp.Expression], *, joined_count: bool = False
) -> exp.Select:
    """The order statistics with ranks within ``window + 1`` of q·n, and the group's n.

    n is ``COUNT(*) OVER (PARTITION BY keys)``, except on DuckDB without groups
    (``joined_count``): there n is its own aggregate, cross-joined to the ranks, since a second
    window (``COUNT(*) OVER ()``) keeps every ranked row for one more pass (1 M rows: ≈ 128 →
    57 ms). PostgreSQL is slower that way (2.4 → 3.0 s: it materialises ``__rows``, now read
    twice), and Spark was not measured."""
    assert stat.q is not None
    partition = [k.copy() for k in keys]
    order = exp.Order(expressions=[exp.Ordered(this=exp.column("__v"), nulls_first=False)])
    rn = exp.Window(this=exp.RowNumber(), partition_by=partition, order=order)
    inner = exp.select(*[k.copy() for k in keys], exp.column("__v"))
    inner = inner.select(exp.alias_(rn, "__rn", copy=False), copy=False)
    joined_count = joined_count and not keys
    if not joined_count:
        cnt = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[k.copy() for k in keys])
        inner = inner.select(exp.alias_(cnt, "__cnt", copy=False), copy=False)
    inner = inner.from_(table(source), copy=False).where(_not_null("__v"), copy=False)
    num, den = stat.q.numerator, stat.q.denominator
    reach = (stat.window + 2) * den
    centre = exp.Mul(this=lit(num), expression=exp.column("__cnt"))
    scaled_rank = exp.Mul(this=exp.column("__rn"), expression=lit(den))
    low = exp.GTE(this=scaled_rank, expression=exp.Sub(this=centre, expression=lit(reach)))
    high = exp.LTE(
        this=scaled_rank.copy(), expression=exp.Add(this=centre.copy(), expression=lit(reach))
    )
    query = exp.select(
        *[k.copy() for k in keys], exp.column("__cnt"), exp.column("__rn"), exp.column("__v")
    )
    query = query.from_(_subquery(inner, "__ranked"), copy=False)
    if joined_count:
        count = exp.select(exp.alias_(exp.Count(this=exp.Star()), "__cnt", copy=False))
        count = count.from_(table(source), copy=False).where(_not_null("__v"), copy=False)
        query = query.join(_subquery(count, "__n"), join_type="CROSS", copy=False)
    return query.where(exp.And(this=low, expression=high), copy=False)


_BUCKETS = 1024
_BUCKET_LIMIT = Fraction(10) ** 250


def _bucketable(ctx: RewriteContext, stat: StatPlan, keys: list[exp.Expression]) -> bool:
    """:func:`_bucketed_window` applies: DuckDB, no groups, and finite bounds far from the
    double range (the bucket arithmetic then stays finite)."""
    lo, hi = stat.bounds.lo, stat.bounds.hi
    if ctx.dialect != "duckdb" or keys or lo is None or hi is None or not lo < hi:
        return False
    ends: tuple[Fraction, ...] = (lo, hi)
    if isinstance(stat.measure, exp.Column):  # clamped to the column's bounds (clamp_values)
        col = ctx.plan.query.table.column(stat.measure.name)
        if col is None or col.lower is None or col.upper is None:
            return False
        ends = (lo, hi, col.lower, col.upper)
    return all(abs(v) <= _BUCKET_LIMIT for v in ends) and hi - lo >= 1 / _BUCKET_LIMIT


def _bucketed_window(
    stat: StatPlan, source: str
) -> tuple[exp.Select, list[tuple[str, exp.Expression]]]:
    """The rows :func:`_window` returns without groups, without sorting every row.

    Each value gets a bucket ``FLOOR((v − lo)·s)`` (s = 1024/(hi − lo) > 0), a monotone
    function of v: IEEE subtraction of a constant, a product by a positive constant and FLOOR
    are each monotone (v is clamped, so finite, and the bounds keep every step finite). So
    ordering by (bucket, v) is ordering by v, and a row's rank among all is the number of rows
    in lower buckets plus its rank within its bucket. ``__hist`` counts the rows per bucket,
    ``__cum`` adds up the counts below each bucket (``__before``) and all of them (n), and only
    the buckets whose ranks ``__before + 1 … __before + __c`` meet the window are ranked, with
    their offset: the same (n, rank, value) rows as ranking everything, ties included (equal
    values share a bucket). 1 M rows on DuckDB: ≈ 4× faster than ranking every row."""
    assert stat.q is not None and stat.bounds.lo is not None and stat.bounds.hi is not None
    lo, hi = stat.bounds.lo, stat.bounds.hi
    num, den = stat.q.numerator, stat.q.denominator
    reach = (stat.window + 2) * den
    scale = lit(repr(float(Fraction(_BUCKETS) / (hi - lo))))
    shifted = exp.Paren(this=exp.Sub(this=exp.column("__v"), expression=number(lo)))
    bucket = exp.Floor(this=exp.Mul(this=shifted, expression=scale))
    buckets = exp.select(exp.column("__v"), exp.alias_(bucket, "__bk", copy=False))
    buckets = buckets.from_(table(source), copy=False).where(_not_null("__v"), copy=False)
    hist = exp.select(exp.column("__bk"), exp.alias_(exp.Count(this=exp.Star()), "__c", copy=False))
    hist = hist.from_(table("__hist_rows"), copy=False).group_by(exp.column("__bk"), copy=False)
    order = exp.Order(expressions=[exp.Ordered(this=exp.column("__bk"), nulls_first=False)])
    running = exp.Window(this=exp.Sum(this=exp.column("__c")), order=order)
    total = exp.Window(this=exp.Sum(this=exp.column("__c")))
    cum = exp.select(
        exp.column("__bk"),
        exp.column("__c"),
        exp.alias_(exp.Sub(this=running, expression=exp.column("__c")), "__before", copy=False),
        exp.alias_(total, "__cnt", copy=False),
    ).from_(table("__hist"), copy=False)

    def near(first: exp.Expression, last: exp.Expression) -> exp.Expression:
        """Ranks first…last (as written) meet the window around q·n."""
        centre = exp.Mul(this=lit(num), expression=exp.column("__cnt"))
        low = exp.GTE(
            this=exp.Mul(this=last, expression=lit(den)),
            expression=exp.Sub(this=centre, expression=lit(reach)),
        )
        high = exp.LTE(
            this=exp.Mul(this=first, expression=lit(den)),
            expression=exp.Add(this=centre.copy(), expression=lit(reach)),
        )
        return exp.And(this=low, expression=high)

    before = exp.column("__before")
    chosen = exp.select(exp.column("__bk"), before.copy(), exp.column("__cnt"))
    chosen = chosen.from_(table("__cum"), copy=False).where(
        near(
            exp.Paren(this=exp.Add(this=before.copy(), expression=lit(1))),
            exp.Paren(this=exp.Add(this=before.copy(), expression=exp.column("__c"))),
        ),
        copy=False,
    )
    within = exp.Window(
        this=exp.RowNumber(),
        partition_by=[exp.column("__bk", table="__hist_rows")],
        order=exp.Order(
            expressions=[
                exp.Ordered(this=exp.column("__v", table="__hist_rows"), nulls_first=False)
            ]
        ),
    )
    ranked = exp.select(
        exp.alias_(exp.column("__cnt", table="__chosen"), "__cnt", copy=False),
        exp.alias_(
            exp.Add(this=exp.column("__before", table="__chosen"), expression=within),
            "__rn",
            copy=False,
        ),
        exp.alias_(exp.column("__v", table="__hist_rows"), "__v", copy=False),
    ).from_(table("__hist_rows"), copy=False)
    on = exp.EQ(
        this=exp.column("__bk", table="__hist_rows"),
        expression=exp.column("__bk", table="__chosen"),
    )
    ranked = ranked.join(table("__chosen"), on=on, copy=False)
    query = exp.select(exp.column("__cnt"), exp.column("__rn"), exp.column("__v"))
    query = query.from_(_subquery(ranked, "__ranked"), copy=False)
    query = query.where(near(exp.column("__rn"), exp.column("__rn")), copy=False)
    ctes: list[tuple[str, exp.Expression]] = [
        ("__hist_rows", buckets),
        ("__hist", hist),
        ("__cum", cum),
        ("__chosen", chosen),
    ]
    return query, ctes


def _subquery(select: exp.Select, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _chunks(
    ctx: RewriteContext, stat: StatPlan, source: str, keys: list[exp.Expression]
) -> exp.Select:
    """Each chunk's statistic; the chunk of a row is a keyed hash of its unit modulo k."""
    k = stat.chunks
    unit_part = (exp.column(UNIT), ctx.unit_kind)
    # A second, constant part: PostgreSQL reads a one-element (x) as x, not as ROW(x).
    parts = [unit_part, (lit(1), None)]
    h = row_hash(ctx.secret ^ 0x3C3C3C3C, parts, portable=False, dialect=ctx.dialect)
    # PostgreSQL's hash is signed: ((h % k) + k) % k is in [0, k) on both engines.
    chunk = exp.Mod(
        this=exp.Paren(this=exp.Add(this=exp.Mod(this=h, expression=lit(k)), expression=lit(k))),
        expression=lit(k),
    )
    query = exp.select(*[kk.copy() for kk in keys])
    query = query.select(exp.alias_(chunk, "__chunk", copy=False), copy=False)
    query = query.select(exp.alias_(_saa_statistic(ctx, stat), "__stat", copy=False), copy=False)
    query = query.from_(table(source), copy=False)
    return query.group_by(*[kk.copy() for kk in keys], exp.column("__chunk"), copy=False)


def _saa_statistic(ctx: RewriteContext, stat: StatPlan) -> exp.Expression:
    v = exp.column("__v")
    name = _SAA_FUNCTIONS.get(stat.kind)
    if name is not None:
        args = [v] if stat.second is None else [v, exp.column("__w")]
        return exp.Anonymous(this=name, expressions=args)
    if not stat.kind.quantile:
        raise InternalError(f"no per-chunk statistic for {stat.kind.value}")
    assert stat.q is not None
    cont = stat.kind in (AggKind.MEDIAN, AggKind.PERCENTILE_CONT)
    q = lit(repr(float(stat.q)))
    if ctx.dialect == "postgres":
        func = exp.PercentileCont(this=q) if cont else exp.PercentileDisc(this=q)
        order = exp.Order(expressions=[exp.Ordered(this=v, nulls_first=False)])
        return exp.WithinGroup(this=func, expression=order)
    return exp.Anonymous(this="QUANTILE_CONT" if cont else "QUANTILE_DISC", expressions=[v, q])
