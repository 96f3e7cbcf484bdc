"""``unit_unique: true`` on Spark (backends/spark_unique.py): checked once against the Parquet
files when the backend opens, then no contribution bounding; refused when the data breaks it or
the files change. Also the Spark pass's SUM of fixed-point terms (rewrite/spark.split_sum),
exact at the extremes of BIGINT. Tables of a few rows, on the test session's Spark local."""

from __future__ import annotations

import os
import time
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from sqlglot import parse_one

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.spark import SparkBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.engine import Engine
from dpproxy.errors import BackendUnavailable, SchemaError
from dpproxy.rewrite.spark import split_sum
from tests.noise import NoNoise
from tests.spark import small_data

SCHEMA = """version: 1
dataset: people
privacy:
  neighbouring: add_remove
  epsilon: 1.0
  delta: 1.0e-6
  budget: {{epsilon: 1000, delta: 0.5}}
tables:
  people:
    privacy_unit: pid
    max_rows_per_unit: 2
    {unique}
    columns:
      pid: {{type: integer}}
      sex: {{type: text, domain: [F, M]}}
      income: {{type: float, lower: 0, upper: 100}}
"""


def _setup(tmp_path: Path, values: str, unique: bool = True) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    duckdb.sql(
        f"COPY (SELECT * FROM (VALUES {values}) t(pid, sex, income)) "
        f"TO '{data / 'people.parquet'}' (FORMAT parquet)"
    )
    schema = tmp_path / "people.yaml"
    schema.write_text(SCHEMA.format(unique="unit_unique: true" if unique else ""), "utf-8")
    return data, schema


def _engine(spark_master: str, data: Path, schema: Path) -> Engine:
    catalog = load_catalog(schema)
    backend = small_data(SparkBackend(f"{spark_master}?parquet_dir={data}"))
    try:
        accountant = MemoryAccountant(catalog.policy.budget, cache="off")
        return Engine(catalog, backend, accountant=accountant, noise=NoNoise())
    except BaseException:
        backend.close()
        raise


ROWS = "(1, 'F', 10.0), (2, 'M', 20.5), (3, 'F', 30.0), (4, 'M', 99.0), (5, 'F', 150.0)"


def test_a_checked_unique_unit_is_not_bounded_and_gives_the_bounded_answer(
    spark_master: str, tmp_path: Path
) -> None:
    """The query without bounding returns exactly what the bounded query returns (the
    argument of spark_unique.py), here checked on one table both ways."""
    data, schema = _setup(tmp_path, ROWS)
    plain = tmp_path / "plain.yaml"
    plain.write_text(SCHEMA.format(unique=""), "utf-8")
    unique, bounded = _engine(spark_master, data, schema), _engine(spark_master, data, plain)
    try:
        assert unique.catalog.tables[0].unit_is_unique
        assert not bounded.catalog.tables[0].unit_is_unique
        sql = "SELECT sex, COUNT(*) AS n, SUM(income) AS s, AVG(income) FROM people GROUP BY sex"
        fast = unique.prepare(sql, epsilon=Fraction(1), secret=7).sql
        slow = bounded.prepare(sql, epsilon=Fraction(1), secret=7).sql
        assert fast is not None and slow is not None
        assert "ROW_NUMBER" not in fast.upper() and "__light" not in fast
        assert "ROW_NUMBER" in slow.upper()
        got = sorted(unique.backend.execute(fast).rows)
        assert got == sorted(bounded.backend.execute(slow).rows)
        assert [r[0] for r in got] == ["F", "M"]
        assert any([r[i] for r in got] == [3, 2] for i in range(1, len(got[0])))  # COUNT(*)
    finally:
        unique.close()
        bounded.close()


@pytest.mark.parametrize(
    "values",
    [
        pytest.param("(1, 'F', 1.0), (1, 'M', 2.0), (2, 'F', 3.0)", id="a repeated unit"),
        pytest.param("(1, 'F', 1.0), (NULL, 'M', 2.0)", id="a NULL unit"),
    ],
)
def test_data_that_breaks_unit_unique_is_refused_at_open(
    spark_master: str, tmp_path: Path, values: str
) -> None:
    with pytest.raises(SchemaError, match="unit_unique") as info:
        _engine(spark_master, *_setup(tmp_path, values))
    assert info.value.sqlstate == "ZD004"


def test_a_file_changed_after_the_check_refuses_the_query(
    spark_master: str, tmp_path: Path
) -> None:
    data, schema = _setup(tmp_path, ROWS)
    engine = _engine(spark_master, data, schema)
    try:
        engine.run("SELECT COUNT(*) FROM people", analyst="a", epsilon=Fraction(1))
        (target,) = [p for p in (data / "people.parquet").rglob("*") if p.is_file()] or [
            data / "people.parquet"
        ]
        later = time.time_ns() + 10**9
        os.utime(target, ns=(later, later))
        with pytest.raises(BackendUnavailable, match="changed since unit_unique was checked"):
            engine.run("SELECT COUNT(*) FROM people", analyst="a", epsilon=Fraction(1))
    finally:
        engine.close()


def test_split_sum_is_exact_at_the_ends_of_bigint(spark_master: str, tmp_path: Path) -> None:
    big = 2**63 - 1
    values = [big, big, -(2**63), -1, 1, 2**42 - 1, -(2**42), 2**21, 12345678901234, None]
    backend = small_data(SparkBackend(spark_master))
    try:
        rows = ", ".join("(CAST(NULL AS BIGINT))" if v is None else f"({v})" for v in values)
        total = split_sum(parse_one("CAST(v AS BIGINT)")).sql("spark")
        (got,) = backend.execute(f"SELECT {total} FROM VALUES {rows} AS t(v)").rows
        assert got[0] == sum(v for v in values if v is not None)
        (empty,) = backend.execute(f"SELECT {total} FROM VALUES (1) AS t(v) WHERE v > 1").rows
        assert empty[0] is None
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("unit_unique: yes please", "must be true or false"),
        ("unit_unique: 1", "must be true or false"),
    ],
)
def test_the_schema_key_is_a_boolean(tmp_path: Path, line: str, problem: str) -> None:
    schema = tmp_path / "people.yaml"
    schema.write_text(SCHEMA.format(unique=line), "utf-8")
    with pytest.raises(SchemaError) as info:
        load_catalog(schema)
    assert any("unit_unique" in p and problem in p for p in info.value.problems)


def test_a_public_table_cannot_state_unit_unique(tmp_path: Path) -> None:
    schema = tmp_path / "people.yaml"
    text = SCHEMA.format(unique="unit_unique: true").replace(
        "    privacy_unit: pid\n    max_rows_per_unit: 2\n", "    private: false\n"
    )
    schema.write_text(text, "utf-8")
    with pytest.raises(SchemaError) as info:
        load_catalog(schema)
    assert any("unit_unique" in p for p in info.value.problems)
