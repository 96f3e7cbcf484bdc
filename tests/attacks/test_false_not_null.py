"""Named attack: a column the schema calls ``nullable: false`` holds NULLs.

``planning/derived.derivable_counts`` reads ``COUNT(*)`` off a JOINT mean's released parts
when the schema says the mean's column holds no NULL, and trusts the schema for it: on a
database that does not declare the column NOT NULL (a CSV file never does), a unit whose rows
hold NULL there can exist. The released ``COUNT(*)`` is then ``COUNT(x)``, the rows with a
value (an answer wrong by the NULL rows, which ``schema check --database`` warns of), but
never a leak: it is A + B of the joint release, whose pair (A, B) moves by at most Δ_J in L1
between neighbours whatever the rows hold (each of a unit's at most K rows adds
(x − lo)/w + (hi − x)/w = 1 to A + B if x is not NULL, nothing if it is), so A + B moves by at
most Δ_J, the sensitivity the plan charges; and the SQL, the plan and the outcome are the
same on both neighbours. Checked here with the noise off on DuckDB and PostgreSQL: adding or
removing a unit whose rows are NULL, or hold the bounds, moves the released count by at most
Δ_J, and every neighbour is answered.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import duckdb
import psycopg
import pytest

from dpproxy.engine import open_engine
from dpproxy.planning.plan import Method, QueryPlan
from tests.noise import NoNoise

K = 2  # max_rows_per_unit
SCHEMA = f"""\
version: 1
dataset: nn
privacy:
  neighbouring: RELATION
  epsilon: 1.0
  delta: 1.0e-6
  budget: {{epsilon: 1000000000, delta: 0.5}}
tables:
  t:
    private: true
    privacy_unit: uid
    max_rows_per_unit: {K}
    columns:
      uid: {{type: integer}}
      g: {{type: text, domain: [a, b]}}
      x: {{type: float, lower: 0, upper: 10}}
"""
QUERIES = (
    "SELECT COUNT(*), AVG(x) FROM t",
    "SELECT g, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY g",
)
Row = tuple[int, str, float | None]
BASE: list[Row] = [(u, "ab"[u % 2], float(u % 11)) for u in range(1, 101)] + [
    (u, "ab"[u % 2], None)
    for u in range(101, 111)  # ten units whose x is NULL
]


def _but(unit: int) -> list[Row]:
    return [r for r in BASE if r[0] != unit]


# relation → (the queries whose COUNT(*) the plan reads off the mean, the neighbours of BASE,
# Δ_J): under add/remove a unit added with K rows of NULL x, or of the bounds (or more rows
# than K), in group a, or a unit with NULL x removed; under substitution (where the planner
# reads only a grouped count off the mean) a unit's rows replaced by K rows of NULL x or of a
# bound (or more), in either group.
CASES: dict[str, tuple[tuple[str, ...], tuple[list[Row], ...], int]] = {
    "add_remove": (
        QUERIES,
        (
            [*BASE, *[(999, "a", None)] * K],
            [*BASE, *[(999, "a", 0.0)] * K],
            [*BASE, *[(999, "a", 10.0)] * K],
            [*BASE, *[(999, "a", 10.0)] * (K + 3)],  # beyond its bound: K rows kept
            _but(101),
        ),
        K,
    ),
    "substitute": (
        QUERIES[1:],
        (
            [*_but(101), *[(101, "a", 10.0)] * K],  # 101: group b, NULL x
            [*_but(101), *[(101, "a", None)] * K],
            [*_but(1), *[(1, "a", None)] * K],  # 1: group b, x = 1
            [*_but(2), *[(2, "b", None)] * K],  # 2: group a, x = 2
            [*_but(2), *[(2, "b", 10.0)] * (K + 3)],
        ),
        2 * K,
    ),
}


Run = Callable[[str], tuple[QueryPlan, list[tuple[object, ...]]]]


def counts(run: Run, sql: str) -> tuple[Fraction, dict[tuple[object, ...], float]]:
    """The joint release's Δ_J and the released counts by group, checking the count is the
    one read off the mean."""
    plan, rows = run(sql)
    count, mean = plan.aggregates
    assert mean.method is Method.JOINT and mean.stat is not None
    assert count.derived is mean.stat, "the COUNT(*) is not read off the mean"
    delta_j = mean.stat.scale * mean.stat.epsilon
    return delta_j, {r[:-2]: float(r[-2]) for r in rows}  # type: ignore[arg-type]  # a count


def check_neighbours(make: Callable[[list[Row]], Run], relation: str) -> None:
    queries, neighbours, sensitivity = CASES[relation]
    for sql in queries:
        delta_j, base = counts(make(BASE), sql)
        assert delta_j == sensitivity
        for rows in neighbours:
            same, other = counts(make(rows), sql)
            assert same == delta_j and other.keys() == base.keys()  # the same groups
            moved = sum(abs(base[k] - other[k]) for k in base)
            assert moved <= delta_j, (sql, rows[-1], base, other)


def _answer(database: str, schema: Path) -> Run:
    def run(sql: str) -> tuple[QueryPlan, list[tuple[object, ...]]]:
        engine = open_engine(database, str(schema), noise=NoNoise())
        try:
            answer = engine.run(sql, analyst="mallory")
        finally:
            engine.close()
        assert isinstance(answer.plan, QueryPlan)
        return answer.plan, list(answer.released.rows)

    return run


@pytest.mark.parametrize("relation", list(CASES))
def test_duckdb_a_false_no_null_claim_moves_the_count_within_its_sensitivity(
    tmp_path: Path, relation: str
) -> None:
    schema = tmp_path / "nn.yaml"
    schema.write_text(SCHEMA.replace("RELATION", relation))

    def make(rows: list[Row]) -> Run:
        path = tmp_path / f"nn{len(list(tmp_path.glob('*.duckdb')))}.duckdb"
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE t (uid INTEGER NOT NULL, g VARCHAR NOT NULL, x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
        con.close()
        return _answer(str(path), schema)

    check_neighbours(make, relation)
    # what the count is when the claim is false: COUNT(x), the rows with a value (50 of the
    # 55 rows of each group)
    _, released = counts(make(BASE), QUERIES[1])
    assert released == {("a",): 50.0, ("b",): 50.0}


@pytest.mark.parametrize("relation", list(CASES))
def test_postgres_a_false_no_null_claim_moves_the_count_within_its_sensitivity(
    pg_dsn: str, tmp_path: Path, relation: str
) -> None:
    schema = tmp_path / "nn.yaml"
    schema.write_text(SCHEMA.replace("RELATION", relation))
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)  # dpproxy takes postgresql:// URLs
    user, host = info.get("user", "postgres"), info.get("host", "127.0.0.1")
    url = f"postgresql://{user}@{host}:{info.get('port') or 5432}/{info['dbname']}"

    def make(rows: list[Row]) -> Run:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS t")
            conn.execute("CREATE TABLE t (uid integer NOT NULL, g text NOT NULL, x float8)")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", rows)
        return _answer(url, schema)

    check_neighbours(make, relation)  # each answer read before ``make`` reloads the table
    _, released = counts(make(BASE), QUERIES[1])
    assert released == {("a",): 50.0, ("b",): 50.0}
