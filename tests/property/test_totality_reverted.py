"""The totality oracle catches each family of data-dependent errors when its guard is reverted.

The property test (``test_totality.py``) and the fixed known-bad queries
(``test_totality_families.py``) pass on today's code. This file shows that they would not, had a
guard of the typed, total expression layer been left out: each test reverts one guard in the
running process (``monkeypatch``; nothing else is faked: a real DuckDB file and a real
PostgreSQL), builds fresh engines, and asserts that :func:`tests.totality.check_query` reports a
violation for the family's known-bad queries — exactly what the property test checks.

* *Integer overflow in literal arithmetic*: ``rewrite.guard.is_double`` answering "already a
  DOUBLE" for everything means no operand is promoted, as before the layer.
* *Type errors on a matching row*: ``sql.coercion.coerce_literal`` doing nothing (where it lives
  and where ``sql.types`` calls it) leaves string literals to the engines, as before.
* *Date functions and date arithmetic*: ``rewrite.guard.portable_trunc`` / ``portable_shift``
  printing ``DATE_TRUNC(unit, d)`` and ``d ± n`` / ``d ± INTERVAL`` as written, as sqlglot
  would.
* *Selection δ*: the old continuous-tail threshold is pinned as a violation in
  ``tests/unit/test_selection_threshold.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dpproxy.engine import Engine
from tests.property.test_totality_families import DATES, FAMILY_ROWS, OVERFLOW, TYPE_MIX
from tests.totality import DuckDBWorld, PostgresWorld, check_query


def _revert_promotion(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpproxy.rewrite import guard, rows

    monkeypatch.setattr(guard, "is_double", lambda n, table: True)
    monkeypatch.setattr(rows, "is_double", lambda n, table: True)


def _revert_literal_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpproxy.sql import coercion, types

    monkeypatch.setattr(coercion, "coerce_literal", lambda node, target: None)
    monkeypatch.setattr(types, "coerce_literal", lambda node, target: None)


def _revert_date_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlglot import exp

    from dpproxy.rewrite import guard

    def naive_shift(node: exp.DateAdd) -> exp.Expression:
        amount = exp.Literal.number(int(node.expression.sql()))
        if node.args["unit"].name == "DAY":
            return exp.Add(this=node.this, expression=amount)
        interval = exp.Interval(this=exp.Literal.string(amount.sql()), unit=exp.Var(this="MONTH"))
        return exp.Add(this=node.this, expression=interval)

    monkeypatch.setattr(
        guard, "portable_trunc", lambda d, unit: exp.TimestampTrunc(this=d, unit=exp.Var(this=unit))
    )
    monkeypatch.setattr(guard, "portable_shift", naive_shift)


def _caught(engine: Engine, queries: tuple[str, ...]) -> list[str]:
    return [q for q in queries if check_query(engine, q).violations]


@pytest.mark.parametrize("engine_name", ["duckdb", "postgres"])
@pytest.mark.parametrize(
    ("queries", "revert"),
    [
        (OVERFLOW, _revert_promotion),
        (TYPE_MIX, _revert_literal_reading),
        (DATES, _revert_date_forms),
    ],
    ids=[
        "overflow-without-promotion",
        "type-mix-without-literal-reading",
        "dates-printed-as-written",
    ],
)
def test_a_reverted_guard_is_caught(
    engine_name: str,
    queries: tuple[str, ...],
    revert: Callable[[pytest.MonkeyPatch], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    engine = _engine(engine_name, tmp_path, request)
    assert not _caught(engine, queries), "the guarded code must pass"
    revert(monkeypatch)
    reverted = _engine(engine_name, tmp_path / "reverted", request)
    caught = _caught(reverted, queries)
    assert len(caught) >= 3, f"only {caught} caught on {engine_name}"


def _engine(name: str, tmp: Path, request: pytest.FixtureRequest) -> Engine:
    """A fresh engine over the families' database (plans are cached per engine)."""
    tmp.mkdir(parents=True, exist_ok=True)
    world: DuckDBWorld | PostgresWorld
    if name == "duckdb":
        world = DuckDBWorld(tmp)
    else:
        world = PostgresWorld(request.getfixturevalue("pg_dsn"))
    request.addfinalizer(world.close)
    return world.engines("rows", False, FAMILY_ROWS, FAMILY_ROWS)[0]
