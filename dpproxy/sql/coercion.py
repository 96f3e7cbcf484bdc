"""How PostgreSQL resolves operands that meet a type, for :func:`dpproxy.sql.types.type_of`.

A string literal is of the *unknown* type and reads as a constant of the type it meets (22P02
when it does not); a number literal must be a finite double (22003); the branches of CASE,
COALESCE, IN or BETWEEN unify to one type (42804); an operator's operands must be of the type it
takes (42804), and not all untyped NULLs (42725).
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable

from sqlglot import exp

from dpproxy.errors import (
    AmbiguousFunction,
    DatatypeMismatch,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
)
from dpproxy.sql.sqltype import SqlType

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


def string_literal(node: exp.Expression) -> exp.Literal | None:
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
    literal = string_literal(node)
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


def compatible(a: SqlType, b: SqlType) -> bool:
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


def unify_all(
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


def expect(t: SqlType, want: SqlType, node: exp.Expression) -> None:
    if t not in (want, SqlType.NULL) and not (t is SqlType.UNKNOWN and want is SqlType.TEXT):
        raise DatatypeMismatch(
            f"{node.sql('postgres')} needs {want.value} operands, got {t.value}",
            hint="use CASE WHEN ... THEN 1 ELSE 0 END to turn a condition into a number"
            if t is SqlType.BOOLEAN and want is SqlType.NUMERIC
            else None,
        )


def not_all_null(operands: list[SqlType], node: exp.Expression) -> None:
    """PostgreSQL cannot resolve an operator whose operands are all untyped NULLs (``- NULL``,
    ``NULL + NULL``, ``EXTRACT(YEAR FROM NULL)``): it fails when the statement runs, after the
    query is charged; refused here on both engines (42725), as PostgreSQL does."""
    if all(o is SqlType.NULL for o in operands):
        raise AmbiguousFunction(
            f"operator is not unique: {node.sql('postgres')[:60]}",
            hint="CAST the NULL to a type: CAST(NULL AS DOUBLE PRECISION)",
        )
