"""SQRT, LN, LOG and EXP printed so that no argument can make an engine raise.

PostgreSQL raises for ``SQRT(-1)``, ``LN(0)``, ``LOG(-1)``, on ``EXP`` overflow (x > 709.78)
and underflow (x < -745.1); DuckDB for the first three. An error decided by one row's value is
an output no noise covers, so each call is printed as ``CASE WHEN <x in the domain> THEN f(x)
END`` over its argument as DOUBLE: NULL outside the domain, on both engines alike. The
condition reads the same guarded, clamped (and, in rewrite/floats.py, tamed: taming is a
function of the value) argument as the function, so it decides exactly the value the function
sees. NaN passes ``>= 0`` and ``> 0`` on both engines (it orders above every number) and both
return NaN for it; ``x BETWEEN -345 AND 345`` excludes NaN and ±inf, and keeps ``EXP(x)``
within [1e-150, 1e150] so that rewrite/floats.py can bound the arithmetic around it.
``tests/integration/test_math_forms.py`` runs the forms on both engines over extreme doubles.
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.sql.buckets import bucket_spec, thresholds
from dpproxy.sql.mathargs import EXP_LIMIT, log_base, power_exponent, power_limits

DOMAIN_FUNCS = (exp.Sqrt, exp.Cbrt, exp.Ln, exp.Log, exp.Exp, exp.Pow)


def _lit(v: int) -> exp.Literal:
    return exp.Literal(this=str(v), is_string=False)


def in_domain(n: exp.Expression, x: exp.Expression) -> exp.Expression:
    """``n`` (one of :data:`DOMAIN_FUNCS`) of the DOUBLE ``x``, NULL outside its domain.
    ``POWER(x, p)`` (p a literal checked by the type checker: an integer 1 … 64 or a
    fraction with 0 < |p| <= 64) only where ``|x^p|`` is 0 or within [1e-150, 1e150]:
    PostgreSQL raises on overflow and underflow, and for a negative ``x`` with a fractional
    ``p``. ``LOG(b, x)`` as ``LN(x) / LN(b)`` (b a positive literal other than 1), ``CBRT(x)``
    as itself (total).

    >>> x = exp.column("x")
    >>> in_domain(exp.Pow(this=x, expression=exp.Literal.number("0.5")), x).sql()[:60]
    'CASE WHEN x >= 1.000001000e-300 AND x <= 9.999990000e+299 TH'
    >>> in_domain(exp.Log(this=exp.Literal.number(2), expression=x), x).sql()
    'CASE WHEN x > 0 THEN LN(x) / LN(2.0) END'

    >>> x = exp.column("x")
    >>> in_domain(exp.Ln(this=x), x).sql()
    'CASE WHEN x > 0 THEN LN(x) END'
    >>> in_domain(exp.Exp(this=x), x).sql()
    'CASE WHEN x BETWEEN -345 AND 345 THEN EXP(x) END'
    """
    if isinstance(n, exp.Cbrt):  # defined for every double on both engines
        return exp.Cbrt(this=x)
    if isinstance(n, exp.Log) and (b := log_base(n)) is not None:  # LOG(b, x) = LN(x) / LN(b)
        ratio = exp.Div(this=exp.Ln(this=x), expression=exp.Ln(this=_number(float(b))))
        return exp.Case(ifs=[exp.If(this=exp.GT(this=x.copy(), expression=_lit(0)), true=ratio)])
    p = power_exponent(n) if isinstance(n, exp.Pow) else None
    if p is not None and p.denominator != 1:  # a fractional exponent: x >= 0 only
        lo, hi = (exp.Literal(this=v, is_string=False) for v in power_limits(abs(p)))
        inside = exp.And(
            this=exp.GTE(this=x.copy(), expression=lo),
            expression=exp.LTE(this=x.copy(), expression=hi),
        )
        ifs = [exp.If(this=inside, true=exp.Pow(this=x, expression=_number(float(p))))]
        if p > 0:  # 0^p = 0; PostgreSQL raises for 0 to a negative power: NULL
            ifs.append(exp.If(this=exp.EQ(this=x.copy(), expression=_lit(0)), true=_lit(0)))
        return exp.Case(ifs=ifs)
    if isinstance(n, exp.Pow):
        k = int(n.expression.name)
        lo, hi = (exp.Literal(this=v, is_string=False) for v in power_limits(k))
        magnitude = exp.Abs(this=x.copy())
        condition: exp.Expression = exp.And(
            this=exp.LTE(this=magnitude, expression=hi),
            expression=exp.Paren(
                this=exp.Or(
                    this=exp.GTE(this=magnitude.copy(), expression=lo),
                    expression=exp.EQ(this=x.copy(), expression=_lit(0)),
                )
            ),
        )
        return exp.Case(ifs=[exp.If(this=condition, true=exp.Pow(this=x, expression=_lit(k)))])
    if isinstance(n, exp.Sqrt):
        condition = exp.GTE(this=x.copy(), expression=_lit(0))
    elif isinstance(n, exp.Exp):
        condition = exp.Between(
            this=x.copy(), low=exp.Neg(this=_lit(EXP_LIMIT)), high=_lit(EXP_LIMIT)
        )
    else:
        condition = exp.GT(this=x.copy(), expression=_lit(0))
    call = type(n)(this=x)
    return exp.Case(ifs=[exp.If(this=condition, true=call)])


def _number(v: float) -> exp.Expression:
    """A double as a literal that reads back as exactly that double on both engines."""
    text = repr(float(v))
    lit = exp.Literal(this=text.lstrip("-"), is_string=False)
    return exp.Paren(this=exp.Neg(this=lit)) if text.startswith("-") else lit


def width_bucket(n: exp.Expression, x: exp.Expression) -> exp.Expression:
    """``WIDTH_BUCKET(x, lo, hi, k)`` of the DOUBLE ``x`` as comparisons with public
    thresholds (``sql/buckets.py`` has the totality argument): PostgreSQL 15's value for every
    number, NULL for NULL.

    >>> w = exp.maybe_parse("WIDTH_BUCKET(x, 0, 10, 2)", dialect="postgres")
    >>> width_bucket(w, exp.column("x")).sql()
    'CASE WHEN x < 0.0 THEN 0 WHEN x >= 10.0 THEN 3 WHEN x >= 5.0 THEN 2 WHEN x >= 0.0 THEN 1 END'
    """
    lo, hi, k = bucket_spec(n)
    up = lo < hi
    below, beyond = (exp.LT, exp.GTE) if up else (exp.GT, exp.LTE)
    reach = exp.GTE if up else exp.LTE
    ifs = [
        exp.If(this=below(this=x.copy(), expression=_number(lo)), true=_lit(0)),
        exp.If(this=beyond(this=x.copy(), expression=_number(hi)), true=_lit(k + 1)),
    ]
    for bucket, t in thresholds(lo, hi, k):
        ifs.append(exp.If(this=reach(this=x.copy(), expression=_number(t)), true=_lit(bucket)))
    ifs.append(exp.If(this=reach(this=x.copy(), expression=_number(lo)), true=_lit(1)))
    return exp.Case(ifs=ifs)
