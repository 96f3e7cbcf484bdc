"""UNION ALL of private row relations in FROM: ``SELECT … FROM (SELECT a, v FROM t1 WHERE …
UNION ALL SELECT b, w FROM t2 …) u``.

Each branch is a row-wise SELECT (no aggregate, GROUP BY, DISTINCT, LIMIT or subquery) over a
private table or a join that ``sql/joins.py`` builds (e.g. line items reaching their customer
through orders); its select list holds columns and constants only (``'web' AS channel``), so
every value of the union is a value the schema describes or a literal, and nothing can fail
(the branch filters are guarded like any WHERE, ``rewrite/unionrel.py``). The union is a
relation of its own to the outer query: a synthetic private table whose columns are the
union's, typed and bounded from the branches, whose unit column ``__unit_of_row`` is each
branch's own privacy unit.

Privacy argument (stability adds up, reading/002). Every row of a branch belongs to the unit
of its table (its ``privacy_unit`` column, or the unit its join reaches), and the schema has
one kind of unit per dataset, so every row of the union belongs to exactly one unit, the value
of ``__unit_of_row``; it is a function of that row alone. Adding or removing one unit with all
its rows adds or removes exactly the union rows tagged with it — its rows in branch 1, plus its
rows in branch 2, … — and changes no other row: a unit with at most m_i rows in branch i has at
most Σ m_i rows in the union. The outer query then runs through the normal planner over that
relation, which bounds every unit's rows in SQL (``ROW_NUMBER() OVER (PARTITION BY
__unit_of_row)``, ``rewrite/bound.py``) to the bound of :func:`union_bound` — the sum of the
branches' declared bounds when every branch declares one, otherwise a bound chosen with DP
(``planning/truncation.py``) or hinted — so the sensitivity holds even on a database that
breaks the schema's declarations. Rows whose unit is NULL belong to nobody and form one
partition of their own, bounded the same way.

Types (PostgreSQL's rule for UNION, "UNION types X and Y cannot be matched", 42804): every
branch gives position i the same type, except that INTEGER and FLOAT give FLOAT (the integer
branch is cast to DOUBLE, which never fails) and NULL takes the others' type. Bounds of a union
column are the hull of the branches' (a literal is its own bound; a branch without bounds makes
the column unbounded); its public domain is the union of the branches' domains (a literal's is
itself) when every branch has one, so ``GROUP BY channel`` over literal tags needs no partition
selection. Column names come from the first branch, or from the alias's column list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, ContributionBound, Table
from dpproxy.errors import DatatypeMismatch, UnsupportedQuery
from dpproxy.sql.joinparts import JoinSource
from dpproxy.sql.perunit import UNIT_OF_ROW
from dpproxy.sql.scope import Scope, expect_bool
from dpproxy.sql.types import COLUMN_TYPES

_ROW_WISE = ("group", "having", "distinct", "limit", "offset", "qualify", "windows", "order")


@dataclass(frozen=True, slots=True)
class Branch:
    """One branch: its relation, its unit, its outputs (columns of ``table`` or literals, in
    the union's column order) and its WHERE conditions over ``table``."""

    table: Table  # a private table, or a joined relation (``source``)
    source: JoinSource | None
    unit: exp.Column
    outputs: tuple[exp.Expression, ...]
    filters: tuple[exp.Expression, ...]


@dataclass(frozen=True, slots=True)
class UnionRelation:
    """The validated union: what ``rewrite/unionrel.py`` prints."""

    branches: tuple[Branch, ...]
    columns: tuple[Column, ...]  # the union's visible columns
    description: str


@dataclass
class UnionScope(Scope):
    """The scope of a query over a UNION ALL relation."""

    union: UnionRelation | None = None


FromScope = Callable[[exp.Select], Scope]


def union_scope(
    node: exp.Union, name: str, column_list: list[str], from_scope: FromScope
) -> UnionScope:
    """Validate ``node`` (a UNION ALL in FROM) as a relation; see the module docstring."""
    selects = _branches(node)
    branches: list[tuple[Scope, list[tuple[str, exp.Expression]]]] = []
    for select in selects:
        branches.append(_branch(select, from_scope))
    width = len(branches[0][1])
    for _, outs in branches[1:]:
        if len(outs) != width:
            raise UnsupportedQuery(
                "each UNION query must have the same number of columns",
                hint=f"the first branch has {width} columns, another {len(outs)}",
            )
    names = [n for n, _ in branches[0][1]]
    if len(column_list) > width:
        raise UnsupportedQuery(
            f'table "{name}" has {width} columns available but {len(column_list)} columns '
            "specified"
        )
    names[: len(column_list)] = [c.lower() for c in column_list]
    for n in names:
        if n.startswith("__"):
            raise UnsupportedQuery(f'column names beginning with "__" are reserved: "{n}"')
        if names.count(n) > 1:
            raise UnsupportedQuery(f'the UNION ALL in FROM has two columns named "{n}"')
    unit_type = _unit_type(branches)
    columns = tuple(
        _column(names[i], [(scope.table, outs[i][1]) for scope, outs in branches])
        for i in range(width)
    )
    built: list[Branch] = []
    for scope, outs in branches:
        unit = exp.column(scope.table.privacy_unit or "")
        outputs = tuple(_typed(e, scope.table, c) for (_, e), c in zip(outs, columns, strict=True))
        built.append(Branch(scope.table, scope.source, unit, outputs, tuple(scope.filters)))
    unit_columns = tuple(
        c.name
        for i, c in enumerate(columns)
        if all(isinstance(b.outputs[i], exp.Column) and b.outputs[i] == b.unit for b in built)
    )
    parts = " ∪ ".join(b.source.description if b.source else b.table.name for b in built)
    description = f"{name} (UNION ALL of {parts})"
    relation = UnionRelation(tuple(built), columns, description)
    table = Table(
        name=description,
        private=True,
        columns=(Column(UNIT_OF_ROW, unit_type, nullable=True), *columns),
        privacy_unit=UNIT_OF_ROW,
        bound=union_bound(built),
        unit_columns=unit_columns,
    )
    names_map: dict[str, exp.Expression] = {c.name: exp.column(c.name) for c in columns}
    types = {c.name: COLUMN_TYPES[c.type] for c in table.columns}
    return UnionScope(table, names_map, set(), [], types, union=relation)


def union_bound(branches: list[Branch]) -> ContributionBound:
    """Rows per unit of the union: the sum of the branches' bounds when each has one (a unit's
    rows in the union are its rows in each branch), else none (chosen with DP or hinted)."""
    total = 0
    for b in branches:
        if b.source is not None:
            rows = b.source.derived
        elif b.table.unit_is_unique:
            rows = 1
        else:
            rows = b.table.bound.rows_total()
        if rows is None:
            return ContributionBound()
        total += rows
    return ContributionBound(max_rows=total)


def _branches(node: exp.Expression) -> list[exp.Select]:
    """The SELECTs of a chain of UNION ALLs, left to right; anything else refused."""
    while isinstance(node, exp.Subquery):
        node = node.this
    if isinstance(node, exp.Union):
        if node.args.get("distinct"):
            raise UnsupportedQuery(
                "UNION in FROM is not supported: it compares rows of different privacy units",
                hint="UNION ALL keeps every row and is supported",
            )
        for key in ("order", "limit", "offset"):
            if node.args.get(key):
                raise UnsupportedQuery(f"{key.upper()} on a UNION ALL in FROM is not supported")
        return _branches(node.this) + _branches(node.expression)
    if isinstance(node, exp.SetOperation):
        raise UnsupportedQuery(
            f"{node.key.upper()} in FROM is not supported: it compares rows of different "
            "privacy units",
            hint="UNION ALL keeps every row and is supported",
        )
    if not isinstance(node, exp.Select):
        raise UnsupportedQuery("each branch of a UNION ALL in FROM must be a SELECT")
    return [node]


def _branch(
    select: exp.Select, from_scope: FromScope
) -> tuple[Scope, list[tuple[str, exp.Expression]]]:
    for key in _ROW_WISE:
        if select.args.get(key):
            raise UnsupportedQuery(
                f"{key.upper()} in a branch of a UNION ALL in FROM is not supported",
                hint="each branch selects rows; aggregate in the outer query",
            )
    if select.args.get("with_") or select.args.get("with"):
        raise UnsupportedQuery("WITH inside a branch of a UNION ALL is not supported")
    if any(select.find_all(exp.Subquery, exp.Exists, exp.AggFunc, exp.Window)):
        raise UnsupportedQuery(
            "a branch of a UNION ALL in FROM may not hold subqueries, aggregates or windows",
            hint="each branch reads one table (or a join) and selects columns and constants",
        )
    scope = from_scope(select)
    if type(scope) is not Scope or (scope.source is not None and scope.source.sides is not None):
        raise UnsupportedQuery(
            "a branch of a UNION ALL in FROM must read a private table or a join on the "
            "privacy unit",
            hint="aggregate per unit or union in the outer query instead",
        )
    if not scope.table.private or not scope.table.privacy_unit:
        raise UnsupportedQuery(
            f'a branch of a UNION ALL reads the public table "{scope.table.name}": its rows '
            "belong to no privacy unit",
            hint="union private tables only; join public tables in the outer query",
        )
    if (where := select.args.get("where")) is not None:
        cond = scope.resolve(where.this)
        expect_bool(cond, scope, "WHERE")
        scope.filters.append(cond)
    outs: list[tuple[str, exp.Expression]] = []
    for i, proj in enumerate(select.expressions):
        node = proj.unalias()
        if isinstance(node, exp.Star) or (
            isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
        ):
            raise UnsupportedQuery(
                "SELECT * in a branch of a UNION ALL is not supported",
                hint="name the columns of each branch",
            )
        resolved = scope.resolve(node)
        while isinstance(resolved, exp.Paren):
            resolved = resolved.this
        if not isinstance(resolved, exp.Column) and _literal(resolved) is None:
            raise UnsupportedQuery(
                f"{node.sql('postgres')[:60]}: a branch of a UNION ALL in FROM may select "
                "columns and constants only",
                hint="compute expressions in the outer query, over the union's columns",
            )
        out = proj.alias_or_name if isinstance(proj, exp.Alias) else node.alias_or_name
        outs.append(((out or f"column{i + 1}").lower(), resolved))
    return scope, outs


def _literal(node: exp.Expression) -> tuple[ColumnType | None, object] | None:
    """(type, value) of a constant a branch may select: a number, text, boolean or NULL."""
    if isinstance(node, exp.Null):
        return None, None
    if isinstance(node, exp.Boolean):
        return ColumnType.BOOLEAN, bool(node.this)
    neg = isinstance(node, exp.Neg)
    lit = node.this if neg else node
    if not isinstance(lit, exp.Literal) or (neg and lit.is_string):
        return None
    if lit.is_string:
        return ColumnType.TEXT, lit.this
    try:
        value = Fraction(lit.this)
    except ValueError:
        return None
    integer = all(ch.isdigit() for ch in lit.this)
    return (ColumnType.INTEGER if integer else ColumnType.FLOAT), (-value if neg else value)


def _column(name: str, items: list[tuple[Table, exp.Expression]]) -> Column:
    """The union's column at one position, from each branch's (relation, output)."""
    cols: list[Column] = []
    for table, e in items:
        if isinstance(e, exp.Column):
            col = table.column(e.name)
            if col is None:  # resolved names are the relation's columns
                raise UnsupportedQuery(f'column "{e.name}" of a UNION ALL branch is not readable')
            cols.append(col)
            continue
        lit = _literal(e)
        assert lit is not None
        kind, value = lit
        if kind is None:
            cols.append(Column(name, ColumnType.TEXT, nullable=True, domain=()))  # NULL: any type
            continue
        if kind.numeric:
            assert isinstance(value, Fraction)
            cols.append(Column(name, kind, value, value, domain=(_number(value),)))
        else:
            cols.append(Column(name, kind, domain=(value,)))
    typed = [c for (_, e), c in zip(items, cols, strict=True) if not isinstance(e, exp.Null)]
    if not typed:
        raise UnsupportedQuery(f'column "{name}" of the UNION ALL is NULL in every branch')
    kinds = {c.type for c in typed}
    if kinds == {ColumnType.INTEGER, ColumnType.FLOAT}:
        kind = ColumnType.FLOAT
    elif len(kinds) == 1:
        kind = kinds.pop()
    else:
        a, b = sorted(k.value for k in kinds)[:2]
        raise DatatypeMismatch(
            f"UNION types {a} and {b} cannot be matched",
            hint=f'column "{name}" must have one type in every branch (CAST a constant)',
        )
    lows = [c.lower for c in typed]
    highs = [c.upper for c in typed]
    lo = None if any(v is None for v in lows) else min(v for v in lows if v is not None)
    hi = None if any(v is None for v in highs) else max(v for v in highs if v is not None)
    domain: tuple[object, ...] | None = None
    if all(c.domain is not None for c in cols) and kind is not ColumnType.FLOAT:
        seen: list[object] = []
        for c in cols:
            for v in c.domain or ():
                if v not in seen:
                    seen.append(v)
        domain = tuple(seen)
    max_length = None
    if kind is ColumnType.TEXT and all(c.max_length is not None or c.domain for c in typed):
        max_length = max(
            c.max_length if c.max_length is not None else max(len(str(v)) for v in c.domain or ())
            for c in typed
        )
    return Column(
        name,
        kind,
        lo if kind.numeric else None,
        hi if kind.numeric else None,
        nullable=any(c.nullable for c in cols),
        domain=domain,
        max_length=max_length,
    )


def _number(v: Fraction) -> object:
    return int(v) if v.denominator == 1 else float(v)


def _typed(e: exp.Expression, table: Table, column: Column) -> exp.Expression:
    """A branch's output as the union column's type: integers of a FLOAT column and every
    constant are CAST (total: a BIGINT fits a DOUBLE; a literal has the column's type)."""
    target = _TYPE[column.type]
    if isinstance(e, exp.Column):
        col = table.column(e.name)
        assert col is not None
        if col.type is ColumnType.INTEGER and column.type is ColumnType.FLOAT:
            return exp.Cast(this=e.copy(), to=exp.DataType.build(target))
        return e.copy()
    return exp.Cast(this=e.copy(), to=exp.DataType.build(target))


_TYPE = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.FLOAT: "DOUBLE",
    ColumnType.TEXT: "TEXT",
    ColumnType.BOOLEAN: "BOOLEAN",
    ColumnType.DATE: "DATE",
}


def _unit_type(branches: list[tuple[Scope, list[tuple[str, exp.Expression]]]]) -> ColumnType:
    kinds = set()
    for scope, _ in branches:
        col = scope.table.column(scope.table.privacy_unit or "")
        kinds.add(col.type if col is not None else ColumnType.INTEGER)
    if len(kinds) != 1:
        raise UnsupportedQuery(
            "the branches of the UNION ALL identify their privacy units with different types",
            hint="union tables of the same privacy unit",
        )
    return kinds.pop()
