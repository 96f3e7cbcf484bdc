"""Brute-force oracle for joins between two units' rows (reading/002's private join).

``people`` (one row per person) and ``shops`` (up to 3 per owner) have different privacy units
that share one id space: a person may also own shops. A query joining them on ``city`` mixes
two people's rows in each joined row, so dpproxy bounds each side per unit (M), truncates each
side per join key (DropExcess(T), or DropNonUnique on a unique key) and calibrates to
T_a·S_b·M_b + T_b·S_a·M_a changed rows. For random small towns, every unit is removed — its
person row and all its shops — and new units are added (including ones above the declared
bounds); with the same secret on both sides, the exact primitives may move by no more than the
plan's sensitivities. A planted bug (a stability of 1 where DropExcess needs 2) is caught.
"""

from __future__ import annotations

import random
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.engine import Engine, Prepared
from dpproxy.errors import DPProxyError
from dpproxy.rewrite.fixed import sum_grids, unscale
from dpproxy.sql.joinparts import Side
from dpproxy.values import Cost
from tests.noise import NoNoise

SECRET = 4242
CITIES = ("a", "b", "c")
SCHEMA = """
version: 1
dataset: town
privacy: {epsilon: 1.0, delta: 1.0e-6, budget: {epsilon: 1000000, delta: 0.5}}
tables:
  people:
    privacy_unit: pid
    max_rows_per_unit: 1
    columns:
      pid: {type: integer}
      city: {type: text, domain: [a, b, c]}
      income: {type: float, lower: 0, upper: 100}
  shops:
    privacy_unit: owner
    max_rows_per_unit: 3
    columns:
      shop_id: {type: integer}
      owner: {type: integer}
      city: {type: text, domain: [a, b, c]}
      revenue: {type: float, lower: 0, upper: 1000}
"""
QUERIES = (
    "SELECT /*+ dpproxy join_rows={t} */ COUNT(*), SUM(income), SUM(revenue) "
    "FROM people p JOIN shops s ON p.city = s.city",
    "SELECT /*+ dpproxy join_rows={t} */ s.city, COUNT(*), SUM(revenue) "
    "FROM people p JOIN shops s ON p.city = s.city GROUP BY s.city",
    # shop_id is unique in shops: DropNonUnique on that side (T = S = 1)
    "SELECT /*+ dpproxy join_rows={t} */ COUNT(*), SUM(income) "
    "FROM people p JOIN shops s ON p.pid = s.shop_id",
)


def _town(rng: random.Random) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    n = rng.randint(3, 7)
    people = [(i, rng.choice(CITIES), round(rng.uniform(-10, 110), 2)) for i in range(1, n + 1)]
    shops = []
    for sid in range(1, rng.randint(1, 8) + 1):
        owner = rng.randint(1, n + 2)  # some owners are not people
        shops.append((sid, owner, rng.choice(CITIES), round(rng.uniform(-50, 1100), 2)))
    return people, shops


def _fill(
    con: duckdb.DuckDBPyConnection, people: list[tuple[Any, ...]], shops: list[tuple[Any, ...]]
) -> None:
    con.execute("CREATE TABLE people (pid INTEGER, city VARCHAR, income DOUBLE)")
    con.execute("CREATE TABLE shops (shop_id INTEGER, owner INTEGER, city VARCHAR, revenue DOUBLE)")
    if people:
        con.executemany("INSERT INTO people VALUES (?, ?, ?)", people)
    if shops:
        con.executemany("INSERT INTO shops VALUES (?, ?, ?, ?)", shops)


def _write(path: Path, people: list[tuple[Any, ...]], shops: list[tuple[Any, ...]]) -> None:
    con = duckdb.connect(str(path))
    try:
        _fill(con, people, shops)
    finally:
        con.close()


def _run_rows(
    people: list[tuple[Any, ...]], shops: list[tuple[Any, ...]], prepared: Prepared
) -> dict[tuple[Any, ...], tuple[float, ...]]:
    """The rewritten SQL's exact primitives on a town held in an in-memory DuckDB."""
    con = duckdb.connect()
    try:
        _fill(con, people, shops)
        return _fetch(con, prepared)
    finally:
        con.close()


def _run(path: Path, prepared: Prepared) -> dict[tuple[Any, ...], tuple[float, ...]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return _fetch(con, prepared)
    finally:
        con.close()


def _fetch(
    con: duckdb.DuckDBPyConnection, prepared: Prepared
) -> dict[tuple[Any, ...], tuple[float, ...]]:
    """Primitives by group key (no keys: one group ``()``); sums scaled back from their grid
    (``rewrite/fixed.py``) as the proxy does."""
    assert prepared.sql is not None
    grids = sum_grids(prepared.plan)
    cur = con.execute(prepared.sql)
    columns = [d[0] for d in cur.description]
    keys = [i for i, c in enumerate(columns) if c.startswith("__key_")]
    out = {}
    for row in cur.fetchall():
        out[tuple(row[i] for i in keys)] = tuple(
            float(unscale(v, grids[columns[i]])) if columns[i] in grids else float(v or 0)
            for i, v in enumerate(row)
            if i not in keys
        )
    return out


def _check(prepared: Prepared, base: dict[Any, Any], other: dict[Any, Any]) -> float:
    """Assert every primitive's L1/L∞ change ≤ its sensitivity; return the largest ratio."""
    plan = prepared.plan
    names = [p.name for p in plan.primitives]
    worst = 0.0
    for j, name in enumerate(names):
        sens = plan.release_for(name).sensitivity
        diffs = [
            abs(base.get(k, (0.0,) * len(names))[j] - other.get(k, (0.0,) * len(names))[j])
            for k in set(base) | set(other)
        ]
        l1, linf = sum(diffs), max(diffs, default=0.0)
        assert l1 <= float(sens.l1) + 1e-6, (name, l1, sens.l1)
        assert linf <= float(sens.linf) + 1e-6, (name, linf, sens.linf)
        if sens.l1:
            worst = max(worst, l1 / float(sens.l1))
    return worst


def _engine(db: Path, schema: Path) -> Engine:
    return Engine(
        load_catalog(schema),
        DuckDBBackend(db),
        accountant=MemoryAccountant(Cost(Fraction(10**9), Fraction(1, 2))),
        noise=NoNoise(),
    )


@pytest.mark.parametrize("seed", range(12))
def test_no_neighbour_moves_more_than_the_sensitivity(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    schema = tmp_path / "town.yaml"
    schema.write_text(SCHEMA)
    people, shops = _town(rng)
    base_db = tmp_path / "base.duckdb"
    _write(base_db, people, shops)
    engine = _engine(base_db, schema)
    worst = 0.0
    try:
        for template in QUERIES:
            for t in (1, 2, 3):
                prepared = engine.prepare(template.format(t=t), secret=SECRET)
                assert prepared.sql is not None and not prepared.plan.needs_bounding
                base = _run(base_db, prepared)
                units = {p[0] for p in people} | {s[1] for s in shops}
                neighbours = []
                for u in sorted(units):  # remove u with all its rows in both tables
                    neighbours.append(
                        ([p for p in people if p[0] != u], [s for s in shops if s[1] != u])
                    )
                fresh = max(units) + 1  # add a unit: a person owning shops, above the bounds
                for extra in range(3):
                    shops_u = [
                        (100 + 10 * extra + k, fresh, rng.choice(CITIES), rng.uniform(0, 999))
                        for k in range(rng.randint(0, 5))
                    ]
                    person = [(fresh, rng.choice(CITIES), rng.uniform(0, 100))]
                    neighbours.append((people + person, shops + shops_u))
                for p2, s2 in neighbours:
                    worst = max(worst, _check(prepared, base, _run_rows(p2, s2, prepared)))
    finally:
        engine.close()
    assert worst <= 1.0


def test_the_oracle_catches_a_wrong_stability(tmp_path: Path, monkeypatch: Any) -> None:
    """DropExcess with stability 1 instead of 2 under-states the change: when a removed shop
    was the one its city kept, another shop takes its place, and grouped by revenue the joined
    row moves between groups (a change of 2 per kept row). Some shop numbering shows it."""
    schema = tmp_path / "town.yaml"
    schema.write_text(SCHEMA)
    sql = (
        "SELECT /*+ dpproxy join_rows=1 */ CASE WHEN revenue > 500 THEN 1 ELSE 0 END AS hi, "
        "COUNT(*) FROM people p JOIN shops s ON p.city = s.city GROUP BY 1"
    )
    people = [(i + 1, c, 50.0) for i, c in enumerate(CITIES)]
    db = tmp_path / "t.duckdb"
    _write(db, people, [(1, 10, "a", 100.0)])
    engine = _engine(db, schema)
    try:
        monkeypatch.setattr(Side, "truncation", lambda self, join_rows: (join_rows, 1))
        prepared = engine.prepare(sql, secret=SECRET)
    finally:
        engine.close()
    assert prepared.sql is not None
    caught = False
    for offset in range(0, 400, 4):
        # unit 10 owns a cheap shop in every city; unit 11 an expensive one in every city
        shops = [(offset + k, 10, c, 100.0) for k, c in enumerate(CITIES)]
        shops += [(offset + 3 + k, 11, c, 900.0) for k, c in enumerate(CITIES)]
        base = _run_rows(people, shops, prepared)
        other = _run_rows(people, [s for s in shops if s[1] != 10], prepared)
        try:
            _check(prepared, base, other)
        except AssertionError:
            caught = True
            break
    assert caught


def test_refusals_of_the_two_unit_join(tmp_path: Path) -> None:
    schema = tmp_path / "town.yaml"
    schema.write_text(SCHEMA)
    db = tmp_path / "t.duckdb"
    _write(db, [(1, "a", 1.0)], [(1, 1, "a", 1.0)])
    engine = _engine(db, schema)
    try:
        for sql, code in (
            ("SELECT MEDIAN(income) FROM people p JOIN shops s ON p.city = s.city", "0A000"),
            ("SELECT COUNT(DISTINCT pid) FROM people p JOIN shops s ON p.city = s.city", "0A000"),
            (
                "SELECT s.owner, COUNT(*) FROM people p JOIN shops s ON p.city = s.city "
                "GROUP BY s.owner",
                "0A000",
            ),
        ):
            with pytest.raises(DPProxyError) as info:
                engine.run(sql, analyst="x")
            assert info.value.sqlstate == code, (sql, info.value)
    finally:
        engine.close()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_postgres_keeps_the_same_rows(tmp_path: Path, pg_dsn: str) -> None:
    """With the portable hash, PostgreSQL truncates both sides exactly as DuckDB does."""
    import psycopg

    from dpproxy.backends.postgres import PostgresBackend

    rng = random.Random(7)
    people = [(i, rng.choice(CITIES), rng.uniform(0, 100)) for i in range(1, 40)]
    shops = [(k, rng.randint(1, 45), rng.choice(CITIES), rng.uniform(0, 999)) for k in range(60)]
    db = tmp_path / "town.duckdb"
    _write(db, people, shops)
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("CREATE TABLE people (pid INTEGER, city TEXT, income DOUBLE PRECISION)")
        con.execute(
            "CREATE TABLE shops (shop_id INTEGER, owner INTEGER, city TEXT, "
            "revenue DOUBLE PRECISION)"
        )
        with con.cursor() as cur:
            cur.executemany("INSERT INTO people VALUES (%s, %s, %s)", people)
            cur.executemany("INSERT INTO shops VALUES (%s, %s, %s, %s)", shops)
    schema = tmp_path / "town.yaml"
    schema.write_text(SCHEMA)
    catalog = load_catalog(schema)
    budget = MemoryAccountant(Cost(Fraction(10**9), Fraction(1, 2)))
    duck = Engine(
        catalog, DuckDBBackend(db, portable_hash=True), accountant=budget, noise=NoNoise()
    )
    pg = Engine(
        catalog, PostgresBackend(pg_dsn, portable_hash=True), accountant=budget, noise=NoNoise()
    )
    try:
        for template in QUERIES:
            sql = template.format(t=2)
            d = duck.prepare(sql, secret=SECRET)
            p = pg.prepare(sql, secret=SECRET)
            assert d.sql is not None and p.sql is not None
            left = sorted(duck.backend.execute(d.sql).rows, key=str)
            right = sorted(pg.backend.execute(p.sql).rows, key=str)
            assert len(left) == len(right)
            for a, b in zip(left, right, strict=True):
                assert len(a) == len(b)
                for x, y in zip(a, b, strict=True):
                    same = x == y if isinstance(x, str) else x == pytest.approx(y, rel=1e-9)
                    assert same, (sql, a, b)
    finally:
        duck.close()
        pg.close()
