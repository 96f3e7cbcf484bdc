"""UNION ALL and UNION of aggregate SELECTs, each an ordinary DP query or a public one.

Planning (:func:`plan_union`, before anything is read or reserved): the set operation is
split into its branches, each planned by the engine's own planner exactly as if it were sent
alone (a DP query, or a query over public tables only). Anything the planner refuses in a
branch refuses the whole query; so do INTERSECT and EXCEPT, a mix of UNION and UNION ALL, an
ORDER BY or LIMIT on a parenthesised part, branches with subqueries of their own, and branches
whose columns differ in number or type. All of it depends on the query text and the catalog
only, never on the data.

Privacy: the branches are separate DP releases over the same data, each with the requested
(ε, δ) — sequential composition: the whole query costs the sum of the branches' costs,
reserved once before the first branch runs and charged once (nothing when a branch is
refused, since every branch is planned first). A public branch reads public tables only and
costs nothing. Concatenating the released rows, for UNION (without ALL) dropping duplicate
released rows in dpproxy (NULLs equal, as PostgreSQL's DISTINCT treats them), and an ORDER BY,
OFFSET or LIMIT after the last branch (applied by dpproxy to the released rows) are
post-processing of released values: they cost nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dpproxy.accounting.ledger import ReleaseRecord
from dpproxy.backends import CancelToken
from dpproxy.composed import EngineCore, Options, plan_summary
from dpproxy.errors import UnsupportedQuery
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.public import PublicPlan
from dpproxy.release.answer import Answer, Progress
from dpproxy.release.postprocess import Released
from dpproxy.release.public import columns_of
from dpproxy.sql.parse import parse, peek

if TYPE_CHECKING:  # built, and imported, for a UNION only (plan_union)
    from dpproxy.planning.union_plan import Plan, UnionPlan

_HINT = re.compile(r"/\*\+\s*dpproxy\b.*?\*/", re.DOTALL | re.IGNORECASE)


def _with_ctes(tree: exp.Expression, outer: tuple[exp.Expr, ...]) -> tuple[exp.Expr, ...]:
    """The CTEs a part of a UNION sees: those of the WITHs around it (``outer``) and its own
    WITH's, taken off it (a branch gets them all back as its own WITH: :func:`_branches`)."""
    with_ = tree.args.get("with_")
    if with_ is None:
        return outer
    if with_.args.get("recursive"):
        raise UnsupportedQuery("recursive CTEs are not supported")
    own = tuple(with_.expressions)
    names = [c.alias_or_name.lower() for c in (*outer, *own)]
    if len(set(names)) != len(names):
        raise UnsupportedQuery(
            "a WITH inside a UNION that defines a CTE of the WITH around it again is not "
            "supported",
            hint="give the inner CTE a name of its own",
        )
    tree.set("with_", None)
    return outer + own


def _used(branch: exp.Expression, ctes: tuple[exp.Expr, ...]) -> list[exp.Expr]:
    """The CTEs ``branch`` reads, directly or through another, in their order (a CTE it does
    not read is left out: one over a private table would make a public branch private)."""
    names = {t.name.lower() for t in branch.find_all(exp.Table)}
    used: set[int] = set()
    for cte in reversed(ctes):  # a CTE reads only those before it
        if cte.alias_or_name.lower() in names:
            used.add(id(cte))
            names |= {t.name.lower() for t in cte.find_all(exp.Table)}
    return [c for c in ctes if id(c) in used]


def _branches(
    tree: exp.Expression, outer: tuple[exp.Expr, ...] = ()
) -> tuple[list[exp.Expression], bool]:
    """The branches of a chain of UNIONs, left to right, and whether it is UNION (not ALL).
    A WITH before the UNION (or before a parenthesised part of it) belongs to every branch it
    covers: each branch gets those CTEs as its own WITH, before any of its own."""
    ctes = _with_ctes(tree, outer)
    if not isinstance(tree, exp.SetOperation):
        used = _used(tree, ctes)
        if used:
            tree.set("with_", exp.With(expressions=[c.copy() for c in used]))
        return [tree], False
    if isinstance(tree, exp.Intersect | exp.Except):
        op = "INTERSECT" if isinstance(tree, exp.Intersect) else "EXCEPT"
        raise UnsupportedQuery(
            f"{op} is not supported: only UNION and UNION ALL of aggregate queries are",
            hint=f"run the two queries separately and compare the released rows "
            f"(an {op} of released rows would be post-processing done by you)",
        )
    if tree.args.get("order") or tree.args.get("limit") or tree.args.get("offset"):
        raise UnsupportedQuery(
            "ORDER BY, LIMIT or OFFSET inside a UNION (on a parenthesised part) is not supported",
            hint="put ORDER BY and LIMIT after the last branch: they then apply to the whole",
        )
    distinct = bool(tree.args.get("distinct"))
    out: list[exp.Expression] = []
    for side in (tree.left, tree.right):
        if isinstance(side, exp.Subquery) and not side.alias:
            side = side.this
        assert isinstance(side, exp.Expression)
        parts, kind = _branches(side, ctes)
        if isinstance(side, exp.Union) and kind != distinct:
            raise UnsupportedQuery(
                "a mix of UNION and UNION ALL is not supported",
                hint="use UNION ALL (or UNION) between every pair of branches",
            )
        out.extend(parts)
    return out, distinct


def plan_union(
    sql: str,
    plan_of: Callable[[str], Plan],
    composed: Callable[[str], bool],
) -> UnionPlan | None:
    """The plan of a UNION [ALL] of aggregate SELECTs, or None for any other statement.
    ``plan_of``: the engine's planner for one query (public or DP); ``composed``: would the
    engine plan this query in parts (subqueries)? Refusals are raised here, before any data."""
    if not isinstance(peek(sql), exp.SetOperation):  # read, not copied: most queries
        return None
    tree = parse(sql)
    modifiers = {k: tree.args.get(k) for k in ("order", "limit", "offset")}
    for k in modifiers:
        tree.set(k, None)
    branches, distinct = _branches(tree)
    hints = "".join(m + " " for m in _HINT.findall(sql))
    texts = tuple(hints + b.sql("postgres", comments=False) for b in branches)
    for text in texts:
        if composed(text):
            raise UnsupportedQuery(
                "a UNION branch with subqueries of its own is not supported",
                hint="send that branch as a query of its own",
            )
    plans = tuple(plan_of(t) for t in texts)
    first = columns_of(plans[0])
    for i, p in enumerate(plans[1:], start=2):
        cols = columns_of(p)
        if len(cols) != len(first):
            raise UnsupportedQuery(
                f"each branch of a UNION must have as many columns: the first has "
                f"{len(first)}, branch {i} has {len(cols)}"
            )
        for a, b in zip(first, cols, strict=True):
            if a.type != b.type:
                raise UnsupportedQuery(
                    f"column {a.name} of a UNION is {a.type} in the first branch and "
                    f"{b.type} in branch {i}",
                    hint="CAST one side so that both have the same type",
                )
    if not any(isinstance(p, QueryPlan) for p in plans):
        return None  # public tables only: the public path answers it
    order = _order(modifiers["order"], [c.name for c in first])
    limit, offset = _count(modifiers["limit"], "LIMIT"), _count(modifiers["offset"], "OFFSET")
    from dpproxy.planning.union_plan import UnionPlan

    return UnionPlan(sql, texts, plans, distinct, order, limit, offset or 0)


def _order(order: Any, names: list[str]) -> tuple[tuple[int, bool, bool], ...]:
    """ORDER BY on the whole union: output column names or ordinals, as (index, descending,
    nulls first); PostgreSQL's default puts NULLs last ascending and first descending."""
    if order is None:
        return ()
    out = []
    for item in order.expressions:
        key, desc = item.this, bool(item.args.get("desc"))
        first = item.args.get("nulls_first")
        if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
            index = int(key.this) - 1
        elif isinstance(key, exp.Column) and not key.table and key.name in names:
            index = names.index(key.name)
        else:
            raise UnsupportedQuery(
                f"ORDER BY {key.sql('postgres')[:60]} on a UNION must name an output column",
                hint=f"order by one of {', '.join(names)} or by its position",
            )
        if not 0 <= index < len(names):
            raise UnsupportedQuery(f"ORDER BY position {index + 1} is not in the select list")
        out.append((index, desc, bool(first) if first is not None else desc))
    return tuple(out)


def _count(node: Any, what: str) -> int | None:
    """A LIMIT or OFFSET on the whole union: a whole-number literal, or None."""
    if node is None:
        return None
    value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    raise UnsupportedQuery(f"{what} on a UNION must be a whole number")


def _ordered(rows: list[tuple[Any, Any]], union: UnionPlan) -> list[tuple[Any, Any]]:
    """ORDER BY, OFFSET and LIMIT applied to the released rows (post-processing), as
    ``release/postprocess.py`` applies them to one query's released groups."""
    for index, desc, nulls_first in reversed(union.order):
        null_rank = 0 if nulls_first != desc else 1  # reverse=True flips the tuple order

        def key(row: tuple[Any, Any], i: int = index, n: int = null_rank) -> tuple[int, Any]:
            v = row[0][i]
            return (n, 0) if v is None else (1 - n, v)

        rows.sort(key=key, reverse=desc)
    stop = None if union.limit is None else union.offset + union.limit
    return rows[union.offset : stop]


def run_union(
    engine: EngineCore,
    union: UnionPlan,
    analyst: str,
    opts: Options,
    cancel: CancelToken | None,
) -> Answer:
    """Every branch under one reservation of the summed cost; rows concatenated in branch
    order, and for UNION the first of equal released rows kept (NULLs equal)."""
    text, normalised = engine._normalised(union.query, union.dp_plan, opts[2], opts[3])
    parts = " | ".join(plan_summary(p) for p in union.plans)
    record = ReleaseRecord(text, f"union of: {parts}", engine._noise_name(opts[2]))

    # The public branches run first, before anything is reserved: they read public tables
    # only, so their failure (a database error, more rows than the public cap) depends on
    # public data alone and is passed on with nothing reserved, nothing charged.
    public = {
        i: engine._run_public(plan, analyst, cancel).released
        for i, plan in enumerate(union.plans)
        if isinstance(plan, PublicPlan)
    }

    def body(progress: Progress) -> tuple[Released, Plan]:
        rows: list[tuple[Any, ...]] = []
        errors: list[tuple[float | None, ...]] = []
        seen: set[tuple[Any, ...]] = set()
        for i, sql in enumerate(union.branches):
            if i in public:
                released = public[i]
            else:
                prepared = engine._prepared(sql, opts, analyst)
                released = engine._execute(sql, prepared, analyst, opts, cancel, progress)[0]
            for row, err in zip(released.rows, released.errors, strict=True):
                if union.distinct:
                    if row in seen:
                        continue
                    seen.add(row)
                rows.append(tuple(row))
                errors.append(tuple(err))
        kept = _ordered(list(zip(rows, errors, strict=True)), union)
        released = Released(
            columns_of(union.first), tuple(r for r, _ in kept), tuple(e for _, e in kept)
        )
        return released, union.dp_plan

    key = engine.accountant.cache_key(analyst, normalised)
    return engine._spend(analyst, union.dp_plan, union.cost, (key, record), cancel, body)
