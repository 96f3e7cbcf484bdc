"""The constant arguments of the row-level math functions, checked before any data is read:
POWER's exponent, LOG's base, and which argument a function is computed of. The forms that
make them total are in ``rewrite/domains.py``; the arguments in ``sql/totality.py``."""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from dpproxy.errors import DivisionByZero, InvalidArgumentForLog, UndefinedFunction

EXP_LIMIT = 345  # EXP(x) is computed for |x| <= 345 only (rewrite/domains.py): e^345 < 1e150
MAX_POWER = 64  # POWER(x, p): a literal |p| <= MAX_POWER (rewrite/domains.py)
POWER_RANGE = 150  # |POWER(x, p)| is 0 or within [10^-150, 10^150]


def power_limits(n: int | Fraction) -> tuple[str, str]:
    """The literals ``lo``, ``hi`` with ``lo^n >= 1e-150`` and ``hi^n <= 1e150`` (n > 0), as
    printed (a little inside the exact limits, so that rounding cannot cross them)."""
    e = POWER_RANGE / float(n)
    return f"{10**-e * 1.000001:.9e}", f"{10**e * 0.999999:.9e}"


def numeric_constant(node: exp.Expression) -> Fraction | None:
    """The exact value of a numeric literal, parenthesised or negated (``-2``, ``(0.5)``);
    None for anything else."""
    sign = 1
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        node, sign = node.this, -1
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        return sign * Fraction(node.name)
    except ValueError:
        return None


def power_exponent(node: exp.Pow) -> Fraction | None:
    """The exponent of ``POWER(x, p)`` / ``x ^ p`` when it is one dpproxy computes per row: a
    literal integer 1 … :data:`MAX_POWER`, or a literal that is not a whole number with
    0 < |p| <= :data:`MAX_POWER` (``rewrite/domains.py`` has both forms); else None."""
    p = numeric_constant(node.expression)
    if p is None:
        return None
    whole = p.denominator == 1
    if (whole and 1 <= p <= MAX_POWER) or (not whole and 0 < abs(p) <= MAX_POWER):
        return p
    return None


def log_base(node: exp.Log) -> Fraction | None:
    """The constant base of ``LOG(b, x)`` (None for ``LOG(x)``, base 10): a literal b > 0,
    b ≠ 1 — any other constant fails on every row in PostgreSQL (2201E, 22012) and is refused
    before data is read; a base that is not a literal is refused too (42883)."""
    if node.args.get("expression") is None:
        return None
    b = numeric_constant(node.this)
    if b is None:
        raise UndefinedFunction(
            "function log(base, x) needs a constant base",
            hint="write LOG(2, x) with a number as the base, or LN(x) / LN(base)",
        )
    if b <= 0:
        raise InvalidArgumentForLog("cannot take logarithm of a negative number or zero")
    if b == 1:
        raise DivisionByZero("division by zero", hint="LOG(1, x) divides by LN(1) = 0")
    return b


def math_operand(node: exp.Expression) -> exp.Expression:
    """The argument a math function is computed of: ``x`` of ``LOG(b, x)``, else ``this``."""
    operand = node.args.get("expression") if isinstance(node, exp.Log) else None
    out = operand if operand is not None else node.args.get("this")
    assert isinstance(out, exp.Expression)
    return out
