"""Per-unit subqueries: a subquery or CTE in FROM that aggregates each privacy unit's rows.

``SELECT n, COUNT(*) FROM (SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY o_custkey) t
GROUP BY n`` — a histogram of orders per customer — reads a *derived relation* with one row per
customer. It is accepted when the subquery's GROUP BY is exactly the privacy unit of its own
relation (one private table, a join that ``sql/joins.py`` builds, or ``T LEFT JOIN U ON
T.unit = U.unit``) and its select list holds the unit and aggregates (COUNT(*), COUNT(x),
COUNT(DISTINCT x), SUM, AVG, MIN, MAX of row-level expressions, and arithmetic over them), with
an optional WHERE and an optional HAVING. Each aggregate is a column of the derived relation
(hidden when only HAVING or arithmetic uses it); HAVING becomes a filter on the derived rows and
arithmetic over aggregates a row-level expression of the outer query over those columns, typed,
guarded and bounded like any other.

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
rows before the join); any other outer join is refused (``sql/leftjoin.py``).

Bounds of the derived columns (claims the outer rewrite enforces by clamping them, since the
derived relation is a table like any other to it): COUNT ∈ [0, ∞) (an integer); AVG, MIN and
MAX of a bounded column within that column's bounds (MIN and MAX of dates are dates); SUM of a
column with lower bound ≥ 0 in [0, ∞); arithmetic over aggregates by interval arithmetic;
anything else unbounded — the outer query must clamp what it sums (``LEAST(n, 50)``), or is
refused by the planner ("has no finite bounds"). SUM and AVG are DOUBLE.

The SQL of the derived relation is built in ``rewrite/perunit.py`` from :class:`PerUnit`
(guarded, clamped row values; the layering forbids ``sql/`` to import ``rewrite/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, ContributionBound, Table
from dpproxy.errors import GroupingError, UnsupportedQuery
from dpproxy.sql.aggregates import default_name
from dpproxy.sql.joinparts import JoinSource
from dpproxy.sql.leftjoin import FromScope, LeftJoin, left_join_scope, no_subqueries, row_level
from dpproxy.sql.scope import Scope, expect_bool
from dpproxy.sql.types import COLUMN_TYPES, SqlType, type_of

UNIT_OF_ROW = "__unit_of_row"

_AGGS = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
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
    date: bool = False  # MIN or MAX of dates: a DATE column


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
        scope, left_join = left_join_scope(inner, from_scope)
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
        no_subqueries(where.this, "the WHERE clause of a per-unit subquery")
        row_level(where.this, "WHERE")
        cond = scope.resolve(where.this)
        expect_bool(cond, scope, "WHERE")
        scope.filters.append(cond)
    unit = _unit_key(inner, group, scope)
    outputs: list[tuple[str, exp.Expression]] = []
    unit_output = None
    derived: list[Derived] = []
    computed: list[tuple[str, exp.Expression]] = []
    for i, proj in enumerate(inner.expressions):
        node = proj.unalias()
        out = column_list[i] if i < len(column_list) else (proj.alias or default_name(node, i))
        out = out.lower()
        if out.startswith("__"):
            raise UnsupportedQuery(f'column names beginning with "__" are reserved: "{out}"')
        if any(o == out for o, _ in outputs):
            raise UnsupportedQuery(f'the per-unit subquery has two columns named "{out}"')
        if isinstance(node, exp.Star) or (
            isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
        ):
            raise UnsupportedQuery("SELECT * in a per-unit subquery is not supported")
        no_subqueries(node, "a per-unit subquery's select list")
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
        if isinstance(node, _AGGS):
            derived.append(_aggregate(node, out, scope))
            outputs.append((out, exp.column(out)))
            continue
        # Arithmetic over aggregates: each aggregate a hidden derived column, the expression
        # over them computed row-wise by the outer query, like a row-wise subquery's columns.
        unit_ref = exp.column(unit_output or UNIT_OF_ROW)
        computed.append((out, _over_derived(node, scope, unit, unit_ref, derived, "a column")))
        outputs.append((out, exp.column(out)))
    if len(column_list) > len(inner.expressions):
        raise UnsupportedQuery(
            f'table "{name}" has {len(inner.expressions)} columns available but '
            f"{len(column_list)} columns specified"
        )
    having_terms: list[exp.Expression] = []
    if h := inner.args.get("having"):
        no_subqueries(h.this, "HAVING of a per-unit subquery")
        unit_ref = exp.column(unit_output or UNIT_OF_ROW)
        having_terms.append(_over_derived(h.this, scope, unit, unit_ref, derived, "HAVING"))
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
    for out, expr in computed:
        visible[out] = out_scope.resolve(expr)
    for term in having_terms:  # over every derived column, the hidden ones too
        cond = out_scope.resolve(term)
        expect_bool(cond, out_scope, "HAVING")
        out_scope.filters.append(cond)
    out_scope.names = visible
    return out_scope


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
        row_level(node, "GROUP BY")
        r = scope.resolve(node)
        if r not in resolved:
            resolved.append(r)
    table = scope.table
    units = [r for r in resolved if isinstance(r, exp.Column) and table.is_unit(r.name)]
    if len(resolved) != 1 or not units:
        names = [table.privacy_unit or "", *table.unit_columns]
        shown = ", ".join(n for n in names if n and not n.startswith("__"))
        hint = "aggregate per person in the subquery (GROUP BY the privacy unit), or aggregate "
        hint += "in the outer query only"
        hidden = scope.source.hidden if scope.source is not None else ()
        if not shown and hidden:  # the unit is reached through tables the query does not name
            hint = f"join {', '.join(hidden)} in the subquery and GROUP BY its privacy unit, or "
            hint += "aggregate in the outer query only"
        raise UnsupportedQuery(
            "GROUP BY in a subquery must be exactly the privacy unit"
            + (f" ({shown})" if shown else "")
            + ": a group of several people's rows is not one person's row, so the outer query "
            "could not bound what one person contributes",
            hint=hint,
        )
    return units[0]


def _aggregate(node: exp.Expression, out: str, scope: Scope) -> Derived:
    assert isinstance(node, _AGGS)
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
    row_level(arg, f"the argument of {kind.upper()}")
    measure = scope.resolve(arg)
    t = type_of(measure, scope.column_types)
    date = kind in ("min", "max") and t is SqlType.DATE
    if kind in ("sum", "avg", "min", "max") and t is not SqlType.NUMERIC and not date:
        raise UnsupportedQuery(
            f"{kind.upper()} of a {t.value} in a per-unit subquery is not supported",
            hint="per-unit SUM and AVG take numbers, MIN and MAX numbers or dates",
        )
    return Derived(out, kind, measure, date)


def _over_derived(
    node: exp.Expression,
    scope: Scope,
    unit: exp.Expression,
    unit_ref: exp.Expression,
    derived: list[Derived],
    where: str,
) -> exp.Expression:
    """An expression over aggregates (HAVING, or a computed column) rewritten over the derived
    relation: every aggregate becomes a derived column (a hidden one when the select list does
    not hold it), the unit its output column."""

    def sub(n: exp.Expression) -> exp.Expression:
        if isinstance(n, _AGGS):
            d = _aggregate(n, "", scope)
            for have in derived:
                if have.kind == d.kind and have.measure == d.measure:
                    return exp.column(have.name)
            name = f"__agg_{len(derived)}"
            derived.append(Derived(name, d.kind, d.measure, d.date))
            return exp.column(name)
        if isinstance(n, exp.AggFunc):
            raise UnsupportedQuery(
                f"{n.sql('postgres')[:60]} in {where} of a per-unit subquery is not supported: "
                "its aggregates must be COUNT, SUM, AVG, MIN or MAX"
            )
        if isinstance(n, exp.Column):
            if scope.resolve(n) != unit:
                raise GroupingError(
                    f'column "{n.sql("postgres")}" must appear in the GROUP BY clause or be '
                    "used in an aggregate function"
                )
            return unit_ref.copy()
        return n

    return node.copy().transform(sub, copy=False)


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
    if d.date:
        return Column(d.name, ColumnType.DATE, nullable=True)
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
