"""The parts of a join's analysis (``sql/joins.py``) that other modules read: the instances of a
FROM clause, the joined relation and the sides of a join of two units' rows, the outer joins
recorded for ``sql/outer.py``, and the rows one unit can have in the joined relation
(:func:`derived_bound`, from the schema and the public data).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, ColumnType, Table
from dpproxy.errors import UnsupportedQuery

UNIT_OF_ROW = "__unit_of_row"
SIDE_UNIT = "__side_unit"

Edges = list[
    tuple[tuple[str, str], tuple[str, str]]
]  # equalities (alias, column) = (alias, column)


@dataclass
class Instance:
    alias: str
    table: Table | None  # None: a flat map
    hidden: bool = False  # joined by dpproxy to reach a unit
    unnest: exp.Expression | None = None  # the array expression of a flat map
    element: str = ""  # the flat map's column name
    fan_out: int | None = None  # a flat map's most elements per row (schema or slice)


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a join between two units' rows: its rows (SQL), the columns it projects
    (virtual names), its join key columns (aligned with the other side's), its rows per unit
    M from the schema, and whether its key is unique (DropNonUnique) or not (DropExcess)."""

    select: exp.Select  # SELECT <columns AS virtual names>, <unit> AS __side_unit FROM …
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    rows_per_unit: int
    unique_key: bool
    description: str

    def truncation(self, join_rows: int) -> tuple[int, int]:
        """(T, S): rows kept per key value and the strategy's stability (reading/002)."""
        return (1, 1) if self.unique_key else (join_rows, 2)


@dataclass(frozen=True, slots=True)
class JoinSource:
    """The joined relation as SQL, with what explain shows about it."""

    select: exp.Select  # SELECT <columns AS virtual names>, <unit> AS __unit_of_row FROM …
    description: str  # "lineitem l ⋈ orders o ⋈ nation n"
    derived: int | None  # rows per unit from the schema; None when some fan-out is unknown
    derivation: str  # how ``derived`` was computed, or why it is unknown
    hidden: tuple[str, ...] = ()  # tables joined only to reach the unit
    # A join of two units' rows on other columns: both sides, truncated per join key in the
    # rewrite (``rewrite/bound.two_sided``), instead of one relation bounded per unit.
    sides: tuple[Side, Side] | None = None
    # (virtual name, schema table, column) of every visible column: what ``sql/semijoins.py``
    # needs to tie a subquery to the unit of the outer row.
    origins: tuple[tuple[str, str, str], ...] = ()

    def stability(self, join_rows: int) -> int:
        """Rows of the joined relation that one unit can change (reading/002):
        T_a·S_b·M_b + T_b·S_a·M_a, with T, S = 1, 1 for DropNonUnique and T, 2 for
        DropExcess(T); M is a side's rows per unit."""
        assert self.sides is not None
        a, b = self.sides
        (ta, sa), (tb, sb) = a.truncation(join_rows), b.truncation(join_rows)
        return ta * sb * b.rows_per_unit + tb * sa * a.rows_per_unit


@dataclass(frozen=True, slots=True)
class OuterJoin:
    """``… LEFT|RIGHT|FULL JOIN <alias> ON <edges>``: the equalities of its ON (or USING)."""

    side: str
    alias: str
    edges: tuple[tuple[tuple[str, str], tuple[str, str]], ...]


@dataclass
class UnionFind:
    parent: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def find(self, x: tuple[str, str]) -> tuple[str, str]:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def derived_bound(
    members: list[Instance],
    edges: Edges,
    flat_links: list[tuple[str, str]],
    catalog: Catalog,
) -> tuple[int | None, str]:
    """Rows of one unit in the joined relation, from the schema and the public data.

    Start from one private table (its declared rows per unit) and add the others along the
    equalities: a table joined on a column that is unique in it (a referenced key, or the
    unit of a one-row-per-unit table) adds a factor 1; a public table adds the most rows
    sharing one value of its join column; another private table its rows per unit; a flat
    map an unknown factor. The smallest product over the possible starting tables wins."""
    best: tuple[int, str] | None = None
    reason = ""
    for start in members:
        if start.table is None or not start.table.private:
            continue
        k = start.table.bound.rows_total()
        if k is None:
            reason = f"{start.table.name} declares no max_rows_per_unit"
            continue
        total, parts = k, [f"{start.table.name} {k}"]
        joined = {start.alias}
        ok = True
        while ok and len(joined) < len(members):
            step = _next_factor(joined, members, edges, flat_links, catalog)
            if step is None:
                ok = False
                break
            alias, factor, why = step
            joined.add(alias)
            if factor is None:
                reason = why
                ok = False
                break
            total *= factor
            parts.append(why)
        if ok and (best is None or total < best[0]):
            best = (total, " × ".join(parts))
    if best is None:
        return None, reason or "no table declares its rows per unit"
    return best


def _next_factor(
    joined: set[str],
    members: list[Instance],
    edges: Edges,
    flat_links: list[tuple[str, str]],
    catalog: Catalog,
) -> tuple[str, int | None, str] | None:
    """The cheapest instance to add next: (alias, its fan-out, why)."""
    options: list[tuple[str, int | None, str]] = []
    for inst in members:
        if inst.alias in joined:
            continue
        if inst.unnest is not None:
            if any(f == inst.alias and o in joined for f, o in flat_links):
                if inst.fan_out is None:
                    options.append((inst.alias, None, "UNNEST has no declared fan-out"))
                else:
                    why = f"UNNEST {inst.fan_out} (elements per row)"
                    options.append((inst.alias, inst.fan_out, why))
            continue
        cols = {
            mine[1]
            for a, b in edges
            for mine, other in ((a, b), (b, a))
            if mine[0] == inst.alias and other[0] in joined
        }
        if not cols:
            continue
        assert inst.table is not None
        options.append((inst.alias, *factor(inst, cols, catalog)))
    if not options:
        return None
    known = [o for o in options if o[1] is not None]
    if known:
        return min(known, key=lambda o: o[1] or 0)
    return options[0]


def factor(inst: Instance, cols: set[str], catalog: Catalog) -> tuple[int | None, str]:
    """The fan-out of joining ``inst`` on its columns ``cols``: (a factor, at least 1, or None,
    why).

    **A public table's factor is max(1, m)**, m the most rows sharing one value of a join
    column, measured on the public table when the catalog was attached (``catalog/public.py``;
    the smallest m over ``cols``, since rows equal on every join column are equal on each).
    m is 0 exactly when the table was empty then. Why 1 and not 0, and why it is private:

    * The factor only sets τ, the rows per unit of the joined relation (:func:`derived_bound`).
      The rewrite truncates every unit to τ joined rows in SQL (a join with a public table is
      never ``unit_is_unique``, so the plan always bounds it) and every sensitivity is computed
      at K = τ. So Δ holds whatever the public table holds when the query runs — empty, or
      filled since it was measured — and τ itself depends on the schema and public data only,
      never on private rows. The factor decides utility (which rows the truncation drops), not
      privacy.
    * τ must be at least 1: a contribution bound of 0 rows is not a stability
      (``analysis/sensitivity.py``, which raises XX000 on it). τ = 0 would be sound — an empty
      join contributes nothing — but it would keep no row even if the table gained rows, and
      with zero sensitivity the release would be the exact answer.
    * Taking 1 for an empty table never lowers the sensitivity below what the data needs:
      while the table is empty every joined relation is empty and any τ ≥ 0 drops no row, so the
      τ derived with the factor 1 (≥ 1) over-estimates the true largest contribution (0): more
      noise, never less. The answer is the plain SQL's (no row joins) plus that noise, with the
      τ a public table whose join key is unique would give.
    """
    t = inst.table
    assert t is not None
    if any(unique_key(t, c, catalog) for c in cols):
        return 1, f"{t.name} 1 (unique key)"
    if not t.private:
        fan = [m for c in cols if (m := t.fan_out(c)) is not None]
        if fan and min(fan) == 0:
            return 1, f"{t.name} 1 (empty when read, taken as 1)"
        if fan:
            return min(fan), f"{t.name} {min(fan)} (most rows per {sorted(cols)[0]})"
        return None, f"the fan-out of public table {t.name} was not measured"
    k = t.bound.rows_total()
    if k is None:
        return None, f"{t.name} declares no max_rows_per_unit"
    return k, f"{t.name} {k}"


def unique_key(t: Table, column: str, catalog: Catalog) -> bool:
    """Is the column a key of the table (from the schema, or measured on public data)?"""
    if not t.private:
        return t.fan_out(column) == 1
    if t.privacy_unit and t.privacy_unit.lower() == column and t.bound.rows_total() == 1:
        return True
    return any(
        o.unit_via is not None
        and o.unit_via.table.lower() == t.name.lower()
        and o.unit_via.key.lower() == column
        for o in catalog.tables
    )


def slice_bounds(bracket: exp.Bracket) -> tuple[int, int]:
    """The first element and the number of elements of ``array[lo:hi]``, with positive literal
    bounds (1-based, both included)."""
    slices = bracket.expressions
    if len(slices) == 1 and isinstance(slices[0], exp.Slice):
        lo, hi = slices[0].this, slices[0].expression
        if (
            isinstance(lo, exp.Literal)
            and isinstance(hi, exp.Literal)
            and lo.is_int
            and hi.is_int
            and 1 <= int(lo.name) <= int(hi.name)
        ):
            return int(lo.name), int(hi.name) - int(lo.name) + 1
    raise UnsupportedQuery(
        "UNNEST of a slice needs literal bounds: UNNEST((string_to_array(c, ','))[1:5])"
    )


def has_column(inst: Instance, name: str) -> bool:
    if inst.unnest is not None:
        return name == inst.element
    assert inst.table is not None
    return inst.table.column(name) is not None


def column_names(inst: Instance) -> list[str]:
    if inst.unnest is not None:
        return [inst.element]
    assert inst.table is not None
    return [c.name.lower() for c in inst.table.columns]


def column_of(inst: Instance, name: str) -> Column:
    if inst.unnest is not None:
        return Column(inst.element, ColumnType.TEXT, nullable=True)
    assert inst.table is not None
    for c in inst.table.columns:
        if c.name.lower() == name:
            return c
    raise UnsupportedQuery(f'column "{name}" is not in {inst.table.name}')


def from_item(inst: Instance) -> exp.Expression:
    if inst.unnest is not None:
        return exp.Unnest(
            expressions=[inst.unnest.copy()],
            alias=exp.TableAlias(
                this=exp.to_identifier(inst.alias),
                columns=[exp.to_identifier(inst.element)],
            ),
        )
    assert inst.table is not None
    return exp.Table(
        this=exp.to_identifier(inst.table.name),
        alias=exp.TableAlias(this=exp.to_identifier(inst.alias)),
    )
