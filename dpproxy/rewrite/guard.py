"""Rules that make row-level expressions total: they can never raise a data-dependent error.

An error raised by the database for one row's value (a division by zero, a failed cast, an
integer overflow) would be an output that no noise covers. So, in every expression the
rewritten SQL evaluates per row:

* ``guard_row_expression``, in one bottom-up pass: ``a / b`` → ``a / NULLIF(b, 0)`` (also
  ``//`` and ``%``); ``CAST`` → ``TRY_CAST`` (NULL instead of an error), and from text only for
  strings in dpproxy's grammar (``rewrite/dialect.py``), which every backend parses alike; a
  cast to ``REAL`` → that value as a DOUBLE rounded to float32 (:mod:`dpproxy.rewrite.real`);
  every operand of arithmetic that is not statically DOUBLE (an integer or DECIMAL column,
  CASE, COALESCE, cast, LENGTH, EXTRACT — anything but a literal) is computed as DOUBLE, and
  so are the literals of arithmetic that has no DOUBLE operand (``2147483647 + 1``): integer
  and DECIMAL overflow, whose errors both engines raise, then cannot occur, and whatever the
  database's physical integer or float type (SMALLINT, REAL, ...) the arithmetic is the same
  IEEE double arithmetic, whose range :mod:`dpproxy.rewrite.floats` checks;
  ``ROUND`` and ``%`` become one formula of IEEE operations that DuckDB and PostgreSQL
  evaluate identically; ``SQRT``, ``LN``, ``LOG`` and ``EXP`` are NULL outside their domains
  (:mod:`dpproxy.rewrite.domains`) and ``SIGN`` is a DOUBLE; ``DATE_TRUNC`` and date ±
  interval on date columns become the forms of :mod:`dpproxy.sql.dates`, total on every date
  either engine stores;
* ``clamp_values``: a numeric column in a *value position* of a measure (not inside a
  condition) is clamped to its schema bounds, which makes :mod:`dpproxy.analysis.bounds` sound.

Both are pure functions ``(expression, table) -> expression`` that copy their input by default.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.errors import DPProxyError, StatementTooComplex
from dpproxy.rewrite.dialect import guarded_type, text_cast_condition
from dpproxy.rewrite.domains import DOMAIN_FUNCS, in_domain, width_bucket
from dpproxy.rewrite.precedence import parenthesise
from dpproxy.rewrite.real import REAL, real_rounding, rounded_operand
from dpproxy.rewrite.textsize import SIZED, bound_text
from dpproxy.sql.dates import (
    portable_difference,
    portable_extract,
    portable_shift,
    portable_trunc,
)
from dpproxy.sql.mathargs import math_operand, numeric_constant
from dpproxy.sql.postmath import digits_of
from dpproxy.sql.tochar import portable_to_char
from dpproxy.sql.types import COLUMN_TYPES, SqlType, cast_type, clone, typed_constant
from dpproxy.values import float_down, float_up

_ARITH = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Neg,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
)
_CONDITION = (exp.Predicate, exp.Not, exp.And, exp.Or, exp.Like, exp.ILike)


def lit(v: object) -> exp.Literal:
    """A numeric literal built directly (``exp.Literal.number`` re-validates its text)."""
    return exp.Literal(this=str(v), is_string=False)


def table(name: str) -> exp.Table:
    """A table reference built without parsing."""
    return exp.Table(this=exp.Identifier(this=name, quoted=False))


def number(v: Fraction) -> exp.Expression:
    """An exact SQL literal for a rational: integers as integers, others as a float literal
    (either in exponent form where :func:`double_text` puts it, as the guards would)."""
    if v.denominator == 1:  # the cache's own first branch, without hashing a Fraction
        text, negative = str(abs(v.numerator)), v.numerator < 0
        if abs(v.numerator) >= 2**63:
            text = double_text(text, negated=negative)
    else:
        text, negative = _number_text(v)
    literal = lit(text)
    return exp.Neg(this=literal) if negative else literal


@functools.lru_cache(maxsize=4096)
def _number_text(v: Fraction) -> tuple[str, bool]:
    if v.denominator == 1:
        return str(abs(v.numerator)), v < 0
    return double_text(repr(abs(float(v)))), v < 0


#: The most digits a number literal may have before or after its point and still be read as
#: an exact number (:func:`double_text`).
LITERAL_DIGITS = 18


def double_text(text: str, *, negated: bool = False) -> str:
    """A number literal's text, in exponent form when DuckDB would read it as a DECIMAL or
    HUGEINT too wide to meet an integer column: ``0.1234567890123456789012`` is a
    DECIMAL(22, 22) there, and comparing it with (or COALESCE, CASE, GREATEST, IN, BETWEEN
    beside) a BIGINT made DuckDB cast the column to DECIMAL(38, 22), which fails for one
    row's value of 10^16 or more ("Could not cast value ... to DECIMAL(38,22)"), an error
    no noise covers.

    **Totality.** DuckDB reads a literal with an exponent as a DOUBLE, which every number
    widens to without error; a literal kept as written has at most 18 digits before and
    after its point (or is an integer within BIGINT): DECIMAL(p, s) with p − s ≤ 19 and
    s ≤ 18, which meets an integer of up to 20 digits (UBIGINT's) in DECIMAL(≤ 38, s), wide
    enough for every value of both (``negated``: the literal is the operand of a ``-``,
    and −2⁶³ is a BIGINT too). PostgreSQL reads both forms as the same exact numeric.

    >>> double_text("0.1234567890123456789012"), double_text("0.5"), double_text("1e400")
    ('0.1234567890123456789012e0', '0.5', '1e400')
    >>> double_text("9223372036854775808"), double_text("9223372036854775808", negated=True)
    ('9223372036854775808e0', '9223372036854775808')
    """
    if "e" in text or "E" in text:
        return text
    whole, point, fraction = text.partition(".")
    if not point:
        return text if int(whole or "0") < 2**63 + negated else f"{text}e0"
    if len(whole.lstrip("0")) > LITERAL_DIGITS or len(fraction) > LITERAL_DIGITS:
        return f"{whole or '0'}.{fraction or '0'}e0"
    return text


def _as_double(col: exp.Expression) -> exp.Expression:
    return exp.Cast(this=col, to=exp.DataType(this=exp.DataType.Type.DOUBLE))


#: Where PostgreSQL gives its operands one type: a REAL column and a number constant are
#: unified as REAL, the constant cast to it.
_UNIFYING = (exp.Coalesce, exp.Greatest, exp.Least, exp.In, exp.Case)
_REAL_MAX, _REAL_MIN = Fraction(3.4e38), Fraction(1.2e-38)


def real_safe(e: exp.Expression) -> exp.Expression:
    """``e`` as a DOUBLE when it is a number constant (``1e300``, ``-(1e-300)``) that
    PostgreSQL's REAL cannot hold, else ``e`` itself.

    **Totality.** PostgreSQL unifies a ``real`` column (a ``float`` of the schema may be
    stored as one) and a numeric constant in COALESCE, GREATEST, LEAST, IN and CASE as REAL,
    casting the constant, which raises 22003 beyond 3.4e38 or below 1.2e-38 ("value out of
    range: overflow"): ``COALESCE(r, 1e300)`` failed, charged. As a DOUBLE the constant
    makes the unified type DOUBLE on both engines, to which every number widens without
    error; a constant within REAL's range converts without error (rounded, as PostgreSQL
    rounds it there)."""
    v = numeric_constant(e)
    if v is None or v == 0 or _REAL_MIN <= abs(v) <= _REAL_MAX:
        return e
    return _as_double(e)


def _in_value_position(col: exp.Expression, root: exp.Expression) -> bool:
    n = col.parent
    child: exp.Expression = col
    while n is not None and child is not root:
        if isinstance(n, _CONDITION):
            return False
        if isinstance(n, exp.If) and child is n.this:
            return False
        if isinstance(n, exp.Nullif) and child is n.expression:
            return False
        child, n = n, n.parent  # type: ignore[assignment]
    return True


def clamp_bounds(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    """The bounds :func:`clamp` writes: integers as they are, others rounded outward to
    doubles. A clamped value lies exactly between them."""
    return (
        lo if lo.denominator == 1 else Fraction(float_down(lo)),
        hi if hi.denominator == 1 else Fraction(float_up(hi)),
    )


def clamp(
    make: Callable[[], exp.Expression], lo: Fraction | None, hi: Fraction | None
) -> exp.Expression:
    """``CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END``, bounds rounded outward.

    ``make`` builds a fresh ``v`` for each of its three uses (cheaper than deep copies).
    Written as CASE rather than LEAST/GREATEST because those skip NULLs in DuckDB and
    PostgreSQL (a NULL would become ``lo``); here NULL stays NULL, and NaN, which both engines
    order above every number, becomes ``hi``.
    """
    if lo is None or hi is None:  # one side only (a per-unit COUNT ∈ [0, ∞): sql/perunit.py)
        ifs = []
        if lo is not None:
            lo_num = lo if lo.denominator == 1 else Fraction(float_down(lo))
            ifs.append(
                exp.If(this=exp.LT(this=make(), expression=number(lo_num)), true=number(lo_num))
            )
        if hi is not None:
            hi_num = hi if hi.denominator == 1 else Fraction(float_up(hi))
            ifs.append(
                exp.If(this=exp.GT(this=make(), expression=number(hi_num)), true=number(hi_num))
            )
        return exp.Case(ifs=ifs, default=make())
    lo_num, hi_num = clamp_bounds(lo, hi)
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=make(), expression=number(lo_num)), true=number(lo_num)),
            exp.If(this=exp.GT(this=make(), expression=number(hi_num)), true=number(hi_num)),
        ],
        default=make(),
    )


def _double_column(name: str) -> Callable[[], exp.Expression]:
    return lambda: _as_double(exp.column(name))


# (column name, lower, upper) → its clamp CASE, built once: a copy of it is the same tree
# as a new :func:`clamp` of the column (its nodes hold only the name and the two bounds) and
# costs a third as much to make. Never handed out itself, only copies.
_COLUMN_CLAMPS: dict[tuple[str, Fraction | None, Fraction | None], exp.Expression] = {}


def _column_clamp(name: str, lo: Fraction | None, hi: Fraction | None) -> exp.Expression:
    key = (name, lo, hi)
    template = _COLUMN_CLAMPS.get(key)
    if template is None:
        if len(_COLUMN_CLAMPS) >= 4096:  # schemas come and go in tests and reloads
            _COLUMN_CLAMPS.clear()
        template = _COLUMN_CLAMPS[key] = clamp(_double_column(name), lo, hi)
    return clone(template)


def clamp_values(
    node: exp.Expression,
    table: Table,
    *,
    copy: bool = True,
    made: set[int] | None = None,
    cases: list[exp.Expression] | None = None,
) -> exp.Expression:
    """Numeric columns in value positions → clamped to their bounds, as DOUBLE.

    ``cases`` collects every CASE written, ``made`` its ``id``. Each is a fixed point of
    :func:`guard_row_expression` against the same ``table`` (which may then skip them): its
    nodes are the CASE, its WHENs, ``<``/``>`` comparisons, number literals (``-`` for
    negative ones) and ``CAST(column AS DOUBLE)`` of a numeric column of ``table``, and
    :func:`_guard_node` changes none of them — such a cast widens (:func:`_widening`), no
    node is a division, function or binary arithmetic, inside the CASE only a literal has an
    arithmetic parent (the ``-`` of a negative number) and literals are never promoted, and
    the CASE itself is a DOUBLE (:func:`is_double`: its ELSE is such a cast), so it is not
    promoted under arithmetic outside it either. It is a fixed point of ``parenthesise``
    too: a comparison's operands are a cast and a number, which bind more tightly (a ``-``
    more tightly still than a comparison), and a CASE is never parenthesised.

    >>> from dpproxy.catalog.model import Column, ColumnType
    >>> t = Table("t", True, (Column("age", ColumnType.INTEGER, Fraction(0), Fraction(9)),))
    >>> sql = clamp_values(exp.maybe_parse("CASE WHEN age > 3 THEN age END"), t).sql()
    >>> sql.replace("CAST(age AS DOUBLE)", "x")
    'CASE WHEN age > 3 THEN CASE WHEN x < 0 THEN 0 WHEN x > 9 THEN 9 ELSE x END END'
    """
    out = clone(node) if copy else node
    wrapper = exp.Paren(this=out)  # so that a bare column has a parent to be replaced in
    for col in list(out.find_all(exp.Column)):
        c = table.column(col.name)
        if c is None or not c.type.numeric or (c.lower is None and c.upper is None):
            continue  # a half-bounded column is clamped on its one side
        if not _in_value_position(col, wrapper):
            continue
        clamped = _column_clamp(col.name, c.lower, c.upper)
        if made is not None:
            made.add(id(clamped))
        if cases is not None:
            cases.append(clamped)
        col.replace(clamped)
    result: exp.Expression = wrapper.this
    return result


def _guard_node(n: exp.Expression, table: Table) -> exp.Expression:
    """The guards of this module applied to one node whose children are already guarded."""
    if isinstance(n, _UNIFYING) and not is_double(n, table):  # (a clamp's CASE is)
        values = [i for i in n.args.get("ifs") or ()] if isinstance(n, exp.Case) else [n]
        for holder in values:  # a constant beyond REAL's range: a DOUBLE (real_safe)
            for child in list(holder.iter_expressions()):
                key, index = child.arg_key, child.index  # before real_safe re-parents it
                if key in ("expressions", "true", "default") or (
                    key == "this" and not isinstance(holder, exp.If | exp.Case)
                ):
                    safe = real_safe(child)
                    if safe is not child:
                        holder.set(key, safe, index)
        if isinstance(n, exp.Case) and n.args.get("default") is not None:
            n.set("default", real_safe(n.args["default"]))
    if type(n) is exp.Literal:  # a number DuckDB would read as a too wide DECIMAL: DOUBLE
        text = n.name if n.is_string else double_text(n.name, negated=type(n.parent) is exp.Neg)
        return n if text == n.name else exp.Literal(this=text, is_string=False)
    if isinstance(n, exp.TimestampTrunc | exp.DateTrunc):  # a DATE, never an operand of + - * /
        return portable_trunc(n.this, n.args["unit"].name)
    if isinstance(n, exp.DateAdd):
        return portable_shift(n)
    if isinstance(n, exp.DateDiff | exp.Extract):  # numbers: DOUBLE under arithmetic
        promote_date = _operand_to_promote(n, table)
        made = portable_difference(n) if isinstance(n, exp.DateDiff) else portable_extract(n)
        return _as_double(made) if promote_date else made
    if isinstance(n, exp.Div | exp.IntDiv | exp.Mod):
        rhs = n.expression
        if not (isinstance(rhs, exp.Literal) and not rhs.is_string and float(rhs.name) != 0):
            n.set("expression", exp.Nullif(this=rhs, expression=lit(0)))
        if isinstance(n, exp.Mod):
            return _portable_mod(n, table)
    if isinstance(n, DOMAIN_FUNCS):  # SQRT, LN, LOG, EXP, POWER: NULL outside their domains
        return in_domain(n, _double(math_operand(n), table))
    if isinstance(n, exp.WidthBucket):  # comparisons with public thresholds
        return width_bucket(n, _double(n.this, table))
    if isinstance(n, exp.TimeToStr):  # TO_CHAR(d, 'YYYY-MM'): substrings of d's ISO text
        return portable_to_char(n, n.this)
    if isinstance(n, exp.Sign):  # a DOUBLE on both engines (DuckDB's SIGN is a TINYINT)
        return _as_double(exp.Sign(this=_double(n.this, table)))
    if isinstance(n, exp.Substring):
        _check_substring(n)
    if isinstance(n, SIZED):  # UPPER, LOWER, TRIM, ILIKE, ||: long texts NULL (textsize.py)
        n = bound_text(n, {c.name: COLUMN_TYPES[c.type] for c in table.columns})
    if isinstance(n, exp.Like | exp.ILike) and not isinstance(n.parent, exp.Escape):
        return _like(n)
    out: exp.Expression = n
    promote = _operand_to_promote(n, table)  # decided on the node as written
    if isinstance(n, _BINARY) and not any(is_double(c, table) for c in (n.this, n.expression)):
        for side in ("this", "expression"):  # ``2147483647 + 1``: literals only
            operand = n.args[side]
            if isinstance(operand, exp.Literal) and not operand.is_string:
                n.set(side, _as_double(operand))
    if type(n) is exp.Cast and n.to.this is REAL:  # float32 rounding, as a DOUBLE (real.py)
        operand = _guarded_double(n.this, table)  # a REAL already: rounding it changes nothing
        out = operand if rounded_operand(operand) is not None else real_rounding(operand)
    elif type(n) is exp.Cast and rounded_operand(n) is not None:
        pass  # a REAL rounding already (guarded again): it stays one, and recognised as one
    elif type(n) is exp.Cast and not _widening(n, table) and not _constant_cast(n):
        out = _try_cast(n, table)
    elif isinstance(n, exp.Round):
        out = _portable_round(n, table)
    if promote:
        return _as_double(out)
    return out


def _like(n: exp.Like | exp.ILike) -> exp.Expression:
    """``LIKE`` with PostgreSQL's meaning on every engine: backslash escapes (DuckDB has no
    escape character unless told). PostgreSQL raises on a pattern that ends with an unpaired
    escape only for rows whose text reaches that point — an error decided by the data — so
    such a pattern, and any pattern that is not a literal, is refused."""
    from dpproxy.errors import UnsupportedQuery

    pattern = n.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise UnsupportedQuery(
            "LIKE patterns must be string literals", hint="write the pattern as a constant"
        )
    trailing = len(pattern.name) - len(pattern.name.rstrip("\\"))
    if trailing % 2:
        raise UnsupportedQuery(
            "LIKE pattern must not end with the escape character",
            hint="write \\\\ for a literal backslash",
        )
    return exp.Escape(this=n, expression=exp.Literal.string("\\"))


def _check_substring(n: exp.Substring) -> None:
    """Negative positions mean different things to the engines (DuckDB counts from the end,
    PostgreSQL from before the start) and a negative length makes PostgreSQL raise."""
    from dpproxy.errors import UnsupportedQuery

    for key in ("start", "length"):
        arg = n.args.get(key)
        if arg is not None and isinstance(arg, exp.Neg | exp.Literal) and float(arg.sql()) < 0:
            raise UnsupportedQuery(
                f"SUBSTRING with a negative {key} is not supported",
                hint="positions count from 1; lengths must not be negative",
            )


def _try_cast(n: exp.Cast, table: Table) -> exp.Expression:
    """``TRY_CAST``, and from text only for the strings every backend parses alike."""
    cast = exp.TryCast(this=n.this, to=n.to)
    types = {c.name: COLUMN_TYPES[c.type] for c in table.columns}
    if guarded_type(n.this, types) not in (SqlType.TEXT, SqlType.UNKNOWN):
        return cast
    condition = text_cast_condition(n.this, n.to.this)
    if condition is None:
        return cast
    return exp.Case(ifs=[exp.If(this=condition, true=cast)])


def _guarded_double(e: exp.Expression, table: Table) -> exp.Expression:
    """``e`` (guarded) as a DOUBLE, by the cast ``CAST(e AS DOUBLE PRECISION)`` is guarded to."""
    if is_double(e, table):
        return e
    n = exp.Cast(this=e, to=exp.DataType(this=exp.DataType.Type.DOUBLE))
    return n if _widening(n, table) or _constant_cast(n) else _try_cast(n, table)


def _constant_cast(n: exp.Cast) -> bool:
    """A string literal that the type checker read as the cast's type (``CAST('2024-02-29'
    AS DATE)``, ``CAST('NaN' AS DOUBLE)``): a constant that cannot fail, needing no guard."""
    literal = n.this
    if not (isinstance(literal, exp.Literal) and literal.is_string):
        return False
    try:
        target = cast_type(n.to)
    except DPProxyError:
        return False
    if target is SqlType.NUMERIC and n.to.this not in _DOUBLE_TYPES:
        return False  # 'NaN' and 'Infinity' read as doubles only
    return typed_constant(literal.name, target) is not None


def _widening(n: exp.Cast, table: Table) -> bool:
    """A numeric column cast to DOUBLE (as the clamps write it) cannot fail."""
    if n.to.this is not exp.DataType.Type.DOUBLE or not isinstance(n.this, exp.Column):
        return False
    c = table.column(n.this.name)
    return c is not None and c.type.numeric


def _double(e: exp.Expression, table: Table) -> exp.Expression:
    return e if is_double(e, table) else _as_double(e)


def _portable_mod(n: exp.Mod, table: Table) -> exp.Expression:
    """``a % b`` as ``a - b * TRUNC(a / b)`` in DOUBLE: PostgreSQL has no ``%`` for floats, and
    this one formula of IEEE operations gives identical results on both engines (exact for
    integers below 2⁵³; the sign follows ``a``, as in both engines' ``%``)."""
    a = _double(n.this, table)
    b = _double(n.expression, table)
    quotient = exp.Div(this=a.copy(), expression=b.copy())
    product = exp.Mul(this=b, expression=exp.Trunc(this=quotient))
    return exp.Paren(this=exp.Sub(this=a, expression=product))


def _portable_round(n: exp.Round, table: Table) -> exp.Expression:
    """``ROUND(x, d)`` half away from zero, as one formula both engines evaluate identically.

    DuckDB rounds doubles half away from zero, PostgreSQL's ``round(float8)`` half to even
    and it has no ``round(float8, int)``. ``SIGN(x) * FLOOR(ABS(x) * 10^d + 0.5) / 10^d``
    uses IEEE operations only. Beyond 10³⁰⁰ / 10^d every double is already an integer at that
    precision (and the scaling could overflow, which PostgreSQL reports as an error), so
    those values, ±inf and NaN are returned unchanged.
    """
    digits_arg = n.args.get("decimals")
    if isinstance(digits_arg, exp.Neg):  # ROUND(x, -3), typed in sql/types.py
        digits = digits_of(digits_arg) or 0
    else:
        digits = int(float(digits_arg.name)) if digits_arg is not None else 0
    x = _double(n.this, table)
    scale = lit(f"1e{abs(digits)}")

    def scaled() -> exp.Expression:
        magnitude = exp.Abs(this=x.copy())
        if digits == 0:
            return magnitude
        op = exp.Mul if digits > 0 else exp.Div
        return op(this=magnitude, expression=scale.copy())

    floored: exp.Expression = exp.Floor(this=exp.Add(this=scaled(), expression=lit("0.5")))
    if digits:
        op = exp.Div if digits > 0 else exp.Mul
        floored = op(this=floored, expression=scale.copy())
    rounded = exp.Mul(this=exp.Sign(this=x.copy()), expression=floored)
    limit = lit(f"1e{300 - max(digits, 0)}")
    return exp.Case(
        ifs=[exp.If(this=exp.LT(this=exp.Abs(this=x.copy()), expression=limit), true=rounded)],
        default=x,
    )


_BINARY = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv)
_DOUBLE_TYPES = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}
_DOUBLE_FUNCS = (*DOMAIN_FUNCS, exp.Pi)


def is_double(n: exp.Expression, table: Table) -> bool:
    """Does every engine compute ``n`` as a DOUBLE, whatever the columns' physical types?

    Columns never count (a ``float`` column may be stored as REAL, an integer one as
    SMALLINT); explicit casts to DOUBLE, arithmetic over a DOUBLE and CASE/COALESCE/
    GREATEST/LEAST with a DOUBLE value do (both engines unify mixed numeric results to
    DOUBLE). ``False`` when in doubt: the caller then casts, which is harmless.
    """
    kind = type(n)
    test = _DOUBLE_TESTS.get(kind)
    if test is None:
        test = _DOUBLE_TESTS[kind] = _double_test(kind)
    return test(n, table)


def _double_test(kind: type) -> Callable[[exp.Expression, Table], bool]:
    """:func:`is_double` for nodes of this class: the first of its cases, in their order,
    that applies to the class (found once per class)."""
    if issubclass(kind, exp.Paren | exp.Neg | exp.Abs | exp.Floor | exp.Ceil):
        return lambda n, table: is_double(n.this, table)
    if issubclass(kind, exp.Cast):  # TRY_CAST too
        return lambda n, table: typing.cast(exp.Cast, n).to.this in _DOUBLE_TYPES
    if issubclass(kind, _DOUBLE_FUNCS):  # of a DOUBLE (rewrite/domains.py), or π
        return lambda n, table: True
    if issubclass(kind, _BINARY):
        return lambda n, table: is_double(n.this, table) or is_double(n.expression, table)
    if issubclass(kind, exp.Case):
        return _case_is_double
    if issubclass(kind, exp.Coalesce | exp.Greatest | exp.Least):
        return lambda n, table: any(is_double(v, table) for v in (n.this, *n.expressions))
    if issubclass(kind, exp.Nullif):
        return lambda n, table: is_double(n.this, table)
    return lambda n, table: False


def _case_is_double(n: exp.Expression, table: Table) -> bool:
    values = [i.args.get("true") for i in n.args.get("ifs") or []]
    values.append(n.args.get("default"))
    return any(v is not None and is_double(v, table) for v in values)


_DOUBLE_TESTS: dict[type, Callable[[exp.Expression, Table], bool]] = {}


def _operand_to_promote(n: exp.Expression, table: Table) -> bool:
    """An operand of arithmetic (type-checked numeric, or NULL) that is not a literal and not
    already a DOUBLE: it is computed as DOUBLE."""
    if not isinstance(n.parent, _ARITH) or n.arg_key not in ("this", "expression"):
        return False
    if isinstance(n, exp.Literal | exp.Null):
        return False
    return not is_double(n, table)


MAX_GUARDED_NODES = 50_000


def _check_growth(new: exp.Expression) -> None:
    """ROUND copies its operand four times and ``%`` both of its operands twice, so nesting
    them grows the guarded tree exponentially (eight nested ROUNDs: 9 MB of SQL, a minute of
    CPU; a dozen: out of memory). Refused (54001) once a guarded node exceeds
    :data:`MAX_GUARDED_NODES` nodes: checked bottom-up, so no tree more than a few times
    that size is ever built."""
    if sum(1 for _ in new.walk()) > MAX_GUARDED_NODES:
        raise StatementTooComplex(
            "statement too complex: its guarded expressions would exceed "
            f"{MAX_GUARDED_NODES:,} nodes",
            hint="ROUND and % copy their operands: nest fewer of them",
        )


def guard_row_expression(
    node: exp.Expression,
    table: Table,
    *,
    copy: bool = True,
    guarded: set[int] | None = None,
) -> exp.Expression:
    """Division, cast and overflow guards for WHERE clauses, group keys and measures.

    ``guarded`` (with ``copy=False`` only): ids of subtrees of ``node`` that are fixed points
    of the guards in any context, such as :func:`clamp_values`'s CASEs (``made``): neither
    walked into nor guarded themselves (their own node is not promoted either).

    >>> from dpproxy.catalog.model import Column, ColumnType
    >>> t = Table("t", True, (Column("n", ColumnType.INTEGER), Column("x", ColumnType.FLOAT)))
    >>> guard_row_expression(exp.maybe_parse("CAST(x AS INT) / (n - 1)"), t).sql()
    'CAST(TRY_CAST(x AS INT) AS DOUBLE) / NULLIF((CAST(n AS DOUBLE) - 1), 0)'
    """

    # Bottom-up, so that every node sees guarded children and nothing under a replaced node
    # is skipped (sqlglot's ``transform`` does not descend into a replacement).
    out = clone(node) if copy else node
    wrapper = exp.Paren(this=out)
    skip = guarded if guarded and not copy else None
    # The walk is listed before any node changes, so the ids in ``skip`` are still theirs.
    walk = list(out.dfs(prune=lambda n: id(n) in skip)) if skip else list(out.dfs())
    # The skipped subtrees, held so that their ids stay theirs while the tree changes.
    kept = [n for n in walk if id(n) in skip] if skip else []
    for visited in reversed(walk):
        n = typing.cast(exp.Expression, visited)
        if skip and id(n) in skip:
            continue  # a fixed point: _guard_node would return it as it is
        parent, key, index = n.parent, n.arg_key, n.index
        new = _guard_node(n, table)
        if new is not n:
            _check_growth(new)
            if parent is not None and key:
                parent.set(key, new, index)
    # The skipped subtrees are parenthesise's fixed points too (clamp_values' docstring).
    result: exp.Expression = parenthesise(wrapper, {id(n) for n in kept}).this
    return result
