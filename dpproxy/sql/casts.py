"""The target types of ``CAST``: which the typed layer accepts, with which parameters, and the
:class:`~dpproxy.sql.sqltype.SqlType` each gives (``sql/types.py`` types the rest)."""

from __future__ import annotations

from sqlglot import exp

from dpproxy.errors import InvalidParameter, UnsupportedQuery
from dpproxy.sql.sqltype import SqlType

_NUMERIC_CASTS = {
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.DOUBLE,
    exp.DataType.Type.FLOAT,
    exp.DataType.Type.DECIMAL,
}
_TEXT_CASTS = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR}


def _check_type_parameters(to: exp.DataType) -> None:
    """Type parameters both engines read alike, or refused before any data is read. ``FLOAT(p)``
    (parsed as DOUBLE with a parameter) becomes, in place, the type PostgreSQL reads it as: REAL
    for 1 <= p <= 24, DOUBLE PRECISION for 25 <= p <= 53 (22023 otherwise, as PostgreSQL), so
    that both engines are sent that type without the parameter (DuckDB refuses ``DOUBLE(p)``),
    and the cast is then typed, guarded and range-checked as a REAL or DOUBLE one is. DECIMAL(p)
    and DECIMAL(p, s) need 1 <= p <= 38 (DuckDB's widest) and 0 <= s <= p; no other numeric
    type takes parameters (``INT(n)`` is a binder error on DuckDB): 0A000. A DECIMAL needs
    s <= 18 and p - s <= 20 too: DuckDB meets an integer or a literal in DECIMAL(38, s) at
    most (``CAST(x AS DECIMAL(38, 37)) = i`` failed for one row's i >= 10)."""
    params = to.expressions
    if not params or to.this not in _NUMERIC_CASTS:
        return
    name = to.sql("postgres")
    values = [p.this for p in params]
    digits = [int(v.name) for v in values if isinstance(v, exp.Literal) and v.name.isdigit()]
    if to.this is exp.DataType.Type.DOUBLE and len(values) == 1 == len(digits):
        if not 1 <= digits[0] <= 53:
            raise InvalidParameter(
                f"precision for type float must be between 1 and 53 bits, not {digits[0]}"
            )
        to.set("expressions", [])
        if digits[0] <= 24:
            to.set("this", exp.DataType.Type.FLOAT)
        return
    if to.this is not exp.DataType.Type.DECIMAL:
        raise UnsupportedQuery(
            f"casts to {name} are not supported",
            hint="write REAL, DOUBLE PRECISION or an integer type without a parameter",
        )
    precision, scale = [*digits, 0][:2] if digits else (0, 0)
    if len(digits) != len(values) or len(values) > 2 or not 0 <= scale <= precision:
        precision = 0
    if not 1 <= precision <= 38 or scale > 18 or precision - scale > 20:
        raise UnsupportedQuery(
            f"casts to {name} are not supported",
            hint="DECIMAL(p, s) takes 1 <= p <= 38, 0 <= s <= 18 and p - s <= 20",
        )


def cast_type(to: exp.DataType) -> SqlType:
    """The type a cast to ``to`` gives, its parameters checked (and ``FLOAT(p)`` rewritten in
    place) first; a target type the typed layer does not know: 0A000."""
    _check_type_parameters(to)
    t = to.this
    if t in _NUMERIC_CASTS:
        return SqlType.NUMERIC
    if t in _TEXT_CASTS:
        return SqlType.TEXT
    if t is exp.DataType.Type.BOOLEAN:
        return SqlType.BOOLEAN
    if t is exp.DataType.Type.DATE:
        return SqlType.DATE
    raise UnsupportedQuery(f"casts to {to.sql('postgres')} are not supported")
