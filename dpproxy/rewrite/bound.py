"""Contribution bounding in SQL: each privacy unit keeps at most its bound of rows and groups.

Which rows a unit keeps is decided by a keyed hash of the unit and the row's own values, with a
fresh secret per query, so (a) the choice for one unit depends only on that unit's rows — the
bounding is a stable transformation, and the sensitivities of ``analysis/sensitivity.py`` hold
for the bounded relation whatever the data — and (b) an analyst cannot predict or steer the
choice. The database's ``random()`` is never used (DuckDB 2 also rejects it in window orders).
Ties between identical rows are harmless; the row values break any other hash tie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from dpproxy.rewrite.dialect import bytewise, row_hash
from dpproxy.rewrite.nodes import lit, table
from dpproxy.sql.types import SqlType

if TYPE_CHECKING:
    from dpproxy.rewrite.context import RewriteContext


def _window(
    func: exp.Expression, partition: list[exp.Expression], order: list[exp.Expression]
) -> exp.Window:
    return exp.Window(
        this=func,
        partition_by=partition,
        order=exp.Order(expressions=[exp.Ordered(this=o, nulls_first=False) for o in order]),
    )


def _bytewise(e: exp.Expression, ctx: RewriteContext) -> exp.Expression:
    """Order hex text bytewise: PostgreSQL would otherwise use the database's collation."""
    return bytewise(e) if ctx.dialect == "postgres" and ctx.portable_hash else e


def bounding_ctes(
    ctx: RewriteContext, measures: list[tuple[str, SqlType]], *, split: bool | None = None
) -> list[tuple[str, exp.Expression]]:
    """``__light`` and ``__bounded``: the contribution-bounded rows.

    Ranking every row is the costly part (a sort per unit), and most units own fewer rows than
    their bound: a unit with at most L rows (L the smallest of the limits) keeps all of them
    under any ranking. So ``__light`` lists those units, their rows pass whole, and only the
    other units' rows (and rows with a NULL unit, which rank together as one unit) are ranked.
    The kept rows are exactly those of ranking everything, so the stability argument above is
    unchanged; on TPC-H SF1 line items this made the bounding about 5x faster on DuckDB
    (benchmarks/JOINS.md). DuckDB tests membership with IN (a hash semi-join); Spark with
    EXISTS. PostgreSQL ranks every row instead (only ``__bounded``): it materialises a CTE read
    three times and aggregates it before the joins, and at its default ``work_mem`` the split
    took 1.8-3.0x the single ranking's time on 1 M rows whether most units were above their
    bound (~10 rows a unit, bound 5: ``SUM(amount)`` 1.25 s against 0.65 s) or none was (one
    row a unit: 1.86 s against 0.63 s; ``benchmarks/bounding_ab.py``, docs/performance.md).
    ``split`` overrides that choice (for that benchmark); the rows kept are the same.

    >>> # see tests/fixtures/rewrite/*.sql for the full SQL of each case
    """
    from dpproxy.rewrite.aggregate import UNIT
    from dpproxy.rewrite.context import key_alias

    ranked, limit = bound_contributions(ctx, measures)
    columns = [
        UNIT,
        *(key_alias(i) for i in range(len(ctx.plan.query.keys))),
        *(m for m, _ in measures),
    ]
    if split is None:
        split = ctx.dialect != "postgres"
    if not split:
        ranked.set("expressions", [exp.column(c) for c in columns])
        return [("__bounded", ranked)]
    light = (
        exp.select(exp.column(UNIT))
        .from_(table("__rows"), copy=False)
        .group_by(exp.column(UNIT), copy=False)
        .having(exp.LTE(this=exp.Count(this=exp.Star()), expression=lit(limit)), copy=False)
    )

    def member(negated: bool) -> exp.Expression:
        # Spark: its NOT IN is a null-aware anti-join that broadcasts all light units;
        # PostgreSQL (when split): NOT IN would be a per-row subplan.
        if ctx.dialect in ("postgres", "spark"):
            probe = exp.Exists(
                this=exp.select(lit(1))
                .from_(table("__light"), copy=False)
                .where(
                    exp.EQ(
                        this=exp.column(UNIT, table="__light"),
                        expression=exp.column(UNIT, table="__rows"),
                    ),
                    copy=False,
                )
            )
            return exp.Not(this=probe) if negated else probe
        units = (
            exp.select(exp.column(UNIT))
            .from_(table("__light"), copy=False)
            .where(exp.Not(this=exp.Is(this=exp.column(UNIT), expression=exp.Null())))
        )
        inside = exp.In(this=exp.column(UNIT), query=exp.Subquery(this=units))
        if not negated:
            return inside
        is_null = exp.Is(this=exp.column(UNIT), expression=exp.Null())
        return exp.Or(this=is_null, expression=exp.Not(this=inside))

    whole = (
        exp.select(*[exp.column(c) for c in columns])
        .from_(table("__rows"), copy=False)
        .where(member(False), copy=False)
    )
    hashed = ranked.find(exp.Subquery)
    assert hashed is not None and isinstance(hashed.this, exp.Select)
    inner_rows = hashed.this.find(exp.Subquery)
    assert inner_rows is not None and isinstance(inner_rows.this, exp.Select)
    inner_rows.this.where(member(True), copy=False)
    ranked.set("expressions", [exp.column(c) for c in columns])
    bounded = exp.union(whole, ranked, distinct=False)
    return [("__light", light), ("__bounded", bounded)]


def bound_contributions(
    ctx: RewriteContext, measures: list[tuple[str, SqlType]]
) -> tuple[exp.Select, int]:
    """``SELECT * FROM (__rows + ranks) WHERE ranks within the bound``, and the smallest
    limit (a unit with at most that many rows keeps them all)."""
    from dpproxy.rewrite.aggregate import UNIT
    from dpproxy.rewrite.context import key_alias

    plan = ctx.plan
    bound = plan.query.table.bound
    keys = [exp.column(key_alias(i)) for i in range(len(plan.query.keys))]
    key_parts: list[tuple[exp.Expression, SqlType | None]] = [
        (k, g.type) for k, g in zip(keys, plan.query.keys, strict=True)
    ]
    measure_parts: list[tuple[exp.Expression, SqlType | None]] = [
        (exp.column(m), t) for m, t in measures
    ]
    unit = exp.column(UNIT)
    unit_part: tuple[exp.Expression, SqlType | None] = (unit, ctx.unit_kind)
    # Rows are ranked by one 64-bit keyed hash, projected in a step of its own: a single sort
    # key is what makes DuckDB's window sort fast (with the top-N window rewrite disabled by the
    # DuckDB backend; benchmarks/RESULTS.md measured 0.75x the time of ordering by the hash
    # and the values). Equal hashes within one unit are identical rows (interchangeable) or a
    # 64-bit collision (probability below n_u²·2⁻⁶⁴); either way the unit keeps at most its
    # bound of its own rows, which is all the sensitivity analysis assumes.
    row_key = row_hash(
        ctx.secret,
        [unit_part, *key_parts, *measure_parts],
        portable=ctx.portable_hash,
        dialect=ctx.dialect,
    )
    hashed = exp.alias_(row_key, "__h", copy=False)
    row_order: list[exp.Expression] = [_bytewise(exp.column("__h"), ctx)]
    ranks: list[tuple[str, exp.Expression, int]] = []
    if not keys:
        ranks.append(("__rn", _window(exp.RowNumber(), [unit], row_order), plan.stability.rows))
    else:
        if bound.max_rows is not None:
            ranks.append(("__rn", _window(exp.RowNumber(), [unit], row_order), bound.max_rows))
        if bound.max_groups is not None and bound.max_rows_per_group is not None:
            # Groups must never tie (a tie would let a unit keep more than its bound of
            # groups), so the keys themselves break hash ties here.
            group_hash = row_hash(
                ctx.secret ^ 0x5A5A5A5A,
                [unit_part, *key_parts],
                portable=ctx.portable_hash,
                dialect=ctx.dialect,
            )
            group_order = [_bytewise(group_hash, ctx), *keys]
            ranks.append(
                (
                    "__rn_group",
                    _window(exp.RowNumber(), [unit, *keys], row_order),
                    bound.max_rows_per_group,
                )
            )
            ranks.append(
                (
                    "__group_rank",
                    _window(exp.Anonymous(this="DENSE_RANK"), [unit], group_order),
                    bound.max_groups,
                )
            )
    with_hash = exp.select(exp.Star(), hashed).from_(table("__rows"), copy=False)
    hashed_rows = exp.Subquery(
        this=with_hash, alias=exp.TableAlias(this=exp.to_identifier("__hashed"))
    )
    inner = exp.select(exp.Star()).from_(hashed_rows, copy=False)
    for name, window, _ in ranks:
        inner = inner.select(exp.alias_(window, name, copy=False), copy=False)
    ranked = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__ranked")))
    outer = exp.select(exp.Star()).from_(ranked, copy=False)
    for name, _, limit in ranks:
        outer = outer.where(exp.LTE(this=exp.column(name), expression=lit(limit)), copy=False)
    return outer, min(limit for _, _, limit in ranks)


def count_per_unit() -> exp.Select:
    """``SELECT __unit, COUNT(*) AS __n FROM __rows GROUP BY __unit``.

    For a query with neither group keys nor measures, keeping K rows of each unit and counting
    them is the same as Σ_u min(n_u, K): no row has to be chosen, so no hash and no sort. The
    per-unit count depends only on the unit's own rows, like the ranking it replaces.
    """
    from dpproxy.rewrite.aggregate import UNIT

    count = exp.alias_(exp.Count(this=exp.Star()), "__n", copy=False)
    return (
        exp.select(exp.column(UNIT), count)
        .from_(table("__rows"), copy=False)
        .group_by(exp.column(UNIT), copy=False)
    )


def counted_rows(units: bool, limit: int) -> exp.Expression:
    """The bounded row count Σ min(__n, K), or the number of units, over ``count_per_unit``."""
    from dpproxy.rewrite.aggregate import UNIT

    if units:
        return exp.Count(this=exp.column(UNIT))
    # __n is never NULL, so the plain function (not sqlglot's NULL-propagating Least) is exact.
    capped = exp.Anonymous(this="LEAST", expressions=[exp.column("__n"), lit(limit)])
    return exp.Coalesce(this=exp.Sum(this=capped), expressions=[lit(0)])


def two_sided(ctx: RewriteContext) -> exp.Select:
    """The relation of a join between two units' rows (``sql/twounits.py``, reading/002).

    Each side keeps at most M rows per unit (ranked by a keyed hash, like a single table), then
    at most T rows per join key value: DropExcess(T) ranks the rows of a key value by another
    keyed hash; DropNonUnique keeps a key value's row only if it is the only one. Then the two
    truncated sides are joined on the keys."""
    from dpproxy.catalog.model import ColumnType
    from dpproxy.sql.joinparts import SIDE_UNIT
    from dpproxy.sql.types import COLUMN_TYPES

    plan = ctx.plan
    source = plan.query.source
    assert source is not None and source.sides is not None and plan.truncation is not None
    join_rows = plan.truncation.join_rows
    kinds: dict[str, SqlType | None] = {}
    for c in plan.query.table.columns:
        plain = c.type in (ColumnType.INTEGER, ColumnType.DATE)
        kinds[c.name] = None if plain else COLUMN_TYPES[c.type]

    def side_sql(n: int) -> exp.Select:
        side = source.sides[n]  # type: ignore[index]
        cols = [*side.columns, SIDE_UNIT]
        parts: list[tuple[exp.Expression, SqlType | None]] = [
            (exp.column(c), kinds.get(c, ctx.unit_kind)) for c in cols
        ]
        inner = exp.Subquery(
            this=side.select.copy(), alias=exp.TableAlias(this=exp.to_identifier("__s"))
        )
        by_unit = row_hash(
            ctx.secret ^ (0x1F1F << n), parts, portable=ctx.portable_hash, dialect=ctx.dialect
        )
        ranked = exp.select(
            exp.Star(),
            exp.alias_(
                _window(exp.RowNumber(), [exp.column(SIDE_UNIT)], [_bytewise(by_unit, ctx)]),
                "__rn_u",
            ),
        ).from_(inner, copy=False)
        bounded = (
            exp.select(*[exp.column(c) for c in cols])
            .from_(exp.Subquery(this=ranked, alias=exp.TableAlias(this=exp.to_identifier("__u"))))
            .where(exp.LTE(this=exp.column("__rn_u"), expression=lit(side.rows_per_unit)))
        )
        keys: list[exp.Expression] = [exp.column(k) for k in side.keys]
        keep: exp.Expression
        if side.unique_key:
            per_key: exp.Expression = exp.Window(this=exp.Count(this=exp.Star()), partition_by=keys)
            keep = exp.EQ(this=exp.column("__k"), expression=lit(1))
        else:
            by_row = row_hash(
                ctx.secret ^ (0x2E2E << n), parts, portable=ctx.portable_hash, dialect=ctx.dialect
            )
            per_key = _window(exp.RowNumber(), keys, [_bytewise(by_row, ctx)])
            keep = exp.LTE(this=exp.column("__k"), expression=lit(join_rows))
        counted = exp.select(exp.Star(), exp.alias_(per_key, "__k")).from_(
            exp.Subquery(this=bounded, alias=exp.TableAlias(this=exp.to_identifier("__m")))
        )
        return (
            exp.select(*[exp.column(c) for c in cols])
            .from_(exp.Subquery(this=counted, alias=exp.TableAlias(this=exp.to_identifier("__t"))))
            .where(keep)
        )

    a, b = source.sides
    on: exp.Expression | None = None
    for x, y in zip(a.keys, b.keys, strict=True):
        eq = exp.EQ(this=exp.column(x, table="__a"), expression=exp.column(y, table="__b"))
        on = eq if on is None else exp.And(this=on, expression=eq)
    joined = source.select.copy()
    joined = joined.from_(
        exp.Subquery(this=side_sql(0), alias=exp.TableAlias(this=exp.to_identifier("__a"))),
        copy=False,
    )
    return joined.join(
        exp.Subquery(this=side_sql(1), alias=exp.TableAlias(this=exp.to_identifier("__b"))),
        on=on,
        copy=False,
    )
