"""Whole-number sums over columns a CHECK constraint keeps within their schema bounds are
rewritten *without* the clamp (``Column.in_bounds``, ``backends/checks.py``), and their
analytic sensitivities still dominate brute-force neighbour distances.

The skip rests on the database: DuckDB refuses every row whose value lies outside the
constraint, so on every database that can exist the clamp is the identity and the SQL
without it computes what the clamped SQL computes. The method is that of
``test_unique_join_bruteforce.py``: the plan is prepared once with a fixed secret, its SQL
runs without noise on a real DuckDB database of D and of every neighbour (D − u for each
person u; D + u' for drawn new people and fixed ones on the bounds), each created with the
same CHECK DDL. For every released primitive the L1 distance must not exceed the plan's
sensitivity; the ratio reaches exactly 1 (a person added at the far bound).

Teeth: a catalog that claims ``in_bounds`` for a table *without* the constraint yields SQL
without the clamp, and a person with a value beyond the bounds moves SUM past its
sensitivity; the brute-force comparison catches it, and the honest catalog's clamped SQL
stays within it on the same databases.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.engine import Engine
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from tests.oracle import Vector, distance, exact_row, released, within

SECRET = 0x21C_B
SCHEMA = """\
version: 1
dataset: check_bounds
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  person:
    private: true
    privacy_unit: pid
    columns:
      pid: {type: integer}
      age: {type: integer, nullable: true, lower: 0, upper: 100}
      income: {type: integer, nullable: true, lower: -50, upper: 1000}
      sex: {type: text, domain: [F, M]}
"""
DDL_CHECKED = (
    "CREATE TABLE person(pid INTEGER PRIMARY KEY, "
    "age INTEGER CHECK (age BETWEEN 0 AND 100), "
    "income BIGINT CHECK (income >= -50 AND income <= 1000), sex TEXT)",
)
DDL_PLAIN = ("CREATE TABLE person(pid INTEGER PRIMARY KEY, age INTEGER, income BIGINT, sex TEXT)",)
QUERIES = {
    "sum": "SELECT SUM(age), SUM(income) FROM person",
    "avg": "SELECT AVG(age), COUNT(age) FROM person",
    "grouped_avg_where": "SELECT sex, AVG(income), SUM(age) FROM person "
    "WHERE age > 30 GROUP BY sex",
    "var": "SELECT VAR_SAMP(income), STDDEV_POP(age) FROM person",
}


@dataclass(frozen=True)
class Person:
    pid: int
    age: int | None
    income: int | None
    sex: str


@dataclass(frozen=True)
class Db:
    people: tuple[Person, ...]

    def without(self, pid: int) -> Db:
        return Db(tuple(p for p in self.people if p.pid != pid))

    def plus(self, p: Person) -> Db:
        return Db((*self.people, p))


def write(con: duckdb.DuckDBPyConnection, d: Db, ddl: Sequence[str]) -> None:
    for stmt in ddl:
        con.execute(stmt)
    for p in d.people:
        con.execute("INSERT INTO person VALUES (?, ?, ?, ?)", [p.pid, p.age, p.income, p.sex])


def vector(plan: QueryPlan, sql: str, d: Db, ddl: Sequence[str]) -> Vector:
    with duckdb.connect(":memory:") as con:
        con.execute("SET threads = 1")
        write(con, d, ddl)
        cur = con.execute(sql)
        rows = cur.fetchall()
        cols = [c[0] for c in cur.description or ()]
    nk = len(plan.query.keys)
    return {tuple(row[:nk]): exact_row(plan, cols[nk:], row[nk:]) for row in rows}


def moves(plan: QueryPlan, a: Vector, b: Vector) -> list[tuple[str, Fraction, Fraction]]:
    out = []
    for r in released(plan):
        d = distance(plan, r.primitive.name, a, b)
        if not within(r, d):
            out.append((r.primitive.name, d.l1, r.sensitivity.l1))
    return out


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path: Path = tmp_path_factory.mktemp("check_bounds") / "empty.duckdb"
    with duckdb.connect(str(path)) as con:
        write(con, Db(()), DDL_CHECKED)
    # canonical: the SQL runs on many datasets, so it must not rest on what the planning
    # file's (empty) rows prove (backends/scanned.py); the CHECK constraints still count
    e = Engine(parse_catalog(SCHEMA), DuckDBBackend(path)).canonical()
    yield e
    e.close()


ages = st.one_of(st.none(), st.integers(0, 100))
incomes = st.one_of(st.none(), st.integers(-50, 1000))


@st.composite
def databases(draw: st.DrawFn) -> Db:
    n = draw(st.integers(2, 7))
    pids = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n, unique=True))
    return Db(
        tuple(
            Person(pid, draw(ages), draw(incomes), draw(st.sampled_from(("F", "M"))))
            for pid in pids
        )
    )


NEW = 9_000
FIXED_ADDED = (
    Person(NEW, 100, 1000, "M"),  # on the far bounds
    Person(NEW, 0, -50, "F"),
    Person(NEW, None, None, "M"),
)
added = st.builds(Person, st.just(NEW), ages, incomes, st.sampled_from(("F", "M")))


def test_checked_columns_are_rewritten_without_their_clamp(engine: Engine) -> None:
    for sql in QUERIES.values():
        prepared = engine.prepare(sql, secret=SECRET)
        assert prepared.sql is not None and not prepared.plan.needs_bounding
        assert "CASE WHEN age <" not in prepared.sql, prepared.sql
        assert "CASE WHEN income <" not in prepared.sql, prepared.sql


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(d=databases(), extra=st.lists(added, max_size=2))
def test_checked_neighbours_within_sensitivity(engine: Engine, d: Db, extra: list[Person]) -> None:
    for name, sql in QUERIES.items():
        prepared = engine.prepare(sql, secret=SECRET)
        plan = prepared.plan
        assert prepared.sql is not None
        base = vector(plan, prepared.sql, d, DDL_CHECKED)
        neighbours = [d.without(p.pid) for p in d.people]
        neighbours += [d.plus(p) for p in (*FIXED_ADDED, *extra)]
        for other in neighbours:
            b = vector(plan, prepared.sql, other, DDL_CHECKED)
            assert moves(plan, base, b) == [], (name, other)


def test_ratio_reaches_one(engine: Engine) -> None:
    """Tight: a person added with income 1000 moves SUM(income) by exactly its sensitivity."""
    prepared = engine.prepare("SELECT SUM(income) FROM person", secret=SECRET)
    assert prepared.sql is not None
    d = Db((Person(1, 40, 5, "F"), Person(2, 50, None, "M")))
    a = vector(prepared.plan, prepared.sql, d, DDL_CHECKED)
    b = vector(prepared.plan, prepared.sql, d.plus(FIXED_ADDED[0]), DDL_CHECKED)
    (s,) = released(prepared.plan)
    assert distance(prepared.plan, s.primitive.name, a, b).l1 == s.sensitivity.l1 == 1000


def test_the_constraint_is_what_the_database_enforces() -> None:
    """A dataset that breaks the bounds cannot exist: the CHECK refuses the row."""
    for bad in (Person(1, 101, 0, "F"), Person(1, 0, 1001, "F"), Person(1, -1, 0, "M")):
        with pytest.raises(duckdb.ConstraintException):
            vector(plan_of_nothing(), "SELECT 1", Db((bad,)), DDL_CHECKED)


def plan_of_nothing() -> QueryPlan:
    catalog = parse_catalog(SCHEMA)
    return _plan(catalog, "SELECT COUNT(*) FROM person")[0]


def _plan(catalog: Catalog, sql: str) -> tuple[QueryPlan, str]:
    plan = plan_query(validate(parse(sql), catalog, sql), catalog.policy)
    return plan, rewrite(plan, SECRET, "duckdb")


def test_oracle_catches_a_false_bounds_claim(tmp_path: Path) -> None:
    path = tmp_path / "plain.duckdb"
    with duckdb.connect(str(path)) as con:
        write(con, Db(()), DDL_PLAIN)
    honest_engine = Engine(parse_catalog(SCHEMA), DuckDBBackend(path))
    try:
        honest = honest_engine.canonical().catalog  # not what the (empty) rows prove
    finally:
        honest_engine.close()
    person = honest.table("person")
    assert person is not None and not any(c.in_bounds for c in person.columns)
    lying = replace(
        honest,
        tables=(
            replace(person, columns=tuple(replace(c, in_bounds=True) for c in person.columns)),
        ),
    )
    sql = "SELECT SUM(income) FROM person"
    d = Db((Person(1, 40, 5, "F"), Person(2, 50, 7, "M")))
    heavy = Person(NEW, 60, 10**6, "M")
    false_plan, false_sql = _plan(lying, sql)
    assert "CASE WHEN" not in false_sql
    a = vector(false_plan, false_sql, d, DDL_PLAIN)
    b = vector(false_plan, false_sql, d.plus(heavy), DDL_PLAIN)
    caught = moves(false_plan, a, b)
    assert caught and caught[0][1] == 10**6 and caught[0][2] == 1000, caught

    true_plan, true_sql = _plan(honest, sql)
    assert "CASE WHEN income < -50" in true_sql
    a = vector(true_plan, true_sql, d, DDL_PLAIN)
    b = vector(true_plan, true_sql, d.plus(heavy), DDL_PLAIN)
    assert moves(true_plan, a, b) == []
