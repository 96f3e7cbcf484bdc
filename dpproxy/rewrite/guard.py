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
* ``clamp_values`` (:mod:`dpproxy.rewrite.clamps`): a numeric column in a *value position* of
  a measure (not inside a condition) is clamped to its schema bounds, which makes
  :mod:`dpproxy.analysis.bounds` sound.

Both are pure functions ``(expression, table) -> expression`` that copy their input by default.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.errors import DPProxyError, StatementTooComplex
from dpproxy.rewrite.dialect import guarded_type, text_cast_condition
from dpproxy.rewrite.domains import DOMAIN_FUNCS, in_domain, width_bucket
from dpproxy.rewrite.nodes import as_double, double_text, lit
from dpproxy.rewrite.precedence import parenthesise
from dpproxy.rewrite.real import REAL, real_rounding, rounded_operand
from dpproxy.rewrite.textsize import SIZED, bound_text
from dpproxy.sql.coercion import typed_constant
from dpproxy.sql.dates import (
    portable_difference,
    portable_extract,
    portable_shift,
    portable_trunc,
)
from dpproxy.sql.mathargs import math_operand, numeric_constant
from dpproxy.sql.postmath import digits_of
from dpproxy.sql.tochar import portable_to_char
from dpproxy.sql.types import COLUMN_TYPES, SqlType, cast_type, clone

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
    if type(e) is exp.Literal and len(e.name) <= 38 and e.name.isascii() and e.name.isdigit():
        return e  # an integer in [0, 10^38): 0, or within [1, 10^38) ⊂ [_REAL_MIN, _REAL_MAX]
    v = numeric_constant(e)
    if v is None or v == 0 or _REAL_MIN <= abs(v) <= _REAL_MAX:
        return e
    return as_double(e)


def _guard_node(n: exp.Expression, table: Table) -> exp.Expression:
    """The guards of this module applied to one node whose children are already guarded."""
    plain = _PLAIN.get(type(n))
    if plain is None:
        plain = _PLAIN[type(n)] = not issubclass(type(n), _RULED)
    if plain:  # of all the rules below, only the promotion of an arithmetic operand applies
        return as_double(n) if _operand_to_promote(n, table) else n
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
        return as_double(made) if promote_date else made
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
        return as_double(exp.Sign(this=_double(n.this, table)))
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
                n.set(side, as_double(operand))
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
        return as_double(out)
    return out


#: Every class some rule of :func:`_guard_node` tests for besides the promotion (Literal and
#: Cast stand for their ``type(n) is`` tests): a node of any other class is "plain", decided
#: once per class in ``_PLAIN``, and only the promotion can change it.
_RULED = (
    *(*_UNIFYING, exp.Literal, exp.TimestampTrunc, exp.DateTrunc, exp.DateAdd, exp.DateDiff),
    *(exp.Extract, exp.Div, exp.IntDiv, exp.Mod, *DOMAIN_FUNCS, exp.WidthBucket, exp.TimeToStr),
    *(exp.Sign, exp.Substring, *SIZED, exp.Like, exp.ILike, exp.Add, exp.Sub, exp.Mul),
    *(exp.Cast, exp.Round),
)
_PLAIN: dict[type, bool] = {}


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
    return e if is_double(e, table) else as_double(e)


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
    """Is some value of the CASE a DOUBLE? Its ELSE first (a pure test of each value, so the
    order does not change the answer): a clamp's, ``CAST(column AS DOUBLE)``, settles it."""
    default = n.args.get("default")
    if default is not None and is_double(default, table):
        return True
    return any(
        (v := i.args.get("true")) is not None and is_double(v, table)
        for i in n.args.get("ifs") or []
    )


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
    of the guards in any context, such as :func:`~dpproxy.rewrite.clamps.clamp_values`'s
    CASEs (``made``): neither walked into nor guarded themselves (their own node is not
    promoted either).

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
