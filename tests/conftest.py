"""Shared test configuration: Hypothesis profiles and the databases the tests run against.

Profiles: ``dev`` (the default, 50 examples) and ``ci`` (selected when the ``CI`` environment
variable is set: more examples, derandomized, no deadline).

Databases:

* ``demo_db``: the bundled Adult demo, built once per session into a temporary cache directory
  (``DPPROXY_CACHE_DIR`` points there for the whole session, so ``dpproxy.connect()`` and the
  CLI subprocesses find the same file);
* ``multi_db``: a DuckDB file with a table ``visits`` in which a privacy unit has *several* rows,
  and two schema files over it (``visits_rows``: at most 3 rows per unit; ``visits_groups``: at
  most 2 groups per unit and 2 rows per group).

PostgreSQL (see ``tests/pg.py``; tests that use these are marked ``postgres`` automatically):

* ``pg_server`` (session): a real server, from ``DPPROXY_TEST_DSN``, a throwaway local cluster or
  testcontainers; skips when there is none, and *fails* under CI;
* ``pg_session_dsn`` (session) / ``pg_dsn`` (per test): the DSN of a fresh empty database on it,
  dropped afterwards;
* ``pg_cluster`` (per test): a dedicated throwaway cluster the test may stop and restart.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from hypothesis import settings

from dpproxy.catalog.load import load_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.demo import demo_database_path, demo_schema_path

# The shared test helpers are imported as ``tests.noise`` and ``tests.fixtures`` from the
# repository root, whatever directory pytest is started from.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests import pg  # noqa: E402
from tests.noise import NoNoise  # noqa: E402

settings.register_profile("dev", max_examples=50)
settings.register_profile("ci", max_examples=500, derandomize=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# Every dpproxy process the tests start (servers, CLI runs) keeps budgets in memory unless a test
# gives it a ledger file of its own: a developer's real ledger must never be touched, and tests
# must not share spending through one.
os.environ["DPPROXY_LEDGER"] = "memory"


# ------------------------------------------------------------------------------------ demo


@pytest.fixture(scope="session")
def demo_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A session cache directory; ``DPPROXY_CACHE_DIR`` points at it while the session runs."""
    path = tmp_path_factory.mktemp("dpproxy-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPPROXY_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def demo_db(demo_cache_dir: Path) -> Path:
    """The path of the demo DuckDB database (built once per session)."""
    return demo_database_path(progress=False)


@dataclass(frozen=True)
class TpchDB:
    """TPC-H at scale 0.01 in DuckDB (1,500 customers) and its privacy schema."""

    path: Path
    schema: Path

    def catalog(self) -> Catalog:
        return load_catalog(self.schema)


@pytest.fixture(scope="session")
def tpch_db(tmp_path_factory: pytest.TempPathFactory) -> TpchDB:
    """TPC-H scale 0.01, generated offline with tpchgen-cli once per session (≈ 2 s)."""
    from dpproxy.tpch import generate_tpch

    path = generate_tpch(tmp_path_factory.mktemp("tpch") / "tpch.duckdb", 0.01)
    return TpchDB(path, Path(_ROOT) / "schemas" / "tpch.yaml")


@pytest.fixture(scope="session")
def demo_catalog() -> Catalog:
    """The demo's privacy schema (``dpproxy/data/adult.yaml``)."""
    return load_catalog(demo_schema_path())


@pytest.fixture
def no_noise() -> NoNoise:
    return NoNoise()


# ------------------------------------------------------------------------------ visits

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DAYS_WITH_DATA = DAYS[:-1]  # nobody visits on Sunday: the public group "Sun" has no rows
CITIES = ("Oslo", "Lima", "Pune", "Kyiv")
NOTES = ("ok", "late", "abc", "12", None)
N_USERS = 60
N_ROWS = 300
SEED = 20240601

# Users 1..40 never exceed either contribution bound (≤ 3 rows, ≤ 2 days, ≤ 2 rows a day), so
# queries restricted to them have the same exact answer before and after bounding. Users 41..60
# have 10 rows each over 5 days: both bounds bind for them.
NON_BINDING_MAX_USER = 40

_SCHEMA_COMMON = """\
version: 1
dataset: visits
privacy:
  neighbouring: add_remove
  epsilon: 1.0
  delta: 1.0e-6
  mechanism: laplace
  budget: {{epsilon: 10, delta: 1.0e-5}}
tables:
  visits:
    private: true
    privacy_unit: user_id
{bound}
    columns:
      user_id: {{type: integer}}
      day_of_week: {{type: text, domain: [{days}]}}
      city: {{type: text}}
      amount: {{type: float, lower: 0, upper: 100}}
      duration: {{type: integer, lower: 0, upper: 600}}
      flag: {{type: boolean}}
      note: {{type: text, nullable: true}}
"""

BOUNDS = {
    "visits_rows": "    max_rows_per_unit: 3",
    "visits_groups": "    max_groups_per_unit: 2\n    max_rows_per_group_per_unit: 2",
}


@dataclass(frozen=True)
class MultiDB:
    """The visits database and its two schema files."""

    path: Path
    schemas: dict[str, Path]  # "visits_rows" / "visits_groups" → YAML file

    def catalog(self, name: str) -> Catalog:
        return load_catalog(self.schemas[name])


def _visit_rows() -> list[tuple[object, ...]]:
    """300 rows for 60 users, from a fixed seed, inside the schema's bounds.

    For users 1..40 the city and the flag are fixed per (user, day), and a user with 3 rows has
    them on two days with different cities and flags, so no unit ever has more than 2 rows in a
    group of day_of_week, city or flag: neither schema's bound binds for them.
    """
    rng = random.Random(SEED)
    rows: list[tuple[object, ...]] = []

    def row(user: int, day: str, city: str, flag: bool) -> tuple[object, ...]:
        amount = round(rng.uniform(0, 100), 2)
        if rng.random() < 0.05:
            amount = rng.choice([0.0, 100.0])
        duration = rng.choice([0, 0, 600]) if rng.random() < 0.1 else rng.randint(1, 599)
        return (user, day, city, amount, duration, flag, rng.choice(NOTES))

    for user in range(1, 21):  # 2 rows, any day, city and flag
        for _ in range(2):
            rows.append(
                row(user, rng.choice(DAYS_WITH_DATA), rng.choice(CITIES), rng.random() < 0.4)
            )
    for user in range(21, NON_BINDING_MAX_USER + 1):  # 3 rows: 2 on one day, 1 on another
        d1, d2 = rng.sample(DAYS_WITH_DATA, 2)
        c1, c2 = rng.sample(CITIES, 2)
        f1 = rng.random() < 0.4
        for day, city, flag in ((d1, c1, f1), (d1, c1, f1), (d2, c2, not f1)):
            rows.append(row(user, day, city, flag))
    for user in range(NON_BINDING_MAX_USER + 1, N_USERS + 1):  # 10 rows, 2 on each of 5 days
        days = rng.sample(DAYS_WITH_DATA, 5)
        for i in range(10):
            rows.append(row(user, days[i % 5], rng.choice(CITIES), rng.random() < 0.4))
    assert len(rows) == N_ROWS
    rng.shuffle(rows)
    return rows


@pytest.fixture(scope="session")
def multi_db(tmp_path_factory: pytest.TempPathFactory) -> MultiDB:
    """A DuckDB file with ``visits`` (300 rows, 60 users, several rows each) and two schemas."""
    root = tmp_path_factory.mktemp("visits")
    path = root / "visits.duckdb"
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "CREATE TABLE visits (user_id INTEGER NOT NULL, day_of_week VARCHAR NOT NULL, "
            "city VARCHAR NOT NULL, amount DOUBLE NOT NULL, duration INTEGER NOT NULL, "
            "flag BOOLEAN NOT NULL, note VARCHAR)"
        )
        con.executemany("INSERT INTO visits VALUES (?, ?, ?, ?, ?, ?, ?)", _visit_rows())
        con.execute("CHECKPOINT")
    finally:
        con.close()
    days = ", ".join(DAYS)
    schemas = {}
    for name, bound in BOUNDS.items():
        f = root / f"{name}.yaml"
        f.write_text(_SCHEMA_COMMON.format(bound=bound, days=days), encoding="utf-8")
        schemas[name] = f
    return MultiDB(path, schemas)


# -------------------------------------------------------------------------------- postgres

PG_FIXTURES = frozenset({"pg_server", "pg_session_dsn", "pg_dsn", "pg_cluster"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a PostgreSQL fixture ``postgres`` (``-m "not postgres"``)."""
    for item in items:
        if PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.Server]:
    """The session's PostgreSQL server; skips without one (fails under CI)."""
    server = pg.server_or_skip()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def pg_session_dsn(pg_server: pg.Server) -> Iterator[str]:
    """The DSN of one empty database for the whole session (for expensive loads)."""
    with pg.temporary_database(pg_server.admin_dsn) as dsn:
        yield dsn


@pytest.fixture
def pg_dsn(pg_server: pg.Server) -> Iterator[str]:
    """The DSN of a fresh empty database ``dpproxy_test_<8 hex>``, dropped after the test."""
    with pg.temporary_database(pg_server.admin_dsn) as dsn:
        yield dsn


@pytest.fixture
def pg_cluster() -> Iterator[pg.TemporaryCluster]:
    """A dedicated, started throwaway cluster, never the shared server: tests may stop it."""
    cluster = pg.cluster_or_skip()
    try:
        yield cluster
    finally:
        cluster.cleanup()


# ----------------------------------------------------------------------------------- spark


@pytest.fixture(scope="session")
def spark_master() -> Iterator[str]:
    """Spark local, started once for the session (``tests/spark.py``); skips without PySpark
    or Java, and fails under CI. Yields the ``--database`` spelling of its master."""
    from dpproxy.backends.spark import SparkBackend
    from tests.spark import MASTER, require_spark

    require_spark()
    keeper = SparkBackend(MASTER)  # holds the process's Spark session until the end
    try:
        yield MASTER
    finally:
        keeper.close()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A standalone Spark cluster (a master and one worker, ``tests/spark_cluster.py``) for the
    session, stopped at its end; skips without PySpark or Java, and fails under CI."""
    from tests.spark import require_spark
    from tests.spark_cluster import Cluster

    require_spark()
    cluster = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark Connect server (``tests/spark_cluster.py``) for the session, stopped at its end;
    skips without PySpark or Java, and fails under CI."""
    from tests.spark import require_spark
    from tests.spark_cluster import ConnectServer

    require_spark()
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield server.start()
    finally:
        server.stop()
