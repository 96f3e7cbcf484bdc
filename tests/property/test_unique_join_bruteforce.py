"""A join of private tables whose privacy-unit columns are all PRIMARY KEYs, joined on the unit,
is planned *without* contribution bounding (issue 21), and its analytic sensitivities still
dominate brute-force neighbour distances.

The skip (``unit_unique`` in ``dpproxy/sql/joinrel.py``) rests on the database's
constraints, read when the backend attaches the catalog (``Table.unit_is_unique``): each table
has at most one row per unit, a joined row combines one row of each table with the same unit,
so the joined relation has at most one row per unit and adding or removing a unit (with its
rows in every table) changes at most one joined row. The schema declares no
``max_rows_per_unit`` here: without the constraints, each query would choose its bound with DP.

The method is that of ``test_join_bruteforce.py`` (reading/004): the plan is prepared once by
:meth:`dpproxy.engine.Engine.prepare` with a fixed secret, its rewritten SQL runs without noise
on a real DuckDB database of D and of every neighbour D' (D − u for each person u; D + u' for
drawn new people and fixed ones with values beyond the column bounds), each created with the
same PRIMARY KEY DDL, so every dataset satisfies the constraint the plan relies on. For every
released primitive the L1, L2 and L∞ distance between D and D' must not exceed the plan's
sensitivity. The ratio observed reaches exactly 1 (a fixed added person at the bounds'
far side), and never exceeds it.

Teeth: the same query planned with ``account``'s uniqueness claimed falsely (a catalog that says
``unit_is_unique`` for a table without the key, holding three rows for one person) moves its
COUNT by 3 against a sensitivity of 1, and the comparison catches it; with the honest catalog
the plan bounds the join and stays within its sensitivity on those same databases.
"""

from __future__ import annotations

import math
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
from dpproxy.explain import explain_data
from dpproxy.planning.plan import QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.rewrite.pipeline import rewrite
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from tests.oracle import Vector, distance, exact_row, released, within

SECRET = 0x5EC_2E7
SCHEMA = """\
version: 1
dataset: unique_join
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  person:
    private: true
    privacy_unit: pid
    columns:
      pid: {type: integer}
      age: {type: integer, lower: 0, upper: 100}
      sex: {type: text, domain: [F, M]}
  account:
    private: true
    privacy_unit: pid
    columns:
      pid: {type: integer}
      balance: {type: float, nullable: true, lower: -10, upper: 100}
  card:
    private: true
    privacy_unit: pid
    columns:
      pid: {type: integer}
      credit: {type: integer, lower: 0, upper: 5}
"""
DDL_UNIQUE = (
    "CREATE TABLE person(pid INTEGER PRIMARY KEY, age INTEGER, sex TEXT)",
    "CREATE TABLE account(pid INTEGER PRIMARY KEY, balance DOUBLE)",
    "CREATE TABLE card(pid INTEGER UNIQUE NOT NULL, credit INTEGER)",
)
DDL_PLAIN = (  # account without its key: several rows per person are possible
    "CREATE TABLE person(pid INTEGER PRIMARY KEY, age INTEGER, sex TEXT)",
    "CREATE TABLE account(pid INTEGER, balance DOUBLE)",
    "CREATE TABLE card(pid INTEGER UNIQUE NOT NULL, credit INTEGER)",
)

QUERIES = {
    "count_sum": "SELECT COUNT(*), SUM(balance) FROM person JOIN account "
    "ON person.pid = account.pid",
    "grouped_avg_where": "SELECT sex, COUNT(*), AVG(balance) FROM person p, account a "
    "WHERE p.pid = a.pid AND p.age > 30 GROUP BY sex",
    "private_keys": "SELECT age, COUNT(*) FROM person JOIN account USING (pid) GROUP BY age",
    "three_tables": "SELECT sex, SUM(credit), SUM(age) FROM person p JOIN account a "
    "ON p.pid = a.pid JOIN card c ON c.pid = a.pid GROUP BY sex",
}


@dataclass(frozen=True)
class Person:
    pid: int
    age: int | None
    sex: str
    balances: tuple[float | None, ...]  # account rows (at most one under the key)
    credit: int | None  # a card row, or None for no card


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
        con.execute("INSERT INTO person VALUES (?, ?, ?)", [p.pid, p.age, p.sex])
        for b in p.balances:
            con.execute("INSERT INTO account VALUES (?, ?)", [p.pid, b])
        if p.credit is not None:
            con.execute("INSERT INTO card VALUES (?, ?)", [p.pid, p.credit])


def vector(plan: QueryPlan, sql: str, d: Db, ddl: Sequence[str]) -> Vector:
    with duckdb.connect(":memory:") as con:
        con.execute("SET threads = 1")
        write(con, d, ddl)  # a second account row of one person fails here under the key
        cur = con.execute(sql)
        rows = cur.fetchall()
        cols = [c[0] for c in cur.description or ()]
    nk = len(plan.query.keys)
    out: Vector = {}
    for row in rows:
        out[tuple(row[:nk])] = exact_row(plan, cols[nk:], row[nk:])
    return out


def moves(plan: QueryPlan, a: Vector, b: Vector) -> list[tuple[str, Fraction, Fraction]]:
    """(primitive, brute-force L1 move, analytic L1) for every primitive outside its bound."""
    out = []
    for r in released(plan):
        d = distance(plan, r.primitive.name, a, b)
        if not within(r, d):
            out.append((r.primitive.name, d.l1, r.sensitivity.l1))
    return out


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path: Path = tmp_path_factory.mktemp("unique_join") / "empty.duckdb"
    with duckdb.connect(str(path)) as con:
        write(con, Db(()), DDL_UNIQUE)
    e = Engine(parse_catalog(SCHEMA), DuckDBBackend(path))
    yield e
    e.close()


WILD = (-1e308, 1e308, math.inf, -math.inf, math.nan, 1e6)
balances = st.one_of(st.none(), st.floats(-10, 100))


@st.composite
def databases(draw: st.DrawFn) -> Db:
    n = draw(st.integers(2, 7))
    pids = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n, unique=True))
    return Db(
        tuple(
            Person(
                pid,
                draw(st.one_of(st.none(), st.integers(0, 100))),
                draw(st.sampled_from(("F", "M"))),
                tuple(draw(st.lists(balances, max_size=1))),
                draw(st.one_of(st.none(), st.integers(0, 5))),
            )
            for pid in pids
        )
    )


NEW = 9_000
FIXED_ADDED = (
    Person(NEW, 100, "M", (1e308,), 5),  # at or beyond every bound
    Person(NEW, 100, "F", (-math.inf,), 5),
    Person(NEW, 31, "M", (math.nan,), None),
)
added = st.builds(
    Person,
    st.just(NEW),
    st.one_of(st.none(), st.integers(-5, 200)),
    st.sampled_from(("F", "M")),
    st.lists(st.one_of(balances, st.sampled_from(WILD)), max_size=1).map(tuple),
    st.one_of(st.none(), st.integers(-3, 9)),
)
MAX_RATIO: dict[str, Fraction] = {}


def test_unique_join_is_planned_without_bounding(engine: Engine) -> None:
    for sql in QUERIES.values():
        prepared = engine.prepare(sql, secret=SECRET)
        assert prepared.plan.query.table.unit_is_unique
        assert not prepared.plan.needs_bounding
        assert prepared.plan.truncation is None  # no DP choice of τ, no ε spent on one
        assert prepared.plan.stability.rows == 1
        assert prepared.sql is not None
        for marker in ("__bounded", "ROW_NUMBER", "HASH("):
            assert marker not in prepared.sql, (marker, prepared.sql)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(d=databases(), extra=st.lists(added, max_size=2))
def test_unique_join_neighbours_within_sensitivity(
    engine: Engine, d: Db, extra: list[Person]
) -> None:
    for name, sql in QUERIES.items():
        prepared = engine.prepare(sql, secret=SECRET)
        plan = prepared.plan
        assert prepared.sql is not None
        base = vector(plan, prepared.sql, d, DDL_UNIQUE)
        neighbours = [d.without(p.pid) for p in d.people]
        neighbours += [d.plus(p) for p in (*FIXED_ADDED, *extra)]
        for other in neighbours:
            b = vector(plan, prepared.sql, other, DDL_UNIQUE)
            assert moves(plan, base, b) == [], (name, other)
            for r in released(plan):
                dist = distance(plan, r.primitive.name, base, b)
                if r.sensitivity.l1:
                    ratio = dist.l1 / r.sensitivity.l1
                    assert ratio <= 1
                    MAX_RATIO[name] = max(MAX_RATIO.get(name, Fraction(0)), ratio)


def test_ratio_reaches_one(engine: Engine) -> None:
    """Tight: the fixed heavy person moves COUNT(*) of the join by exactly its sensitivity 1."""
    prepared = engine.prepare(QUERIES["count_sum"], secret=SECRET)
    assert prepared.sql is not None
    d = Db((Person(1, 40, "F", (5.0,), 1), Person(2, 50, "M", (), None)))
    a = vector(prepared.plan, prepared.sql, d, DDL_UNIQUE)
    b = vector(prepared.plan, prepared.sql, d.plus(FIXED_ADDED[0]), DDL_UNIQUE)
    count = next(r for r in released(prepared.plan) if r.primitive.measure is None)
    assert distance(prepared.plan, count.primitive.name, a, b).l1 == count.sensitivity.l1 == 1


def test_the_key_is_what_the_database_enforces(engine: Engine) -> None:
    """A dataset that breaks the declaration cannot exist: the PRIMARY KEY refuses the row."""
    d = Db((Person(1, 40, "F", (5.0, 6.0), None),))
    with pytest.raises(duckdb.ConstraintException):
        vector(engine.prepare(QUERIES["count_sum"], secret=SECRET).plan, "SELECT 1", d, DDL_UNIQUE)


def _plan(catalog: Catalog, sql: str) -> tuple[QueryPlan, str]:
    plan = plan_query(validate(parse(sql), catalog, sql), catalog.policy)
    return plan, rewrite(plan, SECRET, "duckdb")


def test_oracle_catches_a_false_uniqueness_claim(tmp_path: Path) -> None:
    """Teeth: ``account`` without its key, one person with three accounts. A catalog that
    claims the key anyway yields a plan without bounding, calibrated at one row per person,
    and the brute-force comparison catches the move of 3; the honest catalog's plan bounds
    the join (τ from the DP choice's largest candidate until drawn) and is dominated."""
    path = tmp_path / "plain.duckdb"
    with duckdb.connect(str(path)) as con:
        write(con, Db(()), DDL_PLAIN)
    honest_engine = Engine(parse_catalog(SCHEMA), DuckDBBackend(path))
    try:
        honest = honest_engine.catalog
    finally:
        honest_engine.close()
    assert not honest.table("account").unit_is_unique  # type: ignore[union-attr]
    lying = replace(honest, tables=tuple(replace(t, unit_is_unique=True) for t in honest.tables))
    sql = QUERIES["count_sum"]
    d = Db((Person(1, 40, "F", (5.0,), 1), Person(2, 50, "M", (7.0,), None)))
    heavy = Person(NEW, 60, "M", (50.0, 60.0, 70.0), None)
    false_plan, false_sql = _plan(lying, sql)
    assert not false_plan.needs_bounding
    a = vector(false_plan, false_sql, d, DDL_PLAIN)
    b = vector(false_plan, false_sql, d.plus(heavy), DDL_PLAIN)
    caught = moves(false_plan, a, b)
    assert caught and any(l1 == 3 and s == 1 for _, l1, s in caught), caught

    true_plan, true_sql = _plan(honest, sql)
    assert true_plan.needs_bounding
    a = vector(true_plan, true_sql, d, DDL_PLAIN)
    b = vector(true_plan, true_sql, d.plus(heavy), DDL_PLAIN)
    assert moves(true_plan, a, b) == []


def test_no_skip_when_one_table_lacks_the_key(tmp_path: Path) -> None:
    path = tmp_path / "plain.duckdb"
    with duckdb.connect(str(path)) as con:
        write(con, Db(()), DDL_PLAIN)
    e = Engine(parse_catalog(SCHEMA), DuckDBBackend(path))
    try:
        for sql in QUERIES.values():
            plan = e.prepare(sql, secret=SECRET).plan
            assert plan.needs_bounding and not plan.query.table.unit_is_unique
        # Two keyed tables alone still skip it.
        plan = e.prepare(
            "SELECT COUNT(*) FROM person p JOIN card c ON p.pid = c.pid", secret=SECRET
        ).plan
        assert not plan.needs_bounding
    finally:
        e.close()


def test_a_declared_bound_of_one_is_still_enforced(tmp_path: Path) -> None:
    """Only the database's constraint counts: ``max_rows_per_unit: 1`` in the privacy schema,
    over tables without the key, still gets the bounding (nothing stops a second row)."""
    path = tmp_path / "plain.duckdb"
    with duckdb.connect(str(path)) as con:
        write(con, Db(()), DDL_PLAIN)
    declared = SCHEMA.replace(
        "    privacy_unit: pid\n", "    privacy_unit: pid\n    max_rows_per_unit: 1\n"
    )
    assert declared.count("max_rows_per_unit: 1") == 3
    e = Engine(parse_catalog(declared), DuckDBBackend(path))
    try:
        plan = e.prepare(QUERIES["count_sum"], secret=SECRET).plan
        assert plan.needs_bounding and plan.truncation is not None
        assert plan.truncation.source == "schema" and plan.truncation.rows == 1
    finally:
        e.close()


def test_explain_says_where_the_bound_comes_from(engine: Engine) -> None:
    sql = QUERIES["count_sum"]
    data = explain_data(engine.prepare(sql, secret=SECRET).plan, sql)
    bound = data["contribution_bound"]
    assert not bound["enforced_in_sql"]
    assert bound["how"] == (
        "every joined table's unit column is a PRIMARY KEY or UNIQUE NOT NULL in the database"
    )
