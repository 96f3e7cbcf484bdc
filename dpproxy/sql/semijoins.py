r"""Semi- and anti-joins: ``EXISTS``, ``NOT EXISTS``, ``IN (SELECT …)`` and ``NOT IN (SELECT …)``
as filters on the outer row, and conditions repeated in every branch of an ``OR``.

A WHERE conjunct ``[NOT] EXISTS (subquery)`` or ``x [NOT] IN (SELECT c FROM …)`` keeps or drops
each row of the outer relation; it adds no row and changes no value. It is accepted when its
value for an outer row provably depends only on that row, public data and **the rows of the
outer row's own privacy unit**:

(a) the subquery reads public tables only: the filter is a function of the outer row and
    public data, the same in every neighbouring database;
(b) every private table of the subquery is *tied*: an AND-ed condition (of its WHERE or an
    inner join's ON) equates one of its columns with an outer column that the schema ties to
    the same unit (:func:`dpproxy.sql.unitkeys.unit_key`) — both are the unit column
    (``o_custkey = c_custkey``), or both lead to the same referenced key (``l_orderkey =
    o_orderkey``: ``lineitem`` references ``orders.o_orderkey``) — or with such a column of a
    table already tied (``orders o2 JOIN lineitem l ON l.l_orderkey = o2.o_orderkey WHERE
    o2.o_custkey = c_custkey``). Every inner row that can satisfy the conditions then belongs
    to the outer row's unit: a row ``r`` with ``r.b = o.a`` has unit ``F(r.b) = F(o.a)`` = the
    outer row's unit, where ``F`` maps a key value to the unit of the one row of the
    referenced table with that key (the identity for a unit column), and by induction along
    the chain. That ``KEY`` is unique in its table is the schema's stated assumption
    (schemas/README.md, "Units through references"); the joins of ``sql/joins.py`` rest on it
    too.

**Stability.** Let D' add or remove one unit u with all its rows. For an outer row of a unit
w ≠ u, the inner rows that can match it are w's rows (case b) or public rows (case a), which
are the same in D and D', so the filter keeps or drops it in both alike; only u's own outer
rows can change. The filtered relation therefore differs from the unfiltered one's neighbour
exactly as a row-level WHERE does: in the rows of u alone. The filter sits in the row-level
part of the rewrite (``__rows``, ``rewrite/rows.py``), *before* contribution bounding, so
the bound of τ rows per unit and every sensitivity of ``analysis/sensitivity.py`` hold
unchanged (stability 1 per unit). The DP choice of τ (``planning/truncation.py``) counts rows
per unit of the same filtered rows, each count a function of its unit's data alone.
``tests/property/test_semijoin_bruteforce.py`` checks it over all neighbours of small databases.

Refused (0A000, naming the obstacle): a private subquery with no such correlation (the filter
would depend on other people's rows: an uncorrelated subquery, or one correlated through a
column that is not a unit key, such as ``l_suppkey``); a private subquery in a join of two
people's rows; aggregates, GROUP BY, HAVING, LIMIT, outer joins, USING, CTEs or nested
subqueries inside the subquery; a subquery anywhere but as an AND-ed WHERE condition (inside
OR, in a comparison, in the select list).

**Semantics.** ``x IN (SELECT c …)`` is TRUE exactly when some row has ``c = x`` TRUE, so as a
WHERE conjunct it is ``EXISTS (SELECT … WHERE … AND c = x)``. ``x NOT IN (SELECT c …)`` is TRUE
exactly when no row has ``c = x``, ``c IS NULL`` or ``x IS NULL`` (any of them makes it FALSE
or NULL), so it is ``NOT EXISTS (SELECT … WHERE … AND (c = x OR c IS NULL OR x IS NULL))``;
when the schema declares both sides NOT NULL the two NULL tests are dropped. (The NULL tests
match rows of any unit, so over private rows a nullable ``NOT IN`` is accepted only when
another condition ties the subquery to the unit.)

**The SQL.** The filter is printed from the validated tree, never from the text: ``EXISTS
(SELECT 1 FROM (SELECT __sqN_t.col AS __sqN_col, … FROM table AS __sqN_t) AS __sqN WHERE …)``,
a further table of the subquery as ``CROSS JOIN (…) AS __sqN_k`` with its ON conditions in the
WHERE (the same rows, for inner joins). Every inner column is renamed ``__sqN_col`` (or
``__sqN_k_col``; qualified) and declared, with the inner table's type and bounds, as a
hidden column of the query's relation, so the conditions inside go through the same typing
(:func:`dpproxy.sql.types.type_of`), allowlist (:func:`dpproxy.sql.totality.check_allowed`)
and rewrite guards as any WHERE clause. An outer column keeps the relation's own name, which
no inner column can capture (they all start with ``__sqN_``). ``EXISTS`` itself cannot fail:
it reads rows and evaluates a total condition.

``(A AND B) OR (A AND C)`` is first rewritten as ``A AND (B OR C)`` (:mod:`dpproxy.sql.factor`),
so that a join equality repeated in every OR branch (TPC-H Q19) is seen by the join builder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column
from dpproxy.errors import (
    AmbiguousColumn,
    DatatypeMismatch,
    SQLSyntaxError,
    UndefinedColumn,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.sql.factor import bare
from dpproxy.sql.joinparts import conjuncts
from dpproxy.sql.scope import Scope, no_aggregates, parenthesised
from dpproxy.sql.semiforms import SUPPORTED, SubqueryForm, shorten, subquery_form
from dpproxy.sql.semiunits import Source, prove_tied
from dpproxy.sql.totality import check_allowed
from dpproxy.sql.types import COLUMN_TYPES, SqlType, type_of

PREFIX = "__sq"

# ------------------------------------------------------------------------------ the filter


@dataclass
class SemiJoins:
    """Builds the semi-join filters of one query; numbers their subqueries."""

    catalog: Catalog
    ctes: dict[str, exp.Expression]
    hidden: list[Column] = field(default_factory=list)  # the subqueries' renamed columns
    count: int = 0

    def filter(self, node: exp.Expression, outer: Scope) -> exp.Expression:
        """The validated filter for one WHERE conjunct that
        :func:`~dpproxy.sql.semiforms.split_where` set apart."""
        form = subquery_form(node)
        assert form is not None
        self.count += 1
        return _Inner(self, form, outer, self.count).build()


MAX_TABLES = 4


class _Inner:
    """One subquery: its tables, the names it sees, its conditions."""

    def __init__(self, owner: SemiJoins, form: SubqueryForm, outer: Scope, n: int) -> None:
        self.owner, self.form, self.outer = owner, form, outer
        self.alias = f"{PREFIX}{n}"
        select = form.select
        self._check_shape(select)
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise UnsupportedQuery(f"the subquery of {form.word} must read a table (FROM)")
        self.sources: list[Source] = []
        self.on: list[exp.Expression] = []  # inner joins' ON conditions, AND-ed to the WHERE
        self._add(from_.this)
        for join in select.args.get("joins") or []:
            self._join(join)

    def _add(self, item: exp.Expression) -> None:
        word = self.form.word
        if not isinstance(item, exp.Table):
            raise UnsupportedQuery(
                f"the subquery of {word} must read tables, not {shorten(item)}",
                hint="name the tables directly: " + SUPPORTED,
            )
        if item.args.get("db") or item.args.get("catalog"):
            if item.db.lower() not in ("public", "main"):
                raise UndefinedTable(f'relation "{item.sql("postgres")}" does not exist')
        name = item.name.lower()
        if name in self.owner.ctes and not item.db:
            raise UnsupportedQuery(
                f"a CTE inside {word} is not supported",
                hint="name the table in the subquery directly",
            )
        table = self.owner.catalog.table(name)
        if table is None:
            raise UndefinedTable(
                f'relation "{item.name}" does not exist',
                hint="tables: " + ", ".join(t.name for t in self.owner.catalog.tables),
            )
        user_alias = item.alias_or_name.lower()
        if any(s.user_alias == user_alias for s in self.sources):
            raise AmbiguousColumn(f'table name "{user_alias}" specified more than once')
        if len(self.sources) >= MAX_TABLES:
            raise UnsupportedQuery(f"a subquery of {word} reads more than {MAX_TABLES} tables")
        k = len(self.sources)
        alias = self.alias if k == 0 else f"{self.alias}_{k}"
        self.sources.append(Source(user_alias, table, alias))

    def _join(self, join: exp.Join) -> None:
        word = self.form.word
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        if side or kind not in ("", "INNER", "CROSS") or join.args.get("method"):
            what = " ".join(p for p in (join.args.get("method"), side, kind) if p) or "this join"
            raise UnsupportedQuery(
                f"{str(what).upper()} JOIN inside the subquery of {word} is not supported",
                hint="inner joins (JOIN … ON, or tables and equalities in WHERE) are",
            )
        if join.args.get("using"):
            raise UnsupportedQuery(
                f"JOIN … USING inside the subquery of {word} is not supported",
                hint="write JOIN … ON a.key = b.key",
            )
        self._add(join.this)
        if on := join.args.get("on"):
            self.on.append(on)

    def _check_shape(self, select: exp.Select) -> None:
        word = self.form.word
        for key in ("group", "having", "limit", "offset", "qualify", "windows", "laterals"):
            if select.args.get(key):
                raise UnsupportedQuery(
                    f"{key.upper()} inside the subquery of {word} is not supported",
                    hint=SUPPORTED + ", over rows without grouping",
                )
        if select.args.get("with_") or select.args.get("with"):
            raise UnsupportedQuery(f"WITH inside the subquery of {word} is not supported")
        for n in select.walk():
            if n is select:
                continue
            if isinstance(n, exp.Subquery | exp.Select | exp.Exists):
                raise UnsupportedQuery(
                    f"a subquery inside the subquery of {word} is not supported",
                    hint="each subquery must read tables with conditions on them and on the "
                    "outer row",
                )
            if isinstance(n, exp.AggFunc | exp.Window):
                raise UnsupportedQuery(
                    f"aggregates inside the subquery of {word} are not supported: an "
                    "aggregate over other rows has no per-person bound",
                    hint=SUPPORTED + ", over rows without aggregates",
                )

    # -- names -------------------------------------------------------------------------

    def _inner_column(self, source: Source, name: str) -> exp.Expression:
        c = next(c for c in source.table.columns if c.name.lower() == name)
        if name not in source.used:
            renamed = Column(
                f"{source.alias}_{c.name}", c.type, c.lower, c.upper, c.nullable, c.domain
            )
            if self.outer.table.column(renamed.name) is not None:
                raise AmbiguousColumn(f'column name "{renamed.name}" is reserved by dpproxy')
            source.used[name] = renamed
        return exp.column(source.used[name].name, table=source.alias)

    def _used(self) -> list[Column]:
        return [c for s in self.sources for c in s.used.values()]

    def resolve(self, node: exp.Expression) -> exp.Expression:
        """Inner names → renamed inner columns, outer names → the outer scope's expressions;
        then typed and checked against the allowlist, as :meth:`Scope.resolve` does."""

        def sub(n: exp.Expression) -> exp.Expression:
            word = self.form.word
            if isinstance(n, exp.Star):
                raise UnsupportedQuery(f"* is allowed only as the select list of {word}")
            if not isinstance(n, exp.Column):
                return n
            name = n.name.lower()
            if isinstance(n.this, exp.Star):
                raise UnsupportedQuery(f"* is allowed only as the select list of {word}")
            if n.table:
                named = [s for s in self.sources if s.user_alias == n.table.lower()]
                if named:
                    if not named[0].has(name):
                        raise UndefinedColumn(f"column {n.table}.{n.name} does not exist")
                    return self._inner_column(named[0], name)
            else:
                having = [s for s in self.sources if s.has(name)]
                if len(having) > 1:
                    raise AmbiguousColumn(
                        f'column reference "{n.name}" is ambiguous',
                        hint=f"qualify it with its table: t.{n.name}",
                    )
                if having:
                    return self._inner_column(having[0], name)
            try:
                return self.outer.resolve(n)
            except UndefinedColumn as e:
                inner = ", ".join(c.name for s in self.sources for c in s.table.columns)
                tables = ", ".join(s.table.name for s in self.sources)
                raise UndefinedColumn(
                    e.message, hint=f"columns of {tables}: {inner}"[:300]
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
            **{c.name: COLUMN_TYPES[c.type] for c in self._used()},
        }

    # -- the filter ----------------------------------------------------------------------

    def build(self) -> exp.Expression:
        select, form = self.form.select, self.form
        conds: list[exp.Expression] = []
        where = select.args.get("where")
        for cond, clause in [(on, "JOIN/ON") for on in self.on] + (
            [(where.this, "WHERE")] if where is not None else []
        ):
            no_aggregates(cond, f"the subquery of {form.word}")
            resolved = self.resolve(cond)
            self._expect_bool(resolved, f"{clause} in the subquery of {form.word}")
            conds.extend(conjuncts(resolved))
        projections = select.expressions
        used = [dict(s.used) for s in self.sources]
        unprinted = [o.this for o in (select.args.get("order") or exp.Order()).expressions]
        if form.operand is None:
            unprinted += [
                p.unalias()
                for p in projections
                if not (isinstance(p, exp.Star) or isinstance(getattr(p, "this", None), exp.Star))
            ]
        for e in unprinted:  # names checked as PostgreSQL would; neither is printed
            if not (isinstance(e, exp.Literal) and not e.is_string):
                self.resolve(e)
        for s, kept in zip(self.sources, used, strict=True):
            s.used = kept
        if form.operand is not None:
            if len(projections) != 1 or isinstance(projections[0], exp.Star):
                raise SQLSyntaxError(
                    f"the subquery of {form.word} must return exactly one column",
                    hint="x IN (SELECT column FROM table WHERE …)",
                )
            conds.extend(self._membership(projections[0].unalias(), form.operand))
        prove_tied(conds, self.sources, self.outer, self.owner.catalog, self.form.word)
        return self._sql(conds)

    def _membership(
        self, projection: exp.Expression, operand: exp.Expression
    ) -> list[exp.Expression]:
        """``x = c`` for IN; for NOT IN also ``c IS NULL OR x IS NULL`` unless both are NOT
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
        for c in (*self._used(), *self.outer.table.columns):
            if c.name == e.name:
                return not c.nullable
        return False

    def _sql(self, conds: list[exp.Expression]) -> exp.Expression:
        query = exp.select(exp.Literal.number(1))
        for k, s in enumerate(self.sources):
            table_alias = f"{s.alias}_t"
            derived = exp.select()
            for key, renamed in s.used.items():
                column = next(c for c in s.table.columns if c.name.lower() == key)
                derived = derived.select(
                    exp.alias_(exp.column(column.name, table=table_alias), renamed.name),
                    copy=False,
                )
            if not s.used:
                derived = derived.select(exp.alias_(exp.Literal.number(1), s.alias), copy=False)
            derived = derived.from_(
                exp.Table(
                    this=exp.to_identifier(s.table.name),
                    alias=exp.TableAlias(this=exp.to_identifier(table_alias)),
                ),
                copy=False,
            )
            item = exp.Subquery(this=derived, alias=exp.TableAlias(this=exp.to_identifier(s.alias)))
            query = (
                query.from_(item, copy=False)
                if k == 0
                else query.join(item, join_type="CROSS", copy=False)  # conditions in WHERE
            )
        for c in conds:
            query = query.where(exp.Paren(this=c) if isinstance(bare(c), exp.Or) else c, copy=False)
        self.owner.hidden.extend(self._used())
        exists: exp.Expression = exp.Exists(this=query)
        return exp.Not(this=exists) if self.form.negated else exists
