r"""Semi- and anti-joins: ``EXISTS``, ``NOT EXISTS``, ``IN (SELECT …)`` and ``NOT IN (SELECT …)``
as filters on the outer row, and conditions repeated in every branch of an ``OR``.

A WHERE conjunct ``[NOT] EXISTS (subquery)`` or ``x [NOT] IN (SELECT c FROM …)`` keeps or drops
each row of the outer relation; it adds no row and changes no value. It is accepted when its
value for an outer row provably depends only on that row, public data and **the rows of the
outer row's own privacy unit**:

(a) the subquery reads a public table: the filter is a function of the outer row and public
    data, the same in every neighbouring database;
(b) the subquery reads a private table and one of its AND-ed conditions equates an inner column
    with an outer column that the schema ties to the same unit (:func:`unit_key`): both are the
    unit column (``o_custkey = c_custkey``), or both lead to the same referenced key
    (``l_orderkey = o_orderkey``: ``lineitem`` references ``orders.o_orderkey``). Every inner
    row that can satisfy the subquery's WHERE then belongs to the outer row's unit: an inner
    row ``r`` with ``r.b = o.a`` has unit ``F(r.b) = F(o.a)`` = the outer row's unit, where
    ``F`` maps a key value to the unit of the one row of the referenced table with that key
    (the identity for a unit column). That ``KEY`` is unique in its table is the schema's
    stated assumption (schemas/README.md, "Units through references"); the joins of
    ``sql/joins.py`` rest on it too.

**Stability.** Let D' add or remove one unit u with all its rows. For an outer row of a unit
w ≠ u, the inner rows that can match it are w's rows (case b) or public rows (case a), which
are the same in D and D', so the filter keeps or drops it in both alike; only u's own outer
rows can change. The filtered relation therefore differs from the unfiltered one's neighbour
exactly as a row-level WHERE does: in the rows of u alone. The filter sits in the row-level
part of the rewrite (``__rows``, ``rewrite/pipeline.py``), *before* contribution bounding, so
the bound of τ rows per unit and every sensitivity of ``analysis/sensitivity.py`` hold
unchanged (stability 1 per unit). The DP choice of τ (``planning/truncation.py``) counts rows
per unit of the same filtered rows, each count a function of its unit's data alone.
``tests/property/test_semijoin_bruteforce.py`` checks it over all neighbours of small databases.

Refused (0A000, naming the obstacle): a private subquery with no such correlation (the filter
would depend on other people's rows: an uncorrelated subquery, or one correlated through a
column that is not a unit key, such as ``l_suppkey``); a private subquery in a join of two
people's rows; aggregates, GROUP BY, HAVING, LIMIT, joins, CTEs or nested subqueries inside the
subquery; a subquery anywhere but as an AND-ed WHERE condition (inside OR, in a comparison,
in the select list).

**Semantics.** ``x IN (SELECT c …)`` is TRUE exactly when some row has ``c = x`` TRUE, so as a
WHERE conjunct it is ``EXISTS (SELECT … WHERE … AND c = x)``. ``x NOT IN (SELECT c …)`` is TRUE
exactly when no row has ``c = x``, ``c IS NULL`` or ``x IS NULL`` (any of them makes it FALSE
or NULL), so it is ``NOT EXISTS (SELECT … WHERE … AND (c = x OR c IS NULL OR x IS NULL))``;
when the schema declares both sides NOT NULL the two NULL tests are dropped. (The NULL tests
match rows of any unit, so over private rows a nullable ``NOT IN`` is accepted only when
another condition ties the subquery to the unit.)

**The SQL.** The filter is printed from the validated tree, never from the text: ``EXISTS
(SELECT 1 FROM (SELECT __sqN_t.col AS __sqN_col, … FROM table AS __sqN_t) AS __sqN WHERE …)``.
Every inner column is renamed ``__sqN_col`` (qualified ``__sqN.``) and declared, with the inner
table's type and bounds, as a hidden column of the query's relation, so the conditions inside
go through the same typing (:func:`dpproxy.sql.types.type_of`), allowlist
(:func:`dpproxy.sql.totality.check_allowed`) and rewrite guards as any WHERE clause. An outer
column keeps the relation's own name, which no inner column can capture (they all start with
``__sqN_``). ``EXISTS`` itself cannot fail: it reads rows and evaluates a total condition.

``(A AND B) OR (A AND C)`` is first rewritten as ``A AND (B OR C)`` (:mod:`dpproxy.sql.factor`),
so that a join equality repeated in every OR branch (TPC-H Q19) is seen by the join builder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, Table
from dpproxy.errors import (
    AmbiguousColumn,
    DatatypeMismatch,
    SQLSyntaxError,
    UndefinedColumn,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.sql.factor import and_all, bare
from dpproxy.sql.joins import conjuncts
from dpproxy.sql.scope import SUBQUERY_HINT, Scope, no_aggregates, parenthesised
from dpproxy.sql.totality import check_allowed
from dpproxy.sql.types import COLUMN_TYPES, SqlType, type_of
from dpproxy.sql.unitkeys import unit_key

PREFIX = "__sq"
SUPPORTED = SUBQUERY_HINT

# ------------------------------------------------------------------------------ the WHERE split


def has_subquery(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.Subquery | exp.Select | exp.Exists) for n in node.walk())


def split_where(cond: exp.Expression) -> tuple[exp.Expression | None, list[exp.Expression]]:
    """(the WHERE without its subquery conditions, the subquery conditions); a subquery in any
    other place of the WHERE is refused."""
    if not has_subquery(cond):
        return cond, []
    plain: list[exp.Expression] = []
    semis: list[exp.Expression] = []
    for c in conjuncts(cond):
        if not has_subquery(c):
            plain.append(c)
        elif _form(c) is not None:
            semis.append(c)
        else:
            raise UnsupportedQuery(
                f"a subquery inside a WHERE expression is not supported (in {_shorten(c)})",
                hint=SUPPORTED + "; a scalar subquery or one inside OR is not",
            )
    return (and_all(plain) if plain else None), semis


def _shorten(node: exp.Expression) -> str:
    text = node.sql("postgres")
    return text if len(text) <= 80 else text[:77] + "…"


@dataclass(frozen=True, slots=True)
class _Form:
    negated: bool
    select: exp.Select
    operand: exp.Expression | None  # x of ``x IN (…)``; None for EXISTS
    word: str  # how the user wrote it, for messages


def _form(node: exp.Expression) -> _Form | None:
    node = bare(node)
    negated = isinstance(node, exp.Not)
    inner = bare(node.this) if negated else node
    if isinstance(inner, exp.Exists) and isinstance(inner.this, exp.Select):
        return _Form(negated, inner.this, None, "NOT EXISTS" if negated else "EXISTS")
    query = inner.args.get("query") if isinstance(inner, exp.In) else None
    if isinstance(inner, exp.In) and query is not None:
        select = query.this if isinstance(query, exp.Subquery) else query
        if isinstance(select, exp.Select) and not inner.expressions:
            operand = inner.this
            if has_subquery(operand):
                return None
            return _Form(negated, select, operand, "NOT IN" if negated else "IN")
    return None


# ------------------------------------------------------------------------------ the filter


@dataclass
class SemiJoins:
    """Builds the semi-join filters of one query; numbers their subqueries."""

    catalog: Catalog
    ctes: dict[str, exp.Expression]
    hidden: list[Column] = field(default_factory=list)  # the subqueries' renamed columns
    count: int = 0

    def filter(self, node: exp.Expression, outer: Scope) -> exp.Expression:
        """The validated filter for one WHERE conjunct that :func:`split_where` set apart."""
        form = _form(node)
        assert form is not None
        self.count += 1
        return _Inner(self, form, outer, self.count).build()


class _Inner:
    """One subquery: its table, the names it sees, its conditions."""

    def __init__(self, owner: SemiJoins, form: _Form, outer: Scope, n: int) -> None:
        self.owner, self.form, self.outer = owner, form, outer
        self.alias = f"{PREFIX}{n}"
        select = form.select
        self._check_shape(select)
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise UnsupportedQuery(f"the subquery of {form.word} must read a table (FROM)")
        source = from_.this
        if not isinstance(source, exp.Table):
            raise UnsupportedQuery(
                f"the subquery of {form.word} must read one table, not {_shorten(source)}",
                hint="name the table directly: " + SUPPORTED,
            )
        if source.args.get("db") or source.args.get("catalog"):
            if source.db.lower() not in ("public", "main"):
                raise UndefinedTable(f'relation "{source.sql("postgres")}" does not exist')
        name = source.name.lower()
        if name in owner.ctes and not source.db:
            raise UnsupportedQuery(
                f"a CTE inside {form.word} is not supported",
                hint="name the table in the subquery directly",
            )
        table = owner.catalog.table(name)
        if table is None:
            raise UndefinedTable(
                f'relation "{source.name}" does not exist',
                hint="tables: " + ", ".join(t.name for t in owner.catalog.tables),
            )
        self.table = table
        self.user_alias = source.alias_or_name.lower()
        self.used: dict[str, Column] = {}  # inner column name (lower) → its renamed Column

    def _check_shape(self, select: exp.Select) -> None:
        word = self.form.word
        for key in ("group", "having", "limit", "offset", "qualify", "windows", "laterals"):
            if select.args.get(key):
                raise UnsupportedQuery(
                    f"{key.upper()} inside the subquery of {word} is not supported",
                    hint=SUPPORTED + ", over rows without grouping",
                )
        if select.args.get("joins"):
            raise UnsupportedQuery(
                f"a join inside the subquery of {word} is not supported",
                hint="read one table in the subquery; join in the outer query",
            )
        if select.args.get("with_") or select.args.get("with"):
            raise UnsupportedQuery(f"WITH inside the subquery of {word} is not supported")
        for n in select.walk():
            if n is select:
                continue
            if isinstance(n, exp.Subquery | exp.Select | exp.Exists):
                raise UnsupportedQuery(
                    f"a subquery inside the subquery of {word} is not supported",
                    hint="each subquery must read one table with conditions on it and on the "
                    "outer row",
                )
            if isinstance(n, exp.AggFunc | exp.Window):
                raise UnsupportedQuery(
                    f"aggregates inside the subquery of {word} are not supported: an "
                    "aggregate over other rows has no per-person bound",
                    hint=SUPPORTED + ", over rows without aggregates",
                )

    # -- names -------------------------------------------------------------------------

    def _inner_column(self, name: str) -> exp.Expression:
        c = self.table.column(name) or next(
            (c for c in self.table.columns if c.name.lower() == name), None
        )
        assert c is not None
        key = c.name.lower()
        if key not in self.used:
            renamed = Column(
                f"{self.alias}_{c.name}", c.type, c.lower, c.upper, c.nullable, c.domain
            )
            if self.outer.table.column(renamed.name) is not None:
                raise AmbiguousColumn(f'column name "{renamed.name}" is reserved by dpproxy')
            self.used[key] = renamed
        return exp.column(self.used[key].name, table=self.alias)

    def _has(self, name: str) -> bool:
        return any(c.name.lower() == name for c in self.table.columns)

    def resolve(self, node: exp.Expression) -> exp.Expression:
        """Inner names → renamed inner columns, outer names → the outer scope's expressions;
        then typed and checked against the allowlist, as :meth:`Scope.resolve` does."""

        def sub(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Star):
                raise UnsupportedQuery(f"* is allowed only as the select list of {self.form.word}")
            if not isinstance(n, exp.Column):
                return n
            name = n.name.lower()
            if isinstance(n.this, exp.Star):
                raise UnsupportedQuery(f"* is allowed only as the select list of {self.form.word}")
            if n.table and n.table.lower() == self.user_alias:
                if not self._has(name):
                    raise UndefinedColumn(f"column {n.table}.{n.name} does not exist")
                return self._inner_column(name)
            if not n.table and self._has(name):
                return self._inner_column(name)
            try:
                return self.outer.resolve(n)
            except UndefinedColumn as e:
                inner = ", ".join(c.name for c in self.table.columns)
                raise UndefinedColumn(
                    e.message, hint=f"columns of {self.table.name}: {inner}"[:300]
                ) from None

        out = exp.Paren(this=node.copy().transform(sub, copy=False))
        type_of(out, self.types())
        check_allowed(out)
        result: exp.Expression = out.this
        result.parent = None
        return result

    def _expect_bool(self, cond: exp.Expression, where: str) -> None:
        t = type_of(cond, self.types())
        if t not in (SqlType.BOOLEAN, SqlType.NULL):
            raise DatatypeMismatch(f"argument of {where} must be type boolean, not {t.value}")

    def types(self) -> dict[str, SqlType]:
        return {
            **self.outer.column_types,
            **{c.name: COLUMN_TYPES[c.type] for c in self.used.values()},
        }

    # -- the filter ----------------------------------------------------------------------

    def build(self) -> exp.Expression:
        select, form = self.form.select, self.form
        conds: list[exp.Expression] = []
        if where := select.args.get("where"):
            no_aggregates(where.this, f"the subquery of {form.word}")
            resolved = self.resolve(where.this)
            self._expect_bool(resolved, f"WHERE in the subquery of {form.word}")
            conds = conjuncts(resolved)
        projections = select.expressions
        if form.operand is None:
            used = dict(self.used)
            for p in projections:  # names checked as PostgreSQL would; never printed
                if not (isinstance(p, exp.Star) or isinstance(getattr(p, "this", None), exp.Star)):
                    self.resolve(p.unalias())
            self.used = used
        else:
            if len(projections) != 1 or isinstance(projections[0], exp.Star):
                raise SQLSyntaxError(
                    f"the subquery of {form.word} must return exactly one column",
                    hint="x IN (SELECT column FROM table WHERE …)",
                )
            conds.extend(self._membership(projections[0].unalias(), form.operand))
        self._prove(conds)
        return self._sql(conds)

    def _membership(
        self, projection: exp.Expression, operand: exp.Expression
    ) -> list[exp.Expression]:
        """``c = x`` for IN; for NOT IN also ``c IS NULL OR x IS NULL`` unless both are NOT
        NULL by the schema (module docstring, Semantics)."""
        if isinstance(bare(operand), exp.Tuple):
            raise UnsupportedQuery(
                f"a row value before {self.form.word} (SELECT …) is not supported"
            )
        no_aggregates(operand, self.form.word)
        x = self.outer.resolve(operand)  # the operand is the outer query's
        c = self.resolve(projection)
        # x = c, as PostgreSQL compares them (its messages name the outer type first)
        resolved = exp.EQ(this=parenthesised(x), expression=parenthesised(c))
        wrapper = exp.Paren(this=resolved)
        type_of(wrapper, self.types())  # string literals become typed constants, in place
        check_allowed(wrapper)
        resolved = wrapper.this
        resolved.parent = None
        self._expect_bool(resolved, self.form.word)
        if not self.form.negated:
            return [resolved]
        x, c = bare(resolved.this), bare(resolved.expression)
        if self._never_null(c) and self._never_null(x):
            return [resolved]
        nulls = exp.Or(
            this=exp.Or(
                this=resolved,
                expression=exp.Is(this=exp.Paren(this=c.copy()), expression=exp.Null()),
            ),
            expression=exp.Is(this=exp.Paren(this=x.copy()), expression=exp.Null()),
        )
        return [exp.Paren(this=nulls)]

    def _never_null(self, e: exp.Expression) -> bool:
        if isinstance(e, exp.Literal):
            return True
        if not isinstance(e, exp.Column):
            return False
        for c in (*self.used.values(), *self.outer.table.columns):
            if c.name == e.name:
                return not c.nullable
        return False

    def _prove(self, conds: list[exp.Expression]) -> None:
        """Case (a) or (b) of the module docstring, or a refusal naming the obstacle."""
        if not self.table.private:
            return
        word, t = self.form.word, self.table.name
        source = self.outer.source
        if source is not None and source.sides is not None:
            raise UnsupportedQuery(
                f'{word} over the private table "{t}" in a join of two people\'s rows is not '
                "supported: the outer row has no single privacy unit to tie the subquery to",
                hint=f"{word} over public tables is supported there",
            )
        for c in conds:
            c = bare(c)
            if not isinstance(c, exp.EQ):
                continue
            a, b = bare(c.this), bare(c.expression)
            for inner, outer in ((a, b), (b, a)):
                if self._same_unit(inner, outer):
                    return
        keys = [
            c.name for c in self.table.columns if unit_key(self.owner.catalog, self.table, c.name)
        ]
        raise UnsupportedQuery(
            f'{word} over the private table "{t}" must be tied to the outer row\'s privacy '
            "unit: without an equality between a column of the subquery and a column of the "
            "outer row that lead to the same person, the condition would depend on other "
            "people's rows",
            hint=f"correlate on a unit key of {t} ({', '.join(keys) or 'none'}), e.g. "
            f"WHERE {t}.{keys[0] if keys else 'key'} = <the matching column of the outer "
            "table>; or filter with a public table",
        )

    def _same_unit(self, inner: exp.Expression, outer: exp.Expression) -> bool:
        if not (isinstance(inner, exp.Column) and isinstance(outer, exp.Column)):
            return False
        if inner.table != self.alias or outer.table:
            return False
        own = next((k for k, c in self.used.items() if c.name == inner.name), None)
        origin = _origin(self.outer, self.owner.catalog, outer.name)
        if own is None or origin is None:
            return False
        catalog = self.owner.catalog
        mine = unit_key(catalog, self.table, own)
        theirs = unit_key(catalog, origin[0], origin[1])
        return mine is not None and mine == theirs

    def _sql(self, conds: list[exp.Expression]) -> exp.Expression:
        inner_alias = f"{self.alias}_t"
        derived = exp.select()
        for key, renamed in self.used.items():
            column = next(c for c in self.table.columns if c.name.lower() == key)
            derived = derived.select(
                exp.alias_(exp.column(column.name, table=inner_alias), renamed.name, copy=False),
                copy=False,
            )
        if not self.used:
            derived = derived.select(exp.alias_(exp.Literal.number(1), self.alias), copy=False)
        derived = derived.from_(
            exp.Table(
                this=exp.to_identifier(self.table.name),
                alias=exp.TableAlias(this=exp.to_identifier(inner_alias)),
            ),
            copy=False,
        )
        query = exp.select(exp.Literal.number(1)).from_(
            exp.Subquery(this=derived, alias=exp.TableAlias(this=exp.to_identifier(self.alias))),
            copy=False,
        )
        for c in conds:
            query = query.where(exp.Paren(this=c) if isinstance(bare(c), exp.Or) else c, copy=False)
        self.owner.hidden.extend(self.used.values())
        exists: exp.Expression = exp.Exists(this=query)
        return exp.Not(this=exists) if self.form.negated else exists


def _origin(outer: Scope, catalog: Catalog, name: str) -> tuple[Table, str] | None:
    """The schema table and column behind a column of the outer relation."""
    if outer.source is not None:
        for vname, table, column in outer.source.origins:
            t = catalog.table(table)
            if vname == name and t is not None:
                return t, column
        return None
    if outer.table.column(name) is not None:
        return outer.table, name
    return None
