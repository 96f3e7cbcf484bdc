"""SQL leaves the rewrite builds directly, without parsing: number literals (exact for a
rational, in exponent form where DuckDB would read a too wide DECIMAL: :func:`double_text`),
table references and casts to DOUBLE.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from sqlglot import exp


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


def as_double(col: exp.Expression) -> exp.Expression:
    return exp.Cast(this=col, to=exp.DataType(this=exp.DataType.Type.DOUBLE))
