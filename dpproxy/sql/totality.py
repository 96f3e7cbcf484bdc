"""The allowlist of row-level operations, each with its totality argument.

Every operator and function that an accepted query may evaluate over private data is listed
in :data:`TOTALITY` with a written argument: which inputs could make it fail on DuckDB or
PostgreSQL, and the guard (in the typing of :mod:`dpproxy.sql.types` or in the rewrite of
:mod:`dpproxy.rewrite.guard` / :mod:`dpproxy.rewrite.floats` / :mod:`dpproxy.rewrite.dialect`)
that makes it total. :func:`check_allowed` refuses (42883) any node of a row-level expression
whose class is not listed, independently of the type checker: a function added to the type
checker without an argument here is still refused.

Together these give the invariant stated in :mod:`dpproxy.sql.types`.
"""

from __future__ import annotations

import re
import typing

from sqlglot import exp

from dpproxy.errors import UndefinedFunction

_ARITH_ARGUMENT = (
    "integer and decimal operands are computed as DOUBLE (rewrite/guard.py), so no integer "
    "or DECIMAL overflow exists; the magnitude analysis of rewrite/floats.py tames float "
    "leaves and refuses (0A000) any expression whose intermediate values could leave "
    "±1e300, so PostgreSQL's float8 overflow and underflow errors cannot fire"
)
_SIZE_ARGUMENT = (
    "PostgreSQL allocates a multiple of the text and refuses an allocation of 1 GB, so a text "
    "column in a value position of the operand reads as NULL beyond 262,144 characters and an "
    "operand that could exceed 16 MB is refused, 54001 (rewrite/textsize.py): every allocation "
    "stays within 512 MB"
)

#: Node class → why evaluating it per row cannot raise, and by which guard.
TOTALITY: dict[type[exp.Expression], str] = {
    exp.Paren: "grouping only",
    exp.Column: "reads a column of a type the schema declares; never fails",
    exp.Literal: (
        "numbers must be finite doubles (22003 otherwise); one with more than 18 digits "
        "before or after its point, or an integer beyond BIGINT, is printed in exponent form "
        "(rewrite/nodes.py, double_text): a DOUBLE on DuckDB, which would otherwise unify it "
        "with an integer column in a DECIMAL(38, s) too narrow for the column's values; a "
        "string literal in a typed context is converted to a typed constant before any data "
        "is read (22P02 otherwise)"
    ),
    exp.Boolean: "a constant",
    exp.Null: "a constant",
    exp.Add: _ARITH_ARGUMENT,
    exp.Sub: _ARITH_ARGUMENT,
    exp.Mul: _ARITH_ARGUMENT,
    exp.Div: _ARITH_ARGUMENT + "; the divisor is wrapped in NULLIF(·, 0)",
    exp.IntDiv: _ARITH_ARGUMENT + "; the divisor is wrapped in NULLIF(·, 0)",
    exp.Mod: (
        "rewritten as a − b·TRUNC(a / NULLIF(b, 0)) in DOUBLE, one IEEE formula on both "
        "engines; " + _ARITH_ARGUMENT
    ),
    exp.Neg: _ARITH_ARGUMENT + " (−INT_MIN cannot occur in DOUBLE)",
    exp.Abs: _ARITH_ARGUMENT + " (|INT_MIN| cannot occur in DOUBLE)",
    exp.Round: (
        "rewritten as SIGN(x)·FLOOR(|x|·10^d + 0.5)/10^d in DOUBLE for |x| < 10^(300−d), "
        "x itself beyond; d is a literal (negative: SIGN(x)·FLOOR(|x|/10^k + 0.5)·10^k, to "
        "tens, hundreds, ... for d = −k, k <= 300)"
    ),
    exp.Sign: "DOUBLE in, −1/0/1 out; never fails (NaN gives 0 on both engines)",
    exp.Pi: "a constant (the double nearest π on both engines)",
    exp.Sqrt: (
        "printed as CASE WHEN x >= 0 THEN SQRT(x) END over x as DOUBLE (rewrite/domains.py): "
        "PostgreSQL and DuckDB raise only for x < 0; NaN and +inf give NaN and +inf on both; "
        "the result lies within 1.4e154, so rewrite/floats.py bounds its magnitude"
    ),
    exp.Ln: (
        "printed as CASE WHEN x > 0 THEN LN(x) END over x as DOUBLE: both engines raise only "
        "for x <= 0; |LN(x)| <= 745 for every finite positive double, NaN and +inf pass"
    ),
    exp.Log: (
        "LOG(x), base 10 on both engines: printed as CASE WHEN x > 0 THEN LOG(x) END over x as "
        "DOUBLE, as LN; LOG(b, x) with a literal base b > 0, b <> 1 (others refused before any "
        "read: 42883 for a base that is not a literal, 2201E for b <= 0, 22012 for b = 1, as "
        "PostgreSQL would on every row): printed as CASE WHEN x > 0 THEN LN(x) / LN(b) END, "
        "LN(b) of a positive literal never fails and is not 0; |result| <= 745 / |ln b|"
    ),
    exp.Cbrt: (
        "CBRT(x) over x as DOUBLE: defined for every double on both engines (NaN and ±inf give "
        "NaN and ±inf, which rewrite/floats.py treats as it treats a float column); the "
        "result's magnitude is within [1.7e-108, 5.7e102] or 0"
    ),
    exp.Exp: (
        "printed as CASE WHEN x BETWEEN -345 AND 345 THEN EXP(x) END over x as DOUBLE: "
        "PostgreSQL raises on overflow (x > 709.78) and underflow (x < -745.1); inside, the "
        "result lies in [1e-150, 1e150] on both engines (NaN and ±inf give NULL)"
    ),
    exp.Pow: (
        "POWER(x, p) and x ^ p with a literal integer 1 <= p <= 64, or a literal p that is not "
        "a whole number with 0 < |p| <= 64 (42883 otherwise). An integer p is printed as CASE "
        "WHEN |x| <= 10^(150/p) AND (|x| >= 10^(-150/p) OR x = 0) THEN POWER(x, p) END over x "
        "as DOUBLE; a fractional one as CASE WHEN x >= 10^(-150/|p|) AND x <= 10^(150/|p|) "
        "THEN POWER(x, p) WHEN x = 0 THEN 0 END (p > 0; for p < 0 no 0 branch): PostgreSQL "
        "raises for a negative number to a fractional power and for 0 to a negative one, "
        "which are NULL here; the result is 0 or within [1e-150, 1e150], so it neither "
        "overflows nor underflows (PostgreSQL raises on both); NaN, ±inf give NULL"
    ),
    exp.WidthBucket: (
        "WIDTH_BUCKET(x, lo, hi, n) with literal bounds lo <> hi within ±1e300 and a literal "
        "1 <= n <= 1000, checked before any data is read (PostgreSQL raises for n <= 0, lo = "
        "hi, NaN; DuckDB has no such function): printed as CASE WHEN x < lo THEN 0 WHEN x >= "
        "hi THEN n + 1 WHEN x >= t_k THEN k ... END over x as DOUBLE, the thresholds t_k "
        "computed from PostgreSQL 15's formula (sql/buckets.py): comparisons only, which never "
        "fail and agree on both engines; the result is an integer in 0 ... n + 1"
    ),
    exp.Floor: "DOUBLE or integer in, same type out; never fails",
    exp.Ceil: "DOUBLE or integer in, same type out; never fails",
    exp.EQ: "operands of one type (checked statically); comparison never fails",
    exp.NEQ: "as =",
    exp.GT: "as =",
    exp.GTE: "as =",
    exp.LT: "as =",
    exp.LTE: "as =",
    exp.NullSafeEQ: "as =",
    exp.NullSafeNEQ: "as =",
    exp.And: "boolean operands (checked statically)",
    exp.Or: "boolean operands (checked statically)",
    exp.Not: "a boolean operand (checked statically)",
    exp.Is: (
        "only IS NULL, IS TRUE, IS FALSE (42601 otherwise, as PostgreSQL's grammar); "
        "IS TRUE/FALSE need a boolean operand (42804)"
    ),
    exp.In: "a list of values of the operand's type, string literals converted statically",
    exp.Exists: (
        "EXISTS / NOT EXISTS (and IN / NOT IN (SELECT …), printed as them) over one table's rows: "
        "reading rows never fails, and the subquery's WHERE is typed, checked against this "
        "list and guarded like any WHERE clause (sql/semijoins.py); no aggregate, LIMIT or "
        "scalar subquery, so no cardinality error"
    ),
    exp.Between: "as the two comparisons it stands for",
    exp.Like: (
        "pattern must be a string literal that does not end with an unpaired escape "
        "(PostgreSQL raises on it only for rows that reach that point); ESCAPE '\\' added"
    ),
    exp.ILike: "as LIKE; it lowers its text on PostgreSQL: " + _SIZE_ARGUMENT,
    exp.Escape: "added by the rewrite to LIKE with a literal escape character",
    exp.Case: "branches unified statically; a condition never raises; result untouched",
    exp.If: "a WHEN branch of CASE",
    exp.Coalesce: (
        "arguments unified statically (string literals converted; a number constant beyond "
        "REAL's range written as a DOUBLE, which PostgreSQL would cast to a REAL column's "
        "type and fail: rewrite/guard.real_safe, as in GREATEST, LEAST, IN and CASE); never "
        "fails"
    ),
    exp.Greatest: "arguments unified statically (string literals converted); never fails",
    exp.Least: "arguments unified statically (string literals converted); never fails",
    exp.Nullif: "arguments unified statically (string literals converted); never fails",
    exp.Lower: "text in, text out; " + _SIZE_ARGUMENT,
    exp.Upper: "text in, text out; " + _SIZE_ARGUMENT,
    exp.Trim: "text in, text out; " + _SIZE_ARGUMENT,
    exp.Length: "text in, integer out; never fails (its arithmetic is computed as DOUBLE)",
    exp.StrPosition: (
        "STRPOS(s, t)/POSITION(t IN s), two texts in, the 1-based character position of t "
        "(0: absent, 1 for an empty t) out; never fails, engines agree on multibyte UTF-8"
    ),
    exp.Left: (
        "LEFT(s, n), n a literal |n| < 2^31 (DuckDB raises beyond 2^32); negative n drops "
        "|n| characters from the end on both engines; counts characters, never fails"
    ),
    exp.Right: "as LEFT, from the end (negative n drops |n| characters from the start)",
    exp.Replace: (
        "REPLACE(s, a, b), a and b string literals, b no longer than a in bytes: the result is "
        "never longer than s, so PostgreSQL's length limit cannot be hit; non-overlapping, left "
        "to right, case-sensitive on both engines; an empty a returns s"
    ),
    exp.Substring: (
        "literal, non-negative start and length only (PostgreSQL raises on a negative "
        "length; the engines disagree on negative starts)"
    ),
    exp.DPipe: "one operand must be text; " + _SIZE_ARGUMENT,
    exp.Cast: (
        "a cast that could fail becomes TRY_CAST on DuckDB; on PostgreSQL a CASE that casts "
        "only values matching a literal-only pattern of strings every engine reads alike, "
        "and numbers only inside the target's range (rewrite/dialect.py); casts that widen "
        "(integer or float to DOUBLE) cannot fail; a cast to REAL is the value as a DOUBLE "
        "rounded to float32 by a CASE that casts only magnitudes within (2^-150, REAL's "
        "largest] (beyond: NULL; below: 0.0), returned as a DOUBLE (rewrite/real.py)"
    ),
    exp.TryCast: "as CAST",
    exp.Extract: (
        "a date in, a small integer out; never fails (only the fields of a date both engines "
        "compute alike; DATE_PART('field', d) is read as EXTRACT); printed inside CASE WHEN d "
        "BETWEEN 0001-01-01 AND 9999-12-31 (sql/dates.py), where the engines agree: beyond, "
        "BC years, ISOYEAR and ±infinity differ"
    ),
    exp.TimestampTrunc: (
        "DATE_TRUNC on a date, typed DATE; on a constant folded in Python (sql/dates.py); "
        "on a column printed without date_trunc (timestamptz: session time zone, fails "
        "beyond year 294276) as d − CAST(EXTRACT(ISODOW|DAY|DOY FROM d) − 1 AS INTEGER) or "
        "MAKE_DATE(year, 3·quarter − 2, 1), inside CASE WHEN d BETWEEN 0001-01-01 AND "
        "9999-12-31: there the integers are small and the result a date between 0001-01-01 "
        "(a Monday) and d; other dates, ±infinity included, give NULL on both engines"
    ),
    exp.DateTrunc: "as DATE_TRUNC (TimestampTrunc)",
    exp.TimeToStr: (
        "TO_CHAR(d, template) of a date, the template a literal of YYYY, MM, DD and - / . or "
        "space only (42883 otherwise): printed as substrings of CAST(d AS TEXT), the ISO "
        "'YYYY-MM-DD' on both engines, inside CASE WHEN d BETWEEN 0001-01-01 AND 9999-12-31 "
        "(sql/tochar.py); substrings and || never fail"
    ),
    exp.DateDiff: (
        "date − date with a column (sql/dates.py): CASE WHEN both lie in 0001-01-01 … "
        "9999-12-31 THEN CAST(a − b AS INTEGER) END; there both engines count the same days "
        "and |a − b| ≤ 3652058 fits an integer (PostgreSQL raises on ±infinity, outside the "
        "CASE); computed as DOUBLE under arithmetic, like any integer"
    ),
    exp.DateAdd: (
        "a date column ± INTERVAL or ± integer days (sql/dates.py): months, then days, each "
        "inside CASE WHEN d BETWEEN lo AND hi, where lo … hi are exactly the dates whose "
        "result stays in 0001-01-01 … 9999-12-31 (computed before the data is read; refused, "
        "22008, when there are none): date + integer and CAST(date + INTERVAL 'n' MONTH AS "
        "DATE) cannot overflow there, and clamp to the month's end alike on both engines"
    ),
}

# Parts of the nodes above that are not evaluated by themselves.
_STRUCTURAL = (
    exp.Identifier,
    exp.DataType,
    exp.DataTypeParam,
    exp.Var,
    exp.Star,
)


_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")

#: sqlglot's names for functions that PostgreSQL spells otherwise.
_USER_NAMES: dict[type[exp.Expression], str] = {
    exp.TimestampTrunc: "date_trunc",
    exp.DateTrunc: "date_trunc",
    exp.TimestampAdd: "date_add",
    exp.DateAdd: "date_add",
    exp.StrToTime: "to_timestamp",
    exp.UnixToTime: "to_timestamp",
    exp.TimeToStr: "to_char",
    exp.StrToDate: "to_date",
    exp.StrPosition: "strpos",  # printed as POSITION(x IN y) for PostgreSQL
}


def user_name(n: exp.Expression) -> str:
    """The name of a function as the analyst wrote it (never sqlglot's internal name).

    >>> user_name(exp.maybe_parse("DATE_TRUNC('month', d)", dialect="postgres"))
    'date_trunc'
    >>> user_name(exp.maybe_parse("STRING_AGG(a, ',')", dialect="postgres"))
    'string_agg'
    """
    if isinstance(n, exp.Anonymous):
        return str(n.this).lower()
    if type(n) in _USER_NAMES:
        return _USER_NAMES[type(n)]
    if isinstance(n, exp.Func):
        # PostgreSQL's spelling of the call (STRING_AGG, not sqlglot's GROUP_CONCAT)
        try:
            printed = n.sql("postgres")
        except Exception:  # a node the printer cannot print: sqlglot's name
            printed = ""
        m = _CALL.match(printed)
        return m.group(1).lower() if m else n.sql_name().lower()
    return n.key


def check_allowed(node: exp.Expression) -> None:
    """Refuse (42883) a row-level expression that uses anything without a totality argument.

    >>> check_allowed(exp.maybe_parse("ABS(age) + 1 > 3"))
    >>> check_allowed(exp.maybe_parse("ATAN(age) > 3"))
    Traceback (most recent call last):
    ...
    dpproxy.errors.UndefinedFunction: 42883: function atan() is not supported
    HINT: dpproxy accepts only functions that provably cannot fail on a row; see SECURITY.md
    """
    for n in node.walk():
        if type(n) in TOTALITY or isinstance(n, _STRUCTURAL):
            continue
        name = user_name(typing.cast(exp.Expression, n))
        raise UndefinedFunction(
            f"function {name}() is not supported",
            hint="dpproxy accepts only functions that provably cannot fail on a row; "
            "see SECURITY.md",
        )
