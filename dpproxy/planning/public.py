"""Queries that read public tables only: answered exactly, at no privacy cost.

**Why this is safe.** A table the schema declares ``private: false`` holds no one's private
data: the data steward has published it (``schemas/README.md``), so releasing its rows, or any
function of them, exactly reveals nothing the analyst may not already see. Differential privacy
is a bound on what an answer says about a *private* row; an answer computed from public rows
alone says nothing about any of them, whatever the private tables hold, so it costs ε = δ = 0
and needs no noise (its output distribution is the same on every pair of neighbouring
datasets: neighbours differ in private rows only).

That argument holds only if the query reads nothing else. So a query takes this path **if and
only if every relation it reads, at every depth (joins, subqueries, CTEs, EXISTS, set
operations), is a public table of the schema** — a table name that matches a private table
anywhere sends the whole query to the differentially private path (:func:`reads_public_only`),
which answers or refuses it as before. On this path (:func:`plan_public`) the query must also
pass an **allowlist** of sqlglot node types, each with the arguments it may carry
(:data:`ALLOWED`): relational structure, ordinary scalar functions and operators, and the
standard aggregates (COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX, variances). Everything else is
refused by name — table functions and file or URL readers (``read_csv``, ``read_parquet``,
``generate_series``), system functions and catalogs (``pg_read_file``, ``current_setting``,
``version()``, ``regclass`` casts), sequences, ``random()``, window functions, ``SELECT INTO``,
locking clauses, LATERAL, and any function sqlglot does not know (``exp.Anonymous``) —, because
any of them could read something other than the public tables or have a side effect.

Every table reference must resolve (by sqlglot's scopes, so a CTE name used outside its WITH is
a table again) to a public table of the catalog, and is printed as the catalog names it; every
column must resolve to a *declared* column of a public table, a CTE or a derived table
(``SELECT *`` expands to the declared columns only; PostgreSQL's whole-row references and
system columns such as ``ctid`` are refused). The SQL the backend runs is this module's print
of the checked tree in the backend's dialect, never the analyst's text.

**Totality is not required here.** dpproxy's rule that an accepted query cannot fail exists
because a failure could depend on one person's private row. A failure here depends on public
rows alone, so the engine reports it as :class:`~dpproxy.errors.PublicQueryFailed` (58000) with
the database's message, and nothing is charged. Not so for a query that reads released rows
(the rest of a query around an aggregate relation or keyed subqueries released first): its
rows come from the private data through noise, so it is planned with ``total=True`` and held
to the total subset of ``planning/released.py``.

**Size.** The answer is limited to :data:`MAX_PUBLIC_ROWS` rows: the top-level LIMIT becomes at
most that plus one, and an answer with more rows is refused (53400) rather than cut short, so
an answer is never silently incomplete; on PostgreSQL the backend's statement timeout applies.
The cap bounds the proxy's memory (the rows are held, encoded and sent by dpproxy), not
privacy. A public *key domain* that a DP release covers key by key (correlated subqueries,
``planning/keyed.py``; aggregate subqueries released first, ``planning/relations.py``) has its
own, smaller cap :data:`MAX_KEYS`: every key there costs a noisy value and a literal in the
rewritten SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope

from dpproxy.catalog.model import Catalog, ColumnType
from dpproxy.errors import (
    DPProxyError,
    Forbidden,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
    UnsupportedQuery,
)
from dpproxy.planning.released import category, check_total
from dpproxy.sql.pgnames import fold
from dpproxy.sql.qualify import qualify_tables, table_schemas
from dpproxy.values import Cost

MAX_PUBLIC_ROWS = 100_000  # rows of an answer over public tables only (memory, not privacy)
MAX_KEYS = 10_000  # keys of a public domain released key by key (noisy values, SQL size)

_SCHEMA_TYPES = {ColumnType.INTEGER: "BIGINT", ColumnType.FLOAT: "DOUBLE"}  # else by name

_CLAUSES = frozenset({"with_", "expressions", "distinct", "from_", "joins", "where", "group"})
_TAIL = frozenset({"having", "order", "limit", "offset"})
_SETOP = frozenset({"with_", "this", "expression", "distinct", "order", "limit", "offset"})
_ONE = frozenset({"this"})
_TWO = frozenset({"this", "expression"})
_MANY = frozenset({"this", "expressions"})

# Node type → the arguments it may carry (anything else present is refused): the allowlist.
ALLOWED: dict[type[exp.Expr], frozenset[str]] = {
    # relational structure
    exp.Select: _CLAUSES | _TAIL,
    exp.Union: _SETOP,
    exp.Intersect: _SETOP,
    exp.Except: _SETOP,
    exp.Subquery: frozenset({"this", "alias"}),
    exp.With: frozenset({"expressions"}),
    exp.CTE: frozenset({"this", "alias"}),
    exp.From: _ONE,
    exp.Join: frozenset({"this", "on", "side", "kind", "using"}),
    exp.Table: frozenset({"this", "alias", "db"}),
    exp.TableAlias: frozenset({"this", "columns"}),
    exp.Where: _ONE,
    exp.Group: frozenset({"expressions"}),
    exp.Having: _ONE,
    exp.Order: frozenset({"expressions"}),
    exp.Ordered: frozenset({"this", "desc", "nulls_first"}),
    exp.Limit: frozenset({"expression"}),
    exp.Offset: frozenset({"expression"}),
    exp.Distinct: frozenset({"expressions"}),
    exp.Alias: frozenset({"this", "alias"}),
    exp.Identifier: frozenset({"this", "quoted"}),
    exp.Column: frozenset({"this", "table"}),
    exp.Star: frozenset(),
    exp.Paren: _ONE,
    exp.Tuple: frozenset({"expressions"}),
    # values
    exp.Literal: frozenset({"this", "is_string"}),
    exp.Null: frozenset(),
    exp.Boolean: _ONE,
    exp.Cast: frozenset({"this", "to"}),
    exp.DataType: frozenset({"this", "expressions", "nested"}),
    exp.DataTypeParam: _ONE,
    exp.Interval: frozenset({"this", "unit"}),
    exp.Var: _ONE,  # only as a unit: see _UNIT_PARENTS
    # predicates and operators
    **dict.fromkeys((exp.And, exp.Or, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE), _TWO),
    **dict.fromkeys((exp.NullSafeEQ, exp.NullSafeNEQ, exp.Is), _TWO),
    **dict.fromkeys((exp.Like, exp.ILike), _TWO | {"negate", "escape"}),
    **dict.fromkeys(
        (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.DPipe), _TWO | {"safe", "typed"}
    ),
    exp.Not: _ONE,
    exp.Neg: _ONE,
    exp.Between: frozenset({"this", "low", "high"}),
    exp.In: frozenset({"this", "expressions", "query"}),
    exp.Exists: _ONE,
    exp.Escape: _TWO,
    exp.Filter: _TWO,  # COUNT(*) FILTER (WHERE ...)
    exp.Any: _ONE,
    exp.All: _ONE,
    exp.Case: frozenset({"this", "ifs", "default"}),
    exp.If: frozenset({"this", "true", "false"}),
    # ordinary scalar functions
    exp.Coalesce: _MANY,
    exp.Nullif: _TWO,
    exp.Greatest: _MANY,
    exp.Least: _MANY,
    **dict.fromkeys((exp.Abs, exp.Sqrt, exp.Ln, exp.Exp, exp.Sign, exp.Upper, exp.Lower), _ONE),
    **dict.fromkeys((exp.Floor, exp.Ceil, exp.Round), frozenset({"this", "decimals"})),
    exp.Pow: _TWO,
    exp.Log: _TWO,
    exp.Length: _ONE,
    exp.Substring: frozenset({"this", "start", "length"}),
    exp.Trim: frozenset({"this", "expression", "position"}),
    exp.Replace: frozenset({"this", "expression", "replacement"}),
    exp.StrPosition: frozenset({"this", "substr", "position"}),
    exp.Left: _TWO,
    exp.Right: _TWO,
    exp.Concat: frozenset({"expressions", "safe", "coalesce"}),
    exp.Extract: _TWO,
    exp.TimestampTrunc: frozenset({"this", "unit"}),
    # aggregates
    **dict.fromkeys((exp.Count,), frozenset({"this", "expressions", "big_int"})),
    **dict.fromkeys((exp.Sum, exp.Avg, exp.Min, exp.Max), _ONE),
    **dict.fromkeys((exp.Stddev, exp.StddevPop, exp.StddevSamp), _ONE),
    **dict.fromkeys((exp.Variance, exp.VariancePop), _ONE),
}
_VALUES = frozenset({"expressions", "alias"})  # released rows, written by dpproxy itself
_UNIT_PARENTS = (exp.Interval, exp.Extract, exp.TimestampTrunc)
_CAST_TYPES = frozenset(
    getattr(exp.DataType.Type, name)
    for name in "SMALLINT INT BIGINT FLOAT DOUBLE DECIMAL TEXT VARCHAR CHAR DATE BOOLEAN".split()
)
_UNRESOLVED = re.compile(
    r"(?:Column '|Unknown column: |automatically join: )([^']+?)(?:'| could|$)"
)
_NAMES = {exp.Pow: "power", exp.TimestampTrunc: "date_trunc", exp.StrPosition: "position"}


@dataclass(frozen=True, slots=True)
class PublicPlan:
    """A query over public tables only: the SQL the backend runs (the planner's print, with
    the row cap as its top-level LIMIT) and the answer's columns as ``(name, type)`` with
    ``type`` one of ``integer``, ``double``, ``text``, ``boolean``, ``date``."""

    query: str  # the analyst's query, normalised (for explain)
    sql: str
    columns: tuple[tuple[str, str], ...]
    tables: tuple[str, ...]
    max_rows: int

    @property
    def cost(self) -> Cost:
        return Cost.zero()

    @property
    def truncation(self) -> None:
        """No rows-per-unit bound: there is no privacy unit (for code shared with DP plans)."""
        return None


def reads_public_only(tree: exp.Expression, catalog: Catalog) -> bool:
    """Does the query name tables, every one of them public? A name that matches a private
    table anywhere — even one a CTE shadows — answers False: the DP path decides then."""
    names = [t.name.lower() for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier)]
    if not names:
        return False
    for name in names:
        table = catalog.table(name)
        if table is not None and table.private:
            return False
    return True


_USE = "use ordinary scalar functions and the standard aggregates (docs/sql.md: public tables)"


def _refuse(node: exp.Expr) -> DPProxyError:
    """The refusal of a node outside the allowlist, naming what the analyst wrote."""
    where = "in a query over public tables"
    if isinstance(node, exp.Anonymous):
        return UndefinedFunction(f"function {node.name}() is not allowed {where}", hint=_USE)
    text = node.sql("postgres")[:80]
    if isinstance(node, exp.Window):
        return UnsupportedQuery(f"window functions (OVER) are not supported {where}")
    if isinstance(node, exp.Func) and not isinstance(node, exp.AggFunc):
        return Forbidden(f"{text} is not allowed {where}", hint=_USE)
    hint = _USE if isinstance(node, exp.Func) else None
    return UnsupportedQuery(f"{text or node.key.upper()} is not supported {where}", hint=hint)


def check_allowed(tree: exp.Expression, values: bool = False) -> None:
    """Every node of ``tree`` is in :data:`ALLOWED` and carries only its allowed arguments
    (``values``: and VALUES lists, which dpproxy writes for released rows only)."""
    for node in tree.walk():
        allowed = _VALUES if values and isinstance(node, exp.Values) else ALLOWED.get(type(node))
        if allowed is None:
            raise _refuse(node)
        if isinstance(node, exp.Join) and node.method:
            raise UnsupportedQuery(f"{node.method.upper()} JOIN is not supported")
        for key, value in node.args.items():
            if key not in allowed and value not in (None, False, [], ""):
                raise UnsupportedQuery(
                    f"{key.upper().rstrip('_')} in {node.key.upper()} is not supported in "
                    "queries over public tables"
                )
        if isinstance(node, exp.Var) and not isinstance(node.parent, _UNIT_PARENTS):
            raise _refuse(node)
        if isinstance(node, exp.DataType) and node.this not in _CAST_TYPES:
            raise UnsupportedQuery(
                f"type {node.sql('postgres')} is not supported in queries over public tables",
                hint="cast to integer, bigint, double precision, numeric, text, date or boolean",
            )
        if isinstance(node, exp.Limit | exp.Offset):
            value = node.expression
            if not (isinstance(value, exp.Literal) and value.is_int):
                raise UnsupportedQuery(
                    f"{node.key.upper()} must be a whole number in queries over public tables"
                )
        if isinstance(node, exp.Join) and node.kind.upper() not in ("", "INNER", "OUTER", "CROSS"):
            raise UnsupportedQuery(f"{node.kind.upper()} JOIN is not supported")


def _figure_name(node: exp.Expression) -> str:
    """PostgreSQL's name for an unnamed select-list item (FigureColname, simplified)."""
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Cast):
        inner = node.this
        return inner.name if isinstance(inner, exp.Column) else _figure_name(inner)
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Exists):
        return "exists"
    if isinstance(node, exp.Func):
        return _NAMES.get(type(node), node.key)
    return "?column?"


def _name_outputs(tree: exp.Expression) -> None:
    """Alias every unnamed select-list item as PostgreSQL names it (in place)."""
    for select in list(tree.find_all(exp.Select)):
        items = []
        for item in select.expressions:
            if not isinstance(item, exp.Alias | exp.Column | exp.Star):
                item = exp.alias_(item, _figure_name(item), quoted=True)
            items.append(item)
        select.set("expressions", items)


def _check_sources(tree: exp.Expression, catalog: Catalog) -> tuple[str, ...]:
    """Every table reference resolves, by sqlglot's scopes, to a CTE in scope or to a public
    table of the catalog, which is renamed to the catalog's name. Returns the tables read."""
    seen: set[int] = set()
    read: list[str] = []
    for scope in traverse_scope(tree):
        for table in scope.tables:
            source = scope.sources.get(table.alias_or_name)
            if isinstance(source, Scope) and not table.args.get("db"):
                seen.add(id(table))  # a CTE of an enclosing WITH
                continue
            db = table.args.get("db")
            found = catalog.table(table.name)
            if (
                source is not table
                or found is None
                or (db is not None and db.name.lower() not in ("public", "main"))
            ):
                raise UndefinedTable(f'relation "{table.sql("postgres")}" does not exist')
            if found.private:  # reads_public_only sends these elsewhere; never print them
                raise Forbidden(f'table "{found.name}" is private')
            table.set("db", None)
            table.set("this", exp.to_identifier(found.name, quoted=True))
            seen.add(id(table))
            read.append(found.name)
    for table in tree.find_all(exp.Table):
        if id(table) not in seen:
            raise UndefinedTable(f'relation "{table.sql("postgres")}" does not exist')
    return tuple(dict.fromkeys(read))


def _check_columns(tree: exp.Expression) -> None:
    """Every column names its source (qualify resolved it) or an output name in ORDER BY."""
    for column in tree.find_all(exp.Column):
        if column.table:
            continue
        order = column.find_ancestor(exp.Order, exp.Select, exp.SetOperation)
        owner = order.parent if isinstance(order, exp.Order) else None
        if not (
            isinstance(owner, exp.Select | exp.SetOperation) and column.name in owner.named_selects
        ):
            raise UndefinedColumn(f'column "{column.name}" does not exist')


def _category(t: exp.DataType | None, node: exp.Expression) -> str:
    if t is None or t.this in (exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        if isinstance(node.unalias(), exp.Null):
            return "text"
        raise UnsupportedQuery(
            f"the type of {node.sql('postgres')[:60]} cannot be determined",
            hint="CAST it to integer, double precision, text, date or boolean",
        )
    found = category(t)
    if found is not None:
        return found
    raise UnsupportedQuery(
        f"{node.sql('postgres')[:60]} is of type {t.sql('postgres')}, which is not returned",
        hint="CAST it to integer, double precision, text, date or boolean",
    )


def _columns(tree: exp.Expr) -> list[tuple[str, str | None]]:
    if isinstance(tree, exp.SetOperation):
        left, right = _columns(tree.left), _columns(tree.right)
        if len(left) != len(right):
            raise UnsupportedQuery("each side of a set operation must have as many columns")
        return [(n, _unify(a, b)) for (n, a), (_, b) in zip(left, right, strict=True)]
    assert isinstance(tree, exp.Select)
    out: list[tuple[str, str | None]] = []
    for item in tree.expressions:
        null = isinstance(item.unalias(), exp.Null)
        out.append((item.alias_or_name, None if null else _category(item.type, item)))
    return out


def _exact_sums(tree: exp.Expr) -> None:
    """Spark (ANSI) sums integers into a BIGINT and raises on overflow, where DuckDB sums into
    a HUGEINT and PostgreSQL into a NUMERIC. Over released rows whether a SUM overflows would be
    decided by the data, after the charge (two kept keys of ``COUNT(*) * 1e30``, each written
    as 9·10¹⁸: ``released.bigint``), so on Spark a query over released rows sums integers in
    ``DECIMAL(38, 0)``: exact, and returned as an int (``backends/spark._plain``)."""
    for node in list(tree.find_all(exp.Sum)):
        term = node.this
        inner = term.expressions[0] if isinstance(term, exp.Distinct) else term
        if category(inner.type) == "integer":
            inner.replace(exp.Cast(this=inner.copy(), to=exp.DataType.build("DECIMAL(38, 0)")))


def _unify(a: str | None, b: str | None) -> str | None:
    if a is None or b is None or a == b:
        return a or b
    if {a, b} == {"integer", "double"}:
        return "double"
    raise UnsupportedQuery(f"a set operation combines {a} and {b} columns; CAST one side")


def plan_public(
    tree: exp.Expression,
    catalog: Catalog,
    dialect: str,
    max_rows: int,
    values: bool = False,
    total: bool = False,
) -> PublicPlan:
    """Check a query :func:`reads_public_only` accepted; its SQL and columns (pure).
    ``values``: the query holds released rows as VALUES lists (``planning/relations.py``);
    ``total``: it runs over released relations, so it must be total (``planning/released.py``)."""
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise Forbidden("only SELECT queries are answered")
    check_allowed(tree, values)
    tree = tree.copy()
    _name_outputs(tree)
    # PostgreSQL: a name it would fold is keyed quoted, so that sqlglot matches it exactly
    key = (lambda n: n if fold(n) == n else f'"{n}"') if dialect == "postgres" else str
    schema: dict[str, object] = {
        key(t.name): {key(c.name): _SCHEMA_TYPES.get(c.type, c.type.name) for c in t.columns}
        for t in catalog.tables
        if not t.private
    }
    # sqlglot's optimizer passes, imported for a query over public tables only (fast start)
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    try:
        read = _check_sources(tree, catalog)
        tree = qualify(
            tree,
            schema=schema,
            dialect="postgres",
            quote_identifiers=True,
            validate_qualify_columns=True,
            identify=True,
        )
        tree = annotate_types(tree, schema=schema, dialect="postgres")
        # Again on the qualified tree: what is printed is what was checked.
        check_allowed(tree, values)
        _check_sources(tree, catalog)
    except OptimizeError as e:
        found = _UNRESOLVED.search(str(e))
        message = (
            f'column "{found.group(1)}" does not exist'
            if found
            else "a column of the query is not a declared column of its tables"
        )
        raise UndefinedColumn(
            message, hint="a query reads the columns the schema declares"
        ) from None
    _check_columns(tree)
    if total:
        check_total(tree)
    columns = _columns(tree)
    query = tree.sql("postgres")
    limit = tree.args.get("limit")
    cap = max_rows + 1
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal):
        cap = min(cap, int(limit.expression.this))
    tree.set("limit", exp.Limit(expression=exp.Literal.number(cap)))
    if dialect == "postgres":  # each table with the schema it was found in
        qualify_tables(tree, table_schemas(catalog.tables))
    if dialect == "spark" and values:  # over released rows: checked total, then at the values
        _exact_sums(tree)
    return PublicPlan(
        query=query,
        sql=tree.sql(dialect=dialect, comments=False),
        columns=tuple((name, kind or "text") for name, kind in columns),
        tables=read,
        max_rows=max_rows,
    )
