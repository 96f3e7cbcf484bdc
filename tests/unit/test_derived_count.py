"""A COUNT read off a JOINT mean's release (``dpproxy/planning/derived.py``).

The planner gives the COUNT no budget when the mean's two released parts already determine it
and the predicted error says so (add/remove); it keeps a separate release at the best split
where the derived count would be worse (an ungrouped count under substitution). The cost is the
same ε either way, the plan checker accepts both, the released count equals the exact one with
the noise off, and its 95% interval uses the law of Z_A + Z_B.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Neighbouring
from dpproxy.engine import open_engine
from dpproxy.mechanisms.base import laplace_sum_half_width
from dpproxy.planning import derived
from dpproxy.planning.check import check_plan
from dpproxy.planning.plan import Method, QueryPlan
from dpproxy.planning.planner import plan_query
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate
from dpproxy.values import Cost
from tests.noise import NoNoise

SCHEMA = """
version: 1
dataset: people
privacy:
  neighbouring: {relation}
  epsilon: 1
  delta: 1.0e-6
  mechanism: laplace
tables:
  people:
    private: true
    privacy_unit: pid
    max_rows_per_unit: 1
    columns:
      pid: {{type: integer}}
      sex: {{type: text, domain: ["F", "M"]}}
      age: {{type: integer, lower: 0, upper: 100}}
      income: {{type: integer, lower: 0, upper: 100000, nullable: true}}
"""


def plan_of(sql: str, rel: Neighbouring = Neighbouring.ADD_REMOVE) -> QueryPlan:
    catalog = parse_catalog(SCHEMA.format(relation=rel.value))
    query = validate(parse(sql), catalog, sql)
    plan = plan_query(query, catalog.policy, epsilon=Fraction(1), delta=Fraction(1, 10**6))
    check_plan(plan)
    return plan


def test_a_grouped_count_next_to_a_joint_mean_is_read_off_it() -> None:
    plan = plan_of("SELECT sex, COUNT(*), AVG(age) FROM people GROUP BY sex")
    count, mean = plan.aggregates
    assert mean.method is Method.JOINT and mean.stat is not None
    assert count.derived is mean.stat and count.parts == ()
    assert mean.stat.epsilon == 1  # the whole ε goes to the joint release (not 2/3)
    assert plan.releases == ()  # no separate count
    assert plan.cost == Cost(Fraction(1))


def test_count_of_the_measure_is_read_off_too_but_not_count_star_of_a_nullable_one() -> None:
    plan = plan_of("SELECT COUNT(income), AVG(income) FROM people")
    assert plan.aggregates[0].derived is not None
    plan = plan_of("SELECT COUNT(*), AVG(income) FROM people")  # income may be NULL
    assert plan.aggregates[0].derived is None
    assert plan.aggregates[0].parts and plan.releases


def test_under_substitution_the_separate_count_at_the_best_split_wins() -> None:
    """Ungrouped: Δ_J = 2K, Δ_C = K, so derived scores 1 + 2·4 = 9 against 8 at f = ½."""
    plan = plan_of("SELECT COUNT(*), AVG(age) FROM people", Neighbouring.SUBSTITUTE)
    count, mean = plan.aggregates
    assert count.derived is None and mean.stat is not None
    (release,) = plan.releases
    assert release.cost.epsilon == Fraction(1, 2) and mean.stat.epsilon == Fraction(1, 2)
    assert plan.cost == Cost(Fraction(1))


def test_the_scores() -> None:
    score, f = derived.separate_score(1)
    assert f == Fraction(1, 2) and score == pytest.approx(8)
    assert derived.derived_score(1, Fraction(1), Fraction(1)) == 3
    score3, f3 = derived.separate_score(3)  # three counts: ((1 − f)/f)³ = 1/3
    assert ((1 - f3) / f3) ** 3 == pytest.approx(Fraction(1, 3), rel=1e-2)
    assert score3 < 3 / 0.5**2 + 1 / 0.5**2


def test_the_half_width_is_the_law_of_the_sum() -> None:
    for b in (Fraction(1, 3), Fraction(1), Fraction(7, 2)):
        for alpha in (0.05, 0.01):
            w = laplace_sum_half_width(b, alpha)
            u = w / float(b)
            assert math.exp(-u) * (1 + u / 2) <= alpha
            u_less = u * (1 - 1e-9)
            assert math.exp(-u_less) * (1 + u_less / 2) > alpha


@pytest.fixture
def engine_db(tmp_path: Path) -> Path:
    db = tmp_path / "p.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE people (pid INTEGER PRIMARY KEY, sex VARCHAR NOT NULL, "
        "age INTEGER NOT NULL, income INTEGER)"
    )
    con.execute(
        "INSERT INTO people SELECT i, CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END, i % 90, "
        "CASE WHEN i % 7 = 0 THEN NULL ELSE i * 10 END FROM range(1, 601) t(i)"
    )
    con.close()
    (tmp_path / "s.yaml").write_text(SCHEMA.format(relation="add_remove"))
    return db


def test_with_the_noise_off_the_count_is_exact(engine_db: Path) -> None:
    sql = "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM people GROUP BY sex ORDER BY sex"
    engine = open_engine(
        str(engine_db),
        str(engine_db.parent / "s.yaml"),
        noise=NoNoise(),
        budget=Cost(Fraction(100)),
        cache="off",
    )
    ans = engine.run(sql, analyst="a")
    assert ans.plan.aggregates[0].derived is not None
    exact = duckdb.connect(str(engine_db), read_only=True).execute(sql).fetchall()
    assert [r[:2] for r in ans.released.rows] == [r[:2] for r in exact]
    for row, want in zip(ans.released.rows, exact, strict=True):
        assert row[2] == pytest.approx(want[2])
    # the error bound is the law of Z_A + Z_B at b = 1 (ε = 1, one row per unit), drawn at
    # b' ≤ b·(1 + 2^-12) for the SUM guard's rounding of the parts (release/guard.py)
    h = laplace_sum_half_width(Fraction(1), 0.05)
    for e in ans.released.errors:
        assert h < e[1] <= laplace_sum_half_width(1 + Fraction(1, 2**12), 0.05) * (1 + 1e-12)
