"""The query around released aggregate relations: a total subset, checked before any read.

An aggregate CTE or derived table grouped by a public-domain key is released first and then
read by the rest of the query as a VALUES list (``planning/relations.py``). Unlike a query
over public tables only (``planning/public.py``, where a failure depends on public rows
alone and is reported as 58000), this outer query runs over rows whose presence (a key whose
noisy count rounds to 0 is left out) and values come from the private data through noise: an
error there (``SUM(s * 1e308)`` overflowing on PostgreSQL, ``CAST(s AS INTEGER)`` out of
range, ``n / (n - 1)``, ``LN(s)`` of a value ≤ 0, a LIKE pattern ending in an escape, met only
when a row is present) would be an outcome decided by the data, after the releases were
charged. So the outer query must be total, and :func:`check_total` decides it from the query
and the types alone, before anything runs:

* what it may hold: relational structure (SELECT, set operations, subqueries, CTEs, joins,
  WHERE, GROUP BY, HAVING, ORDER BY, LIMIT/OFFSET of literals, DISTINCT), columns, literals
  (a typed ``DATE 'YYYY-MM-DD'`` of a real day), AND/OR/NOT, comparisons, IN, BETWEEN and
  ``IS [NOT] NULL`` between values of one type (integers and doubles are one: both engines
  compare them as numbers), CASE and COALESCE whose results are of one type, ``-`` of a
  number literal, and the aggregates COUNT, MIN, MAX, SUM and AVG (SUM and AVG of numbers);
* everything else — arithmetic, functions, casts, LIKE, variances — is refused (0A000),
  because each can raise on some value (overflow, a domain, a conversion, a pattern), and
  values of two types met in a comparison may be converted, and fail, row by row;
* a scalar subquery must return at most one row (an aggregate without GROUP BY or DISTINCT,
  or LIMIT 0 or 1): more rows is an error at run time, and how many released rows a subquery
  meets is decided by the noise (``s > (SELECT s FROM (…) e)`` failed where two keys survived);
* the analyst's own VALUES are refused in any query planned in parts (:func:`refuse_values`):
  the check below trusts dpproxy's VALUES, so a look-alike of a keyed lookup, ``(SELECT
  CAST(released.v AS DOUBLE PRECISION) FROM (VALUES (5, 'x')) AS released(k0, v) WHERE
  released.k0 = d.s)``, ran a failing cast exactly where a released value met its key.

Static errors — ones the database raises whatever the rows, a grouping error, ``MAX`` of a
boolean on PostgreSQL — are not this module's: ``composed.check_outer_binds`` EXPLAINs the
outer query with the placeholders before the budget is reserved and refuses them (42000).

The released values themselves are written within ±:data:`MAGNITUDE` (:func:`written`;
post-processing of noisy values, which it changes only beyond 1e140; a column cast to BIGINT,
within ±9e18, :func:`bigint`): SUM over at most
100,001 of them stays below 1e146, and PostgreSQL's AVG of doubles, which squares deviations
of up to n·|x| (``float8_accum``), below 1e300, so neither overflows; Spark, whose SUM of
integers is a BIGINT that two such values overflow, sums integers in ``DECIMAL(38, 0)`` there
(``public._exact_sums``), as DuckDB (HUGEINT) and PostgreSQL (NUMERIC) do. The placeholders
dpproxy writes for the relations (``SELECT CAST(NULL AS t) AS name … WHERE FALSE``) hold
nothing that runs on a value and are not checked, nor are a keyed subquery's lookups in its
released VALUES (``sql/correlated.lookup_relation``, literals and equalities only).

The same holds for a public outer query around keyed subqueries (``planning/keyed.py``,
TPC-H Q20): it reads released values through those lookups, and ``CASE WHEN ps_availqty >
(keyed) THEN CAST(ps_comment AS INTEGER) END`` failed exactly where a released value was low.
There a LIKE with a literal pattern that does not end in an escape is accepted as well
(Q20's ``p_name LIKE 'forest%'``).
"""

from __future__ import annotations

import datetime

from sqlglot import exp

from dpproxy.errors import UnsupportedQuery

MAGNITUDE = 1e140  # the largest magnitude of a released value written in the outer query

_STRUCTURE = (
    exp.Select,
    exp.Union,
    exp.Intersect,
    exp.Except,
    exp.Subquery,
    exp.With,
    exp.CTE,
    exp.From,
    exp.Join,
    exp.Table,
    exp.TableAlias,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Offset,
    exp.Distinct,
    exp.Alias,
    exp.Identifier,
    exp.Column,
    exp.Star,
    exp.Paren,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Exists,
    exp.Count,
    exp.Min,
    exp.Max,
)
_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_NUMBERS = frozenset({"integer", "double"})
_HINT = (
    "the rest of the query runs on the released rows: compare, filter, order and aggregate "
    "them (COUNT, MIN, MAX, SUM, AVG); compute arithmetic over the aggregate inside the "
    "subquery instead"
)


def written(value: float) -> float:
    """A released value as the outer query reads it: within ±:data:`MAGNITUDE` (±inf too;
    NaN stays NaN, which ``sql/correlated.number`` writes as NULL)."""
    if isinstance(value, float) and abs(value) > MAGNITUDE:
        return MAGNITUDE if value > 0 else -MAGNITUDE
    return value


BIGINT_MAX = 9e18  # below 2⁶³ − 1, a float exactly (the literal is written from a float)


def bigint(value: float) -> float:
    """A released value of a relation column cast to BIGINT (its aggregates all COUNTs, say
    ``COUNT(*) * 1e30``): within ±9·10¹⁸, so that the cast cannot overflow on a noisy value
    (post-processing; NaN stays NaN, written as NULL)."""
    if isinstance(value, int | float) and abs(value) >= BIGINT_MAX:
        return BIGINT_MAX if value > 0 else -BIGINT_MAX
    return value


VALUE_WIDTH = 26  # the most characters a released number is printed in: (-2.2250738585072014e-308)


def literal_width(value: object) -> int:
    """An upper bound on the characters ``sql/correlated.literal`` prints a key in (the outer
    query's text at the released values is bounded with it: ``ComposedPlan.longest``)."""
    if value is None or isinstance(value, bool):
        return 5  # NULL, TRUE, FALSE
    if isinstance(value, int):
        return len(str(abs(value))) + 3  # (-…)
    if isinstance(value, float):
        return VALUE_WIDTH
    if isinstance(value, str):
        return 2 * len(value) + 4  # every character escaped, a prefix and the quotes
    return 40  # a date: CAST('YYYY-MM-DD' AS DATE)


def key_depth(key: tuple[object, ...]) -> int:
    """How deep ``sql/correlated.literal`` nests a key's deepest value: a negative number
    ``(-…)`` and a date ``CAST('…' AS DATE)`` below a plain literal."""
    depths = [
        3
        if isinstance(v, int | float) and not isinstance(v, bool) and v < 0
        else 2
        if v is not None and not isinstance(v, bool | int | float | str)
        else 1
        for v in key
    ]
    return max(depths, default=1)


def _placeholder(node: exp.Expr) -> bool:
    """A relation's body as dpproxy plans it (``RelationPart.placeholder``)."""
    if not isinstance(node, exp.Select) or not _only(node, {"expressions", "where"}):
        return False  # an analyst's look-alike with HAVING or a FROM is checked
    where = node.args.get("where")
    if not (isinstance(where, exp.Where) and isinstance(where.this, exp.Boolean)):
        return False
    casts = [i.this for i in node.expressions if isinstance(i, exp.Alias)]
    return (
        not where.this.this
        and all(isinstance(c, exp.Cast) and isinstance(c.this, exp.Null) for c in casts)
        and len(casts) == len(node.expressions)
    )


def _lookup(node: exp.Expr) -> bool:
    """A keyed subquery's released table as dpproxy writes it (``sql/correlated.py``,
    ``lookup_relation``): ``SELECT CAST(released.v AS DOUBLE PRECISION) FROM (VALUES …) AS
    released(…) WHERE released.k0 = … AND …``, literals and equalities only."""
    if not isinstance(node, exp.Select) or len(node.expressions) != 1:
        return False
    from_ = node.args.get("from_")
    source = from_.this if isinstance(from_, exp.From) else None
    if not isinstance(source, exp.Values) or source.alias_or_name != "released":
        return False
    value = node.expressions[0].unalias()
    read = value.this if isinstance(value, exp.Cast) else None
    where = node.args.get("where")
    if not isinstance(read, exp.Column) or read.table != "released" or where is None:
        return False
    if not _only(node, {"from_", "where", "expressions"}):
        return False
    matches = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    return all(
        isinstance(m, exp.EQ)
        and isinstance(m.this, exp.Column)
        and m.this.table == "released"
        and isinstance(m.expression, exp.Column)
        for m in matches
    )


def _only(node: exp.Expr, args: set[str]) -> bool:
    """Does ``node`` carry no argument outside ``args``?"""
    return all(v in (None, False, [], "") for k, v in node.args.items() if k not in args)


def _released(node: exp.Expr) -> bool:
    return _placeholder(node) or _lookup(node)


def _kind(node: exp.Expr) -> str | None:
    """The type category of a typed node (``annotate_types``), None when unknown; "null" for
    NULL, which meets any type."""
    node = node.unalias()
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Subquery | exp.Select):
        select = node.unnest() if isinstance(node, exp.Subquery) else node
        if isinstance(select, exp.Select) and len(select.expressions) == 1:
            return _kind(select.expressions[0])
        return None
    return category(node.type)


def category(t: exp.DataType | None) -> str | None:
    """The category of a sqlglot type as dpproxy returns it (integer, double, text, boolean,
    date), None for any other (``planning/public.py`` refuses those in a result)."""
    if t is None:
        return None
    if t.this in exp.DataType.INTEGER_TYPES:
        return "integer"
    if t.this in exp.DataType.REAL_TYPES:
        return "double"
    if t.this in exp.DataType.TEXT_TYPES:
        return "text"
    if t.this is exp.DataType.Type.BOOLEAN:
        return "boolean"
    if t.this is exp.DataType.Type.DATE:
        return "date"
    return None


def _one_type(nodes: list[exp.Expr], where: exp.Expr) -> str:
    """The one type of ``nodes`` (numbers meet as one), or 0A000."""
    kinds = {_kind(n) for n in nodes} - {"null"}
    if None in kinds or (len(kinds) > 1 and not kinds <= _NUMBERS):
        raise UnsupportedQuery(
            f"{where.sql('postgres')[:80]} meets values of different or unknown types over "
            "released rows",
            hint="compare values of one type (a DATE 'YYYY-MM-DD' literal for a date)",
        )
    if kinds == _NUMBERS:
        return "double"
    return kinds.pop() or "null" if kinds else "null"


def _refuse(node: exp.Expr) -> UnsupportedQuery:
    return UnsupportedQuery(
        f"{node.sql('postgres')[:80]} could fail on a released value: not supported in the "
        "query around an aggregate subquery released first",
        hint=_HINT,
    )


def _date_literal(node: exp.Cast) -> bool:
    if node.to.this is not exp.DataType.Type.DATE or not isinstance(node.this, exp.Literal):
        return False
    try:
        datetime.date.fromisoformat(node.this.name)
    except ValueError:
        return False
    return node.this.is_string and len(node.this.name) == 10


def _check(node: exp.Expr) -> None:
    if isinstance(node, _COMPARE):
        _one_type([node.this, node.expression], node)
    elif isinstance(node, exp.In):
        query = node.args.get("query")
        _one_type([node.this, *node.expressions, *([query] if query else [])], node)
    elif isinstance(node, exp.Between):
        _one_type([node.this, node.args["low"], node.args["high"]], node)
    elif isinstance(node, exp.Is):
        if not isinstance(node.expression, exp.Null):
            raise _refuse(node)
    elif isinstance(node, exp.Case):
        if node.args.get("this") is not None:
            raise _refuse(node)
        results = [i.args["true"] for i in node.args.get("ifs") or []]
        _one_type([*results, *([node.args["default"]] if node.args.get("default") else [])], node)
    elif isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
        return
    elif isinstance(node, exp.Coalesce):
        _one_type([node.this, *node.expressions], node)
    elif isinstance(node, exp.Sum | exp.Avg):
        if _kind(node.this) not in _NUMBERS:
            raise _refuse(node)
    elif isinstance(node, exp.Neg):
        if not isinstance(node.this, exp.Literal) or node.this.is_string:
            raise _refuse(node)
    elif isinstance(node, exp.Cast):
        if not _date_literal(node):
            raise _refuse(node)
    elif isinstance(node, exp.DataType):
        if not (isinstance(node.parent, exp.Cast) and _date_literal(node.parent)):
            raise _refuse(node)
    elif isinstance(node, exp.Like | exp.ILike):
        pattern = node.expression
        literal = isinstance(pattern, exp.Literal) and pattern.is_string
        if not literal or _kind(node.this) != "text" or node.args.get("escape"):
            raise _refuse(node)
        if (len(pattern.name) - len(pattern.name.rstrip("\\"))) % 2:  # ends in an escape
            raise _refuse(node)
    elif isinstance(node, exp.Values):
        raise _refuse(node)  # the analyst's own VALUES: not needed over released rows
    elif not isinstance(node, _STRUCTURE):
        raise _refuse(node)


def _one_row(node: exp.Subquery) -> bool:
    """Does a scalar subquery return at most one row whatever the rows it reads: an
    aggregate without GROUP BY, a LIMIT of 0 or 1, or dpproxy's keyed lookup (one per key)?"""
    select = node.this
    if _released(select):
        return True
    if not isinstance(select, exp.Select):
        return False  # a set operation
    limit = select.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal):
        if limit.expression.is_int and int(limit.expression.name) <= 1:
            return True
    if select.args.get("group") is not None or select.args.get("distinct") is not None:
        return False
    return any(
        isinstance(a, exp.AggFunc) and a.parent_select is select
        for item in select.expressions
        for a in item.find_all(exp.AggFunc)
    )


def check_total(tree: exp.Expr) -> None:
    """Refuse (0A000) an outer query over released relations that could fail on a value.
    ``tree``: the query with the relations' placeholders, qualified and typed. A scalar
    subquery must return at most one row (:func:`_one_row`): more is an error at run time,
    and how many rows a released relation keeps is decided by the noise."""
    for node in tree.walk(prune=_released):
        if _released(node):
            continue
        if isinstance(node, exp.Subquery) and not isinstance(
            node.parent, exp.From | exp.Join | exp.In | exp.SetOperation
        ):
            if not _one_row(node):
                raise UnsupportedQuery(
                    f"{node.sql('postgres')[:80]} may return more than one row, which fails "
                    "on the released rows: not supported in the query around a subquery "
                    "released first",
                    hint="compute one row: an aggregate without GROUP BY, or LIMIT 1",
                )
        _check(node)


def refuse_values(tree: exp.Expr) -> None:
    """Refuse (0A000) the analyst's own VALUES in a query planned in parts: dpproxy writes
    released rows and keyed lookups as VALUES lists, and :func:`check_total` does not look
    inside those (its own, literals only), so a look-alike must not reach it."""
    values = tree.find(exp.Values)
    if values is not None:
        raise UnsupportedQuery(
            f"VALUES ({values.sql('postgres')[:60]}) is not supported in a query with "
            "subqueries released first",
            hint="read public tables and the released subqueries only",
        )
