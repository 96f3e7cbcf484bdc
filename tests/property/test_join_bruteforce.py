"""Analytic sensitivities of *joins* dominate brute-force neighbour distances, on the real pipeline.

The method of ``../shared/reading/004_*`` (empirical sensitivity by enumerating neighbours) and of
``test_sensitivity_bruteforce.py``, applied to the joined relations of ``dpproxy/sql/joins.py``:
a small TPC-H-like database (customers, their orders, the line items of those orders, a public
``nation`` table whose keys are sometimes duplicated, so that a join with it multiplies a
customer's rows by its fan-out m > 1, or empty, m = 0, when the engine reads it), a join query
planned and rewritten by :meth:`dpproxy.engine.Engine.prepare` with a *fixed* secret (so the
keyed hash that picks each unit's rows picks the same rows of every untouched customer in D and
in its neighbours), the rewritten SQL run without noise, and for every neighbour D' the distance
between the exact primitives of D and D' (aligned by group; an absent group counts as 0) must not
exceed the plan's ``release.sensitivity`` in L1, L2 and L∞.

The neighbouring relation is the one of the schema (AddRowsWithID of ``../shared/reading/002_*``):
D' adds or removes ONE customer together with all its rows in every private table — its orders,
and the line items of those orders (``lineitem`` reaches its unit through
``privacy_unit: {via: l_orderkey, references: orders.o_orderkey}``). Neighbours:

* D − u for every customer u of D;
* D + u' for drawn new customers and three fixed heavy ones — more orders and line items than the
  schema declares, values beyond the column bounds (and ±inf, NaN), tags that split into many
  elements — so the checks cover the SQL that truncates to τ rows per unit and clamps, not only
  the formulas.

Queries: COUNT over ``lineitem`` alone (its unit through a join dpproxy adds), line items with
their orders, customers with their orders (JOIN … ON and a comma join), customers and orders with
``nation`` grouped by the public ``n_name``, a three-way and a four-way join with WHERE, a private
GROUP BY (partition selection), and a flat map ``UNNEST(string_to_array(o_tags, ','))`` — each
with ``/*+ dpproxy max_rows=K */`` for several K, with ``max_rows_cap`` (τ chosen with DP;
the plan is calibrated at the largest candidate until the draw) and without a hint (τ derived
from the schema, ``JoinBuilder._derived_bound``), under two schemas: one that declares the rows
per customer of every table, one that declares them for ``customer`` only (like
``schemas/tpch.yaml``).

When τ comes from the schema, two more checks hold on D (whose data respects the schema): τ is
at least the true largest number of rows of one customer in the *un-truncated* join, computed by
brute force in Python (so the truncation drops no row), and hence the noise-free answer (the
exact primitives through ``apply_noise`` with no noise and ``postprocess``) equals the plain SQL
answer.

The rewritten SQL is run on an in-memory DuckDB where ``customer``, ``orders``, ``lineitem`` and
``nation`` are views on tables that hold D and all its neighbours (selected by session
variables), as in ``test_sensitivity_bruteforce.py``; :func:`test_views_match_database_files`
shows that this gives exactly what ``engine.backend.execute(prepared.sql)`` returns on real
database files of D and of each neighbour.

Largest ratio observed (brute-force change / analytic sensitivity, L1), over all primitives,
queries, hints and neighbours: exactly 1, never above. It is attained for every query kind by a
neighbour with more joined rows than τ (the fixed added customers have 6 orders of 6 line items:
``SELECT COUNT(*) FROM lineitem`` with max_rows=2 moves by exactly 2, with τ = 16 from the schema
by exactly 16), and the tightness tests below assert it. Between D and D − u, with data inside
the schema and τ from the schema, it stays below 1 for the line-item queries (at most 0.75 seen:
no drawn customer has the 16 line items the schema allows) and reaches 1 for customer ⋈ nation
(a customer of the nation key with the largest fan-out has exactly m = τ joined rows). Run with
``-s`` to print the largest ratio per query, τ source and neighbour kind.

The mutation tests at the end show that the oracle has teeth: a plan that claims a smaller τ
than its SQL enforces, a unit taken from ``l_orderkey`` instead of through the references (one
*order* instead of one customer), and a public fan-out read as 1 are each caught.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Table
from dpproxy.engine import Engine, Prepared
from dpproxy.planning.plan import QueryPlan
from dpproxy.release.exact import ExactResult
from dpproxy.release.noise import apply_noise
from dpproxy.release.postprocess import postprocess
from dpproxy.sql import joins
from tests.noise import NoNoise
from tests.oracle import Distance, Vector, distance, exact_row, released, within

SECRET = 0x10_1A_5EC7  # fixed per plan: the same keyed hash on D and D'

# ---------------------------------------------------------------------------------------------
# The schema and the database.

ACCT_LO, ACCT_HI = -10, 100
PRICE_LO, PRICE_HI = 0, 1000
QTY_LO, QTY_HI = 1, 50
MAX_ORDERS = 4  # per customer, in D and in the declared schema
MAX_ITEMS = 4  # per order, in D
SCHEMAS = ("declared", "customer_only")


def schema_text(variant: str) -> str:
    """``declared``: every private table bounds its rows per customer (orders 4, line items
    4 × 4 = 16), so every join without a flat map has a bound derived from the schema;
    ``customer_only``: only ``customer`` does (τ is then hinted or chosen with DP)."""
    orders_bound = f"    max_rows_per_unit: {MAX_ORDERS}\n" if variant == "declared" else ""
    items_bound = (
        f"    max_rows_per_unit: {MAX_ORDERS * MAX_ITEMS}\n" if variant == "declared" else ""
    )
    return (
        "version: 1\n"
        "dataset: joins\n"
        "privacy:\n"
        "  neighbouring: add_remove\n"
        "  epsilon: 1\n"
        "  delta: 1.0e-6\n"
        "tables:\n"
        "  customer:\n"
        "    private: true\n"
        "    privacy_unit: c_custkey\n"
        "    max_rows_per_unit: 1\n"
        "    columns:\n"
        "      c_custkey: {type: integer}\n"
        "      c_nationkey: {type: integer}\n"
        f"      c_acctbal: {{type: float, nullable: true, lower: {ACCT_LO}, upper: {ACCT_HI}}}\n"
        "  orders:\n"
        "    private: true\n"
        "    privacy_unit: o_custkey\n"
        f"{orders_bound}"
        "    columns:\n"
        "      o_orderkey: {type: integer}\n"
        "      o_custkey: {type: integer}\n"
        "      o_totalprice: {type: float, nullable: true, "
        f"lower: {PRICE_LO}, upper: {PRICE_HI}}}\n"
        "      o_tags: {type: text, nullable: true}\n"
        "  lineitem:\n"
        "    private: true\n"
        "    privacy_unit: {via: l_orderkey, references: orders.o_orderkey}\n"
        f"{items_bound}"
        "    columns:\n"
        "      l_orderkey: {type: integer}\n"
        f"      l_quantity: {{type: float, nullable: true, lower: {QTY_LO}, upper: {QTY_HI}}}\n"
        "  nation:\n"
        "    private: false\n"
        "    columns:\n"
        "      n_nationkey: {type: integer}\n"
        "      n_name: {type: text}\n"
    )


# The public nation tables: keys 0..3 (customers also use 4, which no nation has). The fan-out m
# of n_nationkey (the most rows per key) is read by the engine when it opens.
NATIONS: dict[str, tuple[tuple[int, str], ...]] = {
    "unique": ((0, "ALGERIA"), (1, "BRAZIL"), (2, "CANADA"), (3, "EGYPT")),  # m = 1
    "dup_same_name": (  # m = 2, both copies in one group
        (0, "ALGERIA"),
        (1, "BRAZIL"),
        (1, "BRAZIL"),
        (2, "CANADA"),
        (3, "EGYPT"),
    ),
    "dup_spread": (  # m = 3 over two groups; key 2 twice over two groups
        (0, "ALGERIA"),
        (1, "BRAZIL"),
        (1, "CHILE"),
        (1, "CHILE"),
        (2, "CANADA"),
        (2, "DENMARK"),
        (3, "EGYPT"),
    ),
    "sparse": ((0, "ALGERIA"), (0, "ALBANIA"), (2, "CANADA")),  # m = 2; keys 1, 3 missing
    # m = 0 when the engine reads it: the schema derives τ with the factor max(1, m) = 1
    # (sql/joinparts.py, factor); a bound of 0 rows was an internal error (XX000)
    "empty": (),
}
NATION_KEYS = (0, 1, 2, 3, 4)


def fan_out(nation: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for k, _ in NATIONS[nation]:
        out[k] = out.get(k, 0) + 1
    return out


DDL = (
    "CREATE TABLE customer(c_custkey INTEGER PRIMARY KEY, c_nationkey INTEGER, c_acctbal DOUBLE)",
    "CREATE TABLE orders(o_orderkey INTEGER PRIMARY KEY, o_custkey INTEGER, "
    "o_totalprice DOUBLE, o_tags TEXT)",
    "CREATE TABLE lineitem(l_orderkey INTEGER, l_quantity DOUBLE)",
    "CREATE TABLE nation(n_nationkey INTEGER, n_name TEXT)",
)


# ---------------------------------------------------------------------------------------------
# Datasets and neighbours.


@dataclass(frozen=True)
class Order:
    key: int
    price: float | None
    tags: str | None
    items: tuple[float | None, ...]  # l_quantity of each line item


@dataclass(frozen=True)
class Customer:
    key: int
    nation: int
    acctbal: float | None
    orders: tuple[Order, ...]

    @property
    def items(self) -> int:
        return sum(len(o.items) for o in self.orders)


@dataclass(frozen=True)
class Db:
    customers: tuple[Customer, ...]
    orphans: tuple[tuple[int, float | None], ...] = ()  # line items of no order: no unit

    def without(self, key: int) -> Db:
        return Db(tuple(c for c in self.customers if c.key != key), self.orphans)

    def plus(self, c: Customer) -> Db:
        assert all(c.key != d.key for d in self.customers)
        return Db((*self.customers, c), self.orphans)

    def rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        customers = [(c.key, c.nation, c.acctbal) for c in self.customers]
        orders = [(o.key, c.key, o.price, o.tags) for c in self.customers for o in c.orders]
        items = [(o.key, q) for c in self.customers for o in c.orders for q in o.items]
        return customers, orders, items + list(self.orphans)


TAGS = (None, "", "a", "b", "a,b", "a,a", "a,b,c", "c,c,c,c")
ORPHAN_KEY = 90_000  # l_orderkey of line items whose order does not exist
NEW_KEY, NEW_ORDER = 50_000, 60_000  # keys of added customers and their orders

prices = st.one_of(st.none(), st.sampled_from((0.0, 1000.0)), st.floats(PRICE_LO, PRICE_HI))
quantities = st.one_of(st.none(), st.integers(QTY_LO, QTY_HI).map(float))
balances = st.one_of(st.none(), st.floats(ACCT_LO, ACCT_HI))
WILD = (-1e308, 1e308, -math.inf, math.inf, math.nan, -7.0, 1e6)  # beyond the bounds
wild_prices = st.one_of(prices, st.sampled_from(WILD))
wild_quantities = st.one_of(quantities, st.sampled_from(WILD))


@st.composite
def databases(draw: st.DrawFn) -> Db:
    """3–8 customers with 0–4 orders of 0–4 line items each (within the schema's bounds and
    the column bounds), and 0–2 orphan line items."""
    n = draw(st.integers(3, 8))
    keys = draw(st.lists(st.integers(1, 999), min_size=n, max_size=n, unique=True))
    order_keys = itertools.count(draw(st.integers(1, 100)) * 100)
    customers = []
    for key in keys:
        orders = tuple(
            Order(
                next(order_keys),
                draw(prices),
                draw(st.sampled_from(TAGS)),
                tuple(draw(st.lists(quantities, max_size=MAX_ITEMS))),
            )
            for _ in range(draw(st.integers(0, MAX_ORDERS)))
        )
        customers.append(Customer(key, draw(st.sampled_from(NATION_KEYS)), draw(balances), orders))
    orphans = tuple((ORPHAN_KEY + i, draw(quantities)) for i in range(draw(st.integers(0, 2))))
    return Db(tuple(customers), orphans)


@st.composite
def new_customers(draw: st.DrawFn) -> Customer:
    """A customer to add: up to 6 orders of up to 6 line items (beyond the declared 4 and 16),
    values beyond the column bounds, any tags."""
    order_keys = itertools.count(NEW_ORDER)
    orders = tuple(
        Order(
            next(order_keys),
            draw(wild_prices),
            draw(st.sampled_from(TAGS)),
            tuple(draw(st.lists(wild_quantities, max_size=6))),
        )
        for _ in range(draw(st.integers(0, 6)))
    )
    acct = draw(st.one_of(balances, st.sampled_from(WILD)))
    return Customer(NEW_KEY, draw(st.sampled_from(NATION_KEYS)), acct, orders)


# Always added too: more rows than any τ below, at the bounds' far side, in the nation with the
# largest fan-out of every variant but "sparse" (where key 1 is missing: a customer who joins
# no nation row).
HEAVY = Customer(
    NEW_KEY,
    1,
    50.0,
    tuple(Order(NEW_ORDER + i, 1e6, "a,b,c,a,b,c", (1e6,) * 6) for i in range(6)),
)
HEAVY_IN_NATION0 = replace(HEAVY, nation=0)
# As many rows, with values inside the bounds that pass every WHERE clause of the queries.
HEAVY_MILD = Customer(
    NEW_KEY,
    1,
    50.0,
    tuple(Order(NEW_ORDER + i, 500.0, "a,b,c,a,b,c", (30.0,) * 6) for i in range(6)),
)
FIXED_ADDED = (HEAVY, HEAVY_IN_NATION0, HEAVY_MILD)


def neighbours(d: Db, added: Sequence[Customer]) -> list[tuple[str, Db]]:
    out = [(f"remove customer {c.key}", d.without(c.key)) for c in d.customers]
    out += [(f"add customer {c}", d.plus(c)) for c in added]
    return out


# ---------------------------------------------------------------------------------------------
# The queries.

RowsOf = Callable[[Customer, dict[int, int]], int]  # a customer's rows in the un-truncated join


def _items(c: Customer, m: dict[int, int]) -> int:
    return c.items


def _orders(c: Customer, m: dict[int, int]) -> int:
    return len(c.orders)


def _nations(c: Customer, m: dict[int, int]) -> int:
    return m.get(c.nation, 0)


def _orders_nations(c: Customer, m: dict[int, int]) -> int:
    return len(c.orders) * m.get(c.nation, 0)


def _items_nations(c: Customer, m: dict[int, int]) -> int:
    return c.items * m.get(c.nation, 0)


@dataclass(frozen=True)
class Query:
    sql: str  # with {hint} where the hint goes
    rows_of: RowsOf | None  # None: the schema derives no bound (a flat map)
    customer_only: bool = False  # reads no private table but customer (bounded in both schemas)


QUERIES: dict[str, Query] = {
    "lineitem": Query("SELECT {hint}COUNT(*) FROM lineitem", _items),
    "lineitem_orders_sum": Query(
        "SELECT {hint}SUM(l_quantity) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey",
        _items,
    ),
    "customer_orders": Query(
        "SELECT {hint}COUNT(*), SUM(o_totalprice) FROM customer c "
        "JOIN orders o ON c.c_custkey = o.o_custkey",
        _orders,
    ),
    "comma_join_avg": Query(
        "SELECT {hint}COUNT(*), AVG(o_totalprice) FROM customer c, orders o "
        "WHERE c.c_custkey = o.o_custkey AND o.o_totalprice > 100",
        _orders,
    ),
    "customer_nation_by_name": Query(
        "SELECT {hint}n_name, COUNT(*) FROM customer JOIN nation ON c_nationkey = n_nationkey "
        "GROUP BY n_name",
        _nations,
        customer_only=True,
    ),
    "orders_nation_by_name": Query(
        "SELECT {hint}n_name, COUNT(*), SUM(o_totalprice) FROM orders o "
        "JOIN customer c ON o.o_custkey = c.c_custkey "
        "JOIN nation n ON c.c_nationkey = n.n_nationkey GROUP BY n_name",
        _orders_nations,
    ),
    "three_way_where": Query(
        "SELECT {hint}COUNT(*), SUM(l_quantity) FROM customer c "
        "JOIN orders o ON c.c_custkey = o.o_custkey JOIN lineitem l ON l.l_orderkey = o.o_orderkey "
        "WHERE c.c_acctbal > 20 AND l.l_quantity < 40",
        _items,
    ),
    "four_way_by_name": Query(
        "SELECT {hint}n_name, SUM(l_quantity), COUNT(*) FROM lineitem l "
        "JOIN orders o ON l.l_orderkey = o.o_orderkey JOIN customer c ON o.o_custkey = c.c_custkey "
        "JOIN nation n ON c.c_nationkey = n.n_nationkey WHERE o.o_totalprice < 800 GROUP BY n_name",
        _items_nations,
    ),
    "lineitem_by_nationkey": Query(  # private keys: partition selection (its __units too)
        "SELECT {hint}c_nationkey, COUNT(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "JOIN customer ON o_custkey = c_custkey GROUP BY c_nationkey",
        _items,
    ),
    "flat_map": Query(
        "SELECT {hint}COUNT(*) FROM orders o "
        "CROSS JOIN UNNEST(string_to_array(o.o_tags, ',')) AS t(tag)",
        None,
    ),
    "flat_map_by_tag": Query(
        "SELECT {hint}tag, COUNT(*) FROM orders o "
        "CROSS JOIN UNNEST(string_to_array(o.o_tags, ',')) AS t(tag) GROUP BY tag",
        None,
    ),
}

# No hint (τ from the schema, or chosen with DP up to the default cap); max_rows=K; max_rows_cap=4
# (chosen with DP: calibrated at 4 until drawn, so the SQL keeps 4 rows per unit).
HINTS = ("", "max_rows=1", "max_rows=2", "max_rows=3", "max_rows=5", "max_rows_cap=4")


def make_sql(name: str, hint: str) -> str:
    return QUERIES[name].sql.format(hint=f"/*+ dpproxy {hint} */ " if hint else "")


# ---------------------------------------------------------------------------------------------
# Running the rewritten SQL.


def to_vector(plan: QueryPlan, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> Vector:
    nk = len(plan.query.keys)
    expected = [f"__key_{i}" for i in range(nk)] + [p.name for p in plan.primitives]
    assert list(cols) == expected, cols
    vec: Vector = {}
    for row in rows:
        key = tuple(row[:nk])
        assert key not in vec, f"two result rows for group {key}"
        vec[key] = exact_row(plan, cols[nk:], row[nk:])
    return vec


class Harness:
    """Engines (one per schema and nation table, over a DuckDB file with the nation rows and
    empty private tables) and a data store: an in-memory DuckDB whose tables hold D and all its
    neighbours, tagged with ``ds``, behind views named like the schema's tables that show one
    dataset (and one nation table) at a time."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._engines: dict[tuple[str, str], Engine] = {}
        self._prepared: dict[tuple[str, str, str], Prepared] = {}
        self._loaded: tuple[str, tuple[Db, ...]] | None = None
        con = duckdb.connect(":memory:")
        con.execute("SET threads = 1")  # a few rows: threads only add overhead
        con.execute("CREATE TABLE customer_all(ds INTEGER, k INTEGER, n INTEGER, a DOUBLE)")
        con.execute("CREATE TABLE orders_all(ds INTEGER, k INTEGER, c INTEGER, p DOUBLE, t TEXT)")
        con.execute("CREATE TABLE lineitem_all(ds INTEGER, o INTEGER, q DOUBLE)")
        con.execute("CREATE TABLE nation_all(nv TEXT, k INTEGER, name TEXT)")
        con.executemany(
            "INSERT INTO nation_all VALUES (?, ?, ?)",
            [(nv, *r) for nv, rows in NATIONS.items() for r in rows],
        )
        con.execute("SET VARIABLE ds = 0")
        con.execute("SET VARIABLE nv = 'unique'")
        for view, select in (
            ("customer", "k AS c_custkey, n AS c_nationkey, a AS c_acctbal FROM customer_all"),
            (
                "orders",
                "k AS o_orderkey, c AS o_custkey, p AS o_totalprice, t AS o_tags FROM orders_all",
            ),
            ("lineitem", "o AS l_orderkey, q AS l_quantity FROM lineitem_all"),
        ):
            con.execute(f"CREATE VIEW {view} AS SELECT {select} WHERE ds = getvariable('ds')")
        con.execute(
            "CREATE VIEW nation AS SELECT k AS n_nationkey, name AS n_name "
            "FROM nation_all WHERE nv = getvariable('nv')"
        )
        self.con = con

    def engine(self, schema: str, nation: str) -> Engine:
        key = (schema, nation)
        if key not in self._engines:
            path = self.tmp / f"{schema}_{nation}.duckdb"
            write_database(path, Db(()), nation)
            self._engines[key] = Engine(parse_catalog(schema_text(schema)), DuckDBBackend(path))
        return self._engines[key]

    def prepare(self, schema: str, nation: str, sql: str) -> Prepared:
        key = (schema, nation, sql)
        if key not in self._prepared:
            # canonical: the SQL is run on other data than the (empty) file it is planned on
            engine = self.engine(schema, nation).canonical()
            self._prepared[key] = engine.prepare(sql, secret=SECRET)
        return self._prepared[key]

    def load(self, nation: str, ds: Sequence[Db]) -> None:
        # Equal data is loaded already (NaN never compares equal: such data is reloaded).
        if self._loaded == (nation, tuple(ds)):
            return
        self._loaded = (nation, tuple(ds))
        self.con.execute(f"SET VARIABLE nv = '{nation}'")
        for t in ("customer_all", "orders_all", "lineitem_all"):
            self.con.execute(f"DELETE FROM {t}")
        customers, orders, items = [], [], []
        for i, d in enumerate(ds):
            c, o, li = d.rows()
            customers += [(i, *r) for r in c]
            orders += [(i, *r) for r in o]
            items += [(i, *r) for r in li]
        for table, rows in (
            ("customer_all", customers),
            ("orders_all", orders),
            ("lineitem_all", items),
        ):
            if rows:
                marks = "(" + ", ".join("?" * len(rows[0])) + ")"
                self.con.execute(
                    f"INSERT INTO {table} VALUES " + ", ".join([marks] * len(rows)),
                    [v for r in rows for v in r],
                )

    def run(self, sql: str, ds: int) -> tuple[list[str], list[tuple[Any, ...]]]:
        self.con.execute(f"SET VARIABLE ds = {ds}")
        cur = self.con.execute(sql)
        rows = cur.fetchall()
        return [c[0] for c in cur.description or ()], rows

    def vectors(self, prepared: Prepared, n: int) -> list[Vector]:
        """The exact primitives of the rewritten SQL on each of the ``n`` loaded datasets."""
        assert prepared.sql is not None
        return [to_vector(prepared.plan, *self.run(prepared.sql, i)) for i in range(n)]

    def close(self) -> None:
        for e in self._engines.values():
            e.close()
        self.con.close()


def harness_fixture(name: str) -> Any:
    """A module-scoped ``harness`` fixture over this module's :class:`Harness`, for the
    brute-force modules that reuse its customers, orders and line items."""

    @pytest.fixture(scope="module")
    def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
        h = Harness(tmp_path_factory.mktemp(name))
        yield h
        h.close()

    return harness


def write_database(path: Path, d: Db, nation: str) -> None:
    """A real DuckDB file of ``d`` (with the primary keys) and a nation table."""
    customers, orders, items = d.rows()
    with duckdb.connect(str(path)) as con:
        for ddl in DDL:
            con.execute(ddl)
        if NATIONS[nation]:
            con.executemany("INSERT INTO nation VALUES (?, ?)", list(NATIONS[nation]))
        for table, rows in (("customer", customers), ("orders", orders), ("lineitem", items)):
            if rows:
                marks = "(" + ", ".join("?" * len(rows[0])) + ")"
                con.executemany(f"INSERT INTO {table} VALUES {marks}", rows)


# The largest |f(D) − f(D')|₁ / Δ₁ seen per query (printed at the end of the module with -s).
RATIOS: dict[str, Fraction] = {}


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("join_bruteforce"))
    yield h
    h.close()
    if RATIOS:
        print("\nlargest brute-force L1 change / analytic L1 sensitivity, per query:")
        for name, ratio in sorted(RATIOS.items()):
            print(f"  {name:40} {float(ratio):.4f}")


# ---------------------------------------------------------------------------------------------
# The comparison.


def assert_dominated(
    prepared: Prepared, a: Vector, b: Vector, what: str, label: str | None = None
) -> None:
    """Raise AssertionError unless every primitive moves by at most its sensitivity."""
    plan = prepared.plan
    for r in released(plan):
        name, s = r.primitive.name, r.sensitivity
        d = distance(plan, name, a, b)
        if label is not None and s.l1:
            key = f"{label} {what.split()[0]}"  # add / remove
            RATIOS[key] = max(RATIOS.get(key, Fraction(0)), d.l1 / s.l1)
        if within(r, d):
            continue
        raise AssertionError(
            f"{what}\n  primitive {name} ({r.primitive.kind.value}, measure "
            f"{r.primitive.measure}): analytic {s}, stability {plan.stability}, truncation "
            f"{plan.truncation}\n  brute force L1 {d.l1}, L2² {d.l2_squared}, L∞ {d.linf}\n"
            f"  sql {prepared.sql}\n  f(D)  {a}\n  f(D') {b}"
        )


def check_neighbours(
    harness: Harness,
    prepared: Prepared,
    nation: str,
    d: Db,
    added: Sequence[Customer],
    label: str | None = None,
) -> list[Vector]:
    """f(D) against f(D') for every neighbour D' (one DuckDB execution each)."""
    described = neighbours(d, added)
    harness.load(nation, [d, *(n for _, n in described)])
    base, *others = harness.vectors(prepared, 1 + len(described))
    for (what, _), other in zip(described, others, strict=True):
        assert_dominated(prepared, base, other, what, label)
    return [base, *others]


def assert_bound_covers(plan: QueryPlan, query: Query, d: Db, nation: str) -> None:
    """A bound derived from the schema is at least the largest number of rows one customer has
    in the un-truncated join (brute force), so truncating at it drops nothing."""
    assert plan.truncation is not None and plan.truncation.source == "schema"
    assert query.rows_of is not None, "the schema derived a bound for a flat map"
    m = fan_out(nation)
    worst = max((query.rows_of(c, m) for c in d.customers), default=0)
    if plan.stability.rows < worst:
        raise AssertionError(
            f"derived bound {plan.stability.rows} ({plan.truncation.derivation}) < {worst} rows "
            f"of one customer in the join; nation {NATIONS[nation]}; data {d}"
        )


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return (a or 0) == (b or 0)
    if isinstance(a, str) or isinstance(b, str):
        return bool(a == b)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def assert_noise_free_is_plain(harness: Harness, prepared: Prepared, sql: str) -> None:
    """With nothing truncated and every value within its bounds, the release without noise is
    the plain SQL answer (dataset 0 of the harness, D; public groups absent from it are 0)."""
    plan = prepared.plan
    assert prepared.sql is not None
    cols, rows = harness.run(prepared.sql, 0)
    out = postprocess(plan, apply_noise(plan, ExactResult(tuple(cols), tuple(rows)), NoNoise()))
    _, plain = harness.run(sql, 0)
    nk = len(plan.query.keys)
    by_key = {tuple(r[:nk]): r for r in plain}
    got = {tuple(r[:nk]): r for r in out.rows}
    assert set(by_key) <= set(got), (by_key, got)
    for key, row in got.items():
        want = by_key.get(key, (*key, *([None] * (len(row) - nk))))
        for r, p in zip(row[nk:], want[nk:], strict=True):
            if p is None and r is not None and r != 0:
                continue  # AVG over no rows: the plain answer is NULL
            assert _close(r, p), f"{sql}\n  released without noise {out.rows}\n  plain {plain}"


# ---------------------------------------------------------------------------------------------
# The property.

_BASE_EXAMPLES = settings.default.max_examples if settings.default is not None else 100
# 12 datasets per query under the default (dev) profile; a tenth of a large (CI) profile's.
EXAMPLES = settings(
    max_examples=12 if _BASE_EXAMPLES <= 100 else _BASE_EXAMPLES // 10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[p for p in Phase if p is not Phase.explain],
)


@pytest.mark.parametrize("name", list(QUERIES))
@EXAMPLES
@given(
    schema=st.sampled_from(SCHEMAS),
    nation=st.sampled_from(list(NATIONS)),
    hint=st.sampled_from(HINTS),
    d=databases(),
    added=st.lists(new_customers(), min_size=1, max_size=2),
)
def test_join_neighbours_within_sensitivity(
    harness: Harness,
    name: str,
    schema: str,
    nation: str,
    hint: str,
    d: Db,
    added: list[Customer],
) -> None:
    """|f(D) − f(D')| ≤ Δ in L1, L2 and L∞ for every neighbour D' = D ∓ one customer with all
    its orders and line items; with τ from the schema, τ covers every customer of D and the
    noise-free release is the plain SQL answer."""
    sql = make_sql(name, hint)
    prepared = harness.prepare(schema, nation, sql)
    plan = prepared.plan
    trunc = plan.truncation
    assert trunc is not None and plan.needs_bounding, "a join must always be truncated"
    query = QUERIES[name]
    derivable = query.rows_of is not None and (schema == "declared" or query.customer_only)
    if hint.startswith("max_rows="):
        assert trunc.source == "hint" and trunc.rows == int(hint.split("=")[1]), trunc
    elif derivable:  # no hint, or a cap for a DP choice that the schema makes unnecessary
        assert trunc.source == "schema", trunc
    else:  # calibrated at the largest candidate until τ is drawn
        assert trunc.source == "dp" and not trunc.chosen, trunc
        assert trunc.rows == (4 if hint else 10_000) and prepared.truncation is not None
    assert plan.stability.rows == trunc.rows
    label = f"{name} [{trunc.source}]"
    check_neighbours(harness, prepared, nation, d, [*added, *FIXED_ADDED], label)
    if trunc.source == "schema":
        assert_bound_covers(plan, query, d, nation)
        if not plan.query.keys or plan.query.public_keys:  # no partition selection
            # Without the orphan line items: a line item whose order does not exist has no unit
            # and is not in dpproxy's relation, while plain SQL over lineitem alone counts it.
            harness.load(nation, [Db(d.customers)])
            assert_noise_free_is_plain(harness, prepared, sql)


# ---------------------------------------------------------------------------------------------
# Fixed data: every query and hint on every nation table, and the real files.

D0 = Db(
    (
        Customer(
            1,
            1,
            30.0,
            (Order(10, 200.0, "a,b", (5.0, 50.0, 1.0)), Order(11, 900.0, "c,c,c,c", (40.0,))),
        ),
        Customer(2, 0, -10.0, ()),
        Customer(
            3, 2, 100.0, tuple(Order(20 + i, 150.0 * i, TAGS[i], (2.0,) * i) for i in range(4))
        ),
        Customer(4, 4, None, (Order(30, None, None, (None, 12.0)),)),
        Customer(5, 1, 55.5, (Order(40, 1000.0, "", (50.0,) * 4),) * 1),
    ),
    ((ORPHAN_KEY, 7.0),),
)
ADDED0 = (
    *FIXED_ADDED,
    Customer(NEW_KEY, 2, math.nan, (Order(NEW_ORDER, math.inf, "a,a", (-math.inf, math.nan)),)),
    Customer(NEW_KEY, 3, 1e6, ()),
)


FIXED = [("declared", n, ("", "max_rows=1", "max_rows=2", "max_rows_cap=4")) for n in NATIONS]
FIXED += [("customer_only", n, ("", "max_rows_cap=4")) for n in ("unique", "dup_spread", "empty")]


@pytest.mark.parametrize(
    ("schema", "nation", "hints"), FIXED, ids=[f"{s}-{n}" for s, n, _ in FIXED]
)
def test_every_query_on_fixed_data(
    harness: Harness, schema: str, nation: str, hints: tuple[str, ...]
) -> None:
    """Every query under several hints (the same SQL under both schemas when hinted), on one
    dataset with hand-picked customers and all the fixed added customers."""
    for name, hint in itertools.product(QUERIES, hints):
        prepared = harness.prepare(schema, nation, make_sql(name, hint))
        check_neighbours(harness, prepared, nation, D0, ADDED0, f"{name} [fixed]")
        if prepared.plan.truncation is not None and prepared.plan.truncation.source == "schema":
            assert_bound_covers(prepared.plan, QUERIES[name], D0, nation)


def test_views_match_database_files(harness: Harness, tmp_path: Path) -> None:
    """``engine.backend.execute(prepared.sql)`` on real DuckDB files of D and of each neighbour
    (a copy of D's file with the customer, its orders and their line items deleted, or with a
    new customer inserted) returns exactly what the views of the harness return."""
    nation = "dup_spread"
    base = tmp_path / "d.duckdb"
    write_database(base, D0, nation)
    engine = Engine(parse_catalog(schema_text("declared")), DuckDBBackend(base))
    described = neighbours(D0, ADDED0[:2])
    files = []
    for i in range(len(described)):
        path = tmp_path / f"n{i}.duckdb"
        shutil.copy(base, path)
        with duckdb.connect(str(path)) as con:
            if i < len(D0.customers):
                key = D0.customers[i].key
                con.execute(
                    "DELETE FROM lineitem WHERE l_orderkey IN "
                    "(SELECT o_orderkey FROM orders WHERE o_custkey = ?)",
                    [key],
                )
                con.execute("DELETE FROM orders WHERE o_custkey = ?", [key])
                con.execute("DELETE FROM customer WHERE c_custkey = ?", [key])
            else:
                c = ADDED0[i - len(D0.customers)]
                customers, orders, items = Db((c,)).rows()
                con.executemany("INSERT INTO customer VALUES (?, ?, ?)", customers)
                con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
                con.executemany("INSERT INTO lineitem VALUES (?, ?)", items)
        files.append(DuckDBBackend(path))
    try:
        for name, hint in itertools.product(QUERIES, ("", "max_rows=2")):
            prepared = engine.prepare(make_sql(name, hint), secret=SECRET)
            assert prepared.sql is not None
            plan = prepared.plan
            real = [
                to_vector(plan, r.columns, r.rows)
                for r in (b.execute(prepared.sql) for b in (engine.backend, *files))
            ]
            for (what, _), other in zip(described, real[1:], strict=True):
                assert_dominated(prepared, real[0], other, what)
            # The harness's engine for the same schema and nation plans the same SQL.
            same = harness.prepare("declared", nation, make_sql(name, hint))
            assert same.sql == prepared.sql
            assert check_neighbours(harness, same, nation, D0, ADDED0[:2]) == real
    finally:
        for b in files:
            b.close()
        engine.close()


# ---------------------------------------------------------------------------------------------
# Tightness: the analytic bound is attained (the oracle's ratio reaches 1).

SMALL = Db(D0.customers[:3])


def _distances(
    harness: Harness, prepared: Prepared, nation: str, d: Db, other: Db
) -> dict[str, Distance]:
    harness.load(nation, [d, other])
    a, b = harness.vectors(prepared, 2)
    plan = prepared.plan
    return {r.primitive.name: distance(plan, r.primitive.name, a, b) for r in released(plan)}


@pytest.mark.parametrize("k", [1, 2, 5])
def test_count_and_sum_attain_tau(harness: Harness, k: int) -> None:
    """A new customer with 36 line items of quantity 1e6 moves the line-item count by exactly
    τ = K and their sum by exactly K × 50 (the upper bound of l_quantity)."""
    for name, per_row in (("lineitem", 1), ("lineitem_orders_sum", QTY_HI)):
        prepared = harness.prepare("declared", "unique", make_sql(name, f"max_rows={k}"))
        [(p, s)] = [(r.primitive.name, r.sensitivity) for r in prepared.plan.releases]
        assert s.l1 == k * per_row
        dist = _distances(harness, prepared, "unique", SMALL, SMALL.plus(HEAVY))[p]
        assert dist.l1 == s.l1, (name, dist, s)


def test_public_fan_out_attained(harness: Harness) -> None:
    """customer ⋈ nation where key 1 has 3 nation rows (BRAZIL once, CHILE twice): the schema
    derives τ = 1 × 3; a customer of nation 1 moves the grouped counts by exactly 3 in L1 and
    by 2 in L∞ (CHILE)."""
    prepared = harness.prepare("declared", "dup_spread", make_sql("customer_nation_by_name", ""))
    plan = prepared.plan
    assert plan.truncation is not None and plan.truncation.source == "schema"
    assert plan.stability.rows == 3
    [(p, s)] = [(r.primitive.name, r.sensitivity) for r in plan.releases]
    dist = _distances(harness, prepared, "dup_spread", SMALL, SMALL.plus(HEAVY))[p]
    assert dist.l1 == s.l1 == 3 and dist.linf == 2 <= s.linf


CUSTOMER_NATION = (
    "SELECT COUNT(*), SUM(c_acctbal) FROM customer JOIN nation ON c_nationkey = n_nationkey"
)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_an_empty_public_table_gives_tau_one_and_stays_within_sensitivity(
    harness: Harness, schema: str
) -> None:
    """nation is empty when the engine reads it (fan-out m = 0): the schema derives τ = 1 × 1
    for customer ⋈ nation (not 0, which was an internal error). The plan holds on the data it
    was read from (no customer joins a nation: every neighbour moves nothing) and on nation
    tables filled afterwards, up to m = 3 rows per key: the SQL keeps τ = 1 row per customer,
    so the count moves by exactly 1 = Δ₁ when a customer of the m = 3 nation key comes or goes,
    never by 3."""
    prepared = harness.prepare(schema, "empty", CUSTOMER_NATION)
    plan = prepared.plan
    assert plan.truncation is not None and plan.truncation.source == "schema"
    assert "empty when read, taken as 1" in plan.truncation.derivation
    assert plan.stability.rows == 1 and plan.needs_bounding
    for nation in NATIONS:  # the plan read "empty"; the data may be any nation table
        check_neighbours(harness, prepared, nation, D0, ADDED0, f"customer_nation_empty [{nation}]")
    assert_bound_covers(plan, Query(CUSTOMER_NATION, _nations), D0, "empty")
    count = next(r for r in plan.releases if r.primitive.kind.value == "count")
    assert count.sensitivity.l1 == 1
    for nation, moved in (("empty", 0), ("dup_spread", 1)):
        dist = _distances(harness, prepared, nation, SMALL, SMALL.plus(HEAVY))
        assert dist[count.primitive.name].l1 == moved, (nation, dist)


# ---------------------------------------------------------------------------------------------
# Mutations: the oracle fails when dpproxy is made wrong.

HEAVY_D = Db(
    (
        Customer(1, 1, 10.0, (Order(10, 10.0, "a", (1.0, 2.0)), Order(11, 10.0, "b", (3.0, 4.0)))),
        Customer(2, 0, 10.0, (Order(20, 10.0, "a", (1.0,)),)),
    )
)


def test_mutation_plan_claims_smaller_tau(harness: Harness) -> None:
    """The SQL truncates at 16 rows per customer but the plan claims 1: removing customer 1
    (4 line items) moves the count by 4 > 1, and the oracle says so."""
    honest = harness.prepare("declared", "unique", make_sql("lineitem", ""))
    claims_one = harness.prepare("declared", "unique", make_sql("lineitem", "max_rows=1"))
    assert honest.plan.stability.rows == 16 and claims_one.plan.stability.rows == 1
    check_neighbours(harness, honest, "unique", HEAVY_D, [HEAVY])
    check_neighbours(harness, claims_one, "unique", HEAVY_D, [HEAVY])
    lying = replace(honest, plan=claims_one.plan)
    with pytest.raises(AssertionError, match="remove customer 1"):
        check_neighbours(harness, lying, "unique", HEAVY_D, [])


def test_mutation_unit_is_the_order(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A join that took ``l_orderkey`` itself as the unit of ``lineitem`` (instead of following
    the reference to the order's customer) would truncate per *order*: with max_rows=2, customer
    1's two orders keep 2 line items each, so removing the customer moves the count by 4 > 2."""
    original = joins.JoinBuilder._unit_of

    def order_is_unit(self: joins.JoinBuilder, inst: Any, depth: int = 0) -> tuple[str, str]:
        if inst.table is not None and inst.table.unit_via is not None:
            return (inst.alias, inst.table.unit_via.column.lower())
        return original(self, inst, depth)

    sql = make_sql("lineitem", "max_rows=2")
    check_neighbours(harness, harness.prepare("declared", "unique", sql), "unique", HEAVY_D, [])
    monkeypatch.setattr(joins.JoinBuilder, "_unit_of", order_is_unit)
    path = tmp_path / "mutant.duckdb"
    write_database(path, Db(()), "unique")
    engine = Engine(parse_catalog(schema_text("declared")), DuckDBBackend(path))
    try:
        mutant = engine.prepare(sql, secret=SECRET)
        assert mutant.sql is not None and "orders" not in mutant.sql  # no join to the customer
        with pytest.raises(AssertionError, match="remove customer 1"):
            check_neighbours(harness, mutant, "unique", HEAVY_D, [])
    finally:
        engine.close()


def test_mutation_public_fan_out_read_as_one(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the fan-out of nation were taken as 1, the schema would derive τ = 1 for
    customer ⋈ nation although a customer of nation 1 has 3 joined rows: the coverage check
    fails (the truncation would silently drop rows). Privacy still holds — the SQL truncates at
    the τ the plan claims — which the neighbour check confirms."""
    monkeypatch.setattr(Table, "fan_out", lambda self, name: 1)
    path = tmp_path / "mutant.duckdb"
    write_database(path, Db(()), "dup_spread")
    engine = Engine(parse_catalog(schema_text("declared")), DuckDBBackend(path))
    try:
        mutant = engine.prepare(make_sql("customer_nation_by_name", ""), secret=SECRET)
        assert mutant.plan.stability.rows == 1
        with pytest.raises(AssertionError, match="derived bound 1"):
            assert_bound_covers(mutant.plan, QUERIES["customer_nation_by_name"], D0, "dup_spread")
        check_neighbours(harness, mutant, "dup_spread", D0, ADDED0)
    finally:
        engine.close()
