"""What the backend returns: exact rows, kept out of every repr, and group-key normalisation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ExactResult:
    """Rows of the rewritten query. Its repr never shows the values."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] = field(repr=False)

    def __repr__(self) -> str:
        return f"ExactResult(columns={self.columns!r}, rows=<{len(self.rows)} redacted>)"


def norm(v: Any) -> Any:
    """Make DB values and YAML domain values compare equal (1 == 1.0 == Decimal('1'))."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def norm_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(norm(v) for v in key)
