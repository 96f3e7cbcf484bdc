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

from dpproxy.rewrite.guard import lit, table

if TYPE_CHECKING:
    from dpproxy.rewrite.pipeline import RewriteContext


def keyed_hash(secret: int, parts: list[exp.Expression], dialect: str) -> exp.Expression:
    """A deterministic hash of ``parts`` keyed by ``secret`` (DuckDB's 64-bit ``hash``)."""
    return exp.Anonymous(this="hash", expressions=[lit(secret), *parts])


def _window(
    func: exp.Expression, partition: list[exp.Expression], order: list[exp.Expression]
) -> exp.Window:
    return exp.Window(
        this=func,
        partition_by=partition,
        order=exp.Order(expressions=[exp.Ordered(this=o, nulls_first=False) for o in order]),
    )


def bound_contributions(ctx: RewriteContext, measures: list[str]) -> exp.Select:
    """``SELECT * FROM (__rows + ranks) WHERE ranks within the bound``.

    >>> # see tests/fixtures/rewrite/*.sql for the full SQL of each case
    """
    from dpproxy.rewrite.pipeline import UNIT, key_alias

    plan = ctx.plan
    bound = plan.query.table.bound
    keys = [exp.column(key_alias(i)) for i in range(len(plan.query.keys))]
    values = [*keys, *(exp.column(m) for m in measures)]
    unit = exp.column(UNIT)
    # Rows are ranked by one 64-bit keyed hash, projected in a step of its own: a single sort
    # key is what makes DuckDB's window sort fast (with the top-N window rewrite disabled by the
    # DuckDB backend; benchmarks/RESULTS.md measured 0.75x the time of ordering by the hash
    # and the values). Equal hashes within one unit are identical rows (interchangeable) or a
    # 64-bit collision (probability below n_u²·2⁻⁶⁴); either way the unit keeps at most its
    # bound of its own rows, which is all the sensitivity analysis assumes.
    hashed = exp.alias_(keyed_hash(ctx.secret, [unit, *values], ctx.dialect), "__h", copy=False)
    row_order: list[exp.Expression] = [exp.column("__h")]
    ranks: list[tuple[str, exp.Expression, int]] = []
    if not keys:
        ranks.append(("__rn", _window(exp.RowNumber(), [unit], row_order), plan.stability.rows))
    else:
        if bound.max_rows is not None:
            ranks.append(("__rn", _window(exp.RowNumber(), [unit], row_order), bound.max_rows))
        if bound.max_groups is not None and bound.max_rows_per_group is not None:
            # Groups must never tie (a tie would let a unit keep more than its bound of
            # groups), so the keys themselves break hash ties here.
            group_order = [keyed_hash(ctx.secret ^ 0x5A5A5A5A, [unit, *keys], ctx.dialect), *keys]
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
    return outer


def count_per_unit() -> exp.Select:
    """``SELECT __unit, COUNT(*) AS __n FROM __rows GROUP BY __unit``.

    For a query with neither group keys nor measures, keeping K rows of each unit and counting
    them is the same as Σ_u min(n_u, K): no row has to be chosen, so no hash and no sort. The
    per-unit count depends only on the unit's own rows, like the ranking it replaces.
    """
    from dpproxy.rewrite.pipeline import UNIT

    count = exp.alias_(exp.Count(this=exp.Star()), "__n", copy=False)
    return (
        exp.select(exp.column(UNIT), count)
        .from_(table("__rows"), copy=False)
        .group_by(exp.column(UNIT), copy=False)
    )


def counted_rows(units: bool, limit: int) -> exp.Expression:
    """The bounded row count Σ min(__n, K), or the number of units, over ``count_per_unit``."""
    from dpproxy.rewrite.pipeline import UNIT

    if units:
        return exp.Count(this=exp.column(UNIT))
    # __n is never NULL, so the plain function (not sqlglot's NULL-propagating Least) is exact.
    capped = exp.Anonymous(this="LEAST", expressions=[exp.column("__n"), lit(limit)])
    return exp.Coalesce(this=exp.Sum(this=capped), expressions=[lit(0)])
