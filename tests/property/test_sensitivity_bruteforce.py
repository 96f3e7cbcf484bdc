"""Analytic sensitivities dominate brute-force neighbour distances, on the real pipeline.

The method of ``../shared/reading/004_*`` (empirical sensitivity by enumerating neighbours),
applied to what dpproxy actually runs: for a drawn small dataset D, the query is planned and
rewritten by :meth:`dpproxy.engine.Engine.prepare` with a *fixed* secret (so the keyed hash that
picks each unit's rows is the same on D and on every neighbour, and picks a unit's rows from its
own rows only, as in production), the rewritten SQL is run directly on DuckDB (no noise) to get the
exact vector of every primitive per group, and for every neighbour D' the L1 / L2 / L∞ distance
between the vectors (aligned by group key; an absent group counts as 0) must not exceed the
plan's ``release.sensitivity``:

* ``add_remove``: remove each unit of D; add a new unit with 1..(bound + 2) rows of extreme values
  (the bounds themselves, values beyond them, ±inf, NaN, NULL) in any group;
* ``substitute``: replace each unit's rows with such extreme rows (same unit id).

The neighbours include units with *more* rows than the contribution bound and values *outside*
the declared bounds, so the checks cover the SQL that enforces them (clamping, ``__bounded``),
not only the formulas of :mod:`dpproxy.analysis.sensitivity` (the protected change of
``../shared/reading/002_*``: MaxRowsPerID, or MaxGroupsPerID × MaxRowsPerGroupPerID).

Distances are exact (:class:`fractions.Fraction` of the values DuckDB returns; a SUM is an integer
total on its fixed-point grid, scaled back exactly as the proxy does, ``rewrite/fixed.py``), and so
is the comparison: no tolerance. The tightness tests at the end check that one
specific neighbour attains the analytic bound, so that over-noising is caught too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.engine import Engine, Prepared
from dpproxy.mechanisms.base import Sensitivity
from tests.oracle import Distance, Vector, distance, exact_row, released, within

# ---------------------------------------------------------------------------------------------
# The schema: one private table, bounds chosen so that every primitive kind is exercised.

X_LO, X_HI = 0, 10  # INTEGER, x ≥ 0 (the tightness tests rely on it)
Y_LO, Y_HI = 0, 50  # DOUBLE; SUM(y / 10 - 1) lies in [-1, 4]
Z_LO, Z_HI = -5, 3  # DOUBLE with a negative lower bound
G_DOMAIN = ("a", "b", "c")
SECRET = 0x5EC2E7_1D  # fixed per plan: the same keyed hash on D and D'

BOUNDS: dict[str, dict[str, int]] = {
    "rows1": {"max_rows_per_unit": 1},
    "rows2": {"max_rows_per_unit": 2},
    "rows3": {"max_rows_per_unit": 3},
    "groups2x2": {"max_groups_per_unit": 2, "max_rows_per_group_per_unit": 2},
    "rows3_groups2x2": {
        "max_rows_per_unit": 3,
        "max_groups_per_unit": 2,
        "max_rows_per_group_per_unit": 2,
    },
    # The database declares uid PRIMARY KEY: the backend marks the unit unique, the plan skips
    # contribution bounding and uses one row per unit. The data then has one row per unit.
    "unique_uid": {"max_rows_per_unit": 3},
}
UNIQUE = "unique_uid"
RELATIONS = ("add_remove", "substitute")

CREATE = "CREATE TABLE people(uid INTEGER, g TEXT, h TEXT, x INTEGER, y DOUBLE, z DOUBLE)"


def schema_text(bounds: str, neighbouring: str) -> str:
    bound_lines = "".join(f"    {k}: {v}\n" for k, v in BOUNDS[bounds].items())
    return (
        "version: 1\n"
        "dataset: bruteforce\n"
        "privacy:\n"
        f"  neighbouring: {neighbouring}\n"
        "  epsilon: 1\n"
        "  delta: 1.0e-6\n"
        "tables:\n"
        "  people:\n"
        "    private: true\n"
        "    privacy_unit: uid\n"
        f"{bound_lines}"
        "    columns:\n"
        "      uid: {type: integer}\n"
        f"      g: {{type: text, nullable: true, domain: [{', '.join(G_DOMAIN)}]}}\n"
        "      h: {type: text, nullable: true}\n"
        f"      x: {{type: integer, nullable: true, lower: {X_LO}, upper: {X_HI}}}\n"
        f"      y: {{type: float, nullable: true, lower: {Y_LO}, upper: {Y_HI}}}\n"
        f"      z: {{type: float, nullable: true, lower: {Z_LO}, upper: {Z_HI}}}\n"
    )


def row_bound(bounds: str) -> int:
    """The most rows one unit keeps in any query (the grouped bound K, or G × R)."""
    if bounds == UNIQUE:
        return 1
    b = BOUNDS[bounds]
    if "max_rows_per_unit" in b:
        return b["max_rows_per_unit"]
    return b["max_groups_per_unit"] * b["max_rows_per_group_per_unit"]


AGGREGATES = (
    "COUNT(*)",
    "COUNT(x)",
    "COUNT(DISTINCT uid)",
    "COUNT(DISTINCT x)",
    "COUNT(DISTINCT h)",
    "COUNT(DISTINCT z) FILTER (WHERE g = 'a')",
    "SUM(x)",
    "SUM(z)",
    "SUM(y / 10 - 1)",
    "AVG(x)",
    "SUM(DISTINCT x)",
    "AVG(DISTINCT z)",
    "VAR_POP(z)",
    "AVG(CASE WHEN g = 'a' THEN 1 ELSE 0 END)",
    "SUM(WIDTH_BUCKET(z, -5, 3, 4))",  # 0 … 5 (sql/buckets.py)
    "AVG(LENGTH(g))",  # within the lengths of g's domain values (analysis/bounds.py)
)
# g: public domain; h: private keys (partition selection); a WIDTH_BUCKET: public buckets 0 … 4
GROUPINGS = (None, "g", "h", "WIDTH_BUCKET(y, 0, 50, 3)")
FILTERS = (None, "x > 2", "z < 1", "g <> 'b'")


def make_sql(aggregates: Sequence[str], key: str | None, where: str | None) -> str:
    select = ", ".join(([key] if key else []) + list(aggregates))
    sql = f"SELECT {select} FROM people"
    if where:
        sql += f" WHERE {where}"
    if key:
        sql += f" GROUP BY {key}"
    return sql


# ---------------------------------------------------------------------------------------------
# Datasets and neighbours.

Row = tuple[str | None, str | None, int | None, float | None, float | None]  # g, h, x, y, z


@dataclass(frozen=True)
class Unit:
    uid: int
    rows: tuple[Row, ...]


Dataset = tuple[Unit, ...]

INF, NAN = math.inf, math.nan
G_VALUES = (*G_DOMAIN, "d", None)  # "d" lies outside the public domain
H_VALUES = ("p", "q", "r", None)
X_EXTREMES = (X_LO, X_HI, X_LO - 1, X_HI + 1, -(2**31), 2**31 - 1, None)
Y_EXTREMES = (float(Y_LO), float(Y_HI), -1.0, Y_HI + 1.0, -1e308, 1e308, -INF, INF, NAN, None)
Z_EXTREMES = (float(Z_LO), float(Z_HI), Z_LO - 1.0, Z_HI + 1.0, -1e308, 1e308, -INF, INF, NAN,
              None)


def _ordinary_rows() -> st.SearchStrategy[Row]:
    x = st.one_of(st.none(), st.integers(X_LO - 3, X_HI + 3), st.sampled_from(X_EXTREMES))
    y = st.one_of(st.none(), st.floats(Y_LO - 10, Y_HI + 10), st.sampled_from(Y_EXTREMES))
    z = st.one_of(st.none(), st.floats(Z_LO - 3, Z_HI + 3), st.sampled_from(Z_EXTREMES))
    return st.tuples(st.sampled_from(G_VALUES), st.sampled_from(H_VALUES), x, y, z)


def _extreme_rows() -> st.SearchStrategy[Row]:
    return st.tuples(
        st.sampled_from(G_VALUES),
        st.sampled_from((*H_VALUES, "s")),  # "s": a group key no unit of D has
        st.sampled_from(X_EXTREMES),
        st.sampled_from(Y_EXTREMES),
        st.sampled_from(Z_EXTREMES),
    )


@st.composite
def datasets(draw: st.DrawFn, max_rows: int = 5) -> Dataset:
    """1–6 units with distinct ids in [-500, 500], 1–``max_rows`` rows each."""
    uids = draw(st.lists(st.integers(-500, 500), min_size=1, max_size=6, unique=True))
    return tuple(
        Unit(uid, tuple(draw(st.lists(_ordinary_rows(), min_size=1, max_size=max_rows))))
        for uid in uids
    )


def unit_rows(bounds: str) -> int:
    """How many rows a neighbour's unit may have: bound + 2, or 1 with a unique unit column."""
    return 1 if bounds == UNIQUE else row_bound(bounds) + 2


def drawn_extreme_units(
    bounds: str, max_units: int
) -> st.SearchStrategy[list[tuple[str, tuple[Row, ...]]]]:
    rows = st.lists(_extreme_rows(), min_size=1, max_size=unit_rows(bounds)).map(tuple)
    return st.lists(rows.map(lambda r: ("drawn extreme rows", r)), max_size=max_units)


HIGH: Row = ("a", "p", 2**31 - 1, INF, 1e308)
LOW: Row = ("a", "p", -(2**31), -INF, -1e308)
AT_HI: Row = ("a", "p", X_HI, float(Y_HI), float(Z_HI))
AT_LO: Row = ("a", "p", X_LO, float(Y_LO), float(Z_LO))
NULLS: Row = ("a", "p", None, None, None)


def _spread(row: Row, i: int) -> Row:
    return (G_DOMAIN[i % 3], ("p", "q", "r", "s")[i % 4], *row[2:])  # type: ignore[return-value]


def fixed_extreme_units(bounds: str, *, with_nulls: bool) -> list[tuple[str, tuple[Row, ...]]]:
    """Units of bound + 2 rows, all in one group ("packed") or round-robin over groups."""
    n = unit_rows(bounds)
    out = []
    for name, row in (("high", HIGH), ("low", LOW), ("at hi", AT_HI), ("at lo", AT_LO)):
        out.append((f"{n} {name} rows packed", (row,) * n))
        if name in ("high", "low"):
            out.append((f"{n} {name} rows spread", tuple(_spread(row, i) for i in range(n))))
    if with_nulls:
        out.append((f"{n} NULL rows", (NULLS,) * n))
    return out


def add_remove_neighbours(
    d: Dataset, new_uid: int, extremes: list[tuple[str, tuple[Row, ...]]]
) -> Iterator[tuple[str, Dataset]]:
    for i, u in enumerate(d):
        yield f"remove unit {u.uid}", d[:i] + d[i + 1:]
    for desc, rows in extremes:
        yield f"add unit {new_uid}: {desc} {rows}", (*d, Unit(new_uid, rows))


def substitute_neighbours(
    d: Dataset, extremes: list[tuple[str, tuple[Row, ...]]]
) -> Iterator[tuple[str, Dataset]]:
    for i, u in enumerate(d):
        for desc, rows in extremes:
            yield f"replace unit {u.uid} by {desc} {rows}", (*d[:i], Unit(u.uid, rows),
                                                             *d[i + 1:])


# ---------------------------------------------------------------------------------------------
# Running the rewritten SQL.



class Harness:
    """Engines (one per schema variant, over an empty schema-only DuckDB file) and a data store.

    The data lives in an in-memory DuckDB (the same engine as the file the proxy reads, without
    a write-ahead log to sync per dataset): a table holds D and all its neighbours, tagged with
    ``ds``, and ``people`` is a view on the dataset selected by a session variable, so the
    rewritten SQL reads exactly one dataset per execution.
    """

    def __init__(self, tmp: Path) -> None:
        self._schema_db = tmp / "schema.duckdb"
        self._unique_db = tmp / "schema_unique.duckdb"
        with duckdb.connect(str(self._schema_db)) as con:  # closed before the engines open it
            con.execute(CREATE)
        with duckdb.connect(str(self._unique_db)) as con:
            con.execute(CREATE.replace("uid INTEGER", "uid INTEGER PRIMARY KEY"))
        self._engines: dict[tuple[str, str], Engine] = {}
        self._prepared: dict[tuple[str, str, str], Prepared] = {}
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET threads = 1")  # a few rows: threads only add overhead
        self.con.execute(CREATE.replace("people(", "datasets(ds INTEGER, "))
        self.con.execute("SET VARIABLE ds = 0")
        self.con.execute("CREATE VIEW people AS SELECT uid, g, h, x, y, z FROM datasets "
                         "WHERE ds = getvariable('ds')")

    def prepare(self, bounds: str, rel: str, sql: str) -> Prepared:
        key = (bounds, rel, sql)
        if key not in self._prepared:
            ekey = (bounds, rel)
            if ekey not in self._engines:
                catalog = parse_catalog(schema_text(bounds, rel))
                db = self._unique_db if bounds == UNIQUE else self._schema_db
                self._engines[ekey] = Engine(catalog, DuckDBBackend(db))
            # canonical: one statement run on every dataset must not rest on what the rows
            # of the planning file prove (backends/scanned.py)
            engine = self._engines[ekey].canonical()
            self._prepared[key] = engine.prepare(sql, secret=SECRET)
        return self._prepared[key]

    def _load(self, ds: Sequence[Dataset]) -> None:
        rows = [(i, u.uid, *r) for i, d in enumerate(ds) for u in d for r in u.rows]
        self.con.execute("DELETE FROM datasets")
        if rows:
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(rows))
            self.con.execute(f"INSERT INTO datasets VALUES {values}",
                             [v for r in rows for v in r])

    def vectors(self, prepared: Prepared, ds: Sequence[Dataset]) -> list[Vector]:
        """The exact primitives of the rewritten SQL on each dataset, by group key."""
        self._load(ds)
        plan = prepared.plan
        nk = len(plan.query.keys)
        expected = [f"__key_{i}" for i in range(nk)] + [p.name for p in plan.primitives]
        out: list[Vector] = []
        for i in range(len(ds)):
            self.con.execute(f"SET VARIABLE ds = {i}")
            cur = self.con.execute(prepared.sql)
            rows = cur.fetchall()
            cols = [c[0] for c in cur.description or ()]
            assert cols == expected, cols
            vec: Vector = {}
            for row in rows:
                key = tuple(row[:nk])
                assert key not in vec, f"two result rows for group {key}"
                vec[key] = exact_row(plan, cols[nk:], row[nk:])
            out.append(vec)
        return out

    def close(self) -> None:
        for e in self._engines.values():
            e.close()
        self.con.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("bruteforce"))
    yield h
    h.close()


def assert_dominated(prepared: Prepared, a: Vector, b: Vector, what: str) -> None:
    plan = prepared.plan
    for r in released(plan):
        name, s = r.primitive.name, r.sensitivity
        d = distance(plan, name, a, b)
        if within(r, d):
            continue
        pytest.fail(
            f"{what}\n  primitive {name} ({r.primitive.kind.value}, measure "
            f"{r.primitive.measure}): analytic {s}\n  brute force L1 {d.l1}, L2² {d.l2_squared}, "
            f"L∞ {d.linf}\n  sql {prepared.sql}\n  f(D)  {a}\n  f(D') {b}"
        )


def check_neighbours(harness: Harness, prepared: Prepared, d: Dataset,
                     neighbours: Iterator[tuple[str, Dataset]]) -> None:
    """f(D) against f(D') for every listed neighbour D' (one DuckDB execution each)."""
    described = list(neighbours)
    base, *others = harness.vectors(prepared, [d, *(n for _, n in described)])
    for (what, _), other in zip(described, others, strict=True):
        assert_dominated(prepared, base, other, what)


# ---------------------------------------------------------------------------------------------
# The property.

_BASE_EXAMPLES = settings.default.max_examples if settings.default is not None else 100
# A quarter of a large (CI) profile's examples; 25 under the default or a small dev profile,
# which keeps each heavy test at a few seconds (every neighbour is one DuckDB execution).
HEAVY = settings(
    max_examples=25 if _BASE_EXAMPLES <= 100 else _BASE_EXAMPLES // 4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[p for p in Phase if p is not Phase.explain],  # far too slow at ~5 ms per run
)

queries = st.tuples(
    # Mostly one to three aggregates; a quarter of the time all of them (a slower query).
    st.integers(0, 3).flatmap(
        lambda i: st.just(AGGREGATES) if i == 0
        else st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=3, unique=True)
    ),
    st.sampled_from(GROUPINGS),
    st.sampled_from(FILTERS),
)


@pytest.mark.slow
@pytest.mark.parametrize("bounds", list(BOUNDS))
@HEAVY
@given(query=queries, new_uid=st.integers(501, 10**6), data=st.data())
def test_add_remove_neighbours_within_sensitivity(
    harness: Harness, bounds: str, query: Any, new_uid: int, data: st.DataObject
) -> None:
    """|f(D) − f(D')| ≤ Δ in L1, L2 and L∞ for every add/remove-one-unit neighbour D'."""
    d = data.draw(datasets(unit_rows(bounds) if bounds == UNIQUE else 5), label="D")
    prepared = harness.prepare(bounds, "add_remove", make_sql(*query))
    extremes = fixed_extreme_units(bounds, with_nulls=True)
    extremes += data.draw(drawn_extreme_units(bounds, 3), label="extra added units")
    check_neighbours(harness, prepared, d, add_remove_neighbours(d, new_uid, extremes))


@pytest.mark.slow
@pytest.mark.parametrize("bounds", list(BOUNDS))
@HEAVY
@given(query=queries, data=st.data())
def test_substitute_neighbours_within_sensitivity(
    harness: Harness, bounds: str, query: Any, data: st.DataObject
) -> None:
    """|f(D) − f(D')| ≤ Δ in L1, L2 and L∞ when one unit's rows are replaced by extreme rows."""
    d = data.draw(datasets(unit_rows(bounds) if bounds == UNIQUE else 5), label="D")
    prepared = harness.prepare(bounds, "substitute", make_sql(*query))
    extremes = [e for e in fixed_extreme_units(bounds, with_nulls=False) if "at " not in e[0]]
    extremes += data.draw(drawn_extreme_units(bounds, 2), label="replacement units")
    check_neighbours(harness, prepared, d, substitute_neighbours(d, extremes))


@pytest.mark.parametrize("rel", RELATIONS)
@pytest.mark.parametrize("key", GROUPINGS)
def test_each_aggregate_alone_within_sensitivity(harness: Harness, rel: str,
                                                 key: str | None) -> None:
    """Each aggregate alone, with and without WHERE, on a fixed dataset and fixed neighbours,
    under the bound with all three ranks (rows, groups, rows per group) in play."""
    bounds = "rows3_groups2x2"
    d: Dataset = (
        Unit(1, (("a", "p", 3, 12.5, -2.0), ("b", "q", 11, 70.0, NAN),
                 ("d", None, None, 5.0, 9.0))),
        Unit(2, (("c", "p", -4, -1.0, 3.0),)),
        Unit(7, (("a", "r", 10, INF, -INF), ("a", "r", 10, 50.0, -5.0), (None, "p", 0, 0.0, 0.0),
                 ("b", "q", 2, 1.0, 1.0), ("c", "q", 8, 33.3, 2.5))),
    )
    extremes = [e for e in fixed_extreme_units(bounds, with_nulls=True) if "at " not in e[0]]
    for agg, where in itertools.product(AGGREGATES, ("z < 1", None)):
        prepared = harness.prepare(bounds, rel, make_sql([agg], key, where))
        neighbours = (add_remove_neighbours(d, 99, extremes) if rel == "add_remove"
                      else substitute_neighbours(d, extremes))
        check_neighbours(harness, prepared, d, neighbours)


# ---------------------------------------------------------------------------------------------
# Tightness: one specific neighbour attains the analytic bound (over-noising is a bug too).

BASE_D: Dataset = (  # one row per unit, so that it also fits the unique-unit variant
    Unit(1, (("a", "p", 4, 1.0, 0.0),)),
    Unit(2, (("b", "q", 7, 2.0, 1.0),)),
    Unit(3, (("c", "r", 1, 3.0, -1.0),)),
)


def _distances(harness: Harness, prepared: Prepared, d: Dataset,
                d2: Dataset) -> dict[str, Distance]:
    a, b = harness.vectors(prepared, [d, d2])
    plan = prepared.plan
    return {r.primitive.name: distance(plan, r.primitive.name, a, b) for r in released(plan)}


def _spread_over(groups: Sequence[str], per_group: int, row: Row) -> tuple[Row, ...]:
    return tuple((g, *row[1:]) for g in groups for _ in range(per_group))  # type: ignore[misc]


def _sens(prepared: Prepared) -> list[tuple[str, Sensitivity]]:
    return [(r.primitive.name, r.sensitivity) for r in prepared.plan.releases]


@pytest.mark.parametrize("bounds", list(BOUNDS))
@pytest.mark.parametrize("key", [None, "g"])
def test_add_remove_count_and_sum_attain_l1(harness: Harness, bounds: str, key: str | None) -> None:
    """Adding a unit with many rows of x above the upper bound, spread over as many groups as
    it may use, moves COUNT(*) by exactly Δ₁ = rows and SUM(x) by exactly rows × hi."""
    prepared = harness.prepare(bounds, "add_remove", make_sql(["COUNT(*)", "SUM(x)"], key, None))
    b = BOUNDS[bounds]
    if bounds == UNIQUE:  # one row per unit, no bounding
        groups, per_group = G_DOMAIN[:1], 1
    elif "max_groups_per_unit" in b:  # R rows in each of G groups (the ranks keep them all)
        groups, per_group = G_DOMAIN[: b["max_groups_per_unit"]], b["max_rows_per_group_per_unit"]
    else:  # K + 1 rows in every group: K of them are kept
        groups, per_group = G_DOMAIN, b["max_rows_per_unit"] + 1
    rows = _spread_over(groups, per_group, ("a", "p", X_HI + 5, 1.0, 1.0))
    dist = _distances(harness, prepared, BASE_D, (*BASE_D, Unit(50, rows)))
    (count, s_count), (total, s_sum) = _sens(prepared)
    assert s_sum.l1 == s_count.l1 * X_HI
    assert dist[count].l1 == s_count.l1, (dist, s_count)
    assert dist[total].l1 == s_sum.l1, (dist, s_sum)


@pytest.mark.parametrize("bounds", list(BOUNDS))
def test_add_remove_grouped_linf_and_l2_attained(harness: Harness, bounds: str) -> None:
    """All rows in one group reach Δ∞; rows packed R per group reach Δ₂ (up to sqrt_up)."""
    prepared = harness.prepare(bounds, "add_remove", make_sql(["COUNT(*)"], "g", None))
    [(name, s)] = _sens(prepared)
    stab = prepared.plan.stability
    one_group = (("a", "p", 1, 1.0, 1.0),) * unit_rows(bounds)
    dist = _distances(harness, prepared, BASE_D, (*BASE_D, Unit(50, one_group)))[name]
    assert dist.linf == s.linf == stab.rows_per_group
    full, rest = divmod(stab.rows, stab.rows_per_group)  # exactly K rows, R per group
    packed = tuple((G_DOMAIN[i // stab.rows_per_group], "p", 1, 1.0, 1.0)
                   for i in range(full * stab.rows_per_group + rest))
    dist = _distances(harness, prepared, BASE_D, (*BASE_D, Unit(50, packed)))[name]
    assert dist.l1 == s.l1
    assert dist.l2_squared <= s.l2**2 <= dist.l2_squared * (1 + Fraction(1, 10**9))


@pytest.mark.parametrize("bounds", list(BOUNDS))
def test_substitute_ungrouped_attains_width(harness: Harness, bounds: str) -> None:
    """Replacing K rows at z's lower bound by K rows at its upper bound moves SUM(z) by
    K × (hi − lo), and a unit whose K rows all pass the WHERE by one row that fails it moves
    COUNT(*) by K: the substitute bounds are attained."""
    prepared = harness.prepare(bounds, "substitute",
                               make_sql(["COUNT(*)", "SUM(z)"], None, "x > 5"))
    (count, s_count), (total, s_sum) = _sens(prepared)
    k = prepared.plan.stability.rows
    assert s_sum.l1 == k * (Z_HI - Z_LO) and s_count.l1 == k
    n = k if bounds == UNIQUE else k + 1  # more rows than the bound, where the data may
    before = (*BASE_D, Unit(9, (("a", "p", 9, 1.0, -50.0),) * n))
    after = (*BASE_D, Unit(9, (("a", "p", 1, 1.0, 50.0),)))
    assert _distances(harness, prepared, before, after)[count].l1 == k
    after = (*BASE_D, Unit(9, (("a", "p", 9, 1.0, 50.0),) * n))
    assert _distances(harness, prepared, before, after)[total].l1 == k * (Z_HI - Z_LO)
