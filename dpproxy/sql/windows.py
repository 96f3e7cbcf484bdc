"""Window functions over released aggregates: ``RANK() OVER (ORDER BY SUM(x) DESC)``,
``SUM(x) / SUM(SUM(x)) OVER ()`` (shares), running totals, ``LAG``/``LEAD``.

A window function of a grouped query reads the query's result rows — the groups — never the
table's rows. dpproxy computes it itself, on the released (noisy) rows, after HAVING and before
ORDER BY and LIMIT, as SQL orders those steps (``release/windows.py``); the database never sees
it. **Privacy argument:** the value is a function of released values only, i.e.
post-processing of a differentially private release, so it costs nothing and protects as much as
the release itself. **Totality:** each window's argument, partition and order expressions are
post-processing expressions typed statically here (``PostBuilder.type_of``); SUM and AVG need a
numeric argument (42804); the evaluation is total (an undefined value is NULL, never an error).

Supported: ``ROW_NUMBER``, ``RANK``, ``DENSE_RANK``, ``PERCENT_RANK``, ``CUME_DIST``,
``NTILE(n)`` (n a positive integer literal: PostgreSQL raises for n <= 0, and a constant makes
that a refusal before anything runs, 22014),
``SUM``, ``AVG``, ``COUNT``, ``MIN``, ``MAX`` (aggregates over the partition; with an ORDER BY in
the window, over the rows up to the current row and its peers — SQL's default frame) and
``LAG``/``LEAD(expr [, offset [, default]])``, each with ``PARTITION BY`` and ``ORDER BY`` over
the query's keys and aggregates. Explicit frames (``ROWS BETWEEN …``), named windows
(``WINDOW w AS``), ``DISTINCT`` inside a window aggregate, ``FILTER`` and nested window calls
are refused; window functions are not allowed in WHERE, GROUP BY or HAVING (42P20), as in
PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dpproxy.errors import (
    DatatypeMismatch,
    InvalidArgumentForNtile,
    NumericValueOutOfRange,
    UnsupportedQuery,
    WindowingError,
)
from dpproxy.sql.scope import OrderItem
from dpproxy.sql.totality import user_name
from dpproxy.sql.types import SqlType

RANKING = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile")
AGGREGATES = ("sum", "avg", "count", "min", "max")
OFFSETS = ("lag", "lead")
INTEGRAL = ("row_number", "rank", "dense_rank", "ntile", "count")  # released as integers

_CLASSES: dict[type[exp.Expression], str] = {
    exp.RowNumber: "row_number",
    exp.Rank: "rank",
    exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank",
    exp.CumeDist: "cume_dist",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Count: "count",
    exp.Min: "min",
    exp.Max: "max",
    exp.Lag: "lag",
    exp.Lead: "lead",
    exp.Ntile: "ntile",
}
_ANONYMOUS = {"rank", "dense_rank", "percent_rank", "cume_dist", "row_number"}


@dataclass(frozen=True, slots=True)
class WindowItem:
    """One window function over the released rows; its value is ``__win_<index>``."""

    function: str  # one of RANKING, AGGREGATES, OFFSETS
    argument: exp.Expression | None  # a post-processing expression; None: COUNT(*), rankings
    partition: tuple[exp.Expression, ...]
    order: tuple[OrderItem, ...]
    type: SqlType
    offset: int = 1  # LAG/LEAD
    default: exp.Expression | None = None  # LAG/LEAD's third argument
    buckets: int = 0  # NTILE's argument


def function_name(node: exp.Expression) -> str:
    """The SQL name of a window's function, as the user wrote it (for messages)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).upper()
    known = _CLASSES.get(type(node))
    return (known or user_name(node)).upper()  # FIRST_VALUE, not sqlglot's FirstValue


def build_window(
    node: exp.Window,
    walk: Callable[[exp.Expression], exp.Expression],
    type_of: Callable[[exp.Expression], SqlType],
    windows: list[WindowItem],
) -> exp.Expression:
    """``node`` → the column ``__win_<i>`` of a new :class:`WindowItem` in ``windows``.
    ``walk`` turns an expression of the query (keys, aggregates, arithmetic over them) into a
    post-processing expression; ``type_of`` types one."""
    if node.args.get("spec") is not None:
        raise UnsupportedQuery(
            "window frames (ROWS/RANGE/GROUPS BETWEEN ...) are not supported",
            hint="without a frame, a window aggregate covers its partition, or with ORDER BY "
            "the rows up to the current one",
        )
    if not isinstance(node.this, exp.Func) or node.args.get("alias"):
        raise UnsupportedQuery("named windows are not supported; write OVER (...)")
    func: exp.Expression = node.args["this"]
    if isinstance(func, exp.Filter):
        raise UnsupportedQuery("FILTER on a window function is not supported")
    for inner in func.walk():
        if inner is not func and isinstance(inner, exp.Window):
            raise WindowingError("window function calls cannot be nested")
    name = _name(func)
    argument: exp.Expression | None = None
    offset, default, buckets = 1, None, 0
    if name == "ntile":
        buckets = _buckets(func.this)
    elif name in AGGREGATES:
        raw = func.this
        if isinstance(raw, exp.Distinct):
            raise UnsupportedQuery(f"{name.upper()}(DISTINCT ...) OVER (...) is not supported")
        if raw is not None and not isinstance(raw, exp.Star):
            argument = walk(raw)
        elif name != "count":
            raise UnsupportedQuery(f"{name.upper()}(*) is not a function")
    elif name in OFFSETS:
        argument = walk(func.this)
        offset = _offset(func.args.get("offset"), name)
        if (d := func.args.get("default")) is not None:
            default = walk(d)
    elif func.expressions or func.args.get("this") is not None:
        raise UnsupportedQuery(f"{name.upper()}() takes no arguments")
    partition = tuple(walk(p) for p in node.args.get("partition_by") or [])
    order: list[OrderItem] = []
    if (o := node.args.get("order")) is not None:
        for item in o.expressions:
            desc = bool(item.args.get("desc"))
            first = item.args.get("nulls_first")
            order.append(
                OrderItem(walk(item.this), desc, bool(first) if first is not None else desc)
            )
    for e in (*partition, *(i.expr for i in order)):
        type_of(e)  # typed like the select list
    result = _result_type(name, argument, default, type_of)
    windows.append(
        WindowItem(name, argument, partition, tuple(order), result, offset, default, buckets)
    )
    return exp.column(f"__win_{len(windows) - 1}")


def _name(func: exp.Expression) -> str:
    if isinstance(func, exp.Anonymous) and str(func.name).lower() in _ANONYMOUS:
        return str(func.name).lower()
    name = _CLASSES.get(type(func))
    if name is None:
        raise UnsupportedQuery(
            f"the window function {function_name(func)} is not supported",
            hint="supported: " + ", ".join(f.upper() for f in (*RANKING, *AGGREGATES, *OFFSETS)),
        )
    return name


def _buckets(node: exp.Expression | None) -> int:
    """NTILE's number of buckets: a positive integer literal (below 2^31, PostgreSQL's
    integer); PostgreSQL raises for 0 or less when the query runs, refused here (22014)."""
    negative = isinstance(node, exp.Neg)
    value = node.this if isinstance(node, exp.Neg) else node
    if not (isinstance(value, exp.Literal) and not value.is_string and value.name.isdigit()):
        raise UnsupportedQuery(
            "the argument of NTILE must be an integer literal", hint="e.g. NTILE(4) OVER (...)"
        )
    n = -int(value.name) if negative else int(value.name)
    if n <= 0:
        raise InvalidArgumentForNtile("argument of ntile must be greater than zero")
    if n >= 2**31:
        raise NumericValueOutOfRange("the argument of NTILE is out of range for type integer")
    return n


def _offset(node: exp.Expression | None, name: str) -> int:
    if node is None:
        return 1
    if isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit():
        return int(node.name)
    raise UnsupportedQuery(f"the offset of {name.upper()} must be a non-negative integer literal")


def _result_type(
    name: str,
    argument: exp.Expression | None,
    default: exp.Expression | None,
    type_of: Callable[[exp.Expression], SqlType],
) -> SqlType:
    if name in RANKING or name == "count":
        if argument is not None:
            type_of(argument)
        return SqlType.NUMERIC
    assert argument is not None
    t = type_of(argument)
    if name in ("sum", "avg") and t not in (SqlType.NUMERIC, SqlType.NULL):
        raise DatatypeMismatch(f"{name.upper()} needs a numeric argument, not {t.value}")
    if default is not None:
        d = type_of(default)
        if SqlType.NULL not in (t, d) and d is not t:
            raise DatatypeMismatch(
                f"the default of {name.upper()} must have the type of its value ({t.value}), "
                f"not {d.value}"
            )
    return SqlType.NUMERIC if name in ("sum", "avg") else t
