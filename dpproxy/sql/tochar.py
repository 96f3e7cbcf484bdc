"""``TO_CHAR(d, 'YYYY-MM')`` of a date, for the formats both engines can print alike.

PostgreSQL's ``to_char`` reads a whole template language (day and month names in the session's
locale, ISO weeks, ``FM``, ordinal suffixes, …) and DuckDB has none of it (its ``strftime``
differs), so only templates made of ``YYYY``, ``MM``, ``DD`` (in either case) and the
separators ``-``, ``/``, ``.``, space are accepted; anything else is refused (42883) with a
hint to use ``DATE_TRUNC`` or ``EXTRACT``, which group by the same periods.

**Totality and equality.** On a date in 0001-01-01 … 9999-12-31 both engines print
``CAST(d AS TEXT)`` as ``YYYY-MM-DD`` (the PostgreSQL backend runs with ``DateStyle = ISO``,
``backends/postgres.py``), and PostgreSQL's ``to_char`` prints ``YYYY``, ``MM`` and ``DD`` as
those same digits; so the call is printed as ``CASE WHEN d BETWEEN '0001-01-01' AND
'9999-12-31' THEN SUBSTRING(CAST(d AS TEXT), …) || '-' || … END``: substrings of a 10-character
text and concatenation, which never fail. Outside that range (BC dates, years beyond 9999,
±infinity, where the engines print differently) it is NULL.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from dpproxy.errors import DatatypeMismatch, UndefinedFunction
from dpproxy.sql.dates import MAX_DATE, MIN_DATE, date_literal
from dpproxy.sql.sqltype import SqlType

# sqlglot reads PostgreSQL's YYYY/yyyy, MM/mm, DD/dd as %Y, %m, %d
_FIELDS = {"%Y": (1, 4), "%m": (6, 2), "%d": (9, 2)}
_TEMPLATE = re.compile(r"(?:%Y|%m|%d|[-/. ])+")
_TOKENS = re.compile(r"%Y|%m|%d|[-/. ]+")
_HINT = (
    "TO_CHAR of a date takes a template of YYYY, MM, DD and the separators - / . (such as "
    "'YYYY-MM'); DATE_TRUNC('month', d) or EXTRACT(YEAR FROM d) group by the same periods"
)


def _template(node: exp.Expression) -> str | None:
    fmt = node.args.get("format")
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        return None
    text = fmt.name
    return text if _TEMPLATE.fullmatch(text) and "%" in text else None


def to_char_type(node: exp.Expression, t: Callable[[exp.Expression], SqlType]) -> SqlType:
    """``TO_CHAR(d, template)``: d a date (42804), the template as the module says (42883)."""
    source = t(node.this)
    if source not in (SqlType.DATE, SqlType.NULL):
        raise DatatypeMismatch(
            f"TO_CHAR is supported for dates only, not {source.value}",
            hint="CAST a number to TEXT, or ROUND it first",
        )
    if _template(node) is None:
        raise UndefinedFunction(
            "function to_char() with this template is not supported", hint=_HINT
        )
    return SqlType.TEXT


def portable_to_char(node: exp.Expression, d: exp.Expression) -> exp.Expression:
    """``TO_CHAR(d, template)`` of the (guarded) date ``d`` as substrings of its ISO text.

    >>> node = exp.maybe_parse("TO_CHAR(d, 'YYYY-MM')", dialect="postgres")
    >>> portable_to_char(node, exp.column("d")).sql("postgres")
    "CASE WHEN d BETWEEN CAST('0001-01-01' AS DATE) AND CAST('9999-12-31' AS DATE) THEN \
SUBSTRING(CAST(d AS TEXT) FROM 1 FOR 4) || '-' || SUBSTRING(CAST(d AS TEXT) FROM 6 FOR 2) END"
    """
    template = _template(node)
    assert template is not None  # checked by to_char_type
    text = exp.Cast(this=d.copy(), to=exp.DataType(this=exp.DataType.Type.TEXT))
    parts: list[exp.Expression] = []
    for token in _TOKENS.findall(template):
        if token in _FIELDS:
            start, length = _FIELDS[token]
            parts.append(
                exp.Substring(
                    this=text.copy(),
                    start=exp.Literal.number(start),
                    length=exp.Literal.number(length),
                )
            )
        else:
            parts.append(exp.Literal.string(token))
    value = parts[0]
    for part in parts[1:]:
        value = exp.DPipe(this=value, expression=part)
    inside = exp.Between(this=d, low=date_literal(MIN_DATE), high=date_literal(MAX_DATE))
    return exp.Case(ifs=[exp.If(this=inside, true=value)])
