"""``CAST(x AS REAL)``: one IEEE float32 rounding on every backend, never an error.

**What the engines do natively.** ``REAL`` (``FLOAT4``, ``FLOAT(p)`` for p ≤ 24) is the IEEE
single-precision float. Within its range, DuckDB and PostgreSQL both round a double to the
nearest float32 (ties to even: 16777217 → 16777216, 0.1 → 0.10000000149011612). They part at
the ends: a double that rounds to ±inf (``|x| ≥ 2¹²⁸ − 2¹⁰³ ≈ 3.4028235677973366e38``) is NULL
under DuckDB's ``TRY_CAST`` and raises 22003 ("value out of range: overflow") on PostgreSQL,
and a non-zero double that rounds to 0 (``|x| ≤ 2⁻¹⁵⁰ ≈ 7.0e-46``) is 0 on DuckDB and raises
22003 ("underflow") on PostgreSQL. An error decided by one row's value is an answer no noise
covers, so PostgreSQL's own cast is never applied to such a value. And a REAL's arithmetic
(``r * r``) is float32 arithmetic, which overflows near 3.4e38: on DuckDB to inf, on
PostgreSQL with an error. dpproxy used to send ``TRY_CAST(x AS REAL)`` to DuckDB and a cast to
``DOUBLE PRECISION`` to PostgreSQL, which answered differently (``CAST(x AS REAL) > 0`` over
1e308 and 5e-324: 0 rows on DuckDB, 2 on PostgreSQL; ``= 16777216`` over 16777217: 1 and 0).

**The semantics chosen.** ``CAST(x AS REAL)`` is ``x`` as a DOUBLE (dpproxy's total cast to
double: text through its number grammar, an integer or DECIMAL widened, a boolean 1.0/0.0)
rounded to the nearest float32, ties to even, and *returned as a DOUBLE*, with total rules
at the ends:

* a finite double beyond the largest REAL (|x| > 3.4028234663852886e38) is NULL — the rule of
  every cast that could fail on a value ("a cast to an integer out of range is NULL"), and
  what DuckDB's ``TRY_CAST`` gives, except for the doubles between the largest REAL and
  2¹²⁸ − 2¹⁰³ (less than one REAL unit beyond it), which IEEE would round down to it;
* a double of magnitude at most 2⁻¹⁵⁰, zeros included, is 0.0 (IEEE rounds it to a zero of
  its sign; the sign is dropped, which only a cast to text could show);
* NaN and ±inf stay NaN and ±inf; NULL stays NULL.

Why this one. It is *identical*: one tree (:func:`real_rounding`) for every backend, whose
conditions compare doubles with constants that are doubles exactly, and whose only cast to
REAL is evaluated where ``2⁻¹⁵⁰ < |x| ≤ REAL_MAX``, where every engine's float32 conversion
is the same correctly rounded IEEE operation and none raises (Spark's ANSI cast checks
against REAL_MAX itself, hence that bound rather than 2¹²⁸ − 2¹⁰³). It is *total*: no value
reaches a cast that can fail (PostgreSQL evaluates a CASE's WHENs in order and only the THEN
chosen). It is *honest*: within REAL's range the value is exactly the REAL PostgreSQL gives
(a float32 is a double exactly, so returning it as a DOUBLE changes no value), and the rows
PostgreSQL would refuse with an error follow the rules above. Returning a DOUBLE keeps all
further arithmetic IEEE double arithmetic on every engine, as ``rewrite/guard.py`` does for
every other type (a REAL's own arithmetic, ``r * r``, is float32 arithmetic that overflows
near 3.4e38 — to inf on DuckDB, with an error on PostgreSQL); and its values lie in
{0} ∪ [2⁻¹⁴⁹, REAL_MAX] (or NaN, ±inf), a fixed span for ``rewrite/floats.py``, which needs
no taming inside it (:func:`real_span`). Treating REAL as DOUBLE would have been cheaper
still, but ``CAST(16777217 AS REAL) = 16777216`` would then be false, against what REAL
means. It is *cheap*: three comparisons per row. One difference from PostgreSQL's native
cast stays: an integer beyond 2⁵³ or a long decimal string is rounded to a double first,
then to a float32, where PostgreSQL rounds it once; the two can differ in the last bit.
"""

from __future__ import annotations

import math
import struct

from sqlglot import exp

from dpproxy.sql.treekey import tree_key

REAL = exp.DataType.Type.FLOAT  # sqlglot's name for REAL / FLOAT4
DOUBLE = exp.DataType.Type.DOUBLE

REAL_MAX = float.fromhex("0x1.fffffep+127")  # 3.4028234663852886e38, the largest REAL
#: From this magnitude on a double rounds to ±inf as a REAL (half-way to 2¹²⁸, ties to even).
OVERFLOW = float.fromhex("0x1.ffffffp+127")  # 3.4028235677973366e38
#: Up to this magnitude (inclusive) a double rounds to ±0 as a REAL.
UNDERFLOW = 2.0**-150  # 7.006492321624085e-46
REAL_MIN = 2.0**-149  # the least positive REAL, 1.401298464324817e-45
MAX_DOUBLE = "1.7976931348623157e308"


def _num(text: str) -> exp.Literal:
    return exp.Literal(this=text, is_string=False)


def _magnitude(d: exp.Expression) -> exp.Expression:
    return exp.Abs(this=d.copy())


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """The very same tree (sqlglot's ``==`` compares some names lower-cased)."""
    key = tree_key(a)
    return key is not None and key == tree_key(b)


def real_rounding(d: exp.Expression, *, native_cast: bool = False) -> exp.Expression:
    """``d`` (a DOUBLE expression) rounded to a REAL, as a DOUBLE (module docstring)::

        CAST(CASE WHEN ABS(d) <= 2^-150 THEN 0.0
                  WHEN ABS(d) <= 3.4028234663852886e38 THEN TRY_CAST(d AS REAL)
                  WHEN ABS(d) > 1.7976931348623157e308 THEN d      -- ±inf, NaN
             END AS DOUBLE)                                       -- else NULL

    The tree the rewrite builds for every backend (DuckDB prints it as it is). The cast in the
    second branch is a ``TRY_CAST``, so that the guards never wrap it again; the PostgreSQL
    and Spark passes print it as their plain cast (:func:`in_range_real`), which cannot fail
    there. ``native_cast``: write that plain cast at once (those passes, for a REAL cast they
    find outside this shape)."""
    cast_type = exp.Cast if native_cast else exp.TryCast
    rounded = cast_type(this=d.copy(), to=exp.DataType(this=REAL))
    case = exp.Case(
        ifs=[
            exp.If(
                this=exp.LTE(this=_magnitude(d), expression=_num(repr(UNDERFLOW))),
                true=_num("0.0"),
            ),
            exp.If(this=exp.LTE(this=_magnitude(d), expression=_num(repr(REAL_MAX))), true=rounded),
            exp.If(this=exp.GT(this=_magnitude(d), expression=_num(MAX_DOUBLE)), true=d.copy()),
        ]
    )
    return exp.Cast(this=case, to=exp.DataType(this=DOUBLE))


def in_range_real(node: exp.Cast) -> bool:
    """Is ``node`` the cast of :func:`real_rounding`'s second branch: ``TRY_CAST(v AS REAL)``
    as the THEN of ``WHEN ABS(v) <= REAL_MAX``, right after ``WHEN ABS(v) <= 2⁻¹⁵⁰`` in the
    same CASE? Then it is evaluated only for 2⁻¹⁵⁰ < |v| <= :data:`REAL_MAX` (NULL and NaN
    fail both tests), where no engine's cast to REAL raises (nor Spark's ANSI one, which
    checks the value against the largest REAL, not against what rounds to it). Decided from
    the tree alone, so a copy of it, whoever made it, is recognised; anything else is not."""
    branch = node.parent
    if node.to.this is not REAL or not isinstance(branch, exp.If) or node.arg_key != "true":
        return False
    case = branch.parent
    if not isinstance(case, exp.Case) or branch.arg_key != "ifs" or not branch.index:
        return False
    before = case.args["ifs"][branch.index - 1]
    v = node.this
    tests = ((branch.this, REAL_MAX), (before.this, UNDERFLOW))
    for test, limit in tests:
        if type(test) is not exp.LTE or not _same(test.this, exp.Abs(this=v.copy())):
            return False
        bound = test.expression
        if not isinstance(bound, exp.Literal) or bound.is_string or bound.name != repr(limit):
            return False
    return True


def rounded_operand(node: exp.Expression) -> exp.Expression | None:
    """``d`` when ``node`` is :func:`real_rounding` of ``d`` (its shape exactly, whoever built
    it), else ``None``: the range analyses then bound it through ``d`` (:func:`real_span`,
    :func:`round_to_real`) instead of through its branches one by one."""
    if type(node) is not exp.Cast or node.to.this is not DOUBLE:
        return None
    case = node.this
    if type(case) is not exp.Case or case.args.get("default") is not None:
        return None
    ifs = case.args.get("ifs") or []
    if len(ifs) != 3:
        return None
    rounded = ifs[1].args.get("true")
    if not isinstance(rounded, exp.TryCast | exp.Cast) or not in_range_real(rounded):
        return None
    d: exp.Expression = rounded.this
    zero, rest = ifs[0].args.get("true"), ifs[2]
    if not (isinstance(zero, exp.Literal) and not zero.is_string and zero.name == "0.0"):
        return None
    test = rest.this
    value = rest.args.get("true")
    if type(test) is not exp.GT or not _same(test.this, exp.Abs(this=d.copy())):
        return None
    if not isinstance(value, exp.Expression) or not _same(value, d):
        return None
    bound = test.expression
    if not isinstance(bound, exp.Literal) or bound.is_string or bound.name != MAX_DOUBLE:
        return None
    return d


def round_to_real(x: float) -> float:
    """``x`` rounded to the nearest REAL (ties to even), as a double, as
    :func:`real_rounding` gives it (but ±0 for a tiny ``x``); a finite ``x`` beyond
    :data:`REAL_MAX`, which gives NULL there, gives ±:data:`REAL_MAX`: monotone, so the
    rounded ends of an interval bound the rounded values of every point in it."""
    if math.isnan(x) or math.isinf(x):
        return x
    if abs(x) > REAL_MAX:  # NULL: any bound holds
        return math.copysign(REAL_MAX, x)
    rounded: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return rounded


def real_value(x: float | None) -> float | None:
    """:func:`real_rounding` on one value, in Python: for the casts dpproxy computes itself,
    on released values (``release/evaluation.py``)."""
    if x is None or math.isnan(x) or math.isinf(x):
        return x
    if abs(x) > REAL_MAX:
        return None
    return 0.0 if abs(x) <= UNDERFLOW else round_to_real(x)


#: Decimal exponents of the largest REAL and of the least positive one.
REAL_MAX_EXPONENT = math.log10(REAL_MAX)  # 38.53
REAL_MIN_EXPONENT = math.log10(REAL_MIN)  # -44.85


def real_span() -> tuple[float, float]:
    """Decimal exponents (largest, least non-zero) of the finite non-zero magnitudes that
    :func:`real_rounding` can give, whatever its operand: its values are NULL, NaN, ±inf, 0 or
    REALs, whose magnitudes lie in [2⁻¹⁴⁹, REAL_MAX] (each rounded outward by 10⁻⁹)."""
    return REAL_MAX_EXPONENT + 1e-9, REAL_MIN_EXPONENT - 1e-9
