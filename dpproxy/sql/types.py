"""The typed, total expression layer: static types of row-level expressions.

**Invariant.** An accepted query's rewritten SQL cannot fail on any database that satisfies
the schema, on either engine (DuckDB, PostgreSQL). An error raised by the database for one
row's value would be an output that no noise covers: one exact bit about one person. So every
expression over private data is decided from the query and the schema alone, before any data
is touched:

* **typed** here by PostgreSQL's rules on both engines: a mismatch is a 42804/42883 refusal,
  never an engine error. String literals are PostgreSQL's *unknown* type: where one meets a
  typed value (a comparison, IN, BETWEEN, a CASE branch, COALESCE, GREATEST, LEAST, NULLIF)
  it is converted *here* (:mod:`dpproxy.sql.coercion`) to a constant of that type (a number,
  ``CAST('…' AS DATE)``, TRUE or FALSE), or refused with 22P02 — so no engine ever coerces a
  string per row;
  ``IS`` takes only NULL, TRUE and FALSE (42601); number literals must be finite doubles
  (22003);
* **built only from the allowlist** of :mod:`dpproxy.sql.totality`, where every operation
  has its written totality argument (42883 for anything else);
* **range-checked** in the rewrite: integer and DECIMAL arithmetic is computed as DOUBLE
  (:mod:`dpproxy.rewrite.guard`), and DOUBLE arithmetic whose magnitudes could overflow is
  tamed or refused up front (:mod:`dpproxy.rewrite.floats`); divisions get ``NULLIF``, casts
  are guarded (:mod:`dpproxy.rewrite.dialect`).

``tests/property/test_totality.py`` checks the invariant on adversarial databases on both
engines; ``tests/attacks/test_data_dependent_errors.py`` names each family of attacks.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

from sqlglot import exp

from dpproxy.catalog.model import ColumnType
from dpproxy.errors import (
    DatatypeMismatch,
    NumericValueOutOfRange,
    SQLSyntaxError,
    UndefinedFunction,
    UnsupportedQuery,
)
from dpproxy.sql import dates
from dpproxy.sql.buckets import width_bucket_type
from dpproxy.sql.casts import cast_type as cast_type  # re-exported for its callers
from dpproxy.sql.coercion import (
    check_number,
    coerce_literal,
    compatible,
    expect,
    not_all_null,
    string_literal,
    typed_constant,
    unify_all,
)
from dpproxy.sql.exact import fold_exact
from dpproxy.sql.mathargs import EXP_LIMIT as EXP_LIMIT
from dpproxy.sql.mathargs import MAX_POWER as MAX_POWER
from dpproxy.sql.mathargs import POWER_RANGE as POWER_RANGE
from dpproxy.sql.mathargs import log_base, math_operand, power_exponent
from dpproxy.sql.mathargs import power_limits as power_limits
from dpproxy.sql.postmath import digits_of
from dpproxy.sql.sqltype import SqlType as SqlType  # re-exported: its home for most modules
from dpproxy.sql.tochar import to_char_type
from dpproxy.sql.totality import user_name

# isinstance tuples built once: ``A | B`` written in the call builds a union of sqlglot
# classes at every call, a microsecond each (issue 21); a tuple tests the same classes
_AND_OR = (exp.And, exp.Or)
_LIKES = (exp.Like, exp.ILike)
_PICKS = (exp.Coalesce, exp.Greatest, exp.Least)
_CASTS = (exp.Cast, exp.TryCast)
_TEXT_FUNCTIONS = (exp.StrPosition, exp.Left, exp.Right, exp.Replace)
_CONSTANTS = (exp.Literal, exp.Neg, exp.Boolean)
_NAMES = (exp.Var, exp.Identifier)
_TRUNCATIONS = (exp.TimestampTrunc, exp.DateTrunc)

_E = typing.TypeVar("_E", bound=exp.Expression)


def clone(node: _E) -> _E:
    """``node.copy()`` without :func:`copy.deepcopy`'s bookkeeping (a memo dict and a
    keep-alive list per call, for sharing that a sqlglot tree never has): the same call of
    sqlglot's ``__deepcopy__``, the same tree. Planning one query copies trees dozens of times.
    """
    return typing.cast(_E, node.__deepcopy__({}))


COLUMN_TYPES = {
    ColumnType.INTEGER: SqlType.NUMERIC,
    ColumnType.FLOAT: SqlType.NUMERIC,
    ColumnType.TEXT: SqlType.TEXT,
    ColumnType.BOOLEAN: SqlType.BOOLEAN,
    ColumnType.DATE: SqlType.DATE,
}


ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_SYMBOL: dict[type[exp.Expression], str] = {  # as the analyst wrote them, for messages
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "IS NOT DISTINCT FROM",
    exp.NullSafeNEQ: "IS DISTINCT FROM",
}
NUMERIC_FUNCS = (exp.Abs, exp.Round, exp.Floor, exp.Ceil)
TEXT_FUNCS = (exp.Lower, exp.Upper, exp.Trim)
MATH_FUNCS = (exp.Sqrt, exp.Cbrt, exp.Ln, exp.Log, exp.Exp, exp.Sign)


def _text_function(node: exp.Expression, t: Callable[[exp.Expression], SqlType]) -> SqlType:
    """``STRPOS(s, t)``/``POSITION(t IN s)`` (an integer) and ``LEFT``/``RIGHT(s, n)`` with a
    literal n: |n| < 2^31 (PostgreSQL's integer; DuckDB raises beyond 2^32); ``REPLACE(s, a,
    b)`` of literals with b no longer than a in UTF-8 bytes (the result is never longer than s,
    so PostgreSQL's 1 GB limit cannot be reached)."""
    expect(t(node.this), SqlType.TEXT, node)
    if isinstance(node, exp.Replace):
        a, b = node.expression, node.args.get("replacement")
        if not (
            isinstance(a, exp.Literal)
            and a.is_string
            and isinstance(b, exp.Literal)
            and b.is_string
        ):
            raise UnsupportedQuery(
                "REPLACE takes string literals to find and to put instead",
                hint="e.g. REPLACE(s, '-', ' ')",
            )
        if len(b.name.encode()) > len(a.name.encode()):
            raise UnsupportedQuery(
                "REPLACE with a replacement longer than the text it replaces is not supported",
                hint="a replacement may not make the text longer; compare with LIKE instead",
            )
        return SqlType.TEXT
    if isinstance(node, exp.StrPosition):
        if any(node.args.get(k) is not None for k in ("position", "occurrence")):
            raise UnsupportedQuery("STRPOS takes two arguments")
        expect(t(node.args["substr"]), SqlType.TEXT, node)
        return SqlType.NUMERIC
    n = node.expression
    inner = n.this if isinstance(n, exp.Neg) else n
    name = user_name(node).upper()
    if not (isinstance(inner, exp.Literal) and not inner.is_string and inner.name.isdigit()):
        raise UnsupportedQuery(
            f"{name} takes a literal whole number of characters",
            hint=f"e.g. {name}(s, 3); a negative count means all but that many",
        )
    if int(inner.name) >= 2**31:
        raise NumericValueOutOfRange(f"{name} count {inner.name[:20]} is out of range")
    return SqlType.TEXT


#: Types a node that only post-processing evaluates (``sql/postmath.py``), else None.
PostTyper = Callable[[exp.Expression, Callable[[exp.Expression], SqlType]], "SqlType | None"]


def type_of(
    node: exp.Expression, column_type: dict[str, SqlType], post: PostTyper | None = None
) -> SqlType:
    """The type of a row-level expression over base columns; refuses anything not listed.
    ``post`` types the functions that post-processing computes on released values (and that
    never reach a database) before the row-level rules apply.

    >>> type_of(exp.maybe_parse("age + 1 > 40"), {"age": SqlType.NUMERIC}).value
    'boolean'
    """

    def t(n: exp.Expression) -> SqlType:
        return type_of(n, column_type, post)

    if post is not None and (post_typed := post(node, t)) is not None:
        return post_typed
    if isinstance(node, exp.Paren):
        return t(node.this)
    if isinstance(node, exp.Column):
        return column_type[node.name]
    if isinstance(node, exp.Literal):
        if node.is_string:
            return SqlType.UNKNOWN
        check_number(node)
        return SqlType.NUMERIC
    if isinstance(node, exp.Boolean):
        return SqlType.BOOLEAN
    if isinstance(node, exp.Null):
        return SqlType.NULL
    if isinstance(node, exp.CurrentDate):  # a public constant: today in UTC, when planned
        if node.parent is not None:
            node.replace(dates.today())
        return SqlType.DATE
    if isinstance(node, ARITHMETIC):
        a, b = dates.operand_type(node.this, t), dates.operand_type(node.expression, t)
        if a is None or b is None or SqlType.DATE in (a, b):  # an interval or a date
            return dates.date_arithmetic(node, a, b)
        operands = [a, b]
        for operand_type in operands:
            expect(operand_type, SqlType.NUMERIC, node)
        not_all_null(operands, node)
        fold_exact(node)  # 0.06 + 0.01 is 0.07, as PostgreSQL's numeric reads it
        return SqlType.NUMERIC
    if isinstance(node, exp.Neg):
        operand = t(node.this)
        expect(operand, SqlType.NUMERIC, node)
        not_all_null([operand], node)
        return SqlType.NUMERIC
    if isinstance(node, COMPARISONS):
        a, b = t(node.this), t(node.expression)
        coerce_literal(node.expression, a)
        coerce_literal(node.this, b)
        if not compatible(a, b):
            raise UndefinedFunction(
                f"operator does not exist: {a.value} {_SYMBOL.get(type(node), node.key)} {b.value}",
                hint="compare values of the same type, or CAST one side",
            )
        return SqlType.BOOLEAN
    if isinstance(node, _AND_OR):
        expect(t(node.this), SqlType.BOOLEAN, node)
        expect(t(node.expression), SqlType.BOOLEAN, node)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Not):
        expect(t(node.this), SqlType.BOOLEAN, node)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Is):
        operand = t(node.this)
        rhs = node.expression
        if isinstance(rhs, exp.Boolean):
            if operand not in (SqlType.BOOLEAN, SqlType.NULL):
                raise DatatypeMismatch(
                    f"argument of IS {rhs.sql().upper()} must be type boolean, not {operand.value}"
                )
        elif not isinstance(rhs, exp.Null):
            raise SQLSyntaxError(
                f"syntax error at or near {rhs.sql('postgres')[:40]}",
                hint="IS takes NULL, TRUE or FALSE; compare values with = or IS NOT DISTINCT FROM",
            )
        return SqlType.BOOLEAN
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest"):
            raise UnsupportedQuery("subqueries inside expressions are not supported")
        lhs = t(node.this)
        for item in node.expressions:
            if not compatible(lhs, t(item)):
                raise DatatypeMismatch(f"IN list of {node.sql('postgres')} has mismatched types")
        unify_all([node.this, *node.expressions], "IN", t)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Between):
        unify_all([node.this, node.args["low"], node.args["high"]], "BETWEEN", t)
        return SqlType.BOOLEAN
    if isinstance(node, _LIKES):
        expect(t(node.this), SqlType.TEXT, node)
        expect(t(node.expression), SqlType.TEXT, node)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Case):
        if node.this is not None:
            raise UnsupportedQuery("write CASE WHEN x = v THEN ... rather than CASE x WHEN v")
        results = []
        for when in node.args.get("ifs") or []:
            expect(t(when.this), SqlType.BOOLEAN, when.this)
            results.append(when.args["true"])
        if node.args.get("default") is not None:
            results.append(node.args["default"])
        return unify_all(results, "CASE", t)
    if isinstance(node, exp.If):
        expect(t(node.this), SqlType.BOOLEAN, node)
        parts = [node.args["true"]]
        if node.args.get("false") is not None:
            parts.append(node.args["false"])
        return unify_all(parts, "IF", t)
    if isinstance(node, _PICKS):
        return unify_all([node.this, *node.expressions], node.key.upper(), t)
    if isinstance(node, exp.Nullif):
        return unify_all([node.this, node.expression], "NULLIF", t)
    if isinstance(node, exp.Pi):
        return SqlType.NUMERIC
    if isinstance(node, exp.Pow):  # guarded to |x^p| <= 1e150 in rewrite/domains.py
        n = node.expression
        if power_exponent(node) is None:
            raise UndefinedFunction(
                f"function power() with exponent {n.sql('postgres')[:20]} is not supported",
                hint=f"POWER(x, p) and x ^ p take a constant p: a whole number from 1 to "
                f"{MAX_POWER}, or a fraction with 0 < |p| <= {MAX_POWER} (x^-1: write 1 / x)",
            )
        operand = t(node.this)
        expect(operand, SqlType.NUMERIC, node)
        not_all_null([operand], node)
        return SqlType.NUMERIC
    if isinstance(node, exp.TimeToStr):  # TO_CHAR(date, 'YYYY-MM') (sql/tochar.py)
        return to_char_type(node, t)
    if isinstance(node, exp.WidthBucket):  # printed as comparisons (sql/buckets.py)
        return width_bucket_type(node, t)
    if isinstance(node, MATH_FUNCS):  # guarded to their domains in rewrite/domains.py
        if isinstance(node, exp.Log):
            log_base(node)  # a literal base b > 0, b ≠ 1, or none
        operand = t(math_operand(node))
        expect(operand, SqlType.NUMERIC, node)
        not_all_null([operand], node)
        return SqlType.NUMERIC
    if isinstance(node, NUMERIC_FUNCS):
        expect(t(node.this), SqlType.NUMERIC, node)
        digits = node.args.get("decimals")
        if isinstance(digits, exp.Neg):  # ROUND(x, -3): to thousands (rewrite/guard.py)
            negative = digits_of(digits)
            if negative is None:
                raise UnsupportedQuery("ROUND takes a literal whole number of digits")
            if negative < -300:
                raise NumericValueOutOfRange("ROUND takes at most 300 digits")
            return SqlType.NUMERIC
        if digits is not None and not (isinstance(digits, exp.Literal) and not digits.is_string):
            raise UnsupportedQuery("ROUND takes a literal number of digits")
        if digits is not None and not float(digits.name) <= 300:  # 10^d must be a double
            raise NumericValueOutOfRange("ROUND takes at most 300 digits")
        return SqlType.NUMERIC
    if isinstance(node, TEXT_FUNCS):
        expect(t(node.this), SqlType.TEXT, node)
        return SqlType.TEXT
    if isinstance(node, exp.Length):
        expect(t(node.this), SqlType.TEXT, node)
        return SqlType.NUMERIC
    if isinstance(node, _TEXT_FUNCTIONS):
        return _text_function(node, t)
    if isinstance(node, exp.Substring):
        expect(t(node.this), SqlType.TEXT, node)
        for key in ("start", "length"):
            arg = node.args.get(key)
            if arg is not None and not (isinstance(arg, exp.Literal) and not arg.is_string):
                raise UnsupportedQuery("SUBSTRING takes literal positions")
            if arg is not None and not float(arg.name) < 2**31:  # PostgreSQL's integer
                raise NumericValueOutOfRange(f"SUBSTRING {key} {arg.name[:20]} is out of range")
        return SqlType.TEXT
    if isinstance(node, exp.DPipe):
        sides = (t(node.this), t(node.expression))
        if not any(s in (SqlType.TEXT, SqlType.UNKNOWN, SqlType.NULL) for s in sides):
            raise UndefinedFunction(
                f"operator does not exist: {sides[0].value} || {sides[1].value}",
                hint="CAST one side to TEXT",
            )
        return SqlType.TEXT
    if isinstance(node, _CASTS):
        src = t(node.this)
        dst = cast_type(node.to)
        if src is SqlType.UNKNOWN:  # a cast of a literal is read here (22P02), never per row
            literal = string_literal(node.this)
            typed = typed_constant(literal.name, dst) if literal is not None else None
            if literal is not None and typed is None and dst is not SqlType.TEXT:
                coerce_literal(literal, dst)  # raises 22P02
            if literal is not None and isinstance(typed, _CONSTANTS):
                literal.replace(typed)  # a number or a boolean; a date stays CAST('…' AS DATE)
        if src is SqlType.DATE and dst is SqlType.NUMERIC:
            raise DatatypeMismatch("cannot cast a date to a number")
        return dst
    if isinstance(node, exp.Extract):
        source = t(node.expression)
        expect(source, SqlType.DATE, node)
        not_all_null([source], node)
        unit = node.this.name.lower() if isinstance(node.this, _NAMES) else ""
        if unit not in _DATE_FIELDS:  # PostgreSQL raises per row for time fields of a date
            raise UnsupportedQuery(
                f'unit "{unit or node.this.sql()}" not supported for type date',
                hint="fields of a date: " + ", ".join(sorted(_DATE_FIELDS)),
            )
        return SqlType.NUMERIC
    if isinstance(node, _TRUNCATIONS):
        return dates.truncation(node, t(node.this))
    if isinstance(node, exp.DateAdd):  # built from date ± interval by dates.date_arithmetic
        expect(t(node.this), SqlType.DATE, node)
        return SqlType.DATE
    if isinstance(node, exp.DateDiff):  # built from date - date by dates.date_arithmetic
        expect(t(node.this), SqlType.DATE, node)
        expect(t(node.expression), SqlType.DATE, node)
        return SqlType.NUMERIC
    if isinstance(node, exp.Interval):
        dates.interval_shift(node)  # refuses time units first
        raise UnsupportedQuery(
            f"{node.sql('postgres')[:60]} is supported only added to or subtracted from a date",
            hint="write DATE '1998-12-01' - INTERVAL '90' DAY",
        )
    raise_unsupported(node)
    raise AssertionError("unreachable")


# EXTRACT fields of a date on which DuckDB and PostgreSQL agree (both count DOW from Sunday).
_DATE_FIELDS = frozenset(
    {"year", "month", "day", "quarter", "week", "dow", "doy", "isodow", "isoyear", "decade"}
    | {"century", "millennium"}
)
_NONDETERMINISTIC = (exp.Rand, exp.CurrentTimestamp, exp.CurrentTime)
_SYSTEM = (exp.CurrentUser, exp.CurrentVersion)


def raise_unsupported(node: exp.Expression) -> None:
    """Refuse an expression node that is not in the supported row-level subset."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name.startswith(("pg_", "current_", "set_config", "version", "inet_")):
            raise UndefinedFunction(f"function {name}() is not available through dpproxy")
        raise UndefinedFunction(
            f"function {name}() is not supported",
            hint="docs/sql.md (Supported SQL) lists the functions dpproxy can analyse",
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
        raise UndefinedFunction(f"function {user_name(node)}() is not supported")
    raise UnsupportedQuery(f"unsupported expression: {node.sql('postgres')[:80]}")
