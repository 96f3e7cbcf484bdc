"""Math functions over released values: ``SQRT(VAR_POP(age))``, ``EXP(AVG(LN(x)))``,
``LOG(SUM(w))``, ``LOG(2, COUNT(*))``, ``POWER(AVG(x), 0.5)``, ``CBRT``, ``SIGN``, ``PI()``,
``ROUND(AVG(x), -3)``, ``TRUNC(AVG(x), 1)``.

A function applied over an aggregate (in the select list, HAVING, ORDER BY or a window over the
released rows) is computed by dpproxy on the released, noisy value (``release/functions.py``),
never by the database. **Privacy argument:** its value is a function of released values only —
post-processing of a differentially private release — so it costs nothing and protects as much
as the release. **Totality:** PostgreSQL raises for ``SQRT`` of a negative number, ``LN``/``LOG``
of zero or a negative number, ``LOG`` to a base of 1, ``POWER(0, negative)``, a negative number
to a fractional power, and on overflow. The released value carries noise, so an error there
would be an outcome decided by data; dpproxy decides on the released value alone and gives
NULL instead: *a function over a released value that is outside its domain gives NULL*, as does
a result beyond the range of a double. The query is typed statically here (arguments must be
numeric, 42804; a ROUND's digits a literal whole number, 0A000), so the evaluation never meets
a type error.

Inside an aggregate or a group key (over private rows) the row-level rules of
``sql/types.py``/``sql/totality.py`` apply instead: there these functions are printed into the
database's SQL with their domain guards, and ``CBRT``, ``LOG(b, x)`` and fractional powers stay
refused.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpproxy.errors import DatatypeMismatch, NumericValueOutOfRange, UnsupportedQuery
from dpproxy.sql.sqltype import SqlType
from dpproxy.sql.totality import user_name

# isinstance tuples built once: ``A | B`` written in the call builds a union of sqlglot
# classes at every call, a microsecond each (issue 21); a tuple tests the same classes
_ROUND_TRUNC = (exp.Round, exp.Trunc)

#: Functions that post-processing computes on released values (``release/functions.py``).
POST_FUNCS: tuple[type[exp.Expression], ...] = (
    exp.Sqrt,
    exp.Cbrt,
    exp.Ln,
    exp.Log,
    exp.Exp,
    exp.Pow,
    exp.Sign,
    exp.Pi,
    exp.Trunc,
)
MAX_DIGITS = 300  # |digits| of ROUND over a released value: 10^digits must be a double


def digits_of(node: exp.Expression | None) -> int | None:
    """A ROUND's digits as written: a whole-number literal, possibly negative, else None.

    >>> digits_of(exp.maybe_parse("-3"))
    -3
    """
    negative = isinstance(node, exp.Neg)
    value = node.this if isinstance(node, exp.Neg) else node
    while isinstance(value, exp.Paren):
        value = value.this
    if not (isinstance(value, exp.Literal) and not value.is_string and value.name.isdigit()):
        return None
    return -int(value.name) if negative else int(value.name)


def post_type(node: exp.Expression, t: Callable[[exp.Expression], SqlType]) -> SqlType | None:
    """The type of ``node`` when post-processing computes it (a function of
    :data:`POST_FUNCS`, or ROUND with literal digits), else None (the row-level rules apply).
    Arguments must be numeric (42804)."""
    if isinstance(node, _ROUND_TRUNC):
        d = node.args.get("decimals")
        if d is None and isinstance(node, exp.Round):
            return None
        name = "ROUND" if isinstance(node, exp.Round) else "TRUNC"
        digits = digits_of(d) if d is not None else 0
        if digits is None:
            raise UnsupportedQuery(
                f"{name} takes a literal whole number of digits", hint=f"e.g. {name}(AVG(x), -3)"
            )
        if abs(digits) > MAX_DIGITS:
            raise NumericValueOutOfRange(f"{name} takes at most {MAX_DIGITS} digits")
        _numeric(node.this, t, node)
        return SqlType.NUMERIC
    if not isinstance(node, POST_FUNCS):
        return None
    for key in ("this", "expression"):
        arg = node.args.get(key)
        if isinstance(arg, exp.Expression):
            _numeric(arg, t, node)
    return SqlType.NUMERIC


def _numeric(
    arg: exp.Expression, t: Callable[[exp.Expression], SqlType], node: exp.Expression
) -> None:
    got = t(arg)
    if got not in (SqlType.NUMERIC, SqlType.NULL):
        raise DatatypeMismatch(
            f"function {user_name(node)}() needs numeric arguments, not {got.value}"
        )
