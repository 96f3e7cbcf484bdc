"""Totality on Spark: the property of ``test_totality.py`` against Spark local in ANSI mode.

The same generated adversarial databases and queries (``tests/totality.py``), written to
Parquet and read by a :class:`~dpproxy.backends.spark.SparkBackend` of the test session's Spark
(``spark_master``): every accepted query's statements must run without an error on Spark,
where an integer overflow, a division by zero or a failing cast raises (ANSI), and prepare
must not depend on the data. A Spark query costs about a second, so the bounded run draws
:data:`SPARK_EXAMPLES` examples only; ``DPPROXY_TOTALITY_EXAMPLES`` sets a longer run.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends.spark import SparkBackend
from dpproxy.engine import Engine
from tests.noise import NoNoise
from tests.property.test_totality import _check_totality
from tests.spark import small_data
from tests.totality import Row, catalog, check_queries, write_duckdb

SPARK_EXAMPLES = 20


class SparkWorld:
    """Per distinct example, the database and its neighbour as ``DIR/t.parquet`` each, and a
    Spark backend (a new session of the shared Spark) over each directory."""

    dialect = "spark"

    def __init__(self, tmp: Path, master: str) -> None:
        self.tmp = tmp
        self.master = master
        self._n = itertools.count()
        self._open: list[Engine] = []
        self._key: str | None = None
        self._writer = duckdb.connect(":memory:")

    def _parquet(self, rows: Sequence[Row]) -> Path:
        n = next(self._n)
        database = self.tmp / f"t{n}.duckdb"
        write_duckdb(self._writer, database, rows)
        directory = self.tmp / f"p{n}"
        directory.mkdir()
        con = duckdb.connect(str(database), read_only=True)
        try:
            con.execute(f"COPY t TO '{directory / 't.parquet'}' (FORMAT parquet)")
        finally:
            con.close()
        database.unlink()
        return directory

    def engines(
        self, bound: str, portable: bool, rows: Sequence[Row], nb_rows: Sequence[Row]
    ) -> tuple[Engine, Engine]:
        key = repr((bound, portable, rows, nb_rows))
        if key != self._key:
            self.release()
            for data in (rows, nb_rows):
                backend = small_data(
                    SparkBackend(
                        f"{self.master}?parquet_dir={self._parquet(data)}", portable_hash=portable
                    )
                )
                self._open.append(Engine(catalog(bound), backend, noise=NoNoise()))
            self._key = key
        return self._open[0], self._open[1]

    def release(self) -> None:
        for e in self._open:
            e.close()
        self._open.clear()
        self._key = None

    def close(self) -> None:
        self.release()
        self._writer.close()


@pytest.fixture(scope="module")
def spark_world(
    spark_master: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkWorld]:
    world = SparkWorld(tmp_path_factory.mktemp("totality-spark"), spark_master)
    yield world
    world.close()


def test_accepted_queries_never_fail_on_spark(spark_world: SparkWorld) -> None:
    _check_totality(spark_world, SPARK_EXAMPLES)  # type: ignore[arg-type]


def test_an_impossible_date_from_a_column_is_null_on_spark(spark_world: SparkWorld) -> None:
    """Found by the property test: text that matches the date pattern but is no date
    (``'2024-02-30'``) reached Spark's ANSI ``CAST`` through a column expression (a literal
    alone is folded before) and raised; the Spark pass now writes ``TRY_CAST`` there."""
    rows = [(u, 1, 1, 1, 0.0, 1.0, "2024-03-01", None, True, None) for u in (1, 2)]
    engine, neighbour = spark_world.engines("rows", True, rows, rows[:1])
    sql = "SELECT COUNT(CAST(LEAST(CAST(cat AS VARCHAR), TRIM('2024-02-30')) AS DATE)) FROM t"
    problems = check_queries(engine, neighbour, [sql], label="spark")
    assert not problems, "\n\n".join(problems)
    assert "TRY_CAST(" in (engine.prepare(sql).sql or "")
