"""The privacy schema as frozen data: datasets, tables, columns, privacy units and bounds."""

from __future__ import annotations

from dataclasses import dataclass
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

    def rows_total(self) -> int | None:
        """A bound on one unit's rows when there is no GROUP BY (one group)."""
        candidates = [v for v in (self.max_rows, self.max_rows_per_group) if v is not None]
        return min(candidates) if candidates else None


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    private: bool
    columns: tuple[Column, ...]
    privacy_unit: str | None = None
    bound: ContributionBound = ContributionBound()
    unit_is_unique: bool = False  # set by a backend that proves it with a constraint
    public_rows: int | None = None  # an approximate size the data steward declares public

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None


@dataclass(frozen=True, slots=True)
class PrivacyPolicy:
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    epsilon: Fraction = Fraction(1)
    delta: Fraction = Fraction(0)
    mechanism: MechanismKind = MechanismKind.LAPLACE
    budget: Cost = Cost(Fraction(10), Fraction(1, 10**5))  # noqa: RUF009 (frozen, immutable)
    selection_share: Fraction = Fraction(1, 2)  # ε share spent on partition selection


@dataclass(frozen=True, slots=True)
class Catalog:
    dataset: str
    tables: tuple[Table, ...]
    policy: PrivacyPolicy
    source: str = "<memory>"

    def table(self, name: str) -> Table | None:
        low = name.lower()
        for t in self.tables:
            if t.name.lower() == low:
                return t
        return None
