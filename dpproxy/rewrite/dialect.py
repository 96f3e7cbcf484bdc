"""What differs between the backends' SQL, handled explicitly rather than left to sqlglot.

The rewrite builds one tree for every backend; this module supplies the few pieces whose
meaning differs between DuckDB and PostgreSQL 15, so that the same plan computes the same
exact aggregates on both (``tests/integration/test_differential.py`` checks the whole rewrite
fixture corpus on both engines).

=====================  =========================  ====================================
construct              DuckDB                     PostgreSQL 15
=====================  =========================  ====================================
``a / b`` on integers  real division              integer division → numerator cast
                                                  to ``DOUBLE PRECISION`` (here)
failed cast            ``TRY_CAST`` gives NULL    ``CAST`` raises → guarded casts
                                                  (:func:`safe_cast`)
float over/underflow   ±inf / 0                   raises → operands tamed, on every
                                                  backend alike (``rewrite/floats.py``)
``ROUND(x, n)``        half away from zero        no ``round(float8, int)``; ``round``
                                                  of float8 is half-even → one portable
                                                  formula for both (``rewrite/guard.py``)
``x % y`` on doubles   ``fmod``                   no ``float8 % float8`` → one portable
                                                  formula for both
cast to ``REAL``       ``TRY_CAST``: NULL beyond  raises beyond REAL's range → one
                       REAL's range, 0 below it   rounding for both (``rewrite/real.py``)
keyed row hash         ``hash`` (fast, native)    none in common → ``md5`` of a
                                                  canonical text (:func:`row_hash`)
text ordering          bytewise                   the database collation → ``COLLATE "C"``
=====================  =========================  ====================================

sqlglot is still what prints the tree for each dialect; it would silently turn ``TRY_CAST``
into a plain ``CAST`` for PostgreSQL (an error on a bad row) and keep ``/`` as integer
division, which is why those two are rewritten here before printing.
"""

from __future__ import annotations

from typing import Any, cast

from sqlglot import exp

from dpproxy.rewrite.real import REAL, in_range_real, real_rounding
from dpproxy.sql.types import SqlType

DOUBLE = exp.DataType.Type.DOUBLE
BIGINT = exp.DataType.Type.BIGINT

_INT_RANGES = {
    exp.DataType.Type.TINYINT: (-128, 127),  # printed as SMALLINT for PostgreSQL
    exp.DataType.Type.SMALLINT: (-32768, 32767),
    exp.DataType.Type.INT: (-2147483648, 2147483647),
    exp.DataType.Type.BIGINT: (-9223372036854775808, 9223372036854775807),
}
_TEXT_TYPES = (exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR)
_FLOAT_TYPES = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)

# dpproxy's grammar for text cast to a number, a boolean or a date: the strings both engines
# parse to the same value. A string outside it casts to NULL on every backend (DuckDB's
# TRY_CAST alone would also accept, e.g., '0x10' and '1_000' for integers).
_NUMBER = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?"
INTEGER_TEXT = rf"^\s*{_NUMBER}\s*$"
FLOAT_TEXT = rf"^\s*({_NUMBER}|[+-]?(nan|inf|infinity))\s*$"  # case-insensitive
BOOL_TEXT = r"^(t|true|f|false|y|yes|n|no|1|0)$"  # case-insensitive, as DuckDB: no blanks
DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
MAX_CAST_TEXT = 100  # longer strings cast to NULL
# Decimal thresholds of IEEE doubles for PostgreSQL, whose float8in raises where DuckDB rounds:
# from max + ulp/2 on, a decimal rounds to ±inf; below min subnormal / 2, to 0.
_FLOAT_OVERFLOW = "1.7976931348623158079372897140530341507993e308"
_FLOAT_UNDERFLOW = "2.4703282292062327208828439643411068618252e-324"


def _text(s: str) -> exp.Literal:
    return exp.Literal.string(s)


def _num(v: int | float | str) -> exp.Literal:
    return exp.Literal(this=str(v), is_string=False)


def _cast(e: exp.Expression, t: Any) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType(this=t))


def _case(*branches: tuple[exp.Expression, exp.Expression]) -> exp.Case:
    """``CASE WHEN c1 THEN v1 ... END`` — PostgreSQL evaluates the WHENs in order, and a THEN
    only for the WHEN that holds, which is what makes the guards below total."""
    return exp.Case(ifs=[exp.If(this=c, true=v) for c, v in branches])


def _matches(e: exp.Expression, pattern: str, *, ignore_case: bool = False) -> exp.Expression:
    if ignore_case:
        return exp.RegexpILike(this=e, expression=_text(pattern))
    return exp.RegexpLike(this=e, expression=_text(pattern))


# --------------------------------------------------------------------------------------------
# Casts


def guarded_type(e: exp.Expression, column_types: dict[str, SqlType]) -> SqlType:
    """The type of an already guarded expression (the guards add CASEs and pattern tests
    that the validator's ``type_of`` never sees in a query)."""
    from dpproxy.sql.types import cast_type, type_of

    if isinstance(e, exp.Paren):
        return guarded_type(e.this, column_types)
    if isinstance(e, exp.Case) and e.args.get("ifs"):
        return guarded_type(e.args["ifs"][0].args["true"], column_types)
    if isinstance(e, exp.Cast):  # TryCast too
        return cast_type(e.to)
    return type_of(e, column_types)


def text_cast_condition(value: exp.Expression, target: Any) -> exp.Expression | None:
    """When a text value may be cast to ``target`` on every backend (``None``: always).

    ``rewrite/guard.py`` puts this condition in front of every cast from text, for every
    dialect, so that all engines accept exactly the same strings.
    """
    pattern, ignore_case = None, False
    if target in _INT_RANGES:
        pattern = INTEGER_TEXT
    elif target in _FLOAT_TYPES:
        pattern, ignore_case = FLOAT_TEXT, True
    elif target is exp.DataType.Type.BOOLEAN:
        pattern, ignore_case = BOOL_TEXT, True
    elif target is exp.DataType.Type.DATE:
        not_year_zero = exp.NEQ(
            this=exp.Left(this=value.copy(), expression=_num(4)), expression=_text("0000")
        )
        # the length first: PostgreSQL's regex copies its text at 4 bytes a character, and
        # raises beyond 1 GB (rewrite/textsize.py); a DATE_TEXT string has 10 characters
        short = exp.LTE(this=exp.Length(this=value.copy()), expression=_num(MAX_CAST_TEXT))
        matches = exp.And(this=_matches(value.copy(), DATE_TEXT), expression=not_year_zero)
        return exp.And(this=short, expression=matches)
    if pattern is None:
        return None
    short = exp.LTE(this=exp.Length(this=value.copy()), expression=_num(MAX_CAST_TEXT))
    return exp.And(this=short, expression=_matches(value.copy(), pattern, ignore_case=ignore_case))


def _in_open(e: exp.Expression, lo: str, hi: str) -> exp.Expression:
    return exp.And(
        this=exp.GT(this=e, expression=_num(lo)),
        expression=exp.LT(this=e.copy(), expression=_num(hi)),
    )


def _half_open(e: exp.Expression, lo: str, hi: str) -> exp.Expression:
    # NaN is above every number in both engines, so NaN fails ``< hi``; NULL fails both.
    return exp.And(
        this=exp.GTE(this=e, expression=_num(lo)),
        expression=exp.LT(this=e.copy(), expression=_num(hi)),
    )


def _text_to_double(value: exp.Expression) -> exp.Expression:
    """PostgreSQL: a FLOAT_TEXT string → the double DuckDB parses, never an error."""
    numeric = exp.Cast(this=value.copy(), to=exp.DataType(this=exp.DataType.Type.DECIMAL))
    magnitude = exp.Abs(this=numeric)

    def special(pattern: str, spelled: str) -> tuple[exp.Expression, exp.Expression]:
        return (_matches(value.copy(), pattern, ignore_case=True), _cast(_text(spelled), DOUBLE))

    return _case(
        special(r"^\s*[+-]?nan\s*$", "NaN"),
        special(r"^\s*\+?inf(inity)?\s*$", "Infinity"),
        special(r"^\s*-inf(inity)?\s*$", "-Infinity"),
        (
            exp.GTE(this=magnitude, expression=_num(_FLOAT_OVERFLOW)),
            exp.Mul(
                this=exp.Sign(this=numeric.copy()), expression=_cast(_text("Infinity"), DOUBLE)
            ),
        ),
        (exp.LT(this=magnitude.copy(), expression=_num(_FLOAT_UNDERFLOW)), _num("0.0")),
        (exp.Boolean(this=True), _cast(value, DOUBLE)),
    )


def _valid_date(value: exp.Expression) -> exp.Expression:
    """PostgreSQL: a DATE_TEXT string names a real day (month 1–12, day within the month)."""

    def part(start: int, length: int) -> exp.Expression:
        return _cast(
            exp.Substring(this=value.copy(), start=_num(start), length=_num(length)),
            exp.DataType.Type.INT,
        )

    year, month, day = part(1, 4), part(6, 2), part(9, 2)

    def divisible(n: int) -> exp.Expression:
        return exp.EQ(this=exp.Mod(this=year.copy(), expression=_num(n)), expression=_num(0))

    leap = exp.Or(
        this=exp.And(this=divisible(4), expression=exp.Not(this=divisible(100))),
        expression=divisible(400),
    )
    month_days = exp.Case(
        ifs=[
            exp.If(
                this=exp.In(this=month.copy(), expressions=[_num(4), _num(6), _num(9), _num(11)]),
                true=_num(30),
            ),
            exp.If(
                this=exp.EQ(this=month.copy(), expression=_num(2)),
                true=exp.Case(ifs=[exp.If(this=leap, true=_num(29))], default=_num(28)),
            ),
        ],
        default=_num(31),
    )
    return exp.And(
        this=exp.Between(this=month, low=_num(1), high=_num(12)),
        expression=exp.Between(this=day, low=_num(1), high=month_days),
    )


def safe_cast(node: exp.TryCast, source: SqlType, *, real_in_range: bool = False) -> exp.Expression:
    """A PostgreSQL expression equal to DuckDB's ``TRY_CAST``: NULL where the cast would fail.

    ``source`` is the operand's type (``sql/types.py``). Casts that cannot fail are printed
    as plain casts; the others are guarded by a nested CASE that checks the value first
    (PostgreSQL evaluates a CASE's WHENs in order and only the chosen THEN). Text sources are
    checked against the same grammar as in ``text_cast_condition`` whatever the caller did.
    A cast to REAL is plain only where ``real_in_range`` (``rewrite/real.in_range_real``: the
    branch of ``real_rounding`` whose WHENs keep every value within REAL's range); any other
    is written as ``real_rounding`` of the value as a DOUBLE.
    """
    from dpproxy.errors import UnsupportedQuery

    value: exp.Expression = node.this
    to: exp.DataType = node.to
    target = to.this
    if target is REAL:
        if real_in_range:
            return _cast(value, REAL)
        double = safe_cast(exp.TryCast(this=value, to=exp.DataType(this=DOUBLE)), source)
        return real_rounding(double, native_cast=True)
    from_text = source in (SqlType.TEXT, SqlType.UNKNOWN)
    if target in _TEXT_TYPES:  # PostgreSQL writes booleans 'true'/'false', like DuckDB
        return _cast(value, exp.DataType.Type.TEXT)
    if target is exp.DataType.Type.BOOLEAN and source is SqlType.BOOLEAN:
        return value
    if target is exp.DataType.Type.DATE and source is SqlType.DATE:
        return value
    condition = text_cast_condition(value, target) if from_text else None
    if condition is not None:  # None from text: no grammar both engines read (DECIMAL)
        if target in _FLOAT_TYPES:
            return _case((condition, _text_to_double(value)))
        if target in _INT_RANGES:
            # Decimal text rounds half away from zero (PostgreSQL's numeric → integer, and
            # DuckDB's text → integer); a value that rounds out of range is NULL.
            lo, hi = _INT_RANGES[target]
            pg_target = (
                exp.DataType.Type.SMALLINT if target is exp.DataType.Type.TINYINT else target
            )
            numeric = exp.Cast(this=value.copy(), to=exp.DataType(this=exp.DataType.Type.DECIMAL))
            # lo < 0 < hi, so f"{lo}.5" is lo − 0.5 and f"{hi}.5" is hi + 0.5.
            in_range = _in_open(numeric, f"{lo}.5", f"{hi}.5")
            return _case((condition, _case((in_range, _cast(numeric.copy(), pg_target)))))
        if target is exp.DataType.Type.BOOLEAN:
            return _case((condition, _cast(value, target)))
        if target is exp.DataType.Type.DATE:
            return _case((condition, _case((_valid_date(value), _cast(value.copy(), target)))))
    if source is SqlType.NUMERIC:
        if target in _FLOAT_TYPES:
            return _cast(value, DOUBLE)
        if target in _INT_RANGES:
            # Doubles round half to even in both engines' integer casts; whatever rounds out
            # of range (and NaN, ±inf) → NULL. lo − 0.5 rounds to lo (even), hi + 0.5 to hi + 1.
            lo, hi = _INT_RANGES[target]
            pg_target = (
                exp.DataType.Type.SMALLINT if target is exp.DataType.Type.TINYINT else target
            )
            as_double = _cast(value.copy(), DOUBLE)
            in_range = _half_open(as_double, f"{lo}.5", f"{hi}.5")
            return _case((in_range, _cast(value, pg_target)))
        if target is exp.DataType.Type.BOOLEAN:
            return _case(
                (exp.EQ(this=value.copy(), expression=_num(0)), exp.Boolean(this=False)),
                (exp.NEQ(this=value.copy(), expression=_num(0)), exp.Boolean(this=True)),
            )
    if source is SqlType.BOOLEAN:
        if target in _FLOAT_TYPES:
            return _case((value.copy(), _num("1.0")), (exp.Not(this=value.copy()), _num("0.0")))
        if target in _INT_RANGES:
            return _case((value.copy(), _num(1)), (exp.Not(this=value.copy()), _num(0)))
    raise UnsupportedQuery(
        f"CAST({source.value} AS {to.sql('postgres')}) is not supported on the PostgreSQL backend",
        hint="it could fail on a row's value; cast to text, double precision or an integer type",
    )


# --------------------------------------------------------------------------------------------
# The keyed row hash


def canonical_text(value: exp.Expression, kind: SqlType) -> exp.Expression:
    """Text that both engines compute identically for ``value`` (never NULL).

    Numbers go through DOUBLE and are written as ``floor`` and the binary fraction scaled by
    2⁵² — IEEE arithmetic and integer-to-text only, which are identical in both engines,
    unlike their float-to-text (DuckDB ``1.0`` vs PostgreSQL ``1``). NULL, NaN and values
    beyond ±9.2·10¹⁸ collapse to a few fixed strings; a collision only ties two rows of one
    unit, which the bounding tolerates.
    """
    if kind is SqlType.NUMERIC:
        x = _cast(value, DOUBLE)

        def xc() -> exp.Expression:
            return x.copy()

        def floor(e: exp.Expression) -> exp.Expression:
            return exp.Floor(this=e)

        def int_text(e: exp.Expression) -> exp.Expression:
            return _cast(_cast(e, BIGINT), exp.DataType.Type.TEXT)

        frac = exp.Mul(
            this=exp.Paren(this=exp.Sub(this=xc(), expression=floor(xc()))),
            expression=_num(4503599627370496),
        )
        small = exp.LT(this=exp.Abs(this=xc()), expression=_num("4.5e15"))
        big = exp.LT(this=exp.Abs(this=xc()), expression=_num("9.2e18"))
        text = exp.Case(
            ifs=[
                exp.If(
                    this=small,
                    true=exp.DPipe(
                        this=exp.DPipe(this=int_text(floor(xc())), expression=_text(".")),
                        expression=int_text(floor(frac)),
                    ),
                ),
                exp.If(this=big, true=int_text(xc())),
                exp.If(this=exp.GT(this=xc(), expression=_num(0)), true=_text("+inf")),
                exp.If(this=exp.LT(this=xc(), expression=_num(0)), true=_text("-inf")),
            ],
            default=_text("nan"),
        )
        return text
    if kind is SqlType.BOOLEAN:
        return exp.Case(
            ifs=[
                exp.If(this=value, true=_text("t")),
                exp.If(this=exp.Not(this=value.copy()), true=_text("f")),
            ],
            default=_text("null"),
        )
    text_value = value if kind is SqlType.TEXT else _cast(value, exp.DataType.Type.TEXT)
    return exp.Coalesce(
        this=exp.DPipe(this=_text("v"), expression=text_value), expressions=[_text("null")]
    )


def _plain_text(value: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=_cast(value, exp.DataType.Type.TEXT), expressions=[_text("null")])


def row_hash(
    secret: int,
    parts: list[tuple[exp.Expression, SqlType | None]],
    *,
    portable: bool,
    dialect: str = "duckdb",
) -> exp.Expression:
    """The keyed hash that orders a unit's rows for contribution bounding.

    Native (the default): the engine's own 64-bit hash of the typed values, keyed by the
    secret — DuckDB's ``hash`` (about 3x faster than md5 on 10 M rows) or PostgreSQL's
    ``hash_record_extended(ROW(...), secret)`` (PostgreSQL 14+; on 1 M rows 0.14 s where
    md5 of text takes 0.42 s). The engines' hashes differ, so they keep different rows.

    Portable: the first 64 bits of ``md5(secret ‖ canonical text of each part)`` as 16 hex
    digits, which DuckDB and PostgreSQL compute identically, so both engines keep the very
    same rows for a given secret (the differential tests use it). A part whose kind is
    ``None`` is an integer or date column, whose text form is already the same everywhere.
    """
    if not portable and dialect == "postgres":
        row = exp.Tuple(expressions=[p for p, _ in parts])
        return exp.Anonymous(this="hash_record_extended", expressions=[row, _num(secret)])
    if not portable and dialect == "spark":  # 64-bit, seeded by nothing but its arguments
        return exp.Anonymous(this="xxhash64", expressions=[_num(secret), *(p for p, _ in parts)])
    if not portable:
        return exp.Anonymous(this="hash", expressions=[_num(secret), *(p for p, _ in parts)])
    text: exp.Expression = _text(f"{secret:x}")
    for value, kind in parts:
        text = exp.DPipe(
            this=exp.DPipe(this=text, expression=_text("|")),
            expression=canonical_text(value, kind) if kind is not None else _plain_text(value),
        )
    return exp.Left(this=exp.MD5(this=text), expression=_num(16))


# --------------------------------------------------------------------------------------------
# The PostgreSQL pass


_ORDERING = (exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between)


def bytewise(e: exp.Expression) -> exp.Expression:
    """``(e) COLLATE "C"``: text compared bytewise, as DuckDB does, not by the database's
    collation (PostgreSQL)."""
    return exp.Collate(this=exp.Paren(this=e), expression=exp.Identifier(this="C", quoted=True))


def _is_text(node: exp.Expression, column_types: dict[str, SqlType]) -> bool:
    """Do all operands of a comparison have a text type (and one of them is not a literal)?"""
    operands = (
        [node.this, node.expression]
        if not isinstance(node, exp.Between)
        else [node.this, node.args["low"], node.args["high"]]
    )
    try:
        kinds = [guarded_type(o, column_types) for o in operands]
    except Exception:  # an operand the type checker does not model is not text
        return False
    return all(k in (SqlType.TEXT, SqlType.UNKNOWN) for k in kinds) and SqlType.TEXT in kinds


def to_postgres(tree: exp.Select, column_types: dict[str, SqlType]) -> exp.Select:
    """Rewrite a finished DuckDB-flavoured tree so that PostgreSQL computes the same values.

    * ``TRY_CAST`` → :func:`safe_cast` (sqlglot would print a plain, failing ``CAST``), the
      cast to REAL inside ``rewrite/real.real_rounding`` a plain one;
    * ``a / b`` → ``CAST(a AS DOUBLE PRECISION) / b`` unless ``a`` is already a double: the
      division of dpproxy's SQL is real division on every backend;
    * ``<``, ``<=``, ``>``, ``>=`` and BETWEEN on text compare ``COLLATE "C"`` (bytewise, as
      DuckDB), not by the database's collation.
    """
    nodes = list(tree.dfs())
    # decided on the tree as built, before the pass below changes the branches' operands
    in_range = {id(n) for n in nodes if isinstance(n, exp.TryCast) and in_range_real(n)}
    for visited in reversed(nodes):
        node = cast(exp.Expression, visited)
        parent, key, index = node.parent, node.arg_key, node.index
        new: exp.Expression = node
        if isinstance(node, exp.TryCast):
            source = guarded_type(node.this, column_types)
            new = safe_cast(node, source, real_in_range=id(node) in in_range)
        elif isinstance(node, exp.Div):
            numerator = node.this
            if not (isinstance(numerator, exp.Cast) and numerator.to.this is DOUBLE):
                node.set("this", _cast(numerator, DOUBLE))
        elif isinstance(node, _ORDERING) and _is_text(node, column_types):
            # Text order bytewise, as DuckDB does, whatever the database's collation.
            node.set("this", bytewise(node.this))
        if new is not node and parent is not None and key:
            parent.set(key, new, index)
    return tree
