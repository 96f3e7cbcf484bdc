"""The Spark pass: a rewrite tree made to compute on Spark (ANSI mode) what DuckDB computes.

Spark runs with ``spark.sql.ansi.enabled=true`` (``backends/spark.py``), where an integer
overflow, a division by zero and a failing ``CAST`` raise: like PostgreSQL, so the guards that
make the rewrite total there (``rewrite/guard.py``, ``rewrite/floats.py``) hold here too.
What differs from DuckDB and is handled below, before sqlglot prints the ``spark`` dialect:

=====================  ===========================  ==========================================
construct              DuckDB                       Spark 4 (ANSI)
=====================  ===========================  ==========================================
failed cast            ``TRY_CAST`` → NULL          ``TRY_CAST`` → NULL, but other strings are
                                                    read: text is checked against dpproxy's
                                                    grammar first (:func:`safe_cast`)
double → integer       rounds half to even          truncates → ``BROUND`` first
``a / b`` on decimals  double                       decimal → numerator cast to DOUBLE
``FLOOR``/``CEIL`` of   a DOUBLE                     a BIGINT, overflow raises → applied only
a double; ``TRUNC``                                 below 2⁵² (above, a double is integral)
``SUM`` of BIGINTs     into a HUGEINT               BIGINT, overflow raises → three BIGINT
                                                    sums of 21-bit parts (:func:`split_sum`);
                                                    ``SUM(DISTINCT …)`` as ``DECIMAL(38, 0)``
``~*`` (ILIKE regex)   ``regexp_matches(…, 'i')``   ``RLIKE '(?i)…'``
``QUANTILE_CONT``      exact, interpolated          ``PERCENTILE`` (exact, interpolated)
``QUANTILE_DISC``      exact                        ``PERCENTILE_DISC … WITHIN GROUP``
keyed row hash         ``hash(secret, …)``          ``xxhash64(secret, …)``
                                                    (``rewrite/dialect.row_hash``)
``LEFT``/``RIGHT`` with  all but the last/first n      ``''`` → ``SUBSTRING`` (:func:`_ends`)
a negative length      characters (PostgreSQL's)
``EXTRACT`` ``DOW``,   0-6 from Sunday, ISO day,      1-7 from Sunday, other names
``ISODOW``, ``ISOYEAR``, ISO year, year / 10           (:func:`_extract`)
``DECADE``
key domain on groups   ``IN (SELECT v FROM VALUES    the same IN a literal list
                       …)``, kept above GROUP BY    (:func:`_domain_list`)
``STRING_TO_ARRAY(s,   split by the literal text    ``SPLIT(s, regex, -1)``: the separator's
sep)`` (UNNEST)        ``sep``                      punctuation escaped (:func:`_split`)
``(array)[lo:hi]``     1-based, both ends included  ``SLICE(array, lo, hi − lo + 1)``
``LOG(x)``             base 10                      natural log (sqlglot prints it as is)
                                                    → ``LOG10(x)``
a number of > 38       a BIGNUM, compared as a      a DECIMAL beyond its 38 digits: fails →
digits (10²⁵⁰)         DOUBLE                       a DOUBLE literal (:func:`_wide_number`)
``FROM t WHERE (c)``   the table ``t``, filtered    ``t`` aliased ``WHERE`` with the columns
                                                    ``(c)``: fails → ``FROM t AS t``
=====================  ===========================  ==========================================

sqlglot would print ``PERCENTILE_CONT … WITHIN GROUP`` as ``PERCENTILE_APPROX`` (an
approximation: a different, data-dependent answer) — one reason this pass exists.
"""

from __future__ import annotations

import string
from typing import Any, cast

from sqlglot import exp

from dpproxy.errors import UnsupportedQuery
from dpproxy.rewrite.dialect import text_cast_condition
from dpproxy.rewrite.real import REAL, in_range_real, real_rounding
from dpproxy.sql.types import SqlType

_DOUBLE = exp.DataType.Type.DOUBLE
_INTS = {
    exp.DataType.Type.TINYINT: (-128, 127),
    exp.DataType.Type.SMALLINT: (-32768, 32767),
    exp.DataType.Type.INT: (-2147483648, 2147483647),
    exp.DataType.Type.BIGINT: (-9223372036854775808, 9223372036854775807),
}
_TEXTS = (exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR)
_FLOATS = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
_PUNCTUATION = frozenset(string.punctuation)  # ASCII; each escaped in a SPLIT pattern


def _num(v: int | str) -> exp.Literal:
    return exp.Literal(this=str(v), is_string=False)


def _type(t: Any) -> exp.DataType:
    return exp.DataType(this=t)


def _decimal38() -> exp.DataType:
    return exp.DataType.build("DECIMAL(38, 0)")


def _when(condition: exp.Expression, value: exp.Expression) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=condition, true=value)])


def safe_cast(node: exp.TryCast, source: SqlType, *, real_in_range: bool = False) -> exp.Expression:
    """A Spark expression equal to DuckDB's ``TRY_CAST`` as dpproxy allows it: NULL where the
    cast would fail, never an error.

    Text is first matched against the grammar both other engines read
    (``rewrite/dialect.text_cast_condition``); Spark's own ``TRY_CAST`` then parses it (an
    integer through ``DECIMAL(38, 0)``, which rounds half away from zero as DuckDB does, and is
    NULL beyond 10³⁸). Numbers cast to integers are rounded half to even (``BROUND``) and
    kept only inside the target's range (NaN and ±inf fail the test).
    """
    value: exp.Expression = node.this
    target = node.to.this
    from_text = source in (SqlType.TEXT, SqlType.UNKNOWN)
    if target is REAL:  # plain in rewrite/real.real_rounding's in-range branch, as there
        if real_in_range:
            return exp.Cast(this=value, to=_type(REAL))
        double = safe_cast(exp.TryCast(this=value, to=_type(_DOUBLE)), source)
        return real_rounding(double, native_cast=True)
    if target in _TEXTS:
        return exp.Cast(this=value, to=_type(exp.DataType.Type.TEXT))
    if target is exp.DataType.Type.BOOLEAN and source is SqlType.BOOLEAN:
        return value
    if target is exp.DataType.Type.DATE and source is SqlType.DATE:
        return value
    if from_text:
        condition = text_cast_condition(value, target)
        if condition is not None:
            if target in _INTS:
                whole = exp.TryCast(this=value.copy(), to=_decimal38())
                return _when(condition, exp.TryCast(this=whole, to=_type(target)))
            if target is exp.DataType.Type.DATE:
                # The pattern admits impossible dates ('2024-02-30', month 13), on which
                # Spark's ANSI CAST raises: TRY_CAST (``safe``: sqlglot prints a TryCast as
                # CAST for Spark otherwise) gives NULL, as DuckDB's TRY_CAST does.
                safe = exp.TryCast(this=value.copy(), to=_type(target), safe=True)
                return _when(condition, safe)
            return _when(condition, exp.TryCast(this=value.copy(), to=_type(target)))
    if source is SqlType.NUMERIC:
        if target in _FLOATS:
            return exp.Cast(this=value, to=_type(_DOUBLE))
        if target in _INTS:
            lo, hi = _INTS[target]
            as_double = exp.Cast(this=value.copy(), to=_type(_DOUBLE))
            in_range = exp.And(
                this=exp.GTE(this=as_double, expression=_num(f"{lo}.5")),
                expression=exp.LT(this=as_double.copy(), expression=_num(f"{hi}.5")),
            )
            rounded = exp.Anonymous(this="BROUND", expressions=[value, _num(0)])
            return _when(in_range, exp.TryCast(this=rounded, to=_type(target)))
        if target is exp.DataType.Type.BOOLEAN:
            return exp.Case(
                ifs=[
                    exp.If(this=exp.EQ(this=value.copy(), expression=_num(0)), true=exp.false()),
                    exp.If(this=exp.NEQ(this=value.copy(), expression=_num(0)), true=exp.true()),
                ]
            )
    if source is SqlType.BOOLEAN and (target in _FLOATS or target in _INTS):
        one, zero = (_num("1.0"), _num("0.0")) if target in _FLOATS else (_num(1), _num(0))
        return exp.Case(
            ifs=[
                exp.If(this=value.copy(), true=one),
                exp.If(this=exp.Not(this=value.copy()), true=zero),
            ]
        )
    raise UnsupportedQuery(
        f"CAST({source.value} AS {node.to.sql('postgres')}) is not supported on the Spark backend",
        hint="it could fail on a row's value; cast to text, double precision or an integer type",
    )


_INTEGRAL = "4503599627370496"  # 2^52: every double at least this large is an integer


def _integral_part(node: exp.Floor | exp.Ceil | exp.Trunc) -> exp.Expression:
    """``FLOOR``/``CEIL``/``TRUNC`` that never overflow: Spark computes them as a BIGINT, which
    raises in ANSI mode beyond 2⁶³, where DuckDB keeps a DOUBLE. Below 2⁵² the BIGINT is exact
    (and the CASE's type is the argument's for a double); from 2⁵² on a double is already an
    integer and NaN and ±inf are their own value, so the argument itself is the answer."""
    if node.args.get("decimals") is not None or node.args.get("expression") is not None:
        raise UnsupportedQuery(f"{node.key.upper()} with digits is not supported on Spark")
    x = node.this
    if isinstance(node, exp.Trunc):
        whole: exp.Expression = exp.Cast(this=x.copy(), to=_type(exp.DataType.Type.BIGINT))
    else:
        whole = type(node)(this=x.copy())
    small = exp.LT(
        this=exp.Abs(this=exp.Cast(this=x.copy(), to=_type(_DOUBLE))), expression=_num(_INTEGRAL)
    )
    return exp.Case(ifs=[exp.If(this=small, true=whole)], default=x)


_PART_BITS = 21
_PART_MASK = (1 << _PART_BITS) - 1


def split_sum(term: exp.Expression) -> exp.Expression:
    """``SUM`` of a BIGINT term ``v``, exact and without overflow, as three BIGINT sums.

    ``v = a·2⁴² + b·2²¹ + c`` with ``a = v >> 42`` (arithmetic: ``|a| ≤ 2²¹``) and ``b, c`` the
    next two 21-bit parts (``0 ≤ b, c < 2²¹``), an identity of two's complement. Each part's
    sum stays below 2⁶³ for up to 2⁴² ≈ 4.4·10¹² rows per group, and the three are combined
    once per group in ``DECIMAL(38, 0)`` (``|Σ v| < 2⁴²·2⁶³ = 2¹⁰⁵ < 10³⁸``). Summing every row
    as a DECIMAL instead costs about twice the whole aggregate at 10⁷ rows on Spark local
    (``benchmarks/SPARK.md``). NULL terms are skipped by the three sums alike; no row gives
    NULL, as ``SUM`` does."""

    def part(shift: int, masked: bool) -> exp.Expression:
        v: exp.Expression = term.copy()
        if shift:
            v = exp.Anonymous(this="SHIFTRIGHT", expressions=[v, _num(shift)])
        if masked:
            v = exp.BitwiseAnd(this=exp.Paren(this=v), expression=_num(_PART_MASK))
        return exp.Cast(this=exp.Sum(this=v), to=_decimal38())

    high = exp.Mul(this=part(2 * _PART_BITS, False), expression=_num(1 << (2 * _PART_BITS)))
    middle = exp.Mul(this=part(_PART_BITS, True), expression=_num(1 << _PART_BITS))
    return exp.Paren(
        this=exp.Add(this=exp.Add(this=high, expression=middle), expression=part(0, True))
    )


def _is_bigint_term(e: exp.Expression) -> bool:
    """A fixed-point summand (``rewrite/fixed.summand``): a BIGINT cast, or a CASE of them."""
    if isinstance(e, exp.Cast) and e.to.this is exp.DataType.Type.BIGINT:
        return True
    if isinstance(e, exp.Case):
        default = e.args.get("default")
        return default is not None and _is_bigint_term(default)
    return False


def _quantile(node: exp.Anonymous) -> exp.Expression | None:
    name = str(node.this).upper()
    if name not in ("QUANTILE_CONT", "QUANTILE_DISC"):
        return None
    v, q = node.expressions
    if name == "QUANTILE_CONT":
        return exp.Anonymous(this="PERCENTILE", expressions=[v, q])
    order = exp.Order(expressions=[exp.Ordered(this=v, nulls_first=False)])
    disc = exp.Anonymous(this="PERCENTILE_DISC", expressions=[q])
    return exp.WithinGroup(this=disc, expression=order)


def _rlike(node: exp.Expression) -> exp.Expression:
    """``x ~* 'p'`` → ``x RLIKE '(?i)p'`` (Spark has no case-insensitive regex operator)."""
    if not isinstance(node, exp.RegexpILike):
        return node
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise UnsupportedQuery("a case-insensitive regular expression must be a literal")
    return exp.RegexpLike(this=node.this, expression=exp.Literal.string("(?i)" + pattern.this))


def _split(node: exp.StringToArray | exp.Split) -> exp.Expression:
    """``STRING_TO_ARRAY(s, 'sep')`` as DuckDB computes it: Spark's ``SPLIT`` takes a regular
    expression, so every ASCII punctuation character of the separator is escaped with a
    backslash. In Java's regular expressions a backslash before a character that is not a
    letter or a digit stands for that character, and letters, digits, spaces and non-ASCII
    characters are never special outside a character class: the pattern matches the separator's
    characters literally and always compiles (the planner admits only a literal separator,
    ``sql/joins.py``). The limit -1 keeps empty elements, as DuckDB does (``'a  b'`` gives
    three); NULL gives NULL and ``''`` gives ``['']`` on both; an empty separator splits into
    characters on both. (sqlglot's own translation, ``CONCAT('\\Q', sep, '\\E')``, breaks on a
    separator holding ``\\E``.) ``tests/integration/test_spark_differential.py`` runs it."""
    sep = node.expression
    if not (isinstance(sep, exp.Literal) and sep.is_string) or node.args.get("limit"):
        raise UnsupportedQuery("STRING_TO_ARRAY needs a literal separator on Spark")
    pattern = "".join("\\" + c if c in _PUNCTUATION else c for c in sep.this)
    return exp.Anonymous(
        this="SPLIT", expressions=[node.this, exp.Literal.string(pattern), _num(-1)]
    )


def _slice(node: exp.Bracket) -> exp.Expression:
    """``(array)[lo:hi]`` with the literal bounds the flat-map rewrite writes (1 ≤ lo, ``hi ≥
    lo − 1``; ``sql/joins.py``) as ``SLICE(array, lo, hi − lo + 1)``: Spark's ``SLICE`` takes a
    start (from 1) and a length ≥ 0, and gives fewer elements when the array is shorter, as
    DuckDB's slice does; anything else is refused rather than sent."""
    (bounds,) = node.expressions
    lo, hi = bounds.this, bounds.expression
    if not all(isinstance(b, exp.Literal) and b.is_int for b in (lo, hi)):
        raise UnsupportedQuery("an array slice needs literal bounds on Spark")
    first, last = int(lo.this), int(hi.this)
    if first < 1 or last < first - 1:
        raise UnsupportedQuery("an array slice on Spark needs 1 <= lo <= hi + 1")
    array = node.this.this if isinstance(node.this, exp.Paren) else node.this
    return exp.Anonymous(this="SLICE", expressions=[array, _num(first), _num(last - first + 1)])


def _ends(node: exp.Left | exp.Right) -> exp.Expression:
    """``LEFT(s, n)``/``RIGHT(s, n)`` as DuckDB and PostgreSQL compute them for a negative n
    (all but the last/first -n characters), where Spark gives ``''``; NULL n gives NULL."""
    s, n = node.this, node.expression
    if isinstance(n, exp.Literal) and not n.is_string and int(n.this) >= 0:
        return node
    if isinstance(node, exp.Left):
        length = exp.Add(this=exp.Length(this=s.copy()), expression=n.copy())
        zero_or_more = exp.Greatest(this=length, expressions=[_num(0)])
        negative: exp.Expression = exp.Substring(this=s.copy(), start=_num(1), length=zero_or_more)
    else:
        negative = exp.Substring(this=s.copy(), start=exp.Sub(this=_num(1), expression=n.copy()))
    return exp.Case(
        ifs=[
            exp.If(this=exp.GTE(this=n.copy(), expression=_num(0)), true=node.copy()),
            exp.If(this=exp.LT(this=n.copy(), expression=_num(0)), true=negative),
        ]
    )


def _extract(node: exp.Extract) -> exp.Expression:
    """``EXTRACT`` fields Spark names differently (``DOW``: Spark counts 1-7 from Sunday,
    DuckDB 0-6) or lacks (``DECADE``)."""
    field = str(node.this.name if isinstance(node.this, exp.Var) else node.this).upper()
    if field == "ISODOW":
        return exp.Extract(this=exp.var("DAYOFWEEK_ISO"), expression=node.expression)
    if field == "ISOYEAR":
        return exp.Extract(this=exp.var("YEAROFWEEK"), expression=node.expression)
    if field == "DOW":
        spark_dow = exp.Extract(this=exp.var("DAYOFWEEK"), expression=node.expression)
        return exp.Paren(this=exp.Sub(this=spark_dow, expression=_num(1)))
    if field == "DECADE":
        year = exp.Extract(this=exp.var("YEAR"), expression=node.expression)
        return exp.IntDiv(this=year, expression=_num(10))
    return node


def _domain_list(node: exp.In) -> exp.Expression:
    """``k IN (SELECT v FROM VALUES (a), (b) …)`` (a key's domain, ``rewrite/pipeline``) as
    ``k IN (a, b, …)``. The subquery keeps DuckDB from pushing the filter below the GROUP BY;
    Spark pushes the semi-join below it anyway, as a broadcast join over every row, which
    measured slower at 10⁷ rows than the plain list, which it pushes into the Parquet scan.
    The same rows pass: both are the same three-valued ``IN`` over the same literals (NULL is
    never in the list: a NULL key is an ``IS NULL`` of its own)."""
    sub = node.args.get("query")
    select = sub.this if isinstance(sub, exp.Subquery) else None
    source = select.args.get("from_") if isinstance(select, exp.Select) else None
    values = source.this if isinstance(source, exp.From) else None
    if not isinstance(values, exp.Values) or not isinstance(select, exp.Select):
        return node
    if len(select.expressions) != 1:
        return node
    items = []
    for row in values.expressions:
        if not (isinstance(row, exp.Tuple) and len(row.expressions) == 1):
            return node
        (item,) = row.expressions
        if not isinstance(item, exp.Literal | exp.Boolean):
            return node
        items.append(item.copy())
    return exp.In(this=node.this, expressions=items)


def _wide_number(node: exp.Literal) -> exp.Expression:
    """A number of more than 38 digits (the rewrite's limits such as ``SUM_LIMIT`` = 10²⁵⁰,
    which clamp DOUBLE measures) as a DOUBLE literal: Spark reads a longer one as a DECIMAL and
    fails (``DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION``), on every run. The nearest double, as
    DuckDB's comparison with a DOUBLE uses it; numbers of up to 38 digits are left as written.

    >>> _wide_number(exp.Literal.number("1" + "0" * 250)).sql("spark")
    '1E250'
    >>> _wide_number(exp.Literal.number("12.5")).sql("spark")
    '12.5'
    """
    text = str(node.this)
    if sum(ch.isdigit() for ch in text.split("e")[0].split("E")[0]) <= 38:
        return node
    mantissa, _, power = repr(float(text)).partition("e")
    return exp.Literal.number(f"{mantissa}E{int(power or 0)}")


def to_spark(tree: exp.Select, column_types: dict[str, SqlType]) -> exp.Select:
    """Rewrite a finished DuckDB-flavoured tree so that Spark (ANSI) computes the same values
    (the table in the module docstring)."""
    from dpproxy.rewrite.dialect import guarded_type

    nodes = list(tree.dfs())
    in_range = {id(n) for n in nodes if isinstance(n, exp.TryCast) and in_range_real(n)}
    for visited in reversed(nodes):
        node = cast(exp.Expression, visited)
        parent, key, index = node.parent, node.arg_key, node.index
        new: exp.Expression = node
        if isinstance(node, exp.TryCast):
            # The guard's own pattern tests are built here, after the walk passed them.
            source = guarded_type(node.this, column_types)
            new = safe_cast(node, source, real_in_range=id(node) in in_range).transform(_rlike)
        elif isinstance(node, exp.Div):
            numerator = node.this
            if not (isinstance(numerator, exp.Cast) and numerator.to.this is _DOUBLE):
                node.set("this", exp.Cast(this=numerator, to=_type(_DOUBLE)))
        elif isinstance(node, exp.RegexpILike):
            new = _rlike(node)
        elif isinstance(node, exp.Sum):
            term = node.this
            inner = term.expressions[0] if isinstance(term, exp.Distinct) else term
            if _is_bigint_term(inner):
                if isinstance(term, exp.Distinct):
                    term.set("expressions", [exp.Cast(this=inner.copy(), to=_decimal38())])
                else:
                    new = split_sum(inner)
        elif isinstance(node, exp.Anonymous):
            new = _quantile(node) or node
        elif isinstance(node, exp.Floor | exp.Ceil | exp.Trunc):
            new = _integral_part(node)
        elif isinstance(node, exp.Left | exp.Right):
            new = _ends(node)
        elif isinstance(node, exp.Extract):
            new = _extract(node)
        elif isinstance(node, exp.In) and node.args.get("query") is not None:
            new = _domain_list(node)
        elif isinstance(node, exp.Log) and node.args.get("expression") is None:
            new = exp.Anonymous(this="LOG10", expressions=[node.this])
        elif isinstance(node, exp.StringToArray | exp.Split):
            new = _split(node)
        elif (
            isinstance(node, exp.Bracket)
            and len(node.expressions) == 1
            and isinstance(node.expressions[0], exp.Slice)
        ):
            new = _slice(node)
        elif isinstance(node, exp.Literal) and not node.is_string:
            new = _wide_number(node)
        elif (
            isinstance(node, exp.Table) and not node.alias and isinstance(node.this, exp.Identifier)
        ):
            # Spark reads ``FROM t WHERE (c)`` as the table ``t`` aliased ``WHERE`` with the
            # column list ``(c)`` (WHERE is not reserved: ASSIGNMENT_ARITY_MISMATCH); an alias
            # of its own name leaves no room for that, and names the same columns.
            node.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
        if new is not node and parent is not None and key:
            parent.set(key, new, index)
    return tree
