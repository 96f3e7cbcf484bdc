"""The plans beyond global sensitivity, end to end through the engine on real databases.

With :class:`tests.noise.NoNoise` every mechanism releases its exact input, so the answers must
equal what the database computes directly: the joint, PTR and smooth means equal AVG, the
exponential mechanism picks the cell of the true order statistic, PTR and smooth sensitivity on
order statistics return PERCENTILE_CONT/DISC, sample-and-aggregate returns the mean of the
per-chunk statistics. Real-noise runs check costs, refusals and the planner's choices; the same
plans run on PostgreSQL and agree with DuckDB.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.model import Catalog
from dpproxy.demo import load_demo_postgres
from dpproxy.engine import Engine
from dpproxy.errors import InvalidParameter, StabilityTestFailed
from dpproxy.explain import explain_data
from dpproxy.mechanisms.noise import OpenDPNoise
from dpproxy.planning.plan import Method
from dpproxy.values import Cost
from tests.noise import NoNoise

HUGE = Cost(Fraction(10**6), Fraction(1, 2))


@pytest.fixture(scope="module")
def exact_engine(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    engine = Engine(
        demo_catalog, DuckDBBackend(demo_db), accountant=MemoryAccountant(HUGE), noise=NoNoise()
    )
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def noisy_engine(demo_db: Path, demo_catalog: Catalog) -> Iterator[Engine]:
    engine = Engine(
        demo_catalog,
        DuckDBBackend(demo_db),
        accountant=MemoryAccountant(Cost(Fraction(10), Fraction(1, 10**5))),
        noise=OpenDPNoise(),
    )
    yield engine
    engine.close()


def _direct(demo_db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(demo_db), read_only=True) as con:
        return con.execute(sql).fetchall()


def _value(engine: Engine, sql: str, **kw: Any) -> Any:
    answer = engine.run(sql, analyst="t", **kw)
    return answer.released.rows[0][0]


@pytest.mark.parametrize("method", ["joint", "ptr", "smooth", "gs"])
def test_mean_plans_release_the_exact_mean_without_noise(
    exact_engine: Engine, demo_db: Path, method: str
) -> None:
    (true,) = _direct(demo_db, "SELECT AVG(age) FROM adult")[0]
    hint = f"/*+ dpproxy mechanism={method} */"
    got = _value(exact_engine, f"SELECT {hint} AVG(age) FROM adult")
    assert got == pytest.approx(true, rel=1e-12)


def test_the_planner_picks_the_joint_release_for_avg(exact_engine: Engine) -> None:
    plan = exact_engine.plan("SELECT AVG(age) FROM adult")
    agg = plan.aggregates[0]
    assert agg.method is Method.JOINT
    by_method = {c.method: c for c in agg.candidates}
    assert set(by_method) == {Method.GS, Method.JOINT, Method.PTR, Method.SMOOTH, Method.SAA}
    assert all(c.applicable for c in agg.candidates)  # the demo declares its public size
    joint, gs = by_method[Method.JOINT], by_method[Method.GS]
    assert joint.error95 is not None and gs.error95 is not None
    # Kulesza–Suresh–Wang: the whole ε on each part instead of half (benchmarks/LOCAL.md
    # measures 0.0062 against 0.010 at the 95th percentile).
    assert joint.error95 < 0.75 * gs.error95
    # The joint release spends ε once; nothing is released at global sensitivity.
    assert plan.releases == () and plan.cost == Cost(Fraction(1))


def test_explain_lists_every_candidate_with_its_predicted_error(exact_engine: Engine) -> None:
    prepared = exact_engine.prepare("SELECT AVG(age) FROM adult")
    data = explain_data(prepared.plan, ";\n".join(prepared.statements))
    (entry,) = data["aggregate_plans"]
    assert entry["chosen"] == "joint"
    assert [c["method"] for c in entry["candidates"]] == ["gs", "joint", "ptr", "smooth", "saa"]
    assert all(isinstance(c["error95"], float) for c in entry["candidates"])


@pytest.mark.parametrize(
    ("sql", "direct"),
    [
        (
            "SELECT MEDIAN(age) FROM adult",
            "SELECT PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY age) FROM adult",
        ),
        (
            "SELECT PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY hours_per_week) FROM adult",
            "SELECT PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY hours_per_week) FROM adult",
        ),
        ("SELECT MIN(age) FROM adult", "SELECT MIN(age) FROM adult"),
        ("SELECT MAX(education_num) FROM adult", "SELECT MAX(education_num) FROM adult"),
    ],
)
def test_the_exponential_mechanism_picks_the_true_order_statistic(
    exact_engine: Engine, demo_db: Path, sql: str, direct: str
) -> None:
    """Integer cells and no noise: the best-scoring cell is the one holding the statistic (for
    MEDIAN, whose 32,561 values have a middle one, that is PERCENTILE_DISC(0.5) too)."""
    assert exact_engine.plan(sql).aggregates[0].method is Method.EXPONENTIAL
    assert _value(exact_engine, sql) == _direct(demo_db, direct)[0][0]


@pytest.mark.parametrize("method", ["smooth", "ptr"])
@pytest.mark.parametrize(
    ("fn", "q"),
    [("PERCENTILE_CONT", "0.9"), ("PERCENTILE_DISC", "0.25"), ("PERCENTILE_CONT", "0.5")],
)
def test_order_statistic_plans_return_the_exact_percentile(
    exact_engine: Engine, demo_db: Path, method: str, fn: str, q: str
) -> None:
    hint = f"/*+ dpproxy mechanism={method} ptr_bound=5 */"
    body = f"{fn}({q}) WITHIN GROUP (ORDER BY hours_per_week) FROM adult"
    got = _value(exact_engine, f"SELECT {hint} {body}")
    assert got == pytest.approx(_direct(demo_db, f"SELECT {body}")[0][0], rel=1e-12)


def test_grouped_medians_over_public_and_private_keys(exact_engine: Engine, demo_db: Path) -> None:
    truth = dict(
        _direct(
            demo_db,
            "SELECT sex, PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY age) FROM adult GROUP BY sex",
        )
    )
    rows = exact_engine.run("SELECT sex, MEDIAN(age) FROM adult GROUP BY sex", analyst="t")
    assert dict(rows.released.rows) == truth
    smooth = exact_engine.run(
        "SELECT /*+ dpproxy mechanism=smooth */ sex, MEDIAN(age) FROM adult GROUP BY sex",
        analyst="t",
    )
    cont = dict(_direct(demo_db, "SELECT sex, MEDIAN(age) FROM adult GROUP BY sex"))
    assert {k: pytest.approx(v) for k, v in cont.items()} == dict(smooth.released.rows)
    # A key without a public domain: groups pass DP partition selection first.
    by_age = exact_engine.run(
        "SELECT age, MEDIAN(hours_per_week) FROM adult WHERE age < 30 GROUP BY age",
        analyst="t",
    )
    direct = dict(
        _direct(
            demo_db,
            "SELECT age, PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY hours_per_week) "
            "FROM adult WHERE age < 30 GROUP BY age",
        )
    )
    assert by_age.released.rows and all(direct[a] == m for a, m in by_age.released.rows)


def test_sample_and_aggregate_averages_the_chunk_statistics(
    exact_engine: Engine, demo_db: Path
) -> None:
    sql = (
        "SELECT /*+ dpproxy mechanism=saa saa_chunks=50 saa_lower=20 saa_upper=80 */ "
        "AVG(age) FROM adult"
    )
    prepared = exact_engine.prepare(sql, secret=7)
    assert prepared.sql is None and len(prepared.extra) == 1
    (_, statement) = prepared.extra[0]
    chunks = exact_engine.backend.execute(statement)
    stats = [min(max(float(s), 20.0), 80.0) for _, s in chunks.rows]
    stats += [50.0] * (50 - len(stats))  # an empty chunk counts as the middle of [20, 80]
    assert len(chunks.rows) == 50  # 32,561 people fill every chunk
    expected = sum(stats) / 50
    (true,) = _direct(demo_db, "SELECT AVG(age) FROM adult")[0]
    assert expected == pytest.approx(true, abs=1.0)
    assert _value(exact_engine, sql) == pytest.approx(true, abs=1.0)


def test_correlation_goes_through_sample_and_aggregate(exact_engine: Engine, demo_db: Path) -> None:
    plan = exact_engine.plan("SELECT CORR(age, hours_per_week) FROM adult")
    assert plan.aggregates[0].method is Method.SAA
    (true,) = _direct(demo_db, "SELECT CORR(age, hours_per_week) FROM adult")[0]
    got = _value(exact_engine, "SELECT CORR(age, hours_per_week) FROM adult")
    assert -1 <= got <= 1 and got == pytest.approx(true, abs=0.05)


def test_ptr_refusal_is_an_error_and_is_charged(
    noisy_engine: Engine, demo_catalog: Catalog
) -> None:
    before = noisy_engine.remaining("refused")
    with pytest.raises(StabilityTestFailed) as info:
        noisy_engine.run(
            "SELECT /*+ dpproxy mechanism=ptr ptr_bound=0.00001 */ AVG(age) FROM adult",
            analyst="refused",
        )
    assert info.value.sqlstate == "ZD005"
    spent = before - noisy_engine.remaining("refused")
    assert spent == Cost(Fraction(1), demo_catalog.policy.delta)


def test_real_noise_answers_are_near_the_truth(noisy_engine: Engine, demo_db: Path) -> None:
    (true_mean,) = _direct(demo_db, "SELECT AVG(age) FROM adult")[0]
    rows = noisy_engine.run(
        "SELECT AVG(age), MEDIAN(age), PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM adult",
        analyst="n",
    ).released.rows[0]
    assert abs(rows[0] - true_mean) < 0.5
    assert abs(rows[1] - 37) <= 3 and abs(rows[2] - 58) <= 4


def test_a_forced_plan_that_cannot_apply_is_refused(exact_engine: Engine) -> None:
    with pytest.raises(InvalidParameter):
        exact_engine.run(
            "SELECT /*+ dpproxy mechanism=exponential */ AVG(age) FROM adult", analyst="t"
        )
    with pytest.raises(InvalidParameter):
        exact_engine.run("SELECT MEDIAN(age) FROM adult", analyst="t", method=Method.JOINT)


def test_bounded_contributions_feed_every_plan(multi_db: Any) -> None:
    """visits: up to 10 rows per user, bounded to 3; every plan reads the bounded relation and
    charges its cost, and no answer leaves the amount bounds."""
    engine = Engine(
        multi_db.catalog("visits_rows"),
        DuckDBBackend(multi_db.path),
        accountant=MemoryAccountant(HUGE),
        noise=OpenDPNoise(),
    )
    try:
        for method in ("joint", "ptr", "smooth", "saa", "gs"):
            sql = f"SELECT /*+ dpproxy mechanism={method} ptr_bound=5 */ AVG(amount) FROM visits"
            try:
                value = _value(engine, sql)
            except StabilityTestFailed:
                continue  # 300 rows over 60 users are too few for a bound of 5 at times
            assert 0 <= value <= 100 or method == "saa"
        grouped = engine.run(
            "SELECT day_of_week, MEDIAN(duration) FROM visits GROUP BY day_of_week", analyst="t"
        )
        assert len(grouped.released.rows) == 7  # the public domain, Sunday included
        stat = (
            engine.plan("SELECT day_of_week, MEDIAN(duration) FROM visits GROUP BY day_of_week")
            .aggregates[0]
            .stat
        )
        assert stat is not None and stat.rows == 3 and stat.groups == 3
    finally:
        engine.close()


def test_the_same_plans_on_postgresql(pg_dsn: str, demo_db: Path, demo_catalog: Catalog) -> None:
    """Exact (noise-free) answers of the order-statistic plans agree with DuckDB's."""
    from dpproxy.backends.postgres import PostgresBackend

    load_demo_postgres(pg_dsn)
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    url = (
        f"postgresql://{info.get('user', 'postgres')}@{info.get('host', '127.0.0.1')}:"
        f"{info.get('port', 5432)}/{info['dbname']}"
    )
    pg = Engine(
        demo_catalog, PostgresBackend(url), accountant=MemoryAccountant(HUGE), noise=NoNoise()
    )
    duck = Engine(
        demo_catalog, DuckDBBackend(demo_db), accountant=MemoryAccountant(HUGE), noise=NoNoise()
    )
    try:
        for sql in (
            "SELECT sex, MEDIAN(age) FROM adult GROUP BY sex",
            "SELECT /*+ dpproxy mechanism=smooth */ PERCENTILE_CONT(0.9) WITHIN GROUP "
            "(ORDER BY hours_per_week) FROM adult",
            "SELECT /*+ dpproxy mechanism=ptr ptr_bound=5 */ MEDIAN(education_num) FROM adult",
            "SELECT AVG(age), MIN(age), MAX(age) FROM adult",
        ):
            a = duck.run(sql, analyst="t").released.rows
            b = pg.run(sql, analyst="t").released.rows
            assert len(a) == len(b)
            for ra, rb in zip(a, b, strict=True):
                assert ra[:-1] == rb[:-1]  # group keys
                assert ra[-1] == pytest.approx(rb[-1], rel=1e-12)
        # Chunks are drawn by each engine's native hash, so SAA answers differ; both run.
        for sql in (
            "SELECT CORR(age, hours_per_week) FROM adult",
            "SELECT /*+ dpproxy mechanism=saa */ sex, PERCENTILE_DISC(0.5) WITHIN GROUP "
            "(ORDER BY age) FROM adult GROUP BY sex",
        ):
            got = pg.run(sql, analyst="t").released.rows
            assert got and all(v is not None and math.isfinite(v) for r in got for v in r[-1:])
    finally:
        pg.close()
        duck.close()


@pytest.mark.parametrize(
    "rate",
    [
        "COUNT(*) FILTER (WHERE income_class = '>50K') / COUNT(*)",
        "SUM(CASE WHEN income_class = '>50K' THEN 1 ELSE 0 END) / CAST(COUNT(*) AS DOUBLE)",
        "COUNT(CASE WHEN income_class = '>50K' THEN 1 END) / COUNT(*)",
    ],
)
def test_rates_are_released_jointly(exact_engine: Engine, demo_db: Path, rate: str) -> None:
    """A ratio of counts is the mean of a 0/1 value: one joint release, not two noisy counts."""
    sql = f"SELECT sex, {rate} AS rate FROM adult GROUP BY sex"
    plan = exact_engine.plan(sql)
    assert [a.method for a in plan.aggregates] == [Method.JOINT]
    truth = dict(
        _direct(
            demo_db,
            "SELECT sex, AVG(CASE WHEN income_class = '>50K' THEN 1 ELSE 0 END) "
            "FROM adult GROUP BY sex",
        )
    )
    got = dict(exact_engine.run(sql, analyst="t").released.rows)
    assert got == {k: pytest.approx(v, rel=1e-12) for k, v in truth.items()}
    assert [c.name for c in exact_engine.run(sql, analyst="t").released.columns] == ["sex", "rate"]
