"""Named attack: a condition on one person's row decides whether the database raises an error.

An error is not noised. If ``CASE WHEN <one person's row matches> THEN 2147483647 END + 1``
overflows, or ``GREATEST('', capital_gain)`` fails to cast only on the rows a condition keeps,
then "answered" or "error" reveals one exact bit about that person per query, whatever ε says.
dpproxy's defence is totality (SECURITY.md): an accepted query's rewritten SQL cannot fail on a
database that satisfies the schema, and what cannot be made total is refused *before* any data
is read, by a check that depends only on the query and the schema.

Each family below runs the attack with a condition that matches real rows of the demo (person
12345 is a man; 43 people are 90; most work in the private sector) and with one that matches
none, on DuckDB and on PostgreSQL, and asserts that both give the same outcome — both answered,
or both refused by :meth:`Engine.prepare` (before the data) with the same SQLSTATE — and never
a failure of the database.

The last family is the same leak through partition selection: a group of one person must be
released with probability at most δ/G, from the law of the noise actually drawn (discrete
Laplace on the unit counts, compared with the threshold as ``release/noise.py`` compares it),
or its appearance tells the analyst more than the δ charged for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import pytest

from dpproxy.catalog.model import Catalog, Neighbouring
from dpproxy.engine import Engine
from dpproxy.errors import DPProxyError
from dpproxy.mechanisms.base import Laplace
from dpproxy.planning.plan import QueryPlan
from dpproxy.release.noise import ExactResult, apply_noise
from dpproxy.values import Cost, float_up
from tests.demo_engines import demo_engine

BUDGET = Cost(Fraction(10**9), Fraction(1, 2))  # never the reason for a refusal here
Outcome = tuple[str, str | None]  # ("answered", None) | ("refused", SQLSTATE) | ("failed", ...)


@pytest.fixture(
    scope="module", params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def engine(
    request: pytest.FixtureRequest, demo_db: Path, demo_catalog: Catalog
) -> Iterator[Engine]:
    """The demo on DuckDB (the bundled file) or on PostgreSQL (loaded into a fresh database)."""
    with demo_engine(request.param, request, demo_db, demo_catalog, BUDGET) as e:
        yield e


def outcome(engine: Engine, sql: str) -> Outcome:
    """Refused before the data (``prepare`` raised), answered, or failed once it ran."""
    try:
        engine.prepare(sql)
    except DPProxyError as e:
        return ("refused", e.sqlstate)
    try:
        engine.run(sql, analyst="mallory")
    except DPProxyError as e:
        return ("failed", f"{e.sqlstate}: {e.message} [{e.log_detail}]")
    return ("answered", None)


def assert_same_outcome(engine: Engine, template: str, match: str, none: str) -> None:
    matched = outcome(engine, template.format(c=match))
    unmatched = outcome(engine, template.format(c=none))
    assert matched[0] != "failed", f"the database failed on a matching row: {matched[1]}"
    assert unmatched[0] != "failed", f"the database failed with no matching row: {unmatched[1]}"
    assert matched == unmatched, (template, matched, unmatched)


# ------------------------------------------------------- integer overflow in literal arithmetic

OVERFLOW = [
    "SELECT COUNT(*) FROM adult WHERE (CASE WHEN {c} THEN 2147483647 ELSE 0 END) + 1 > 0",
    "SELECT SUM(CASE WHEN {c} THEN 2000000000 ELSE 0 END + CASE WHEN {c} THEN 2000000000 "
    "ELSE 0 END) FROM adult",
    "SELECT COUNT(*) FROM adult WHERE (CASE WHEN {c} THEN 2000000000 ELSE 0 END) * 2 > 0",
    "SELECT SUM((CASE WHEN {c} THEN 2000000000 ELSE 0 END) * 2) FROM adult",
    "SELECT COUNT(*) FROM adult WHERE ABS(CASE WHEN {c} THEN -2147483648 ELSE 0 END) > 0",
    "SELECT COUNT(*) FROM adult WHERE -(CASE WHEN {c} THEN -2147483648 ELSE 0 END) > 0",
    "SELECT COUNT(*) FROM adult WHERE (CASE WHEN {c} THEN 9223372036854775807 ELSE 0 END) + 1 > 0",
]
MATCHES = [("age = 90", "age = 99"), ("workclass = 'Private'", "age = 99")]


@pytest.mark.parametrize("match,none", MATCHES, ids=["age", "workclass"])
@pytest.mark.parametrize("template", OVERFLOW, ids=range(len(OVERFLOW)))
def test_integer_overflow_on_a_matching_row(
    engine: Engine, template: str, match: str, none: str
) -> None:
    assert_same_outcome(engine, template, match, none)


# ---------------------------------------------------------------- type errors on a matching row

TYPE_ERRORS = [
    "SELECT COUNT(*) FROM adult WHERE {c} AND GREATEST('', capital_gain) > 0",
    "SELECT COUNT(*) FROM adult WHERE {c} AND LEAST('', capital_gain) > 0",
    "SELECT COUNT(*) FROM adult WHERE {c} AND COALESCE('', capital_gain) > 0",
    "SELECT COUNT(*) FROM adult WHERE {c} AND NULLIF('', capital_gain) > 0",
    "SELECT COUNT(*) FROM adult WHERE (CASE WHEN {c} THEN '' ELSE capital_gain END) > 0",
    "SELECT COUNT(*) FROM adult WHERE (CASE WHEN {c} THEN 'abc' ELSE age END) > 0",
    "SELECT SUM(CASE WHEN {c} THEN '' ELSE capital_gain END) FROM adult",
]
PERSON = ("person_id = 12345 AND sex = 'Male'", "person_id = 12345 AND sex = 'Female'")


@pytest.mark.parametrize("template", TYPE_ERRORS, ids=range(len(TYPE_ERRORS)))
def test_type_error_on_a_matching_row(engine: Engine, template: str) -> None:
    assert_same_outcome(engine, template, *PERSON)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM adult WHERE workclass IS 'x'",
        "SELECT COUNT(*) FROM adult WHERE person_id = 12345 AND workclass IS 'x'",
    ],
)
def test_is_with_a_string_is_a_syntax_error_before_the_data(engine: Engine, sql: str) -> None:
    """PostgreSQL's grammar has no ``IS <string>``: refused as it would be, before any data."""
    assert outcome(engine, sql) == ("refused", "42601")


# ------------------------------------------------------------------ selection δ under-counted


class Shift:
    """A noise source that adds ``z`` to every integer value (floats unchanged): with it, the
    group of one unit is kept exactly when the drawn Z = z passes the release rule."""

    def __init__(self, z: int) -> None:
        self.z = z

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        return [float(v) + self.z if integer else float(v) for v in values]

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        return self.laplace(values, sigma, integer=integer)

    def noisy_min_index(self, scores: Sequence[float], scale: Fraction) -> int:
        return min(range(len(scores)), key=lambda i: scores[i])


def _kept(plan: QueryPlan, z: int) -> bool:
    """Is a group that holds one unit released when its unit count's noise is ``z``?"""
    columns = ("__key_0", *(p.name for p in plan.primitives))
    row = ("someone", *(1 for _ in plan.primitives))
    return bool(apply_noise(plan, ExactResult(columns, (row,)), Shift(z)))


def _smallest_kept(plan: QueryPlan) -> int:
    """The smallest noise value m that releases a one-unit group, read off the release rule."""
    z = 0
    while not _kept(plan, z):
        z += 1
        assert z < 100_000, "no noise value releases the group"
    assert all(_kept(plan, z + i) for i in range(1, 4))  # monotone: every Z ≥ m releases it
    assert z == 0 or not _kept(plan, z - 1)
    return z


@pytest.mark.parametrize("delta", [Fraction(1, 10**5), Fraction(1, 10**6)], ids=["1e-5", "1e-6"])
@pytest.mark.parametrize("epsilon", [Fraction(1), Fraction(2)], ids=["eps1", "eps2"])
def test_selection_releases_a_one_unit_group_with_probability_at_most_its_delta(
    engine: Engine, epsilon: Fraction, delta: Fraction
) -> None:
    plan = engine.plan(
        "SELECT lower(workclass) AS w, COUNT(*) FROM adult GROUP BY 1",
        epsilon=epsilon,
        delta=delta,
    )
    sel = plan.selection
    assert sel is not None and isinstance(sel.release.mechanism, Laplace)
    m = _smallest_kept(plan)
    # The law OpenDP draws from: discrete Laplace at the planned scale rounded up to a float,
    # P(Z = z) = (1 − p)/(1 + p)·p^|z| with p = e^{−1/s}, so P(Z ≥ m) = p^m/(1 + p) for m ≥ 0.
    s = Fraction(float_up(sel.release.mechanism.scale))
    groups = plan.stability.groups * (2 if plan.neighbouring is Neighbouring.SUBSTITUTE else 1)
    charged = sel.release.cost.delta
    with localcontext() as ctx:
        ctx.prec = 60
        p = (Decimal(-s.denominator) / Decimal(s.numerator)).exp()
        released = p**m / (1 + p)
        bound = groups * released
        allowed = Decimal(charged.numerator) / Decimal(charged.denominator)
        assert bound <= allowed, (
            f"a one-unit group is released with probability {float(released):.4g} "
            f"(Z ≥ {m}, scale {float(s):.6g}), ×{groups} group(s) = {float(bound):.4g} > the "
            f"δ charged to selection {float(charged):.4g} ({float(bound / allowed):.4f}×)"
        )
    assert 0 < charged <= delta
