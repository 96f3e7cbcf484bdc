"""Number columns wider than dpproxy computes with, read as DOUBLE through a total conversion.

A ``numeric`` without a precision holds up to 131,072 digits before the point and 16,383 after
it, NaN and (PostgreSQL 14 on) ±Infinity; ``numeric`` → ``double precision`` raises 22003 for a
finite value beyond a double's range (1e400) or one that would round to zero (1e-400). The
rewrite computes a ``float`` column as DOUBLE, so such a column was refused when the engine
opened (42804). A private table's ``float`` column of such a type (``catalog.draft.
wide_numeric``: no precision, or one reaching beyond a double's range) is now read through
:func:`total_double`, and every statement sent to PostgreSQL reads the table through
:func:`read_as_double`: a derived table of the same name whose such columns are DOUBLE. The
rest of the rewrite sees a ``double precision`` column, with the guards it has for one (NaN,
±Infinity, the clamps and casts of ``rewrite/clamps.py`` and ``rewrite/guard.py``).

A private table's ``float`` column stored as ``real`` (float4) is read through the same
derived table as ``CAST(x AS DOUBLE PRECISION)`` (exact and total; :func:`read_as_double`
says why it is needed).

DuckDB's HUGEINT, UHUGEINT and a DECIMAL with more than 20 digits before the point or 18 after
it were refused the same way (``catalog/draft.py``: DuckDB compares them with an integer or a
literal in a type that cannot hold every value of both). Such a ``float`` column of a private
table is read through :func:`duckdb_double`, by the same derived table (:func:`read_as_double`,
placed by ``sql/qualify.read_wide_tables`` for both engines).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

# a finite value beyond ±SATURATE is read as ±SATURATE, one nearer to 0 than TINY as 0
SATURATE = "1e308"
TINY = "1e-307"


def _numeric(text: str) -> exp.Expression:
    return exp.cast(exp.Literal.string(text), exp.DataType.build("decimal"))


def _double(text: str) -> exp.Expression:
    return exp.cast(exp.Literal.string(text), exp.DataType.build("double"))


def total_double(x: exp.Expression) -> exp.Expression:
    """``x`` (a ``numeric``) as a DOUBLE, by an expression that cannot fail::

        CASE WHEN x = 'NaN' THEN 'NaN'::float8
             WHEN x = 'Infinity' THEN 'Infinity'::float8
             WHEN x = '-Infinity' THEN '-Infinity'::float8
             WHEN x > 1e308 THEN 1e308::float8  WHEN x < -1e308 THEN -1e308::float8
             WHEN x > -1e-307 AND x < 1e-307 THEN 0::float8
             ELSE CAST(x AS float8) END

    Why it is total. Every WHEN compares two ``numeric`` values, and PostgreSQL's numeric
    comparison is total: it never raises, NaN equals NaN and sorts above every other value,
    Infinity above every finite one. The literals are constants of ``numeric`` and
    ``float8`` that parse (numeric's ``'Infinity'`` needs PostgreSQL 14, dpproxy's least).
    A NULL ``x`` makes every WHEN unknown, and the ELSE casts NULL: NULL. So the one cast of
    ``x`` runs only for a finite ``x`` with 1e-307 <= |x| <= 1e308 (NaN and ±Infinity were
    taken by the first three WHENs, and every other finite value by the next three):
    PostgreSQL converts it through its decimal text with ``strtod``, which sets ERANGE only
    when the result overflows beyond 1.797e308 or underflows below 2.2e-308, and 1e308
    (rounded up at most to the next double, still below the largest) and 1e-307 (a normal
    double) are within. ``CASE`` evaluates a branch's result only when its condition is
    true, so no cast of an out-of-range value is ever evaluated (the constant results are
    casts of valid literals, which cannot fail). The values change only where a double cannot hold
    them: beyond ±1e308 (saturated) and between -1e-307 and 1e-307 (zero)."""
    case = exp.Case()
    for special in ("NaN", "Infinity", "-Infinity"):
        case = case.when(exp.EQ(this=x.copy(), expression=_numeric(special)), _double(special))
    big, small = _numeric(SATURATE), _numeric(TINY)
    case = case.when(exp.GT(this=x.copy(), expression=big), _double(SATURATE))
    case = case.when(exp.LT(this=x.copy(), expression=exp.Neg(this=big)), _double("-" + SATURATE))
    near_zero = exp.and_(
        exp.GT(this=x.copy(), expression=exp.Neg(this=small.copy())),
        exp.LT(this=x.copy(), expression=small),
    )
    case = case.when(near_zero, _double("0"))
    return case.else_(exp.cast(x.copy(), exp.DataType.build("double")))


def duckdb_double(x: exp.Expression) -> exp.Expression:
    """``x`` (a DuckDB HUGEINT, UHUGEINT or DECIMAL(p, s), p <= 38) as a DOUBLE:
    ``CAST(x AS DOUBLE)``, which cannot fail on any stored value.

    Why it is total. DuckDB casts these types to DOUBLE by arithmetic, not through text: a
    HUGEINT's magnitude is at most 2^127 (about 1.7e38), a UHUGEINT's at most 2^128 - 1
    (3.4e38) and a DECIMAL(38, s)'s below 10^38, all far below a double's largest value
    (1.8e308), so the result is finite and the cast has no overflow to raise; the result
    is the nearest double or one next to it, never an error. A NULL casts to NULL. There is
    no NaN nor infinity in these types. Checked on DuckDB with each type's extremes
    (±(2^127 - 1), -2^127, UHUGEINT 2^128 - 1, DECIMAL(38, 0) ±(10^38 - 1), DECIMAL(38, 37)
    ±9.99..., 1e-37) and NULL: ``tests/attacks/test_wide_numeric_duckdb.py``. The values
    change only where a double cannot hold them exactly (beyond 2^53, or beyond 15-17
    significant digits), rounded as a double rounds."""
    return exp.cast(x.copy(), exp.DataType.build("double"))


def read_as_double(
    table: exp.Table,
    columns: Sequence[tuple[str, str | None]],
    convert: Callable[[exp.Expression], exp.Expression] = total_double,
) -> exp.Expression:
    """The derived table that replaces the reference ``table``: ``columns`` (each column's
    spelling, and ``"numeric"`` when it is read through ``convert`` — :func:`total_double` on
    PostgreSQL, :func:`duckdb_double` on DuckDB —, ``"real"`` when it is a PostgreSQL float4
    read as ``CAST(x AS DOUBLE PRECISION)``, else None), under the reference's alias, or its
    name when it has none, so the statement's references to the table and its columns mean
    what they did.

    A float4 is widened because PostgreSQL would otherwise unify it with the rewrite's
    constants as a float4: ``CASE WHEN ... THEN 1e150 ELSE x END`` (``rewrite/floats.py``'s
    taming) casts 1e150 to float4 and fails (22003) before any row is read, on every
    database. The widening is total and exact: every float4 is a double, NaN and ±Infinity
    included, and PostgreSQL's ``float4 → float8`` never raises; so the rest of the rewrite
    sees the ``double precision`` column it was written for."""
    alias = table.args.get("alias")
    name = (
        alias.this.copy()
        if isinstance(alias, exp.TableAlias) and isinstance(alias.this, exp.Identifier)
        else table.this.copy()
    )
    inner = table.copy()
    inner.set("alias", None)

    def read(c: str, kind: str | None) -> exp.Expression:
        column = exp.column(exp.to_identifier(c, quoted=True))
        if kind == "numeric":
            return convert(column)
        if kind == "real":
            return exp.cast(column, exp.DataType.build("double"))
        return column

    items = [exp.alias_(read(c, kind), exp.to_identifier(c, quoted=True)) for c, kind in columns]
    return exp.select(*items).from_(inner).subquery(exp.TableAlias(this=name))
