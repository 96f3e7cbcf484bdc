"""The typed, total expression layer: static types of row-level expressions.

**Invariant.** An accepted query's rewritten SQL cannot fail on any database that satisfies
the schema, on either engine (DuckDB, PostgreSQL). An error raised by the database for one
row's value would be an output that no noise covers: one exact bit about one person. So every
expression over private data is decided from the query and the schema alone, before any data
is touched:

* **typed** here by PostgreSQL's rules on both engines: a mismatch is a 42804/42883 refusal,
  never an engine error. String literals are PostgreSQL's *unknown* type: where one meets a
  typed value (a comparison, IN, BETWEEN, a CASE branch, COALESCE, GREATEST, LEAST, NULLIF)
  it is converted *here* to a constant of that type (a number, ``CAST('…' AS DATE)``, TRUE
  or FALSE), or refused with 22P02 — so no engine ever coerces a string per row;
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

import datetime
import math
import re
import typing
from collections.abc import Callable

from sqlglot import exp

from dpproxy.catalog.model import ColumnType
from dpproxy.errors import (
    AmbiguousFunction,
    DatatypeMismatch,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    SQLSyntaxError,
    UndefinedFunction,
    UnsupportedQuery,
)
from dpproxy.sql import dates
from dpproxy.sql.buckets import width_bucket_type
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
    _expect(t(node.this), SqlType.TEXT, node)
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
        _expect(t(node.args["substr"]), SqlType.TEXT, node)
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


def _check_type_parameters(to: exp.DataType) -> None:
    """Type parameters both engines read alike, or 0A000 before any data is read: DECIMAL(p)
    and DECIMAL(p, s) with 1 <= p <= 38, s <= 18 and p - s <= 20 (DuckDB meets it and an
    integer or a literal in DECIMAL(38, s) at most: ``CAST(x AS DECIMAL(38, 37)) = i`` failed
    for one row's i >= 10), none on other numeric types: ``FLOAT(p)`` is REAL for p <= 24 on
    PostgreSQL (a double beyond 3.4e38 fails to cast) and, like ``INT(n)``, a binder error
    on DuckDB."""
    params = to.expressions
    if not params or to.this not in _NUMERIC_CASTS:
        return
    name = to.sql("postgres")
    values = [p.this for p in params]
    if to.this is not exp.DataType.Type.DECIMAL:
        raise UnsupportedQuery(
            f"casts to {name} are not supported",
            hint="write REAL, DOUBLE PRECISION or an integer type without a parameter",
        )
    digits = [int(v.name) for v in values if isinstance(v, exp.Literal) and v.name.isdigit()]
    precision, scale = [*digits, 0][:2] if digits else (0, 0)
    if len(digits) != len(values) or len(values) > 2 or not 0 <= scale <= precision:
        precision = 0
    if not 1 <= precision <= 38 or scale > 18 or precision - scale > 20:
        raise UnsupportedQuery(
            f"casts to {name} are not supported",
            hint="DECIMAL(p, s) takes 1 <= p <= 38, 0 <= s <= 18 and p - s <= 20",
        )


def cast_type(to: exp.DataType) -> SqlType:
    t = to.this
    _check_type_parameters(to)
    if t in _NUMERIC_CASTS:
        return SqlType.NUMERIC
    if t in _TEXT_CASTS:
        return SqlType.TEXT
    if t is exp.DataType.Type.BOOLEAN:
        return SqlType.BOOLEAN
    if t is exp.DataType.Type.DATE:
        return SqlType.DATE
    raise UnsupportedQuery(f"casts to {to.sql('postgres')} are not supported")


_TRUE_WORDS = {"t", "true", "y", "yes", "on", "1"}
_FALSE_WORDS = {"f", "false", "n", "no", "off", "0"}
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL_FLOATS = {
    "nan": "NaN",
    "infinity": "Infinity",
    "+infinity": "Infinity",
    "inf": "Infinity",
    "+inf": "Infinity",
    "-infinity": "-Infinity",
    "-inf": "-Infinity",
}
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _string_literal(node: exp.Expression) -> exp.Literal | None:
    while isinstance(node, exp.Paren):
        node = node.this
    return node if isinstance(node, exp.Literal) and node.is_string else None


def typed_constant(text: str, target: SqlType) -> exp.Expression | None:
    """The constant of type ``target`` that a string literal stands for (PostgreSQL reads an
    *unknown* literal as the type it meets), or ``None`` when it does not read as one.

    >>> typed_constant(" 12.5 ", SqlType.NUMERIC).sql()
    '12.5'
    >>> typed_constant("2024-02-29", SqlType.DATE).sql()
    "CAST('2024-02-29' AS DATE)"
    >>> typed_constant("2024-02-30", SqlType.DATE) is None
    True
    """
    t = text.strip()
    if target is SqlType.NUMERIC:
        if _NUMBER.fullmatch(t):
            negative = t.startswith("-")
            digits = t.lstrip("+-")
            if not math.isfinite(float(digits)):
                return None
            lit = exp.Literal(this=digits, is_string=False)
            return exp.Neg(this=lit) if negative else lit
        special = _SPECIAL_FLOATS.get(t.lower())
        if special is None:
            return None
        return exp.Cast(
            this=exp.Literal.string(special), to=exp.DataType(this=exp.DataType.Type.DOUBLE)
        )
    if target is SqlType.DATE:
        if not _ISO_DATE.fullmatch(t):
            return None
        try:
            day = datetime.date.fromisoformat(t)
        except ValueError:
            return None
        return exp.Cast(
            this=exp.Literal.string(day.isoformat()),
            to=exp.DataType(this=exp.DataType.Type.DATE),
        )
    if target is SqlType.BOOLEAN:
        if t.lower() in _TRUE_WORDS:
            return exp.Boolean(this=True)
        if t.lower() in _FALSE_WORDS:
            return exp.Boolean(this=False)
        return None
    return exp.Literal.string(text)


def coerce_literal(node: exp.Expression, target: SqlType) -> None:
    """A string literal meeting a value of type ``target`` becomes a constant of that type,
    in place, before any data is read; 22P02 when it does not read as one. Text targets and
    non-literals are left alone."""
    literal = _string_literal(node)
    if literal is None or target in (SqlType.TEXT, SqlType.UNKNOWN, SqlType.NULL):
        return
    typed = typed_constant(literal.name, target)
    if typed is None:
        hint = "write dates as YYYY-MM-DD" if target is SqlType.DATE else None
        raise InvalidTextRepresentation(
            f'invalid input syntax for type {target.value}: "{literal.name}"', hint=hint
        )
    if literal.parent is not None:
        literal.replace(typed)


def check_number(node: exp.Literal) -> None:
    """A number literal must be a finite double: every engine can then compute with it."""
    try:
        finite = math.isfinite(float(node.name))
    except ValueError:
        finite = False
    if not finite:
        raise NumericValueOutOfRange(
            f"the constant {node.name[:40]} is out of range for double precision",
            hint="constants must lie within ±1.7976931348623157e308",
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


def _unify_all(
    parts: list[exp.Expression], what: str, t: Callable[[exp.Expression], SqlType]
) -> SqlType:
    """Unify the types of ``parts`` and turn their string literals into constants of the
    common type (PostgreSQL's resolution of *unknown* literals in UNION/CASE/COALESCE)."""
    target = _unify([t(p) for p in parts], what)
    for p in parts:
        coerce_literal(p, target)
    if target in (SqlType.UNKNOWN, SqlType.NULL) and what not in ("IN", "BETWEEN"):
        # PostgreSQL resolves a CASE/COALESCE of string literals or NULLs alone as text
        # (``age = COALESCE(NULL, NULL)`` failed there after the query was charged)
        return SqlType.TEXT
    return target


def _expect(t: SqlType, want: SqlType, node: exp.Expression) -> None:
    if t not in (want, SqlType.NULL) and not (t is SqlType.UNKNOWN and want is SqlType.TEXT):
        raise DatatypeMismatch(
            f"{node.sql('postgres')} needs {want.value} operands, got {t.value}",
            hint="use CASE WHEN ... THEN 1 ELSE 0 END to turn a condition into a number"
            if t is SqlType.BOOLEAN and want is SqlType.NUMERIC
            else None,
        )


def _not_all_null(operands: list[SqlType], node: exp.Expression) -> None:
    """PostgreSQL cannot resolve an operator whose operands are all untyped NULLs (``- NULL``,
    ``NULL + NULL``, ``EXTRACT(YEAR FROM NULL)``): it fails when the statement runs, after the
    query is charged; refused here on both engines (42725), as PostgreSQL does."""
    if all(o is SqlType.NULL for o in operands):
        raise AmbiguousFunction(
            f"operator is not unique: {node.sql('postgres')[:60]}",
            hint="CAST the NULL to a type: CAST(NULL AS DOUBLE PRECISION)",
        )


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
            _expect(operand_type, SqlType.NUMERIC, node)
        _not_all_null(operands, node)
        fold_exact(node)  # 0.06 + 0.01 is 0.07, as PostgreSQL's numeric reads it
        return SqlType.NUMERIC
    if isinstance(node, exp.Neg):
        operand = t(node.this)
        _expect(operand, SqlType.NUMERIC, node)
        _not_all_null([operand], node)
        return SqlType.NUMERIC
    if isinstance(node, COMPARISONS):
        a, b = t(node.this), t(node.expression)
        coerce_literal(node.expression, a)
        coerce_literal(node.this, b)
        if not _compatible(a, b):
            raise UndefinedFunction(
                f"operator does not exist: {a.value} {_SYMBOL.get(type(node), node.key)} {b.value}",
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
            if not _compatible(lhs, t(item)):
                raise DatatypeMismatch(f"IN list of {node.sql('postgres')} has mismatched types")
        _unify_all([node.this, *node.expressions], "IN", t)
        return SqlType.BOOLEAN
    if isinstance(node, exp.Between):
        _unify_all([node.this, node.args["low"], node.args["high"]], "BETWEEN", t)
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
            results.append(when.args["true"])
        if node.args.get("default") is not None:
            results.append(node.args["default"])
        return _unify_all(results, "CASE", t)
    if isinstance(node, exp.If):
        _expect(t(node.this), SqlType.BOOLEAN, node)
        parts = [node.args["true"]]
        if node.args.get("false") is not None:
            parts.append(node.args["false"])
        return _unify_all(parts, "IF", t)
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return _unify_all([node.this, *node.expressions], node.key.upper(), t)
    if isinstance(node, exp.Nullif):
        return _unify_all([node.this, node.expression], "NULLIF", t)
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
        _expect(operand, SqlType.NUMERIC, node)
        _not_all_null([operand], node)
        return SqlType.NUMERIC
    if isinstance(node, exp.TimeToStr):  # TO_CHAR(date, 'YYYY-MM') (sql/tochar.py)
        return to_char_type(node, t)
    if isinstance(node, exp.WidthBucket):  # printed as comparisons (sql/buckets.py)
        return width_bucket_type(node, t)
    if isinstance(node, MATH_FUNCS):  # guarded to their domains in rewrite/domains.py
        if isinstance(node, exp.Log):
            log_base(node)  # a literal base b > 0, b ≠ 1, or none
        operand = t(math_operand(node))
        _expect(operand, SqlType.NUMERIC, node)
        _not_all_null([operand], node)
        return SqlType.NUMERIC
    if isinstance(node, NUMERIC_FUNCS):
        _expect(t(node.this), SqlType.NUMERIC, node)
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
        _expect(t(node.this), SqlType.TEXT, node)
        return SqlType.TEXT
    if isinstance(node, exp.Length):
        _expect(t(node.this), SqlType.TEXT, node)
        return SqlType.NUMERIC
    if isinstance(node, exp.StrPosition | exp.Left | exp.Right | exp.Replace):
        return _text_function(node, t)
    if isinstance(node, exp.Substring):
        _expect(t(node.this), SqlType.TEXT, node)
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
    if isinstance(node, exp.Cast | exp.TryCast):
        src = t(node.this)
        dst = cast_type(node.to)
        if src is SqlType.UNKNOWN:  # a cast of a literal is read here (22P02), never per row
            literal = _string_literal(node.this)
            typed = typed_constant(literal.name, dst) if literal is not None else None
            if literal is not None and typed is None and dst is not SqlType.TEXT:
                coerce_literal(literal, dst)  # raises 22P02
            if literal is not None and isinstance(typed, exp.Literal | exp.Neg | exp.Boolean):
                literal.replace(typed)  # a number or a boolean; a date stays CAST('…' AS DATE)
        if src is SqlType.DATE and dst is SqlType.NUMERIC:
            raise DatatypeMismatch("cannot cast a date to a number")
        return dst
    if isinstance(node, exp.Extract):
        source = t(node.expression)
        _expect(source, SqlType.DATE, node)
        _not_all_null([source], node)
        unit = node.this.name.lower() if isinstance(node.this, exp.Var | exp.Identifier) else ""
        if unit not in _DATE_FIELDS:  # PostgreSQL raises per row for time fields of a date
            raise UnsupportedQuery(
                f'unit "{unit or node.this.sql()}" not supported for type date',
                hint="fields of a date: " + ", ".join(sorted(_DATE_FIELDS)),
            )
        return SqlType.NUMERIC
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        return dates.truncation(node, t(node.this))
    if isinstance(node, exp.DateAdd):  # built from date ± interval by dates.date_arithmetic
        _expect(t(node.this), SqlType.DATE, node)
        return SqlType.DATE
    if isinstance(node, exp.DateDiff):  # built from date - date by dates.date_arithmetic
        _expect(t(node.this), SqlType.DATE, node)
        _expect(t(node.expression), SqlType.DATE, node)
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
