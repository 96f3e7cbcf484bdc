"""Static types of row-level expressions, so that no query can fail on a data value.

A comparison of a text column with a number, or arithmetic on text, would make the database
raise an error that depends on the values it meets. The validator refuses such queries up
front; only expressions whose every operation is well-typed reach the rewrite.
"""

from __future__ import annotations

import datetime
from enum import Enum

from sqlglot import exp

from dpproxy.catalog.model import ColumnType
from dpproxy.errors import (
    DatatypeMismatch,
    InvalidTextRepresentation,
    UndefinedFunction,
    UnsupportedQuery,
)


class SqlType(Enum):
    NUMERIC = "numeric"
    TEXT = "text"
    BOOLEAN = "boolean"
    DATE = "date"
    NULL = "null"  # the untyped NULL literal, compatible with everything
    UNKNOWN = "unknown"  # a string literal: Postgres's "unknown", coerced on use


COLUMN_TYPES = {
    ColumnType.INTEGER: SqlType.NUMERIC,
    ColumnType.FLOAT: SqlType.NUMERIC,
    ColumnType.TEXT: SqlType.TEXT,
    ColumnType.BOOLEAN: SqlType.BOOLEAN,
    ColumnType.DATE: SqlType.DATE,
}

_NUMERIC_CASTS = {
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.DOUBLE,
    exp.DataType.Type.FLOAT,
    exp.DataType.Type.DECIMAL,
}
_TEXT_CASTS = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR}

ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
NUMERIC_FUNCS = (exp.Abs, exp.Round, exp.Floor, exp.Ceil)
TEXT_FUNCS = (exp.Lower, exp.Upper, exp.Trim)


def cast_type(to: exp.DataType) -> SqlType:
    t = to.this
    if t in _NUMERIC_CASTS:
        return SqlType.NUMERIC
    if t in _TEXT_CASTS:
        return SqlType.TEXT
    if t is exp.DataType.Type.BOOLEAN:
        return SqlType.BOOLEAN
    if t is exp.DataType.Type.DATE:
        return SqlType.DATE
    raise UnsupportedQuery(f"casts to {to.sql('postgres')} are not supported")


_BOOLEAN_WORDS = {"t", "f", "true", "false", "y", "n", "yes", "no", "on", "off", "1", "0"}


def check_literal(node: exp.Expression, target: SqlType) -> None:
    """A string literal compared with a typed value must read as that type (Postgres coerces
    it at parse time; the database would otherwise fail on it, after the budget is charged)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if not (isinstance(node, exp.Literal) and node.is_string):
        return
    text = node.name.strip()
    ok = True
    if target is SqlType.NUMERIC:
        try:
            float(text)
        except ValueError:
            ok = False
    elif target is SqlType.DATE:
        try:
            datetime.date.fromisoformat(text)
        except ValueError:
            ok = False
    elif target is SqlType.BOOLEAN:
        ok = text.lower() in _BOOLEAN_WORDS
    if not ok:
        raise InvalidTextRepresentation(
            f'invalid input syntax for type {target.value}: "{node.name}"'
        )


def _compatible(a: SqlType, b: SqlType) -> bool:
    if SqlType.NULL in (a, b) or SqlType.UNKNOWN in (a, b):
        return True
    return a is b


def _unify(types: list[SqlType], what: str) -> SqlType:
    known = [t for t in types if t not in (SqlType.NULL, SqlType.UNKNOWN)]
    for t in known[1:]:
        if t is not known[0]:
            raise DatatypeMismatch(f"{what} types {known[0].value} and {t.value} cannot be matched")
    if known:
        return known[0]
    return SqlType.UNKNOWN if SqlType.UNKNOWN in types else SqlType.NULL


def _expect(t: SqlType, want: SqlType, node: exp.Expression) -> None:
    if t not in (want, SqlType.NULL) and not (t is SqlType.UNKNOWN and want is SqlType.TEXT):
        raise DatatypeMismatch(
            f"{node.sql('postgres')} needs {want.value} operands, got {t.value}",
            hint="use CASE WHEN ... THEN 1 ELSE 0 END to turn a condition into a number"
            if t is SqlType.BOOLEAN and want is SqlType.NUMERIC
            else None,
        )


def type_of(node: exp.Expression, column_type: dict[str, SqlType]) -> SqlType:
    """The type of a row-level expression over base columns; refuses anything not listed.

    >>> type_of(exp.maybe_parse("age + 1 > 40"), {"age": SqlType.NUMERIC}).value
    'boolean'
    """

    def t(n: exp.Expression) -> SqlType:
        return type_of(n, column_type)

    if isinstance(node, exp.Paren):
        return t(node.this)
    if isinstance(node, exp.Column):
        return column_type[node.name]
    if isinstance(node, exp.Literal):
        return SqlType.UNKNOWN if node.is_string else SqlType.NUMERIC
    if isinstance(node, exp.Boolean):
        return SqlType.BOOLEAN
    if isinstance(node, exp.Null):
        return SqlType.NULL
    if isinstance(node, ARITHMETIC):
        for side in (node.this, node.expression):
            _expect(t(side), SqlType.NUMERIC, node)
        return SqlType.NUMERIC
    if isinstance(node, exp.Neg):
        _expect(t(node.this), SqlType.NUMERIC, node)
        return SqlType.NUMERIC
    if isinstance(node, COMPARISONS):
        a, b = t(node.this), t(node.expression)
        check_literal(node.expression, a)
        check_literal(node.this, b)
        if not _compatible(a, b):
            raise UndefinedFunction(
                f"operator does not exist: {a.value} {node.key} {b.value}",
                hint="compare values of the same type, or CAST one side",
            )
        return SqlType.BOOLEAN
    if isinstance(node, exp.And | exp.Or):
        _expect(t(node.this), SqlType.BOOLEAN, node)
        _expect(t(node.expression), SqlType.BOOLEAN, node)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Not):
        _expect(t(node.this), SqlType.BOOLEAN, node)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Is):
        t(node.this)
        return SqlType.BOOLEAN
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest"):
            raise UnsupportedQuery("subqueries inside expressions are not supported")
        lhs = t(node.this)
        for item in node.expressions:
            check_literal(item, lhs)
            if not _compatible(lhs, t(item)):
                raise DatatypeMismatch(f"IN list of {node.sql('postgres')} has mismatched types")
        return SqlType.BOOLEAN
    if isinstance(node, exp.Between):
        target = _unify([t(node.this), t(node.args["low"]), t(node.args["high"])], "BETWEEN")
        for part in (node.this, node.args["low"], node.args["high"]):
            check_literal(part, target)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Like | exp.ILike):
        _expect(t(node.this), SqlType.TEXT, node)
        _expect(t(node.expression), SqlType.TEXT, node)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Case):
        if node.this is not None:
            raise UnsupportedQuery("write CASE WHEN x = v THEN ... rather than CASE x WHEN v")
        results = []
        for when in node.args.get("ifs") or []:
            _expect(t(when.this), SqlType.BOOLEAN, when.this)
            results.append(t(when.args["true"]))
        if node.args.get("default") is not None:
            results.append(t(node.args["default"]))
        return _unify(results, "CASE")
    if isinstance(node, exp.If):
        _expect(t(node.this), SqlType.BOOLEAN, node)
        parts = [t(node.args["true"])]
        if node.args.get("false") is not None:
            parts.append(t(node.args["false"]))
        return _unify(parts, "IF")
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return _unify([t(node.this), *(t(e) for e in node.expressions)], node.key.upper())
    if isinstance(node, exp.Nullif):
        return _unify([t(node.this), t(node.expression)], "NULLIF")
    if isinstance(node, NUMERIC_FUNCS):
        _expect(t(node.this), SqlType.NUMERIC, node)
        digits = node.args.get("decimals")
        if digits is not None and not (isinstance(digits, exp.Literal) and not digits.is_string):
            raise UnsupportedQuery("ROUND takes a literal number of digits")
        return SqlType.NUMERIC
    if isinstance(node, TEXT_FUNCS):
        _expect(t(node.this), SqlType.TEXT, node)
        return SqlType.TEXT
    if isinstance(node, exp.Length):
        _expect(t(node.this), SqlType.TEXT, node)
        return SqlType.NUMERIC
    if isinstance(node, exp.Substring):
        _expect(t(node.this), SqlType.TEXT, node)
        for key in ("start", "length"):
            arg = node.args.get(key)
            if arg is not None and not (isinstance(arg, exp.Literal) and not arg.is_string):
                raise UnsupportedQuery("SUBSTRING takes literal positions")
        return SqlType.TEXT
    if isinstance(node, exp.DPipe):
        t(node.this)
        t(node.expression)
        return SqlType.TEXT
    if isinstance(node, exp.Cast | exp.TryCast):
        src = t(node.this)
        dst = cast_type(node.to)
        if src is SqlType.DATE and dst is SqlType.NUMERIC:
            raise DatatypeMismatch("cannot cast a date to a number")
        return dst
    if isinstance(node, exp.Extract):
        _expect(t(node.expression), SqlType.DATE, node)
        return SqlType.NUMERIC
    raise_unsupported(node)
    raise AssertionError("unreachable")


_NONDETERMINISTIC = (exp.Rand, exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime)
_SYSTEM = (exp.CurrentUser, exp.CurrentVersion)


def raise_unsupported(node: exp.Expression) -> None:
    """Refuse an expression node that is not in the supported row-level subset."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name.startswith(("pg_", "current_", "set_config", "version", "inet_")):
            raise UndefinedFunction(f"function {name}() is not available through dpproxy")
        raise UndefinedFunction(
            f"function {name}() is not supported",
            hint="see the README for the functions dpproxy can analyse",
        )
    if isinstance(node, _NONDETERMINISTIC):
        raise UnsupportedQuery(
            f"{node.sql('postgres')} is not deterministic and cannot be used in a private query"
        )
    if isinstance(node, _SYSTEM):
        raise UndefinedFunction(f"{node.sql('postgres')} is not available through dpproxy")
    if isinstance(node, exp.Subquery | exp.Exists | exp.Select):
        raise UnsupportedQuery("subqueries inside expressions are not supported")
    if isinstance(node, exp.Window):
        raise UnsupportedQuery("window functions are not supported")
    if isinstance(node, exp.AggFunc):
        raise UnsupportedQuery(f"the aggregate {node.key.upper()} is not allowed here")
    if isinstance(node, exp.Func):
        raise UndefinedFunction(f"function {node.sql_name().lower()}() is not supported")
    raise UnsupportedQuery(f"unsupported expression: {node.sql('postgres')[:80]}")
