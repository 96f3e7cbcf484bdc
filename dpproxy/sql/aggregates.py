"""Select-list, HAVING and ORDER BY → post-processing expressions over aggregate placeholders.

Every aggregate call becomes a placeholder column ``__agg_i`` (with an :class:`Aggregate`
describing it over base columns) and every group-key occurrence ``__key_j``. The expressions are
evaluated by ``release/evaluation.py`` on noisy values, never by the database.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dpproxy.errors import (
    AmbiguousColumn,
    DatatypeMismatch,
    Forbidden,
    GroupingError,
    InvalidParameter,
    UndefinedFunction,
    UnsupportedQuery,
)
from dpproxy.sql.postmath import POST_FUNCS, post_type
from dpproxy.sql.scope import (
    AggKind,
    Aggregate,
    GroupKey,
    OutputItem,
    Scope,
    expect_bool,
    no_aggregates,
)
from dpproxy.sql.totality import user_name
from dpproxy.sql.types import SqlType, clone, raise_unsupported, type_of

if TYPE_CHECKING:  # sql/windows.py is imported by a query with a window function only
    from dpproxy.sql.windows import WindowItem

_AGG_CLASSES: dict[type[exp.Expression], AggKind] = {
    exp.Sum: AggKind.SUM,
    exp.Avg: AggKind.AVG,
    exp.VariancePop: AggKind.VAR_POP,
    exp.Variance: AggKind.VAR_SAMP,
    exp.StddevPop: AggKind.STDDEV_POP,
    exp.StddevSamp: AggKind.STDDEV_SAMP,
    exp.Stddev: AggKind.STDDEV_SAMP,
}
_ORDER_CLASSES: dict[type[exp.Expression], tuple[AggKind, Fraction]] = {
    exp.Median: (AggKind.MEDIAN, Fraction(1, 2)),
    exp.Min: (AggKind.MIN, Fraction(0)),
    exp.Max: (AggKind.MAX, Fraction(1)),
}
_BIVARIATE_CLASSES: dict[type[exp.Expression], AggKind] = {
    exp.Corr: AggKind.CORR,
    exp.CovarPop: AggKind.COVAR_POP,
    exp.CovarSamp: AggKind.COVAR_SAMP,
    exp.RegrSlope: AggKind.REGR_SLOPE,
    exp.RegrIntercept: AggKind.REGR_INTERCEPT,
}
#: The ends of a released aggregate's 95% interval (Snowflake's names); post-processing.
INTERVAL_FUNCTIONS = ("DP_INTERVAL_LOW", "DP_INTERVAL_HIGH")
_LATER = {
    "quantile": "QUANTILE",
    "mode": "MODE",
    "percentilecont": "PERCENTILE_CONT",
    "percentiledisc": "PERCENTILE_DISC",
}


def _fraction_literal(node: exp.Expression | None, kind: AggKind) -> Fraction:
    """The fraction argument of a percentile: a numeric literal in [0, 1]."""
    value = node.this if isinstance(node, exp.Neg) else node
    if not isinstance(value, exp.Literal) or value.is_string:
        raise UnsupportedQuery(f"the fraction of {kind.value.upper()} must be a numeric constant")
    q = Fraction(value.this)
    if isinstance(node, exp.Neg):
        q = -q
    if q.denominator > 10**6:
        # The rewritten SQL compares rank·denominator with numerator·n in 64-bit integers.
        raise InvalidParameter(
            f"the fraction of {kind.value.upper()} has too many digits",
            hint="give the percentile with at most 6 decimals",
        )
    if not 0 <= q <= 1:
        raise InvalidParameter(f"percentile value {float(q):g} is not between 0 and 1")
    return q


_NAMED_FUNCS = (
    *POST_FUNCS,
    exp.Round,
    exp.Abs,
    exp.Floor,
    exp.Ceil,
    exp.Length,
    exp.WidthBucket,
    exp.TimeToStr,
)


def default_name(node: exp.Expression, i: int) -> str:
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Anonymous) and node.name.upper() in INTERVAL_FUNCTIONS:
        return node.name.lower()
    if isinstance(node, exp.Window):  # PostgreSQL names it after its function: rank, sum
        from dpproxy.sql.windows import function_name  # imported by a query with a window

        return function_name(node.this).lower()
    if isinstance(node, _NAMED_FUNCS):  # sqrt, round, width_bucket, to_char, as PostgreSQL
        return user_name(node)
    if isinstance(node, (exp.AggFunc, exp.Filter, exp.WithinGroup)):
        inner = node.this if isinstance(node, (exp.Filter, exp.WithinGroup)) else node
        names = {
            exp.Stddev: "stddev",
            exp.Variance: "variance",
            exp.VariancePop: "var_pop",
            exp.StddevPop: "stddev_pop",
            exp.StddevSamp: "stddev_samp",
            exp.PercentileCont: "percentile_cont",
            exp.PercentileDisc: "percentile_disc",
            exp.CovarPop: "covar_pop",
            exp.CovarSamp: "covar_samp",
            exp.RegrSlope: "regr_slope",
            exp.RegrIntercept: "regr_intercept",
        }
        return str(names.get(type(inner), inner.key))
    return f"?column?{i}" if i else "?column?"


class PostBuilder:
    """Turns select-list, HAVING and ORDER BY expressions into post-processing expressions."""

    def __init__(self, scope: Scope, keys: list[GroupKey], aggregates: list[Aggregate]) -> None:
        self.scope = scope
        self.keys = keys
        self.aggregates = aggregates
        self.key_index = {k.expr: i for i, k in enumerate(keys)}
        self.windows: list[WindowItem] = []  # window functions over the released rows
        self._typed: tuple[tuple[int, int], dict[str, SqlType]] | None = None

    def build(
        self,
        node: exp.Expression,
        outputs: list[OutputItem] | None = None,
        *,
        outputs_first: bool = False,
    ) -> exp.Expression:
        """``node`` as a post-processing expression. A bare name that is an output column's
        name stands for that output: in ORDER BY (``outputs_first``) before any input column
        of that name, as PostgreSQL resolves it (``SUM(x) AS x … ORDER BY x`` orders by the
        sum; two outputs of that name are ambiguous, 42702); in HAVING only when no input
        column has the name (PostgreSQL refuses output names there; DuckDB takes them)."""
        if outputs and isinstance(node, exp.Column) and not node.table:
            name = node.name.lower()
            named = [out for out in outputs if out.name.lower() == name]
            if outputs_first and len(named) > 1:
                raise AmbiguousColumn(f'ORDER BY "{node.name}" is ambiguous')
            if named and (outputs_first or name not in self.scope.names):
                return clone(named[0].expr)
        return self._walk(node)

    def _walk(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Window):
            from dpproxy.sql.windows import build_window  # imported by a query with a window

            return build_window(node, self._walk, self.type_of, self.windows)
        if isinstance(node, (exp.Filter, exp.AggFunc, exp.WithinGroup)):
            return exp.column(f"__agg_{self._aggregate(node)}")
        if isinstance(node, exp.Anonymous) and node.name.upper() in INTERVAL_FUNCTIONS:
            return self._interval(node)
        has_column, has_aggregate = _reads(node)
        if not has_column and not has_aggregate:
            if isinstance(node, exp.Star):
                raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
            check_post_constant(node)
            return clone(node)
        if not has_aggregate:
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
            if isinstance(node, exp.Func) and not isinstance(node, exp.Anonymous | exp.AggFunc):
                # allowed on rows (WHERE, GROUP BY) perhaps, but not on what is released
                what = "an aggregate" if has_aggregate else "a GROUP BY key"
                raise UndefinedFunction(
                    f"function {user_name(node)}() is not supported over {what}",
                    hint="docs/sql.md lists the functions allowed after aggregation"
                    if has_aggregate
                    else "it is allowed on rows: GROUP BY the expression itself to release "
                    "or order by it",
                )
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

    def _interval(self, node: exp.Anonymous) -> exp.Expression:
        """``DP_INTERVAL_LOW(agg)`` / ``DP_INTERVAL_HIGH(agg)`` → ``__lo_i`` / ``__hi_i``: an
        end of the 95% interval of aggregate i of this query (``release/intervals.py``)."""
        name = node.name.upper()
        args = node.expressions
        inner: exp.Expression | None = args[0] if len(args) == 1 else None
        if inner is None or not isinstance(inner, exp.Filter | exp.AggFunc | exp.WithinGroup):
            raise UnsupportedQuery(
                f"the argument of {name} must be one aggregate of the query",
                hint=f"e.g. SELECT AVG(age), {name}(AVG(age)) FROM ...",
            )
        end = "lo" if name == "DP_INTERVAL_LOW" else "hi"
        return exp.column(f"__{end}_{self._aggregate(inner)}")

    def _aggregate(self, node: exp.Expression) -> int:
        condition = None
        if isinstance(node, exp.Filter):
            condition = node.expression.this
            node = node.this
            no_aggregates(condition, "FILTER")
        kind, arg, q, second_arg = self._classify(node)
        distinct = isinstance(node, (exp.Sum, exp.Avg)) and isinstance(node.this, exp.Distinct)
        measure: exp.Expression | None = None
        second: exp.Expression | None = None
        if kind is AggKind.COUNT_UNITS:
            measure = exp.column(self.scope.table.privacy_unit or "")
        elif arg is not None:
            measure = self._numeric_argument(kind, arg)
            if second_arg is not None:
                second = self._numeric_argument(kind, second_arg)
        if condition is not None:
            cond, cond_type = self.scope.resolve_typed(condition)
            expect_bool(cond, self.scope, "FILTER", cond_type)
            if kind is AggKind.COUNT_UNITS:
                raise UnsupportedQuery("COUNT(DISTINCT ...) FILTER is not supported")
            value = measure if measure is not None else exp.Literal.number(1)
            measure = exp.Case(ifs=[exp.If(this=cond, true=value)])
            if second is not None:
                second = exp.Case(ifs=[exp.If(this=cond.copy(), true=second)])
            if kind is AggKind.COUNT_STAR:
                kind = AggKind.COUNT
        candidate = Aggregate(kind, measure, q, second, distinct)
        for i, a in enumerate(self.aggregates):
            if a == candidate:
                return i
        self.aggregates.append(candidate)
        return len(self.aggregates) - 1

    def _numeric_argument(self, kind: AggKind, arg: exp.Expression) -> exp.Expression:
        no_aggregates(arg, "an aggregate argument")
        measure, t = self.scope.resolve_typed(arg)
        # An untyped NULL (``SUM(NULL)``, ``SUM(CASE WHEN c THEN NULL END)``) is refused as
        # PostgreSQL refuses it (its CASE of NULLs is text); it failed there after charging.
        if kind not in (AggKind.COUNT, AggKind.COUNT_DISTINCT) and t is not SqlType.NUMERIC:
            raise DatatypeMismatch(
                f"{kind.value.upper()} needs a numeric argument, not {t.value}",
                hint="use CASE WHEN ... THEN 1 ELSE 0 END to count conditions",
            )
        return measure

    def _classify(
        self, node: exp.Expression
    ) -> tuple[AggKind, exp.Expression | None, Fraction | None, exp.Expression | None]:
        own = node.this if isinstance(node, exp.WithinGroup) else node
        for inner in node.walk():
            if inner is not node and inner is not own and isinstance(inner, exp.AggFunc):
                raise GroupingError("aggregate function calls cannot be nested")
        if isinstance(node, exp.Count):
            arg = node.this
            if arg is None or isinstance(arg, exp.Star):
                return AggKind.COUNT_STAR, None, None, None
            if isinstance(arg, exp.Distinct):
                unit = self.scope.table.privacy_unit
                items = arg.expressions
                resolved = self.scope.resolve(items[0]) if len(items) == 1 else None
                if (
                    unit is not None
                    and isinstance(resolved, exp.Column)
                    and self.scope.table.is_unit(resolved.name)
                ):
                    return AggKind.COUNT_UNITS, None, None, None
                if len(items) != 1:
                    raise UnsupportedQuery(
                        "COUNT(DISTINCT ...) of several expressions is not supported",
                        hint="count the distinct values of one expression",
                    )
                return AggKind.COUNT_DISTINCT, items[0], None, None
            return AggKind.COUNT, arg, None, None
        if isinstance(node, exp.WithinGroup):
            return self._within_group(node)
        if isinstance(node, (exp.Sum, exp.Avg)) and isinstance(node.this, exp.Distinct):
            items = node.this.expressions
            if len(items) != 1:
                raise UnsupportedQuery(
                    f"{user_name(node).upper()}(DISTINCT ...) of several expressions is not "
                    "supported"
                )
            return _AGG_CLASSES[type(node)], items[0], None, None
        if isinstance(node.this, exp.Distinct):
            raise UnsupportedQuery(f"{user_name(node).upper()}(DISTINCT ...) is not supported")
        kind = _AGG_CLASSES.get(type(node))
        if kind is not None:
            return kind, node.this, None, None
        order_kind = _ORDER_CLASSES.get(type(node))
        if order_kind is not None:
            kind, q = order_kind
            return kind, node.this, q, None
        two = _BIVARIATE_CLASSES.get(type(node))
        if two is not None:
            second = node.args.get("expression")
            if second is None:
                raise UnsupportedQuery(f"{two.value.upper()} needs two arguments")
            return two, node.this, None, second
        name = node.key.lower()
        if name in _LATER:
            raise UnsupportedQuery(
                f"{_LATER[name]} is not supported",
                hint="MEDIAN, PERCENTILE_CONT/PERCENTILE_DISC(q) WITHIN GROUP (ORDER BY x), MIN "
                "and MAX are the supported order statistics",
            )
        raise UnsupportedQuery(f"the aggregate {user_name(node).upper()} is not supported")

    def _within_group(
        self, node: exp.WithinGroup
    ) -> tuple[AggKind, exp.Expression, Fraction, None]:
        """``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)`` (and ``_DISC``), ascending only."""
        func = node.this
        kinds = {
            exp.PercentileCont: AggKind.PERCENTILE_CONT,
            exp.PercentileDisc: AggKind.PERCENTILE_DISC,
        }
        kind = kinds.get(type(func))
        if kind is None:
            raise UnsupportedQuery(f"{user_name(func).upper()} ... WITHIN GROUP is not supported")
        order = node.expression
        items = order.expressions if isinstance(order, exp.Order) else []
        if len(items) != 1:
            raise UnsupportedQuery(f"{kind.value.upper()} needs exactly one ORDER BY expression")
        item = items[0]
        if item.args.get("desc"):
            raise UnsupportedQuery(
                f"{kind.value.upper()} with ORDER BY ... DESC is not supported",
                hint="order ascending and ask for the fraction 1 - q",
            )
        q = _fraction_literal(func.this, kind)
        return kind, item.this, q, None

    def type_of(self, expr: exp.Expression) -> SqlType:
        return type_of(expr, self._types(), post_type)  # math over released values: postmath

    def _types(self) -> dict[str, SqlType]:
        """The released columns' types: built again only when an aggregate or a window was
        added since (the keys are fixed at construction, and items are only appended, each
        with its type), not once per expression typed (issue 21)."""
        size = (len(self.aggregates), len(self.windows))
        if self._typed is None or self._typed[0] != size:
            types = dict.fromkeys(_released_names(size[0]), SqlType.NUMERIC)
            types.update({f"__key_{i}": k.type for i, k in enumerate(self.keys)})
            types.update({f"__win_{i}": w.type for i, w in enumerate(self.windows)})
            self._typed = (size, types)
        return self._typed[1]


@functools.lru_cache(maxsize=64)
def _released_names(n: int) -> tuple[str, ...]:
    """The columns of ``n`` released aggregates and their intervals (``__agg_i`` …)."""
    return tuple(f"__{p}_{i}" for i in range(n) for p in ("agg", "lo", "hi"))


_POST_NODES: tuple[type[exp.Expression], ...] = (
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
    *POST_FUNCS,
)


def _reads(node: exp.Expression) -> tuple[bool, bool]:
    """Whether ``node`` holds a column, and whether it holds an aggregate (one walk)."""
    has_column = has_aggregate = False
    for n in node.walk():
        if isinstance(n, exp.Column):
            has_column = True
        elif isinstance(n, exp.AggFunc):
            has_aggregate = True
        if has_column and has_aggregate:
            break
    return has_column, has_aggregate


def check_post_constant(node: exp.Expression) -> None:
    for n in node.walk():
        if not isinstance(n, _POST_NODES):
            raise_unsupported(n)  # type: ignore[arg-type]


def rates_as_means(node: exp.Expression) -> exp.Expression:
    """``COUNT(*) FILTER (WHERE c) / COUNT(*)`` (also with ``SUM(CASE WHEN c THEN 1 ELSE 0
    END)`` or ``COUNT(CASE WHEN c THEN 1 END)`` on top, and numeric casts) → ``AVG(CASE WHEN c
    THEN 1 ELSE 0 END)``: the same rate (``/`` is real division in dpproxy), answered as one
    mean of a 0/1 value, which the planner can release jointly (``reading/003``, KSW) instead
    of as two noisy counts.
    """

    def strip(n: exp.Expression) -> exp.Expression:
        while isinstance(n, exp.Paren | exp.Cast):
            if isinstance(n, exp.Cast) and not n.to.is_type(*exp.DataType.NUMERIC_TYPES):
                break
            n = n.this
        return n

    def is_count_star(n: exp.Expression) -> bool:
        return isinstance(n, exp.Count) and (n.this is None or isinstance(n.this, exp.Star))

    def literal(n: exp.Expression | None, value: int) -> bool:
        return (
            isinstance(n, exp.Literal) and not n.is_string and n.this in (str(value), f"{value}.0")
        )

    def condition(n: exp.Expression) -> exp.Expression | None:
        found: exp.Expression | None = None
        if isinstance(n, exp.Filter) and is_count_star(n.this):
            found = n.expression.this
        elif isinstance(n, exp.Sum | exp.Count) and isinstance(n.this, exp.Case):
            case = n.this
            ifs = case.args.get("ifs") or []
            default = case.args.get("default")
            ok_default = default is None if isinstance(n, exp.Count) else literal(default, 0)
            if len(ifs) == 1 and literal(ifs[0].args.get("true"), 1) and ok_default:
                found = ifs[0].this
        return found

    def replace(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Div) and is_count_star(strip(n.expression)):
            cond = condition(strip(n.this))
            if cond is not None:
                case = exp.Case(
                    ifs=[exp.If(this=cond.copy(), true=exp.Literal.number(1))],
                    default=exp.Literal.number(0),
                )
                return exp.Avg(this=case)
        return n

    if node.find(exp.Div) is None:  # nothing to rewrite: ``node`` as it is (never changed:
        return node  # PostBuilder builds new nodes from what it reads)
    return clone(node).transform(replace, copy=False)
