"""Per-unit subqueries: a subquery or CTE in FROM that aggregates each privacy unit's rows.

``SELECT n, COUNT(*) FROM (SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY o_custkey) t
GROUP BY n`` — a histogram of orders per customer — reads a *derived relation* with one row per
customer. It is accepted when the subquery's GROUP BY is exactly the privacy unit of its own
relation (one private table, a join that ``sql/joins.py`` builds, or ``T LEFT JOIN U ON
T.unit = U.unit``) and its select list holds the unit and aggregates (COUNT(*), COUNT(x),
COUNT(DISTINCT x), SUM, AVG, MIN, MAX of row-level expressions), with an optional WHERE and an
optional HAVING.

Privacy argument. Every row of the inner relation belongs to exactly one unit: the value of
its unit column (rows whose unit is NULL belong to no one and are dropped: ``WHERE unit IS NOT
NULL``, so they never reach any aggregate). Grouping by the unit therefore yields at most one
row per unit, and that row is a function of that unit's rows alone (the WHERE and the
aggregates read only the row itself; HAVING reads only the group). Adding or removing one unit
adds or removes at most one row of the derived relation and changes no other row. So the
derived relation has stability 1 with the unit unique: the outer query runs through the normal
planner over a table whose unit column is unique (``unit_is_unique``: no contribution bounding
is needed), with every sensitivity of ``analysis/sensitivity.py`` at one row per unit.

A LEFT JOIN keeps the argument: ``customer LEFT JOIN orders ON c_custkey = o_custkey`` pairs a
customer row only with orders of the same unit (orders' unit is ``o_custkey``), and a customer
without orders gets one row of NULLs, so every output row still belongs to exactly one unit,
``c_custkey``. Further ON conditions may read the right table only (they are applied to its
rows before the join); any other outer join is refused.

Bounds of the derived columns (claims the outer rewrite enforces by clamping them, since the
derived relation is a table like any other to it): COUNT ∈ [0, ∞) (an integer); AVG, MIN and
MAX of a bounded column within that column's bounds; SUM of a column with lower bound ≥ 0 in
[0, ∞); anything else unbounded — the outer query must clamp what it sums (``LEAST(n, 50)``),
or is refused by the planner ("has no finite bounds"). SUM and AVG are DOUBLE.

The SQL of the derived relation is built in ``rewrite/perunit.py`` from :class:`PerUnit`
(guarded, clamped row values; the layering forbids ``sql/`` to import ``rewrite/``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, ContributionBound, Table
from dpproxy.errors import GroupingError, UnsupportedQuery
from dpproxy.sql.aggregates import default_name
from dpproxy.sql.joins import JoinSource, conjuncts
from dpproxy.sql.scope import Scope, expect_bool
from dpproxy.sql.types import COLUMN_TYPES, SqlType, type_of

UNIT_OF_ROW = "__unit_of_row"

_KINDS: dict[type, str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


@dataclass(frozen=True, slots=True)
class Derived:
    """One column of the derived relation: ``kind`` (count, count_distinct, sum, avg, min,
    max) of ``measure`` over the inner relation (``None``: COUNT(*))."""

    name: str
    kind: str
    measure: exp.Expression | None


@dataclass(frozen=True, slots=True)
class LeftJoin:
    """``left LEFT JOIN right ON left.unit = right.unit AND <right_filters>``."""

    left: Table
    right: Table
    left_unit: str
    right_unit: str
    right_filters: tuple[exp.Expression, ...]


@dataclass(frozen=True, slots=True)
class PerUnit:
    """The validated per-unit relation: what ``rewrite/perunit.py`` prints."""

    inner: Table  # the inner relation (a table, a joined relation, or the LEFT JOIN's columns)
    source: JoinSource | None  # an inner join (sql/joins.py)
    left_join: LeftJoin | None
    unit: exp.Expression  # the unit column of the inner relation
    unit_output: str | None  # the name under which the subquery selects the unit
    filters: tuple[exp.Expression, ...]  # the inner WHERE, over the inner relation
    columns: tuple[Derived, ...]
    description: str


@dataclass
class PerUnitScope(Scope):
    """The scope of a query over a derived per-unit relation."""

    per_unit: PerUnit | None = None


FromScope = Callable[[exp.Select], Scope]


def per_unit_scope(
    inner: exp.Select, name: str, column_list: list[str], from_scope: FromScope
) -> PerUnitScope:
    """Validate a grouped subquery as a per-unit relation; see the module docstring."""
    for key in ("distinct", "limit", "offset", "qualify", "windows"):
        if inner.args.get(key):
            raise UnsupportedQuery(
                f"{key.upper()} in a per-unit subquery (GROUP BY the privacy unit) is not supported"
            )
    group = inner.args["group"]
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        raise UnsupportedQuery("ROLLUP, CUBE and GROUPING SETS are not supported")
    joins = inner.args.get("joins") or []
    left_join = None
    if any(j.side for j in joins):
        scope, left_join = _left_join_scope(inner, from_scope)
    else:
        scope = from_scope(inner)
    if isinstance(scope, PerUnitScope):
        raise UnsupportedQuery(
            "a per-unit subquery (GROUP BY the privacy unit) over another one is not supported",
            hint="aggregate per unit once, in the innermost subquery",
        )
    if scope.source is not None and scope.source.sides is not None:
        raise UnsupportedQuery(
            "a per-unit subquery over a join of two people's rows is not supported",
            hint="join private tables on the privacy unit inside a per-unit subquery",
        )
    if any(f.find(exp.Exists) for f in scope.filters):
        raise UnsupportedQuery(
            "EXISTS and IN (SELECT …) filters under a per-unit subquery are not supported",
            hint="filter the outer query, or join the tables inside the per-unit subquery",
        )
    table = scope.table
    where = inner.args.get("where")
    if where is not None:
        _no_subqueries(where.this, "the WHERE clause of a per-unit subquery")
        _row_level(where.this, "WHERE")
        cond = scope.resolve(where.this)
        expect_bool(cond, scope, "WHERE")
        scope.filters.append(cond)
    unit = _unit_key(inner, group, scope)
    outputs: list[tuple[str, exp.Expression]] = []
    unit_output = None
    derived: list[Derived] = []
    for i, proj in enumerate(inner.expressions):
        node = proj.unalias()
        out = column_list[i] if i < len(column_list) else (proj.alias or default_name(node, i))
        out = out.lower()
        if any(o == out for o, _ in outputs):
            raise UnsupportedQuery(f'the per-unit subquery has two columns named "{out}"')
        if isinstance(node, exp.Star) or (
            isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
        ):
            raise UnsupportedQuery("SELECT * in a per-unit subquery is not supported")
        _no_subqueries(node, "a per-unit subquery's select list")
        if not any(isinstance(n, exp.AggFunc) for n in node.walk()):
            if scope.resolve(node) != unit:
                raise GroupingError(
                    f'column "{node.sql("postgres")}" must appear in the GROUP BY clause or be '
                    "used in an aggregate function",
                    hint="a per-unit subquery selects the privacy unit and aggregates",
                )
            unit_output = out
            outputs.append((out, exp.column(unit_output)))
            continue
        derived.append(_aggregate(node, out, scope))
        outputs.append((out, exp.column(out)))
    if len(column_list) > len(inner.expressions):
        raise UnsupportedQuery(
            f'table "{name}" has {len(inner.expressions)} columns available but '
            f"{len(column_list)} columns specified"
        )
    having_terms: list[exp.Expression] = []
    if h := inner.args.get("having"):
        _no_subqueries(h.this, "HAVING of a per-unit subquery")
        having_terms.append(_having(h.this, scope, unit, unit_output, derived))
    inner_name = scope.source.description if scope.source is not None else table.name
    description = f"{name} (one row per unit: {inner_name} GROUP BY {unit.sql('postgres')})"
    derived_table = _derived_table(description, table, unit, unit_output, derived)
    for c in derived_table.columns:  # the rewrite types both relations' names together
        same = table.column(c.name)
        if same is not None and COLUMN_TYPES[same.type] is not COLUMN_TYPES[c.type]:
            raise UnsupportedQuery(
                f'the per-unit subquery\'s column "{c.name}" has the name of a '
                f"{same.type.value} column of {table.name}",
                hint="give it another name (AS)",
            )
    per_unit = PerUnit(
        inner=table,
        source=scope.source,
        left_join=left_join,
        unit=unit,
        unit_output=unit_output,
        filters=tuple(scope.filters),
        columns=tuple(derived),
        description=description,
    )
    types = {c.name: COLUMN_TYPES[c.type] for c in derived_table.columns}
    out_scope = PerUnitScope(derived_table, dict(outputs), set(), [], types, per_unit=per_unit)
    visible = out_scope.names
    out_scope.names = {c.name: exp.column(c.name) for c in derived_table.columns}
    for term in having_terms:  # over every derived column, the hidden ones too
        cond = out_scope.resolve(term)
        expect_bool(cond, out_scope, "HAVING")
        out_scope.filters.append(cond)
    out_scope.names = visible
    return out_scope


def _no_subqueries(node: exp.Expression, where: str) -> None:
    if any(isinstance(n, exp.Subquery | exp.Select | exp.Exists) for n in node.walk()):
        raise UnsupportedQuery(f"a subquery in {where} is not supported")


def _row_level(node: exp.Expression, where: str) -> None:
    for n in node.walk():
        if isinstance(n, exp.AggFunc):
            raise GroupingError(f"aggregate functions are not allowed in {where}")
        if isinstance(n, exp.Window):
            raise UnsupportedQuery(f"window functions are not allowed in {where}")


def _unit_key(inner: exp.Select, group: exp.Group, scope: Scope) -> exp.Expression:
    """The single GROUP BY item, which must be the privacy unit of the inner relation."""
    items = list(group.expressions)
    resolved: list[exp.Expression] = []
    for item in items:
        node = item
        if isinstance(item, exp.Literal) and not item.is_string and item.name.isdigit():
            pos = int(item.name)
            if not 1 <= pos <= len(inner.expressions):
                raise UnsupportedQuery(f"GROUP BY position {pos} is not in select list")
            node = inner.expressions[pos - 1].unalias()
        _row_level(node, "GROUP BY")
        r = scope.resolve(node)
        if r not in resolved:
            resolved.append(r)
    table = scope.table
    units = [r for r in resolved if isinstance(r, exp.Column) and table.is_unit(r.name)]
    if len(resolved) != 1 or not units:
        names = [table.privacy_unit or "", *table.unit_columns]
        shown = ", ".join(n for n in names if n and not n.startswith("__")) or "the unit"
        raise UnsupportedQuery(
            "GROUP BY in a subquery must be exactly the privacy unit "
            f"({shown}): a group of several people's rows is not one person's row, so the "
            "outer query could not bound what one person contributes",
            hint="aggregate per person in the subquery (GROUP BY the privacy unit), or "
            "aggregate in the outer query only",
        )
    return units[0]


def _aggregate(node: exp.Expression, out: str, scope: Scope) -> Derived:
    if not isinstance(node, tuple(_KINDS)):
        raise UnsupportedQuery(
            f"{node.sql('postgres')[:60]} in a per-unit subquery is not supported: its columns "
            "must be COUNT, SUM, AVG, MIN or MAX of a row-level expression",
            hint="compute arithmetic over the aggregates in the outer query",
        )
    kind = _KINDS[type(node)]
    arg = node.this
    if isinstance(arg, exp.Star):
        if kind != "count":
            raise UnsupportedQuery(f"{kind.upper()}(*) is not an aggregate")
        return Derived(out, "count", None)
    if isinstance(arg, exp.Distinct):
        if kind != "count" or len(arg.expressions) != 1:
            raise UnsupportedQuery(
                "DISTINCT in a per-unit subquery is supported in COUNT(DISTINCT x) only"
            )
        kind, arg = "count_distinct", arg.expressions[0]
    if arg is None or node.args.get("expressions"):
        raise UnsupportedQuery(f"{node.sql('postgres')[:60]}: one argument expected")
    _row_level(arg, f"the argument of {kind.upper()}")
    measure = scope.resolve(arg)
    t = type_of(measure, scope.column_types)
    if kind in ("sum", "avg", "min", "max") and t is not SqlType.NUMERIC:
        raise UnsupportedQuery(
            f"{kind.upper()} of a {t.value} in a per-unit subquery is not supported",
            hint="per-unit SUM, AVG, MIN and MAX take numbers",
        )
    return Derived(out, kind, measure)


def _having(
    cond: exp.Expression,
    scope: Scope,
    unit: exp.Expression,
    unit_output: str | None,
    derived: list[Derived],
) -> exp.Expression:
    """HAVING as a filter on the derived relation: every aggregate becomes a derived column
    (hidden when the select list does not hold it), the unit its output column."""
    hidden = 0

    def sub(n: exp.Expression) -> exp.Expression:
        nonlocal hidden
        if isinstance(n, tuple(_KINDS)):
            d = _aggregate(n, "", scope)
            for have in derived:
                if have.kind == d.kind and have.measure == d.measure:
                    return exp.column(have.name)
            name = f"__having_{hidden}"
            hidden += 1
            derived.append(Derived(name, d.kind, d.measure))
            return exp.column(name)
        if isinstance(n, exp.AggFunc):
            raise UnsupportedQuery(
                f"{n.sql('postgres')[:60]} in HAVING of a per-unit subquery is not supported"
            )
        if isinstance(n, exp.Column):
            if scope.resolve(n) != unit:
                raise GroupingError(
                    f'column "{n.sql("postgres")}" must appear in the GROUP BY clause or be '
                    "used in an aggregate function"
                )
            return exp.column(unit_output or UNIT_OF_ROW)
        return n

    return cond.copy().transform(sub, copy=False)


def _derived_table(
    name: str, table: Table, unit: exp.Expression, unit_output: str | None, derived: list[Derived]
) -> Table:
    unit_col = table.column(unit.name) if isinstance(unit, exp.Column) else None
    unit_type = unit_col.type if unit_col is not None else ColumnType.INTEGER
    columns = [Column(UNIT_OF_ROW, unit_type)]
    if unit_output is not None:
        columns.append(Column(unit_output, unit_type))
    for d in derived:
        columns.append(_derived_column(d, table))
    return Table(
        name=name,
        private=True,
        columns=tuple(columns),
        privacy_unit=UNIT_OF_ROW,
        bound=ContributionBound(max_rows=1),
        unit_is_unique=True,  # GROUP BY the unit: one row per unit (module docstring)
        unit_columns=(unit_output,) if unit_output is not None else (),
    )


def _derived_column(d: Derived, table: Table) -> Column:
    if d.kind in ("count", "count_distinct"):
        return Column(d.name, ColumnType.INTEGER, lower=Fraction(0))
    col = table.column(d.measure.name) if isinstance(d.measure, exp.Column) else None
    lo = col.lower if col is not None else None
    hi = col.upper if col is not None else None
    if d.kind == "sum":
        return Column(
            d.name,
            ColumnType.FLOAT,
            Fraction(0) if lo is not None and lo >= 0 else None,
            nullable=True,
        )
    if lo is None or hi is None:
        lo = hi = None
    return Column(d.name, ColumnType.FLOAT, lo, hi, nullable=True)


def _left_join_scope(inner: exp.Select, from_scope: FromScope) -> tuple[Scope, LeftJoin]:
    """``T LEFT JOIN U ON T.unit = U.unit [AND <conditions on U>]`` (module docstring)."""
    joins = inner.args.get("joins") or []
    from_ = inner.args.get("from_") or inner.args.get("from")
    join = joins[0]
    if (
        from_ is None
        or len(joins) != 1
        or join.side.upper() != "LEFT"
        or join.args.get("using")
        or not isinstance(from_.this, exp.Table)
        or not isinstance(join.this, exp.Table)
    ):
        raise UnsupportedQuery(
            "outer joins are supported only as T LEFT JOIN U ON T.unit = U.unit inside a "
            "per-unit subquery (GROUP BY the privacy unit): other outer joins could give a row "
            "no person or two people",
        )
    left_scope = from_scope(exp.select("*").from_(from_.this.copy()))
    right_scope = from_scope(exp.select("*").from_(join.this.copy()))
    lt, rt = left_scope.table, right_scope.table
    if not (_plain(left_scope) and _plain(right_scope)):
        raise UnsupportedQuery(
            "a LEFT JOIN in a per-unit subquery must join tables of the schema, not CTEs",
            hint="write the tables themselves in the LEFT JOIN",
        )
    if (
        left_scope.source is not None
        or right_scope.source is not None
        or not (lt.privacy_unit and rt.privacy_unit)
    ):
        raise UnsupportedQuery(
            "a LEFT JOIN in a per-unit subquery must join two private tables that each hold "
            "the privacy unit as a column"
        )
    shared = {c.name for c in lt.columns} & {c.name for c in rt.columns}
    if shared:
        raise UnsupportedQuery(
            f"a LEFT JOIN of tables sharing column names ({', '.join(sorted(shared))}) is not "
            "supported in a per-unit subquery"
        )
    lq = {from_.this.alias_or_name.lower(), lt.name.lower()}
    rq = {join.this.alias_or_name.lower(), rt.name.lower()}
    tied = False
    right_filters: list[exp.Expression] = []
    for c in conjuncts(join.args.get("on")):
        cols = list(c.find_all(exp.Column))
        owners = {_owner(col, lt, rt, lq, rq) for col in cols}
        if isinstance(c, exp.EQ) and owners == {"left", "right"} and len(cols) == 2:
            a, b = cols if _owner(cols[0], lt, rt, lq, rq) == "left" else cols[::-1]
            if a.name.lower() == lt.privacy_unit.lower() and b.name.lower() == (
                rt.privacy_unit.lower()
            ):
                tied = True
                continue
        if owners - {"right"}:
            raise UnsupportedQuery(
                "the ON clause of a LEFT JOIN in a per-unit subquery may equate the two "
                "tables' privacy units and add conditions on the right table only",
                hint=f"ON {lt.privacy_unit} = {rt.privacy_unit} AND <conditions on {rt.name}>",
            )
        _no_subqueries(c, "the ON clause")
        _row_level(c, "JOIN/ON")
        right_filters.append(right_scope.resolve(c))
    if not tied:
        raise UnsupportedQuery(
            "a LEFT JOIN in a per-unit subquery must equate the two tables' privacy units "
            f"(ON {lt.privacy_unit} = {rt.privacy_unit}): otherwise a joined row could hold "
            "another person's rows"
        )
    columns = lt.columns + tuple(
        Column(c.name, c.type, c.lower, c.upper, True, c.domain) for c in rt.columns
    )
    table = Table(
        name=f"{lt.name} ⟕ {rt.name}",
        private=True,
        columns=columns,
        privacy_unit=lt.privacy_unit,
    )
    names: dict[str, exp.Expression] = {c.name.lower(): exp.column(c.name) for c in columns}
    for q in lq:
        names.update({f"{q}.{c.name.lower()}": exp.column(c.name) for c in lt.columns})
    for q in rq:
        names.update({f"{q}.{c.name.lower()}": exp.column(c.name) for c in rt.columns})
    types = {c.name: COLUMN_TYPES[c.type] for c in columns}
    scope = Scope(table, names, lq | rq, [], types, None, set(), True)
    left = LeftJoin(lt, rt, lt.privacy_unit, rt.privacy_unit, tuple(right_filters))
    return scope, left


def _plain(scope: Scope) -> bool:
    """Is the scope a table of the schema as it is (no CTE's filters or computed columns)?"""
    own = {c.name.lower(): exp.column(c.name) for c in scope.table.columns}
    return not scope.filters and scope.names == own


def _owner(col: exp.Column, lt: Table, rt: Table, lq: set[str], rq: set[str]) -> str:
    if col.table:
        if col.table.lower() in lq:
            return "left"
        if col.table.lower() in rq:
            return "right"
        return "?"
    if lt.column(col.name.lower()) is not None or lt.column(col.name) is not None:
        return "left"
    if rt.column(col.name.lower()) is not None or rt.column(col.name) is not None:
        return "right"
    return "?"
