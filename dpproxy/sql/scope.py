"""The name scope of a query over one private table, and the value types shared by validation.

A :class:`Scope` maps every visible name to an expression over the base table's own columns
(row-wise CTEs and subqueries are substituted into it) and collects their WHERE clauses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.errors import (
    AmbiguousColumn,
    DatatypeMismatch,
    Forbidden,
    GroupingError,
    UndefinedColumn,
    UndefinedTable,
    UnsupportedQuery,
    WindowingError,
)
from dpproxy.sql.joinparts import JoinSource
from dpproxy.sql.totality import check_allowed
from dpproxy.sql.types import COLUMN_TYPES, SqlType, clone, type_of

# isinstance tuples built once: ``A | B`` written in the call builds a union of sqlglot
# classes at every call, a microsecond each (issue 21); a tuple tests the same classes
_ATOMIC = (exp.Column, exp.Paren, exp.Literal, exp.Func, exp.Case, exp.Null, exp.Boolean)
_SUBQUERIES = (exp.Subquery, exp.Select, exp.Exists)


class AggKind(Enum):
    COUNT_STAR = "count(*)"
    COUNT = "count"
    COUNT_UNITS = "count(distinct unit)"
    COUNT_DISTINCT = "count(distinct)"  # of any other column: as COUNT's sensitivity (below)
    SUM = "sum"
    AVG = "avg"
    VAR_POP = "var_pop"
    VAR_SAMP = "var_samp"
    STDDEV_POP = "stddev_pop"
    STDDEV_SAMP = "stddev_samp"
    # Order statistics (``q`` is the fraction): local-sensitivity or exponential-mechanism plans.
    MEDIAN = "median"
    PERCENTILE_CONT = "percentile_cont"
    PERCENTILE_DISC = "percentile_disc"
    MIN = "min"
    MAX = "max"
    # Two-argument statistics with no usable sensitivity: sample-and-aggregate only.
    CORR = "corr"
    COVAR_POP = "covar_pop"
    COVAR_SAMP = "covar_samp"
    REGR_SLOPE = "regr_slope"
    REGR_INTERCEPT = "regr_intercept"

    @property
    def quantile(self) -> bool:
        return self in QUANTILE_KINDS

    @property
    def bivariate(self) -> bool:
        return self in BIVARIATE_KINDS


# Aggregates released as non-negative integers (rounded, clipped at 0).
COUNT_KINDS = frozenset(
    {AggKind.COUNT, AggKind.COUNT_STAR, AggKind.COUNT_UNITS, AggKind.COUNT_DISTINCT}
)


QUANTILE_KINDS = frozenset(
    {AggKind.MEDIAN, AggKind.PERCENTILE_CONT, AggKind.PERCENTILE_DISC, AggKind.MIN, AggKind.MAX}
)
BIVARIATE_KINDS = frozenset(
    {
        AggKind.CORR,
        AggKind.COVAR_POP,
        AggKind.COVAR_SAMP,
        AggKind.REGR_SLOPE,
        AggKind.REGR_INTERCEPT,
    }
)


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One aggregate call; ``measure`` is over base columns with any FILTER folded in.

    ``q`` is the fraction of an order statistic (MEDIAN ½, MIN 0, MAX 1); ``second`` the second
    argument of a two-argument statistic (``CORR(measure, second)``), FILTER folded in too.
    ``distinct``: SUM(DISTINCT x) or AVG(DISTINCT x) (``planning/plan.py`` Primitive).
    """

    kind: AggKind
    measure: exp.Expression | None
    q: Fraction | None = None
    second: exp.Expression | None = None
    distinct: bool = False


@dataclass(frozen=True, slots=True)
class GroupKey:
    expr: exp.Expression
    type: SqlType
    domain: tuple[Any, ...] | None  # public values (None: private keys)


@dataclass(frozen=True, slots=True)
class OutputItem:
    name: str
    expr: exp.Expression  # post-processing expression over __agg_i / __key_j
    type: SqlType
    is_key: bool


@dataclass(frozen=True, slots=True)
class OrderItem:
    expr: exp.Expression
    desc: bool
    nulls_first: bool


@dataclass
class Scope:
    """Visible names → expressions over the base table, plus collected row filters."""

    table: Table
    names: dict[str, exp.Expression]
    qualifiers: set[str]
    filters: list[exp.Expression]
    column_types: dict[str, SqlType]
    # A join (sql/joins.py): its relation, and its column names that several tables share.
    # ``names`` then also holds ``alias.column`` for every table's columns.
    source: JoinSource | None = None
    ambiguous: set[str] = field(default_factory=set)
    joined_names: bool = False  # qualified names resolve as ``alias.column`` keys

    def resolve(self, node: exp.Expression) -> exp.Expression:
        """Substitute visible names by base expressions; refuse unknown names and constructs."""
        return self.resolve_typed(node)[0]

    def resolve_typed(self, node: exp.Expression) -> tuple[exp.Expression, SqlType]:
        """:meth:`resolve`, and the type of what it returns (``type_of`` of it: computed by
        the resolution anyway, so a caller that needs it does not walk the tree again)."""

        def sub(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column):
                if n.table and n.table.lower() not in self.qualifiers:
                    raise UndefinedTable(f'missing FROM-clause entry for table "{n.table}"')
                name = n.name.lower()
                if isinstance(n.this, exp.Star):
                    raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
                if self.joined_names and n.table:
                    qualified = f"{n.table.lower()}.{name}"
                    if qualified not in self.names:
                        raise UndefinedColumn(f"column {n.table}.{n.name} does not exist")
                    return parenthesised(clone(self.names[qualified]))
                if name in self.ambiguous:
                    raise AmbiguousColumn(
                        f'column reference "{n.name}" is ambiguous',
                        hint=f"qualify it with its table: t.{n.name}",
                    )
                if name not in self.names:
                    raise UndefinedColumn(
                        f'column "{n.name}" does not exist',
                        hint=f"columns of {self.table.name}: "
                        + ", ".join(sorted(k for k in self.names if "." not in k))[:300],
                    )
                return parenthesised(clone(self.names[name]))
            if isinstance(n, exp.Star):
                raise Forbidden("row-level reads are not allowed: SELECT * returns rows")
            if isinstance(n, _SUBQUERIES):
                raise UnsupportedQuery(
                    f"a subquery is not supported here: {n.sql('postgres')[:60]}",
                    hint=SUBQUERY_HINT,
                )
            return n

        if isinstance(node, exp.Column):  # what ``transform`` gives for a bare name (its
            out = exp.Paren(this=sub(node))  # root replaced), without copying ``node`` first
        else:
            out = exp.Paren(this=clone(node).transform(sub, copy=False))
        # converts string literals in typed contexts, in place; a Paren has its operand's type
        kind = type_of(out, self.column_types)
        check_allowed(out)  # the second line: nothing without a totality argument
        result: exp.Expression = out.this
        result.parent = None
        return result, kind


_TABLE_SCOPES: dict[int, tuple[Table, dict[str, exp.Expression], dict[str, SqlType]]] = {}


def table_scope(table: Table) -> Scope:
    """A fresh scope over one schema table: each column's name (lower case) → the column,
    and each column's SQL type. Both are a pure function of the table, so they are built once
    per schema table (keyed by the table object, kept so that its id stays its own) and each
    scope gets its own copy of the dicts; the column nodes are shared and never changed
    (:meth:`Scope.resolve` copies what it substitutes, like every other reader of ``names``).
    """
    hit = _TABLE_SCOPES.get(id(table))
    if hit is None or hit[0] is not table:
        names: dict[str, exp.Expression] = {
            c.name.lower(): exp.column(c.name) for c in table.columns
        }
        types = {c.name: COLUMN_TYPES[c.type] for c in table.columns}
        if len(_TABLE_SCOPES) >= 256:  # schemas come and go in tests and reloads
            _TABLE_SCOPES.clear()
        hit = _TABLE_SCOPES[id(table)] = (table, names, types)
    return Scope(table, dict(hit[1]), set(), [], dict(hit[2]))


def parenthesised(e: exp.Expression) -> exp.Expression:
    """Wrap a substituted subquery column so it keeps its precedence where it lands.

    sqlglot's generator prints trees as they are: ``Mul(Add(age, 1), 2)`` would print as
    ``age + 1 * 2``. Atomic expressions need no parentheses.
    """
    if isinstance(e, _ATOMIC):
        return e
    return exp.Paren(this=e)


def expect_bool(
    cond: exp.Expression, scope: Scope, where: str, kind: SqlType | None = None
) -> None:
    """Refuse a condition that is not a boolean (42804). ``kind``: its type, when the caller
    has it from :meth:`Scope.resolve_typed` (the same ``type_of``, not computed twice)."""
    t = type_of(cond, scope.column_types) if kind is None else kind
    if t not in (SqlType.BOOLEAN, SqlType.NULL):
        raise DatatypeMismatch(f"argument of {where} must be type boolean, not {t.value}")


SUBQUERY_HINT = (
    "EXISTS, NOT EXISTS, IN (SELECT …) and NOT IN (SELECT …) are supported as conditions "
    "AND-ed to the WHERE clause"
)


def no_aggregates(node: exp.Expression, where: str) -> None:
    """Refuse aggregates and window functions in a row-level clause (and subqueries, whose
    aggregates are not the clause's: sql/semijoins.py takes the supported ones out first)."""
    for n in node.walk():
        if isinstance(n, _SUBQUERIES):
            raise UnsupportedQuery(f"a subquery in {where} is not supported", hint=SUBQUERY_HINT)
        if isinstance(n, exp.AggFunc):
            raise GroupingError(f"aggregate functions are not allowed in {where}")
        if isinstance(n, exp.Window):
            raise WindowingError(f"window functions are not allowed in {where}")
