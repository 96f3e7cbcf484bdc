"""The privacy schema as frozen data: datasets, tables, columns, privacy units and bounds."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from fractions import Fraction

from dpproxy.values import Cost, Interval


class ColumnType(Enum):
    INTEGER = "integer"
    FLOAT = "float"
    TEXT = "text"
    BOOLEAN = "boolean"
    DATE = "date"

    @property
    def numeric(self) -> bool:
        return self in (ColumnType.INTEGER, ColumnType.FLOAT)


class Neighbouring(Enum):
    """Which datasets are neighbours: one privacy unit added or removed, or substituted."""

    ADD_REMOVE = "add_remove"
    SUBSTITUTE = "substitute"


class MechanismKind(Enum):
    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    lower: Fraction | None = None
    upper: Fraction | None = None
    nullable: bool = False
    domain: tuple[object, ...] | None = None
    max_elements: int | None = None  # text split by UNNEST: at most this many elements used
    max_length: int | None = None  # text: at most this many characters (bounds LENGTH)
    # Set by a backend whose CHECK constraint proves every value within [lower, upper]
    # (backends/checks.py): the rewrite then leaves out the clamp (rewrite/wholesum.py and,
    # for the DOUBLE clamps of row-level measures, rewrite/noop_clamps.py).
    in_bounds: bool = False
    # Set by the DuckDB backend when reading the data proved every value within [lower, upper]
    # in a database file it holds read-only, which no one can write while it is open
    # (backends/scanned.py; integer and float columns): the rewrite leaves out the clamp as
    # for ``in_bounds`` (rewrite/wholesum.py, rewrite/noop_clamps.py), but the
    # SQL that EXPLAIN shows keeps it (``Catalog.shown``), since this fact is about the rows.
    scanned: bool = False
    # With ``scanned``, for a float column: the least magnitude of its non-zero values as
    # doubles (inf when none; 0.0 when unknown or some value is -0.0), read the same way
    # (backends/scanned.py): the rewrite leaves out the taming of rewrite/floats.py where it
    # maps every row to itself (rewrite/noop_clamps.py). A fact about the rows, like ``scanned``.
    least_nonzero: float = 0.0
    # Set by the DuckDB backend when the database stores it in a signed integer type of at most
    # 64 bits or a smaller unsigned one (backends/checks.py): rewrite/unclamp.py may then cast
    # its unclamped values to BIGINT.
    bigint: bool = False
    # Set by a backend whose database declares the column NOT NULL (DuckDB's DESCRIBE,
    # PostgreSQL's ``attnotnull`` of a plain table without children: backends/checks.py):
    # metadata the database enforces on every row, unlike the schema's ``nullable: false``, a
    # promise it trusts. ``COUNT(x)`` is then ``COUNT(*)`` over the same rows
    # (planning/builder.py, ``PrimitiveBuilder._count``).
    not_null: bool = False

    @property
    def bounds(self) -> Interval:
        return Interval(self.lower, self.upper)

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True, slots=True)
class ContributionBound:
    """The protected change of reading/002: how much one privacy unit may contribute.

    ``max_rows``: rows per unit overall. ``max_groups`` × ``max_rows_per_group``: groups per
    unit, and rows per unit inside one group. At least ``max_rows`` or ``max_rows_per_group``
    is set, so every unit's row count is bounded.
    """

    max_rows: int | None = None
    max_groups: int | None = None
    max_rows_per_group: int | None = None

    @property
    def declared(self) -> bool:
        """Does the schema bound the unit's rows? (If not, each query chooses a bound with DP.)"""
        return self.max_rows is not None or self.max_rows_per_group is not None

    def rows_total(self) -> int | None:
        """A bound on one unit's rows when there is no GROUP BY (one group)."""
        candidates = [v for v in (self.max_rows, self.max_rows_per_group) if v is not None]
        return min(candidates) if candidates else None


@dataclass(frozen=True, slots=True)
class UnitPath:
    """A private table whose rows belong to the unit of the row they reference: ``column`` of
    this table equals ``key`` of ``table`` (a private table in which ``key`` is unique)."""

    column: str
    table: str
    key: str


@dataclass(frozen=True, slots=True)
class Table:
    """A table of the schema — or, for a join, the joined relation (``sql/joins.py``), whose
    columns are the joined tables' columns and whose unit is ``__unit_of_row``."""

    name: str
    private: bool
    columns: tuple[Column, ...]
    privacy_unit: str | None = None  # the unit column; None with ``unit_via`` or when public
    bound: ContributionBound = ContributionBound()
    unit_is_unique: bool = False  # set by a backend that proves it with a constraint
    # The schema states the unit column unique and never NULL (``unit_unique``); a backend
    # without constraints (Spark) checks it against the data and then sets unit_is_unique.
    unit_declared_unique: bool = False
    public_rows: int | None = None  # an approximate size the data steward declares public
    # A public upper bound on the table's rows: released counts over it are clipped to it.
    public_max_rows: int | None = None
    unit_via: UnitPath | None = None  # the unit comes from the referenced private table
    unit_columns: tuple[str, ...] = ()  # further columns equal to the unit (joined relations)
    # Public tables only, read from the public data when a backend attaches the catalog:
    # the most rows sharing one value, per column (the fan-out of a join on that column).
    multiplicity: tuple[tuple[str, int], ...] = ()
    # PostgreSQL: the schema the backend found the table in when it attached the catalog (the
    # first on the steward's search path); its SQL names the table with it (sql/qualify.py).
    schema: str | None = None
    # PostgreSQL and DuckDB: the lower-case names of the ``float`` columns of a type too wide
    # (``numeric`` without a precision; HUGEINT, UHUGEINT, DECIMAL(38, 0)), read as DOUBLE
    # through a total conversion (sql/widenum.py) in every statement; private tables only.
    wide: tuple[str, ...] = ()
    # PostgreSQL: the lower-case names of the ``float`` columns stored as ``real`` (float4),
    # read as DOUBLE PRECISION (an exact, total widening) in every statement, so that no
    # float4 arithmetic or float4 CASE runs (sql/widenum.py); private tables only.
    real: tuple[str, ...] = ()
    # ``column``'s index by lower-case name, built on first use (the first column of each
    # name, as a scan of ``columns`` finds it): planning a query looks columns up dozens of
    # times. Regardless of case, as ``Catalog.table``: the schema's column names are unique
    # regardless of case, and planning looks them up in lower case (until 2026-11-29 a column
    # ``regionId`` was not found for ``regionid``, and a join on it was refused as a cross join).
    _by_name: dict[str, Column] | None = field(default=None, init=False, repr=False, compare=False)

    def column(self, name: str) -> Column | None:
        index = self._by_name
        if index is None:
            index = {}
            for c in self.columns:
                index.setdefault(c.name.lower(), c)
            object.__setattr__(self, "_by_name", index)
        return index.get(name.lower())

    def is_unit(self, name: str) -> bool:
        """Is ``name`` the privacy unit, or a column known to equal it on every row?"""
        low = name.lower()
        units = ((self.privacy_unit,) if self.privacy_unit else ()) + self.unit_columns
        return any(u.lower() == low for u in units)

    def fan_out(self, name: str) -> int | None:
        """Public tables: the most rows with one value of ``name`` (None: not measured)."""
        for c, m in self.multiplicity:
            if c.lower() == name.lower():
                return m
        return None


@dataclass(frozen=True, slots=True)
class PrivacyPolicy:
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    epsilon: Fraction = Fraction(1)
    delta: Fraction = Fraction(0)
    mechanism: MechanismKind = MechanismKind.LAPLACE
    budget: Cost = Cost(Fraction(10), Fraction(1, 10**5))  # noqa: RUF009 (frozen, immutable)
    selection_share: Fraction = Fraction(1, 2)  # ε share spent on partition selection
    # Contribution bounds chosen with DP (tables without a declared bound, joins): the share
    # of a query's ε spent on the choice, and the share of units whose rows it keeps whole.
    truncation_share: Fraction = Fraction(1, 10)
    truncation_coverage: Fraction = Fraction(999, 1000)


@dataclass(frozen=True, slots=True)
class Catalog:
    dataset: str
    tables: tuple[Table, ...]
    policy: PrivacyPolicy
    source: str = "<memory>"

    def shown(self) -> Catalog:
        """This catalog as the analyst may see it planned: without the ``scanned`` marks,
        which come from the rows (``backends/scanned.py``). EXPLAIN plans against it, so the
        SQL it shows is the same whatever the data; the SQL that runs differs from it only in
        clamps that the data proved to change nothing (the same numbers)."""
        marked = {id(t) for t in self.tables if any(c.scanned for c in t.columns)}
        if not marked:
            return self
        tables = tuple(
            replace(
                t,
                columns=tuple(replace(c, scanned=False, least_nonzero=0.0) for c in t.columns),
            )
            if id(t) in marked
            else t
            for t in self.tables
        )
        return replace(self, tables=tables)

    def table(self, name: str) -> Table | None:
        low = name.lower()
        for t in self.tables:
            if t.name.lower() == low:
                return t
        return None
