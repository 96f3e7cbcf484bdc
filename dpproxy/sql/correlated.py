"""Correlated scalar subqueries keyed on a public table: the tree work (pure).

TPC-H Q17 compares each line item with ``(SELECT 0.2 * AVG(l_quantity) FROM lineitem WHERE
l_partkey = p_partkey)``, Q20 each partsupp row with ``(SELECT 0.5 * SUM(l_quantity) FROM
lineitem WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey AND ...)``. Such a subquery is
a function of its *key*: the outer columns it equates inner columns with. When every outer
column it reads belongs to one **public** table T of the query that directly holds it (the
*enclosing* SELECT), the subquery is answered as one grouped release over a public key domain
(``planning/keyed.py`` plans it and carries the privacy argument); this module

* recognises the shape (:func:`correlation`): the subquery's WHERE is ``inner = outer`` conjuncts
  (one per key column) and conjuncts over its own tables; nothing else reads the outer row;
* writes the **key domain query** (:attr:`Correlation.domain_sql`): the distinct non-NULL key
  values of T's rows that pass the conjuncts of the enclosing WHERE reading T alone (and public
  subqueries, such as Q20's ``ps_partkey IN (SELECT p_partkey FROM part WHERE ...)``). Every
  row the enclosing SELECT keeps has its key in that set: those conjuncts are conjuncts of its
  WHERE, and its FROM joins T by inner joins only. Leaving a conjunct out only widens the set;
* writes the **keyed release** (:func:`keyed_sql`): the subquery grouped by its key's integer
  code over IN lists (:func:`coded_index`), or else by the index of its key in the domain,
  ``CASE WHEN l_partkey = 5 AND l_suppkey = 7 THEN 0 WHEN ... END``, a group key whose domain
  is public (the code's IN list, or the CASE's literal branches), with ``COUNT(*)`` beside
  the value when the value is NULL over no rows (SUM, AVG, ...);
* writes the released table back in place of the subquery (:func:`lookup`): ``CASE WHEN
  p_partkey = 5 THEN 4.8 WHEN ... END`` over the outer columns, NULL for any other key — what
  the subquery gives for a key with no rows (a value released as NULL has no branch); for an
  outer query over public tables, the same function as a VALUES relation
  (:func:`lookup_relation`).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Table
from dpproxy.errors import UnsupportedQuery
from dpproxy.sql.validate import MAX_PUBLIC_GROUPS

CORRELATED_HINT = (
    "an uncorrelated scalar subquery (x > (SELECT AVG(x) FROM t WHERE ...)) is released first "
    "with noise and compared as a constant, and a correlated one keyed on columns of a public "
    "table (l_partkey = p_partkey) once per key; for a per-group average, GROUP BY the "
    "correlating column in a query of its own"
)
SHAPE_HINT = (
    "a correlated subquery is answered when it equates its own columns with columns of one "
    "public table of the outer query (WHERE l_partkey = p_partkey AND ...): it is then released "
    "once per key of that table's public rows"
)
Key = tuple[object, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Correlation:
    """A correlated scalar subquery keyed on the public table ``table``."""

    inner: tuple[exp.Column, ...]  # the subquery's key columns, as written
    outer: tuple[exp.Column, ...]  # the outer columns they equal, as written
    table: str  # the public table T the outer columns belong to
    domain_sql: str  # SELECT DISTINCT the key FROM T WHERE <T's own conjuncts>
    rest: exp.Select = field(repr=False)  # the subquery without the correlation
    counts: bool = False  # a value of COUNTs only: 0 (not NULL) over no rows
    enclosing: exp.Select | None = field(default=None, repr=False)


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def and_all(parts: Sequence[exp.Expression]) -> exp.Expression | None:
    out: exp.Expression | None = None
    for p in parts:
        out = p.copy() if out is None else exp.And(this=out, expression=p.copy())
    return out


def _sources(select: exp.Select) -> list[exp.Expression]:
    from_ = select.args.get("from_") or select.args.get("from")
    found = [from_.this] if from_ is not None else []
    return found + [j.this for j in select.args.get("joins") or []]


def owner(col: exp.Column, select: exp.Select, catalog: Catalog) -> tuple[exp.Table, Table] | None:
    """The table of ``select``'s own FROM that ``col`` names (None: not exactly one)."""
    hits = []
    for src in _sources(select):
        if not isinstance(src, exp.Table):
            continue
        table = catalog.table(src.name.lower())
        names = {src.name.lower(), src.alias_or_name.lower()}
        if col.table:
            if col.table.lower() in names and table is not None:
                hits.append((src, table))
        elif table is not None and table.column(col.name.lower()) is not None:
            hits.append((src, table))
    return hits[0] if len(hits) == 1 else None


def correlation(
    node: exp.Subquery, outer_columns: Sequence[exp.Column], catalog: Catalog
) -> Correlation:
    """The correlation of ``node``, whose ``outer_columns`` belong to the query around it;
    refused (0A000) unless it has the shape of the module docstring."""
    select = node.this
    assert isinstance(select, exp.Select)
    text = node.sql("postgres")
    text = text if len(text) <= 80 else text[:77] + "…"
    enclosing = node.parent
    while enclosing is not None and not isinstance(enclosing, exp.Select):
        enclosing = enclosing.parent
    outer_ids = {id(c) for c in outer_columns}

    def refuse(why: str) -> UnsupportedQuery:
        return UnsupportedQuery(f"{why} (in {text})", hint=SHAPE_HINT)

    inner: list[exp.Column] = []
    outer: list[exp.Column] = []
    kept: list[exp.Expression] = []
    for cond in _conjuncts(select.args.get("where") and select.args["where"].this):
        reads = [c for c in cond.find_all(exp.Column) if id(c) in outer_ids]
        if not reads:
            kept.append(cond)
            continue
        sides = (cond.this, cond.expression) if isinstance(cond, exp.EQ) else ()
        pair = [s for s in sides if isinstance(s, exp.Column) and id(s) in outer_ids]
        other = [s for s in sides if s not in pair]
        if len(pair) != 1 or len(other) != 1 or not isinstance(other[0], exp.Column):
            raise refuse(
                f"a correlated subquery may read the outer row only as inner_column = "
                f"outer_column in its WHERE, not in {cond.sql('postgres')[:60]}"
            )
        inner.append(other[0])
        outer.append(pair[0])
    used = {id(c) for c in outer}
    if any(id(c) not in used for c in outer_columns if _inside(c, select)):
        raise refuse("a correlated subquery may read the outer row only in its WHERE clause")
    if not isinstance(enclosing, exp.Select):
        raise refuse("a correlated subquery must stand in a SELECT")
    owners = [owner(c, enclosing, catalog) for c in outer]
    if any(o is None for o in owners) or len({id(o[0]) for o in owners if o}) != 1:
        raise refuse("the outer columns of a correlated subquery must belong to one table")
    src, table = owners[0]  # type: ignore[misc]
    if table.private:
        raise UnsupportedQuery(
            f"a scalar subquery that reads a column of the outer query "
            f"({outer[0].sql('postgres')}) of the private table {table.name} is not supported "
            f"(in {text}): it is an aggregate over other people's rows, computed again for every "
            "outer row, and one person's influence on such an answer has no bounded sensitivity",
            hint=CORRELATED_HINT,
        )
    if any(
        j.side or (j.kind or "").upper() not in ("", "INNER", "CROSS")
        for j in enclosing.args.get("joins") or []
    ):
        raise refuse("a correlated subquery is supported in a SELECT with inner joins only")
    return Correlation(
        tuple(inner),
        tuple(outer),
        table.name,
        _domain_sql(enclosing, src, table, outer, catalog),
        _without(select, kept),
        counts=_counts_only(select),
        enclosing=enclosing,
    )


def _inside(node: exp.Expression, outer: exp.Expression) -> bool:
    p = node.parent
    while p is not None:
        if p is outer:
            return True
        p = p.parent
    return False


def _counts_only(select: exp.Select) -> bool:
    aggs = [a for a in select.expressions[0].find_all(exp.AggFunc)]
    return bool(aggs) and all(isinstance(a, exp.Count) for a in aggs)


def _without(select: exp.Select, kept: Sequence[exp.Expression]) -> exp.Select:
    rest = select.copy()
    where = and_all(kept)
    rest.set("where", exp.Where(this=where) if where is not None else None)
    return rest


def _reads_only(cond: exp.Expression, src: exp.Table, table: Table, catalog: Catalog) -> bool:
    """Does ``cond`` read T's columns and public subqueries only (for sure)?"""
    names = {src.name.lower(), src.alias_or_name.lower()}
    for t in cond.find_all(exp.Table):
        found = catalog.table(t.name.lower())
        if found is None or found.private:
            return False
    for col in cond.find_all(exp.Column):
        sub = col.find_ancestor(exp.Select)
        if sub is not None and _inside(sub, cond):  # inside a public subquery of the conjunct
            own = {
                n
                for t in sub.find_all(exp.Table)
                for n in (t.name.lower(), t.alias_or_name.lower())
            }
            columns = {
                c.name
                for t in sub.find_all(exp.Table)
                if (x := catalog.table(t.name.lower())) is not None
                for c in x.columns
            }
            if col.table and col.table.lower() in own:
                continue
            if not col.table and col.name.lower() in columns:
                continue
        if col.table:
            if col.table.lower() not in names:
                return False
        elif table.column(col.name.lower()) is None:
            return False
    return True


def _domain_sql(
    enclosing: exp.Select,
    src: exp.Table,
    table: Table,
    outer: Sequence[exp.Column],
    catalog: Catalog,
) -> str:
    where = enclosing.args.get("where")
    own = [
        c
        for c in _conjuncts(where.this if where is not None else None)
        if not any(isinstance(n, exp.Subquery) and _is_scalar_here(n) for n in c.walk())
        and _reads_only(c, src, table, catalog)
    ]
    own += [exp.Not(this=exp.Is(this=c.copy(), expression=exp.Null())) for c in outer]
    query = exp.select(*(c.copy() for c in outer)).distinct().from_(src.copy())
    condition = and_all(own)
    if condition is not None:
        query = query.where(condition)
    return query.sql("postgres", comments=False)


def _is_scalar_here(node: exp.Subquery) -> bool:
    return isinstance(node.this, exp.Select) and not isinstance(node.parent, exp.In | exp.Exists)


def literal(value: object) -> exp.Expression:
    """A key value of the public domain as a SQL literal."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float):
        text = str(value)
        number = exp.Literal.number(text.lstrip("-"))
        return exp.Paren(this=exp.Neg(this=number)) if text.startswith("-") else number
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, datetime.date):
        return exp.Cast(this=exp.Literal.string(value.isoformat()), to=exp.DataType.build("date"))
    raise UnsupportedQuery(f"a correlated subquery keyed on a {type(value).__name__} column")


def _match(columns: Sequence[exp.Column], key: Key) -> exp.Expression:
    parts = [
        exp.Is(this=c.copy(), expression=exp.Null())
        if v is None
        else exp.EQ(this=c.copy(), expression=literal(v))
        for c, v in zip(columns, key, strict=True)
    ]
    out = and_all(parts)
    assert out is not None
    return out


def key_case(
    columns: Sequence[exp.Column],
    keys: Sequence[Key],
    values: Sequence[exp.Expression],
    default: exp.Expression | None = None,
) -> exp.Expression:
    """``CASE WHEN c1 = k1 AND ... THEN v ... [ELSE default] END`` (a NULL value has no
    branch; with no branch at all, the default or NULL)."""
    ifs = [
        exp.If(this=_match(columns, k), true=v.copy())
        for k, v in zip(keys, values, strict=True)
        if not isinstance(v, exp.Null)
    ]
    if not ifs:
        return default.copy() if default is not None else exp.Null()
    return exp.Case(ifs=ifs, default=default.copy() if default is not None else None)


EXACT = 2**53  # every integer below is exact as a DOUBLE PRECISION


def key_codes(keys: Sequence[Key]) -> list[int] | None:
    """One integer per key of a domain of integer keys, distinct, or None (then the key's
    index is a CASE). One column: the key itself. Several: the mixed-radix number
    ``k1·W1 + k2·W2 + … + kn`` with ``W_i = Π_{j>i} (max_j + 1)`` over non-negative keys,
    injective on every row whose columns each lie in their column's values (each ``k_j <
    max_j + 1``), and below 2**53 so that the engines' arithmetic (in DOUBLE PRECISION,
    ``rewrite/``) is exact."""
    if not keys or any(isinstance(v, bool) or not isinstance(v, int) for k in keys for v in k):
        return None
    ints = _ints(keys)
    if len(ints[0]) == 1:
        return [k[0] for k in ints]
    if any(v < 0 for k in ints for v in k):
        return None
    weights = _weights(ints)
    if sum(max(k[i] for k in ints) * w for i, w in enumerate(weights)) >= EXACT:
        return None
    return [sum(v * w for v, w in zip(k, weights, strict=True)) for k in ints]


def _ints(keys: Sequence[Key]) -> list[tuple[int, ...]]:
    return [tuple(v for v in k if isinstance(v, int)) for k in keys]


def _weights(keys: Sequence[tuple[int, ...]]) -> list[int]:
    weights = [1]
    for i in range(len(keys[0]) - 1, 0, -1):
        weights.insert(0, weights[0] * (max(k[i] for k in keys) + 1))
    return weights


def key_code(columns: Sequence[exp.Column], keys: Sequence[Key]) -> exp.Expression:
    """The expression of :func:`key_codes` over ``columns`` (``keys`` must have codes)."""
    out: exp.Expression | None = None
    for column, weight in zip(columns, _weights(_ints(keys)), strict=True):
        term: exp.Expression = column.copy()
        if weight != 1:
            term = exp.Mul(this=term, expression=exp.Literal.number(weight))
        out = term if out is None else exp.Add(this=out, expression=term)
    assert out is not None
    return out


def key_index(keys: Sequence[Key]) -> dict[object, int] | None:
    """The index of each key by its code (None: the released rows carry the index)."""
    codes = key_codes(keys)
    return None if codes is None else {c: i for i, c in enumerate(codes)}


def coded_index(
    columns: Sequence[exp.Column], keys: Sequence[Key]
) -> tuple[exp.Expression, list[exp.Expression]]:
    """The group key of a release over the public domain ``keys`` and its extra filters.

    Integer keys are grouped by their code (:func:`key_codes`), ``WHERE l_partkey IN (…) AND
    l_suppkey IN (…) AND l_partkey * 10001 + l_suppkey IN (…) GROUP BY l_partkey * 10001 +
    l_suppkey``: the last IN list is the group key's public domain (``sql/domains.py``,
    :func:`listed_domain`, a function of the query text), so every key is released with no
    partition selection, as with a CASE of key indexes, and the engines hash the IN lists
    (time linear in the rows) where a CASE of n branches costs up to n comparisons per row.
    The row kept has each column among its column's values (the per-column IN lists), where
    the code is injective, so the code's IN list keeps exactly the rows of the domain's keys.
    Other keys: ``CASE WHEN c1 = k1 AND … THEN <index> … END``."""
    codes = key_codes(keys)
    if codes is None:
        return key_case(columns, keys, [exp.Literal.number(i) for i in range(len(keys))]), []
    code = key_code(columns, keys)
    if len(columns) == 1:
        return code, []
    listed = [exp.Literal.number(c) for c in dict.fromkeys(codes)]
    return code, [exp.In(this=code.copy(), expressions=listed)]


def keyed_sql(corr: Correlation, keys: Sequence[Key]) -> str:
    """The keyed release: the subquery grouped by its key's index in ``keys`` (every key
    released, the domain being the CASE's literal branches), with COUNT(*) beside a value
    that is NULL over no rows; for one integer key, grouped by the key itself over the IN
    list of its domain, several by their code (:func:`coded_index`)."""
    rest = corr.rest.copy()
    index, coded = coded_index(corr.inner, keys)
    value = rest.expressions[0].unalias()
    items = [exp.alias_(index.copy(), "key_index"), exp.alias_(value.copy(), "value")]
    if not corr.counts:
        items.append(exp.alias_(exp.Count(this=exp.Star()), "key_rows"))
    rest.set("expressions", items)
    filters: list[exp.Expression] = []
    for i, col in enumerate(corr.inner):
        values = list(dict.fromkeys(k[i] for k in keys))
        filters.append(exp.In(this=col.copy(), expressions=[literal(v) for v in values]))
    filters += coded
    return group_by_index(rest, index, filters, len(keys)).sql("postgres", comments=False)


def group_by_index(
    select: exp.Select, index: exp.Expression, filters: Sequence[exp.Expression], keys: int
) -> exp.Select:
    """``select`` with ``filters`` AND-ed to its WHERE, grouped by its first item, the key
    ``index`` (printed once: the text of a large domain stays within the parser's limits). The
    CASE's NULL (a row of no key) is a group too, released and dropped, unless the domain is at
    the cap of public groups: then ``index IS NOT NULL`` is a filter, which narrows it away."""
    where = select.args.get("where")
    conditions = ([where.this] if where is not None else []) + list(filters)
    if keys >= MAX_PUBLIC_GROUPS and isinstance(index, exp.Case):
        conditions.append(exp.Not(this=exp.Is(this=index.copy(), expression=exp.Null())))
    condition = and_all(conditions)
    select.set("where", exp.Where(this=condition) if condition is not None else None)
    select.set("group", exp.Group(expressions=[exp.Literal.number(1)]))
    return select


def lookup(
    corr: Correlation, keys: Sequence[Key], values: Sequence[object], relation: bool = False
) -> exp.Expression:
    """The released table in place of the subquery: a CASE over the outer columns, or with
    ``relation`` (an outer query over public tables, run exactly: ``planning/keyed.py``) a
    lookup in a VALUES list (:func:`lookup_relation`)."""
    consts = [exp.Null() if v is None else number(v) for v in values]
    if relation:
        return lookup_relation(corr, keys, consts, _over_no_rows(corr))
    return key_case(corr.outer, keys, consts, _over_no_rows(corr))


def lookup_relation(
    corr: Correlation,
    keys: Sequence[Key],
    values: Sequence[exp.Expression],
    default: exp.Expression | None,
) -> exp.Expression:
    """``(SELECT CAST(released.v AS DOUBLE PRECISION) FROM (VALUES (k1, k2, v), …) AS
    released(k0, k1, v) WHERE released.k0 = ps_partkey AND released.k1 = ps_suppkey)``, in
    COALESCE with ``default`` when there is one: the CASE of :func:`key_case` as a relation,
    which the engines join by hashing (DuckDB decorrelates it; PostgreSQL scans it once per
    outer row that reaches the comparison, as the CASE's branches) and whose text and tree
    are a third of the CASE's. The same value for every outer row: the keys are the distinct
    rows of the domain query, so at most one VALUES row matches (the subquery never returns
    two rows); a key with a NULL value has no row, so the subquery gives NULL, or ``default``
    (the CASE's ELSE), as the CASE without a branch for it. Total: VALUES of literals (typed
    keys as :func:`literal` writes them, values numbers or NULL cast to DOUBLE PRECISION on
    both engines), equalities of a column with a value of its own type."""
    rows = [
        exp.Tuple(expressions=[*(literal(k) for k in key), value.copy()])
        for key, value in zip(keys, values, strict=True)
        if not isinstance(value, exp.Null)
    ]
    if not rows:
        return default.copy() if default is not None else exp.Null()
    names = [f"k{i}" for i in range(len(corr.outer))] + ["v"]
    table = exp.Values(
        expressions=rows,
        alias=exp.TableAlias(
            this=exp.to_identifier("released"), columns=[exp.to_identifier(n) for n in names]
        ),
    )
    match = and_all(
        [
            exp.EQ(this=exp.column(f"k{i}", table="released"), expression=c.copy())
            for i, c in enumerate(corr.outer)
        ]
    )
    value = exp.Cast(
        this=exp.column("v", table="released"), to=exp.DataType.build("DOUBLE PRECISION")
    )
    found: exp.Expression = exp.Subquery(this=exp.select(value).from_(table).where(match))
    if default is not None:
        found = exp.Coalesce(this=found, expressions=[default.copy()])
    return found


def _over_no_rows(corr: Correlation) -> exp.Expression | None:
    """What the subquery gives for a key outside the domain (a NULL key, the only one a kept
    outer row can have): NULL, or for a value of COUNTs the value with every COUNT at 0."""
    if not corr.counts:
        return None
    value = corr.rest.expressions[0].unalias().copy()
    for count in list(value.find_all(exp.Count)):
        if count is value:
            return exp.Literal.number(0)
        count.replace(exp.Literal.number(0))
    return exp.Paren(this=value)


def number(v: object) -> exp.Expression:
    """A released value as a literal; NULL when post-processing made it ±inf or NaN (as
    ``sql/scalars.constant``: whether it does depends on the released value)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"a keyed subquery released a {type(v).__name__}")
    f = float(v)
    if f != f or f in (float("inf"), float("-inf")):
        return exp.Null()
    return literal(f)
