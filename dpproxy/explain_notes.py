"""How ``explain`` says each construct of a query is handled, in the words of the query.

Pure functions of the validated query (``sql/validate.py``): the WHERE as planned (constants
folded: date arithmetic, intervals and CURRENT_DATE are computed before planning, so the plan
shows the dates it compares with), semi- and anti-joins, outer joins, per-unit subqueries,
UNION ALL in FROM, group keys computed on each row, GROUP BY and ORDER BY output names and
ordinals resolved, DISTINCT aggregates, what dpproxy computes itself on the released values
(math functions and where they give NULL, HAVING, window functions, ORDER BY and LIMIT), and
where a contribution bound that is not drawn with DP comes from.
Internal names (``__agg_0``, ``__sq1_t``, ``n1__n_name``) do not appear: released aggregates
and columns are named as the user wrote them (``tests/integration/test_explain_constructs.py``
checks it over the corpus).
"""

from __future__ import annotations

import re

import sqlglot
import sqlglot.errors
from sqlglot import exp

from dpproxy.sql.scope import AggKind
from dpproxy.sql.unionrel import union_bound
from dpproxy.sql.validate import ValidQuery

# What a function applied by dpproxy on a released value gives where it is undefined.
_UNDEFINED = {
    exp.Sqrt: "SQRT is NULL for a negative value",
    exp.Ln: "LN is NULL for a value <= 0",
    exp.Log: "LOG is NULL for a value <= 0 (or a base <= 0 or 1)",
    exp.Exp: "EXP is NULL beyond the largest double",
    exp.Div: "a division by 0 is NULL",
    exp.Pow: "POWER is NULL for 0 to a negative power or a negative value to a fractional one",
}
_OUTER = re.compile(r"\b(LEFT|RIGHT|FULL) JOIN\b")
POST = "computed by dpproxy on the released values (post-processing, no extra cost)"


def aggregate_text(q: ValidQuery, i: int) -> str:
    """Aggregate ``i`` as the user wrote it (roughly): ``count(*)``, ``sum(DISTINCT age)``."""
    agg = q.aggregates[i]
    args = [a.sql("postgres") for a in (agg.measure, agg.second) if a is not None]
    if agg.kind is AggKind.COUNT_STAR:
        return "count(*)"
    name = {AggKind.COUNT_UNITS: "count", AggKind.COUNT_DISTINCT: "count"}.get(
        agg.kind, agg.kind.value
    )
    distinct = "DISTINCT " if agg.distinct or name != agg.kind.value else ""
    if agg.kind.quantile and agg.kind not in (AggKind.MEDIAN, AggKind.MIN, AggKind.MAX):
        assert agg.q is not None
        return f"{name}({float(agg.q):g}) of {', '.join(args)}"
    return f"{name}({distinct}{', '.join(args) or '*'})"


def readable(q: ValidQuery, e: exp.Expression) -> str:
    """A post-processing expression with the released aggregates, keys and windows named."""

    def name(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table:
            n = node.name
            if n.startswith("__agg_"):
                return exp.var(aggregate_text(q, int(n[6:])))
            if n.startswith("__key_"):
                return exp.var(q.keys[int(n[6:])].expr.sql("postgres"))
            if n.startswith("__win_"):
                w = q.windows[int(n[6:])]
                arg = readable(q, w.argument) if w.argument is not None else ""
                return exp.var(f"{w.function.upper()}({arg}) OVER (...)")
        return node

    return _user_names(q, e.copy().transform(name).sql("postgres"))


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _ordered(q: ValidQuery, e: exp.Expression) -> str:
    """An ORDER BY item as the output column it names, when it names one."""
    text = readable(q, e)
    for o in q.outputs:
        if o.expr == e:
            return o.name if o.name == text else f"{o.name} (= {text})"
    return text


def _key_index(e: exp.Expression) -> bool:
    """The CASE of a keyed release (``CASE WHEN c = k0 THEN 0 ...``): numbered by dpproxy, said
    in the part's heading instead."""
    ifs = (e.args.get("ifs") or []) if isinstance(e, exp.Case) else []
    return bool(ifs) and all(
        isinstance(i.args.get("true"), exp.Literal) and i.args["true"].name == str(n)
        for n, i in enumerate(ifs)
    )


def derived_column(q: ValidQuery, e: exp.Expression) -> str:
    """The error column of an output that is not one released aggregate: what dpproxy does."""
    text = readable(q, e)
    if any(
        isinstance(n, exp.Column) and n.name.startswith("__win_") for n in e.find_all(exp.Column)
    ):
        return f"{text}: a window function {POST}"
    rules = sorted({rule for n in e.walk() for t, rule in _UNDEFINED.items() if isinstance(n, t)})
    undefined = f"; {', '.join(rules)}" if rules else ""
    return f"{text}: {POST}{undefined}"


_VIRTUAL = re.compile(r"\b([A-Za-z]\w*?)__([A-Za-z]\w*)")


def _user_names(q: ValidQuery, text: str) -> str:
    """A joined relation's column ``n1__n_name`` as ``n1.n_name``; a per-unit subquery's unnamed
    aggregate (``HAVING COUNT(*) > 20``) as the aggregate, per unit."""
    if q.per_unit is not None:
        for d in q.per_unit.columns:
            if d.name.startswith("__"):
                arg = d.measure.sql("postgres") if d.measure is not None else "*"
                kind = d.kind.upper().replace("_DISTINCT", "(DISTINCT")
                func = f"{kind} {arg})" if "(" in kind else f"{kind}({arg})"
                text = re.sub(rf"\b{re.escape(d.name)}\b", f"{func} per unit", text)
    return _VIRTUAL.sub(r"\1.\2", text)


def _date_literals(e: exp.Expression) -> exp.Expression:
    """``CAST('1995-04-01' AS DATE)`` → ``DATE '1995-04-01'``, as the user would write it."""

    def lit(node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Cast)
            and isinstance(node.this, exp.Literal)
            and node.this.is_string
            and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
        ):
            return exp.var(f"{node.to.this.value} '{node.this.name}'")
        return node

    return e.copy().transform(lit)


def how_lines(q: ValidQuery) -> list[str]:
    """One short sentence per construct of the query that the plan handles in its own way."""
    out: list[str] = []
    where = []
    for f in q.filters:
        for node in f.find_all(exp.Exists):
            anti = isinstance(node.parent, exp.Not)
            out.append(
                ("anti-join (NOT EXISTS / NOT IN)" if anti else "semi-join (EXISTS / IN)")
                + ": a subquery that keeps or drops each row by the rows of that row's own "
                "privacy unit (or public rows) only; it adds no rows and is applied before "
                "the bound on rows per unit"
            )
        if not any(True for _ in f.find_all(exp.Exists)):
            where.append(_user_names(q, _date_literals(f).sql("postgres")))
    if where:
        text = " AND ".join(where)
        folded = (
            " (date arithmetic, intervals and CURRENT_DATE folded to constants before planning)"
            if re.search(r"\b(DATE|TIMESTAMP) '", text)
            else ""
        )
        out.insert(0, f"WHERE as planned: {_short(text)}{folded}")
    if q.source is not None and (m := _OUTER.search(q.source.description)):
        if "keeping public rows" in q.source.description:
            out.append(
                f"outer join ({m.group(0)}) keeping public rows: an unmatched public row is kept "
                "with NULLs, which every aggregate ignores (each reads the private side); the "
                "private rows are bounded per unit as in an inner join"
            )
        else:
            out.append(
                f"outer join ({m.group(0)}): a row without a match is kept once, with NULLs for "
                "the other side; each joined row is one privacy unit's and is bounded per unit "
                "as in an inner join"
            )
    if q.per_unit is not None:
        left = (
            " (its LEFT JOIN on the unit keeps a unit with no matching rows, as one row)"
            if q.per_unit.left_join is not None
            else ""
        )
        out.append(
            "per-unit subquery: grouped by the privacy unit, so each unit is one row of the "
            f"derived relation and no bound on rows is needed{left}"
        )
    if q.union is not None:
        n = len(q.union.branches)
        bound = union_bound(list(q.union.branches)).rows_total()
        how = (
            f"at most {bound} rows per unit, the sum of the branches' declared bounds"
            if bound is not None
            else "no bound declared for every branch, so one is hinted or chosen with DP"
        )
        out.append(
            f"UNION ALL of {n} private relations: each row keeps its branch's privacy unit, so "
            f"one unit's rows add up over the branches; {how}, enforced on the union"
        )
    for k in q.keys:
        if not isinstance(k.expr, exp.Column) and not _key_index(k.expr):
            domain = (
                f"a public domain of {len(k.domain)} values"
                if k.domain is not None
                else "groups chosen with DP"
            )
            key = _short(_user_names(q, k.expr.sql("postgres")))
            out.append(f"group key {key}: computed on each row before aggregation ({domain})")
    named = [_ordered(q, exp.column(f"__key_{j}")) for j in range(len(q.keys))]
    if any("(= " in n for n in named) and not any(_key_index(k.expr) for k in q.keys):
        out.append(f"GROUP BY {_short(', '.join(named))} (output names and ordinals resolved)")
    for i, agg in enumerate(q.aggregates):
        label = aggregate_text(q, i)
        if agg.kind is AggKind.COUNT_UNITS:
            out.append(f"{label}: the number of distinct privacy units, each counted once")
        elif agg.kind is AggKind.COUNT_DISTINCT:
            out.append(f"{label}: each distinct value counted once")
        elif agg.distinct:
            out.append(f"{label}: over the distinct values, each taken once")
    if q.having is not None:
        out.append(f"HAVING {_short(readable(q, q.having))}: {POST}, on each released group")
    if q.windows:
        out.append(f"window functions: {POST}, over the released rows")
    if q.order or q.limit is not None or q.offset:
        order = ", ".join(_ordered(q, o.expr) + (" DESC" if o.desc else "") for o in q.order)
        parts = [
            *((f"ORDER BY {order}",) if q.order else ()),
            *((f"LIMIT {q.limit}",) if q.limit is not None else ()),
            *((f"OFFSET {q.offset}",) if q.offset else ()),
        ]
        out.append(
            f"{' '.join(parts)}: applied by dpproxy to the released rows (output names and "
            "ordinals resolved to the columns they name)"
        )
    return out


def fixed_bound(q: ValidQuery) -> str:
    """Where a bound that is not drawn with DP comes from."""
    if q.per_unit is not None:
        return "one row per unit: the per-unit subquery"
    if q.union is not None:
        return "the sum of the UNION ALL branches' bounds declared in the schema"
    if q.table.unit_is_unique:
        if q.source is not None:  # sql/joinrel.py unit_unique
            return (
                "every joined table's unit column is a PRIMARY KEY or UNIQUE NOT NULL in the "
                "database"
            )
        # Spark: the schema's unit_unique, checked against the data (backends/spark_unique.py)
        return (
            "the unit column is a PRIMARY KEY or UNIQUE NOT NULL in the database, or checked unique"
        )
    return "declared in the schema"


LIST_KEEP = 6  # list items shown by abbreviated(); the rest are counted


def abbreviated(sql: str, limit: int = 2000) -> str:
    """``sql`` with every IN list and VALUES relation longer than :data:`LIST_KEEP` + 2 items
    cut to its first items and a count (``l_partkey IN (5, 304, …, 58 more)``), for explain's
    text: the key domains of released-first parts hold up to 10,000 values. Still longer than
    ``limit`` characters: cut there. The JSON form and the rewritten SQL stay whole."""
    text = sql
    if sql.count(",") > LIST_KEEP + 1:  # else no list is long enough: the text as written
        try:
            tree = sqlglot.parse_one(sql, read="postgres")
        except sqlglot.errors.SqlglotError:
            tree = None
        cuts = 0

        def cut(node: exp.Expression) -> exp.Expression:
            nonlocal cuts
            if isinstance(node, exp.In | exp.Values):
                items = node.expressions
                if len(items) > LIST_KEEP + 2:
                    cuts += 1
                    more = exp.var(f"… {len(items) - LIST_KEEP} more")
                    node = node.copy()
                    node.set("expressions", [*items[:LIST_KEEP], more])
            return node

        if tree is not None:
            short = tree.transform(cut).sql("postgres")
            text = short if cuts else sql
    return text if len(text) <= limit else text[:limit] + " …"
