"""Dates: constant date arithmetic folded before any data is read, and date functions over
date columns printed in forms that both engines compute alike and that cannot fail.

**Constants are folded here, in Python.** ``DATE 'x' ± INTERVAL 'n' unit``, ``DATE 'x' ± n``
(days), ``DATE 'x' - DATE 'y'`` (days, a number), ``DATE_TRUNC(unit, DATE 'x')`` and
``CURRENT_DATE`` become typed constants (``CAST('YYYY-MM-DD' AS DATE)`` or a number) while the
query is typed, so no engine ever computes them. ``CURRENT_DATE`` is a public constant: the
date in UTC when the query is planned (the analyst knows it as well as dpproxy does).
Months are added as PostgreSQL and DuckDB add them: the day is clamped to the month's end
(``DATE '2024-01-31' + INTERVAL '1' MONTH`` is 2024-02-29), months before days for an
interval with both. A result outside 0001-01-01 … 9999-12-31 is refused (22008) up front.

**Over date columns** (each with its argument in :mod:`dpproxy.sql.totality`):

* ``d ± INTERVAL`` / ``d ± n`` becomes :class:`~sqlglot.exp.DateAdd` (months, then days),
  printed by :func:`portable_shift` as ``CASE WHEN d BETWEEN lo AND hi THEN d + n END``
  (months: ``CAST(d + INTERVAL 'n' MONTH AS DATE)``), where ``lo … hi`` are exactly the dates
  of 0001-01-01 … 9999-12-31 whose result stays in that range (computed here by bisection:
  the shift is monotone). Inside that range both engines compute the proleptic Gregorian
  result, which never overflows; outside it — dates BC, beyond 9999, ±infinity — the value
  is NULL on both engines instead of an error for one row;
* ``a - b`` of two dates, one of them not a constant, becomes :class:`~sqlglot.exp.DateDiff`,
  printed by :func:`portable_difference` as ``CASE WHEN a BETWEEN DATE '0001-01-01' AND DATE
  '9999-12-31' AND b BETWEEN … THEN CAST(a - b AS INTEGER) END``: there both engines count the
  days alike and the result lies within ±:data:`MAX_DAYS` (PostgreSQL raises on ±infinity);
* ``DATE_TRUNC(unit, d)`` for day, week (ISO, Monday), month, quarter and year is a DATE
  (not PostgreSQL's timestamp: ``date_trunc`` on a date goes through ``timestamptz``, which
  depends on the session time zone and fails beyond year 294276). :func:`portable_trunc`
  prints ``d`` for day, ``d - CAST(EXTRACT(field FROM d) - 1 AS INTEGER)`` for week (ISODOW),
  month (DAY) and year (DOY), and ``MAKE_DATE(year, 3·quarter − 2, 1)`` for quarter, each
  inside ``CASE WHEN d BETWEEN DATE '0001-01-01' AND DATE '9999-12-31'``: there every
  intermediate is a small integer and the result a date between 0001-01-01 (a Monday) and
  the input, so nothing can fail; other dates (BC, beyond 9999, ±infinity, which PostgreSQL's
  EXTRACT(YEAR) reports as Infinity, an integer cast error) truncate to NULL on both engines;
* ``EXTRACT(field FROM d)`` (``DATE_PART`` too) is printed by :func:`portable_extract` inside
  the same CASE: the engines disagree on BC years and on ±infinity, never inside it.

:func:`date_arithmetic` and :func:`truncation` are called by :func:`dpproxy.sql.types.type_of`
and replace the node they type, in place, as the coercion of string literals does.
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dpproxy.errors import (
    AmbiguousFunction,
    DatetimeFieldOverflow,
    UndefinedFunction,
    UnsupportedQuery,
)
from dpproxy.sql.sqltype import SqlType

# isinstance tuples built once: ``A | B`` written in the call builds a union of sqlglot
# classes at every call, a microsecond each (issue 21); a tuple tests the same classes
_ADD_SUB = (exp.Add, exp.Sub)

MIN_DATE = datetime.date.min  # 0001-01-01, a Monday
MAX_DATE = datetime.date.max  # 9999-12-31
MAX_DAYS = MAX_DATE.toordinal() - MIN_DATE.toordinal()  # 3652058: |a - b| of two such dates
_RANGE_HINT = "dates run from 0001-01-01 to 9999-12-31"

#: Interval units on a date → (months, days) per unit.
_UNITS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("day", "days", "d"), (0, 1)),
    **dict.fromkeys(("week", "weeks", "w"), (0, 7)),
    **dict.fromkeys(("month", "months", "mon", "mons"), (1, 0)),
    **dict.fromkeys(("quarter", "quarters"), (3, 0)),
    **dict.fromkeys(("year", "years", "y", "yr", "yrs"), (12, 0)),
}
TRUNC_UNITS = ("day", "week", "month", "quarter", "year")
_PART = re.compile(r"\s*([+-]?[0-9]{1,9})\s*([a-z]+)\s*")
_MAX_FIELD = 10**8  # 10⁸ days or months moves every date out of 0001…9999


@dataclass(frozen=True, slots=True)
class Shift:
    """A date interval: months (added first, day clamped to the month's end), then days."""

    months: int
    days: int

    def times(self, sign: int) -> Shift:
        return Shift(self.months * sign, self.days * sign)


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _said(node: exp.Expression) -> str:
    """The expression as the analyst wrote it, near enough: ``DATE 'x'`` for typed constants."""
    return _DATE_CONSTANT.sub(r"DATE '\1'", node.sql("postgres"))[:80]


_DATE_CONSTANT = re.compile(r"CAST\('([0-9-]*)' AS DATE\)")


def interval_shift(node: exp.Interval) -> Shift:
    """The months and days of ``INTERVAL '3 months'``, ``INTERVAL '90' DAY``,
    ``INTERVAL '1 year 2 months'``; refuses time units and fractions, naming what was written.

    >>> interval_shift(exp.maybe_parse("INTERVAL '1 year 2 months'", dialect="postgres"))
    Shift(months=14, days=0)
    """
    value, unit = node.this, node.args.get("unit")
    if not isinstance(value, exp.Literal) or (unit is not None and not isinstance(unit, exp.Var)):
        raise UnsupportedQuery(
            f"{_said(node)} is not supported", hint="write INTERVAL '90' DAY or INTERVAL '3 months'"
        )
    text = f"{value.name} {unit.name.lower()}" if unit is not None else value.name
    said = f"INTERVAL '{text}'"
    months = days = 0
    pos = 0
    for part in _PART.finditer(text.lower()):
        if part.start() != pos:
            break
        pos = part.end()
        name = part.group(2)
        if name not in _UNITS:
            raise UnsupportedQuery(
                f"{said} on a date is not supported: a date has no unit {name!r}",
                hint="date intervals count days, weeks, months, quarters or years",
            )
        per_months, per_days = _UNITS[name]
        n = int(part.group(1))
        months += n * per_months
        days += n * per_days
    if pos != len(text) or pos == 0:
        raise UnsupportedQuery(
            f"{said} on a date is not supported",
            hint="write a whole number of days, weeks, months, quarters or years: "
            "INTERVAL '90' DAY, INTERVAL '3 months'",
        )
    if abs(months) >= _MAX_FIELD or abs(days) >= _MAX_FIELD:
        raise DatetimeFieldOverflow(f"interval out of range: {said}", hint=_RANGE_HINT)
    return Shift(months, days)


def _state(day: datetime.date, s: Shift) -> tuple[int, datetime.date | None]:
    """-1 / +1 when ``day`` shifted falls before / after 0001…9999 (the month step first),
    else 0 and the result. Non-decreasing in ``day``."""
    if s.months:
        y, m = divmod(day.year * 12 + day.month - 1 + s.months, 12)
        if y < MIN_DATE.year or y > MAX_DATE.year:
            return (-1 if y < MIN_DATE.year else 1), None
        day = datetime.date(y, m + 1, min(day.day, calendar.monthrange(y, m + 1)[1]))
    ordinal = day.toordinal() + s.days
    if ordinal < 1 or ordinal > MAX_DATE.toordinal():
        return (-1 if ordinal < 1 else 1), None
    return 0, datetime.date.fromordinal(ordinal)


def shift_date(day: datetime.date, s: Shift) -> datetime.date | None:
    """``day`` moved by ``s`` as both engines move it, or None outside 0001…9999.

    >>> shift_date(datetime.date(2024, 1, 31), Shift(1, 0))
    datetime.date(2024, 2, 29)
    >>> shift_date(datetime.date(2023, 3, 31), Shift(-1, 0))
    datetime.date(2023, 2, 28)
    """
    return _state(day, s)[1]


def input_range(s: Shift) -> tuple[datetime.date, datetime.date] | None:
    """The dates of 0001…9999 whose shift stays in 0001…9999 (an interval, since the shift
    is monotone), or None when there are none."""

    def first(pred: Callable[[int], bool]) -> int:  # the least ordinal where pred holds
        lo, hi = 1, MAX_DATE.toordinal() + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def state(o: int) -> int:
        return _state(datetime.date.fromordinal(o), s)[0]

    lo = first(lambda o: state(o) >= 0)
    hi = first(lambda o: state(o) > 0) - 1
    if lo > hi:
        return None
    return datetime.date.fromordinal(lo), datetime.date.fromordinal(hi)


def truncate(day: datetime.date, unit: str) -> datetime.date:
    """``DATE_TRUNC(unit, day)`` as a date (weeks start on Monday, as ISO and both engines).

    >>> truncate(datetime.date(2024, 8, 17), "quarter")
    datetime.date(2024, 7, 1)
    """
    if unit == "week":
        return day - datetime.timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    if unit == "quarter":
        return datetime.date(day.year, 3 * ((day.month - 1) // 3) + 1, 1)
    if unit == "year":
        return datetime.date(day.year, 1, 1)
    return day


def date_literal(day: datetime.date) -> exp.Cast:
    """``CAST('YYYY-MM-DD' AS DATE)``: a constant every engine reads alike."""
    return exp.Cast(
        this=exp.Literal.string(day.isoformat()), to=exp.DataType(this=exp.DataType.Type.DATE)
    )


def constant_date(node: exp.Expression) -> datetime.date | None:
    """The date a typed constant stands for (``CAST('2024-02-29' AS DATE)``), else None."""
    node = _unparen(node)
    if not (isinstance(node, exp.Cast) and node.to.this is exp.DataType.Type.DATE):
        return None
    literal = node.this
    if not (isinstance(literal, exp.Literal) and literal.is_string):
        return None
    try:
        return datetime.date.fromisoformat(literal.name.strip())
    except ValueError:
        return None


def today() -> exp.Cast:
    """``CURRENT_DATE``: today's date in UTC, when the query is planned."""
    return date_literal(datetime.datetime.now(datetime.UTC).date())


def _integer_constant(node: exp.Expression) -> int | None:
    node = _unparen(node)
    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, _unparen(node.this)
    if isinstance(node, exp.Literal) and not node.is_string and re.fullmatch(r"[0-9]+", node.name):
        return sign * int(node.name) if len(node.name) <= 9 else sign * _MAX_FIELD
    return None


def _replace(node: exp.Expression, new: exp.Expression) -> None:
    """Replace ``node`` in its tree. Row-level expressions are typed inside a wrapper; a
    post-processing expression (select list, HAVING, ORDER BY over aggregates) is typed as it
    stands, and date arithmetic alone at its top has nowhere to go: refused (0A000)."""
    if node.parent is None:
        raise UnsupportedQuery(
            f"date arithmetic on its own is not supported here: {_said(node)}",
            hint="date arithmetic works in WHERE, in GROUP BY keys and inside aggregates",
        )
    node.replace(new)


def _name(t: SqlType | None) -> str:
    return "interval" if t is None else "integer" if t is SqlType.NUMERIC else t.value


def operand_type(node: exp.Expression, t: Callable[[exp.Expression], SqlType]) -> SqlType | None:
    """The type of an operand of arithmetic; None for an interval (checked here)."""
    inner = _unparen(node)
    if isinstance(inner, exp.Interval):
        interval_shift(inner)
        return None
    return t(node)


def date_arithmetic(node: exp.Expression, a: SqlType | None, b: SqlType | None) -> SqlType:
    """Type ``a ± b`` where one side is a date or an interval (None), and replace it: by a
    constant when the date is one, else by :class:`~sqlglot.exp.DateAdd` nodes."""
    ops: dict[type[exp.Expression], str] = {
        exp.Add: "+",
        exp.Sub: "-",
        exp.Mul: "*",
        exp.Div: "/",
        exp.Mod: "%",
    }
    op = ops.get(type(node), node.key)
    refusal = UndefinedFunction(
        f"operator does not exist: {_name(a)} {op} {_name(b)}",
        hint="a date takes + or - an INTERVAL or an integer number of days; "
        "two dates subtract to a number of days",
    )
    other_type: SqlType | None
    if isinstance(node, exp.Add) and a is not SqlType.DATE and b is SqlType.DATE:
        date_side, other, other_type = node.expression, node.this, a
    elif isinstance(node, _ADD_SUB) and a is SqlType.DATE:
        date_side, other, other_type = node.this, node.expression, b
    else:
        raise refusal
    sign = -1 if isinstance(node, exp.Sub) else 1
    day = constant_date(date_side)
    if other_type is SqlType.DATE:  # date - date: a number of days
        later = constant_date(other)
        if day is not None and later is not None:
            _replace(node, exp.Literal.number(day.toordinal() - later.toordinal()))
        else:
            _replace(node, exp.DateDiff(this=date_side, expression=other, unit=exp.Var(this="DAY")))
        return SqlType.NUMERIC
    if other_type is None:
        shift = interval_shift(_unparen(other)).times(sign)  # type: ignore[arg-type]
    elif other_type is SqlType.NUMERIC and _integer_constant(other) is not None:
        shift = Shift(0, sign * _integer_constant(other))  # type: ignore[operator]
    elif other_type is SqlType.NUMERIC:
        raise UnsupportedQuery(
            f"a date takes + or - an integer constant number of days: {_said(node)}",
            hint="write d + 30 or d + INTERVAL '30' DAY",
        )
    else:
        raise refusal
    if day is not None:
        result = shift_date(day, shift)
        if result is None:
            raise DatetimeFieldOverflow(f"date out of range: {_said(node)}", hint=_RANGE_HINT)
        _replace(node, date_literal(result))
        return SqlType.DATE
    if input_range(shift) is None:
        raise DatetimeFieldOverflow(f"date out of range for every date: {_said(node)}")
    moved = date_side
    for amount, unit in ((shift.months, "MONTH"), (shift.days, "DAY")):
        if amount:
            moved = exp.DateAdd(
                this=moved, expression=exp.Literal.number(amount), unit=exp.Var(this=unit)
            )
    _replace(node, moved)
    return SqlType.DATE


def truncation(node: exp.Expression, source: SqlType) -> SqlType:
    """Type ``DATE_TRUNC(unit, d)`` (its operand typed ``source``): fold it on a constant,
    else normalise its unit; refuse units and operands it cannot compute on a date."""
    unit = node.args.get("unit")
    name = unit.name.lower() if isinstance(unit, exp.Var | exp.Literal) else ""
    if source is SqlType.NULL:
        raise AmbiguousFunction(
            "function date_trunc(unknown, unknown) is not unique",
            hint="CAST the NULL to a type: CAST(NULL AS DATE)",
        )
    if source is not SqlType.DATE:
        raise UndefinedFunction(
            f"function date_trunc(unknown, {_name(source)}) is not supported",
            hint="DATE_TRUNC takes a date: write DATE 'YYYY-MM-DD' for a constant",
        )
    if name not in TRUNC_UNITS:
        raise UnsupportedQuery(
            f"DATE_TRUNC('{name or (_said(unit) if unit is not None else '')}', …) on a date "
            "is not supported",
            hint="units of a date: " + ", ".join(TRUNC_UNITS),
        )
    day = constant_date(node.this)
    if day is not None:
        _replace(node, date_literal(truncate(day, name)))
    else:
        node.set("unit", exp.Var(this=name.upper()))
    return SqlType.DATE


# --------------------------------------------------------------------------------------------
# Printed forms (used by rewrite/guard.py on already guarded operands)


def _between(d: exp.Expression, lo: datetime.date, hi: datetime.date) -> exp.Expression:
    return exp.Between(this=d, low=date_literal(lo), high=date_literal(hi))


def _days_into(d: exp.Expression, field: str) -> exp.Expression:
    """``CAST(EXTRACT(field FROM d) - 1 AS INTEGER)``: 0 … 365, on both engines."""
    extract = exp.Extract(this=exp.Var(this=field), expression=d)
    minus = exp.Sub(this=extract, expression=exp.Literal.number(1))
    return exp.Cast(this=minus, to=exp.DataType(this=exp.DataType.Type.INT))


def _int(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType(this=exp.DataType.Type.INT))


def portable_trunc(d: exp.Expression, unit: str) -> exp.Expression:
    """``DATE_TRUNC(unit, d)`` as a DATE, total on every date either engine stores."""
    unit = unit.lower()
    if unit == "day":
        return d
    if unit == "quarter":
        year = exp.Extract(this=exp.Var(this="YEAR"), expression=d.copy())
        quarter = exp.Extract(this=exp.Var(this="QUARTER"), expression=d.copy())
        first_month = exp.Sub(
            this=exp.Mul(this=quarter, expression=exp.Literal.number(3)),
            expression=exp.Literal.number(2),
        )
        value: exp.Expression = exp.Anonymous(
            this="MAKE_DATE", expressions=[_int(year), _int(first_month), exp.Literal.number(1)]
        )
    else:
        field = {"week": "ISODOW", "month": "DAY", "year": "DOY"}[unit]
        value = exp.Sub(this=d.copy(), expression=_days_into(d.copy(), field))
    return exp.Case(ifs=[exp.If(this=_between(d, MIN_DATE, MAX_DATE), true=value)])


def portable_shift(node: exp.DateAdd) -> exp.Expression:
    """``d`` moved by ``amount`` months or days, NULL where it would leave 0001…9999."""
    d, unit = node.this, node.args["unit"].name
    amount = _integer_constant(node.expression)
    assert amount is not None  # built by date_arithmetic
    shift = Shift(amount, 0) if unit.upper() == "MONTH" else Shift(0, amount)
    bounds = input_range(shift)
    if bounds is None:  # checked when typed
        raise DatetimeFieldOverflow("date out of range for every date", hint=_RANGE_HINT)
    n = exp.Literal.number(abs(amount))
    op = exp.Add if amount >= 0 else exp.Sub
    value: exp.Expression
    if shift.months:
        interval = exp.Interval(
            this=exp.Literal.string(str(abs(amount))), unit=exp.Var(this="MONTH")
        )
        value = exp.Cast(
            this=op(this=d.copy(), expression=interval),
            to=exp.DataType(this=exp.DataType.Type.DATE),
        )
    else:
        value = op(this=d.copy(), expression=n)
    return exp.Case(ifs=[exp.If(this=_between(d, *bounds), true=value)])


def portable_extract(node: exp.Extract) -> exp.Expression:
    """``EXTRACT(field FROM d)`` where both engines give the same value: NULL unless ``d`` lies
    in 0001…9999. Beyond it they differ — BC years (PostgreSQL: 4713 BC is -4713, DuckDB counts
    a year 0: -4712), ISOYEAR of 1 BC, and ±infinity (PostgreSQL: ±Infinity for YEAR, DECADE,
    CENTURY, MILLENNIUM, ISOYEAR; DuckDB: NULL)."""
    d = node.expression
    return exp.Case(ifs=[exp.If(this=_between(d.copy(), MIN_DATE, MAX_DATE), true=node.copy())])


def portable_difference(node: exp.DateDiff) -> exp.Expression:
    """``a - b`` of two dates in days, NULL unless both lie in 0001…9999 (an INTEGER there,
    within ±:data:`MAX_DAYS`: the cast to INTEGER tells the magnitude analysis so)."""
    a, b = node.this, node.expression
    inside = exp.And(
        this=_between(a, MIN_DATE, MAX_DATE), expression=_between(b, MIN_DATE, MAX_DATE)
    )
    value = _int(exp.Sub(this=a.copy(), expression=b.copy()))
    return exp.Case(ifs=[exp.If(this=inside, true=value)])
