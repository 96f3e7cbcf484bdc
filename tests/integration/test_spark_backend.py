"""The Spark backend on Spark local: docs/spark.md's "Spark local" (moved there from the README,
whose "Running on Spark" keeps one line and a link), checked sentence by sentence.

The documented command runs as a user runs it (the console script in a subprocess, with its own
Spark); the other checks share the test session's Spark (``spark_master``, tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpproxy.backends import CancelToken, open_backend
from dpproxy.backends.spark import DEFAULT_STATEMENT_TIMEOUT_S, SparkBackend, parse_spark_url
from dpproxy.catalog.model import Catalog
from dpproxy.cli import main
from dpproxy.errors import BackendUnavailable, InternalError, InvalidParameter, QueryCanceled
from tests.commands import dpproxy_command
from tests.spark import export_parquet

ROOT = Path(__file__).resolve().parents[2]
SPARK_DOC = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
SECTION = SPARK_DOC.split("\n## Spark local\n", 1)[1].split("\n## ", 1)[0]
SLOW = "SELECT MAX(xxhash64(id)) AS s FROM range(0, 1000000000000)"


def _blocks(kind: str) -> list[str]:
    found = re.findall(r"^```(\w*)\n(.*?)^```", SECTION, re.M | re.S)
    return [body for lang, body in found if lang == kind]


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Path:
    return export_parquet(demo_db, tmp_path_factory.mktemp("spark-adult") / "data")


@pytest.fixture(scope="module")
def backend(spark_master: str, parquet_dir: Path) -> Any:
    b = SparkBackend(f"{spark_master}?parquet_dir={parquet_dir}")
    yield b
    b.close()


def test_the_documented_command_answers_over_parquet_on_spark_local(
    tmp_path: Path, demo_db: Path
) -> None:
    (python_block,) = _blocks("python")
    (shell_block,) = _blocks("")
    (tmp_path / "data").mkdir()
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "adult.yaml").write_bytes((ROOT / "schemas/adult.yaml").read_bytes())
    subprocess.run([sys.executable, "-c", python_block], cwd=tmp_path, check=True, timeout=300)
    assert (tmp_path / "data" / "adult.parquet").is_file()
    command = shlex.split(shell_block.replace("\\\n", " ").removeprefix("$ "))
    assert command[:2] == ["dpproxy", "query"]
    out = subprocess.run(
        [*dpproxy_command(), *command[1:], "--format", "json", "--ledger", "memory"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout)
    assert sorted(r["sex"] for r in answer["rows"]) == ["Female", "Male"]
    assert all(17 <= r["avg"] <= 90 for r in answer["rows"])


def test_explain_takes_the_same_database(spark_master: str, parquet_dir: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "explain",
            "--database",
            f"{spark_master}?parquet_dir={parquet_dir}",
            "--schema",
            str(ROOT / "schemas/adult.yaml"),
            "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "adult" in result.output and "COUNT" in result.output.upper()


@pytest.mark.parametrize("address", ["sc://127.0.0.1:1", "spark://127.0.0.1:1"])
def test_an_address_that_does_not_answer_is_refused_with_08001(address: str) -> None:
    out = subprocess.run(
        [
            *dpproxy_command(),
            "query",
            "--database",
            address,
            "--schema",
            str(ROOT / "schemas/adult.yaml"),
            "--format",
            "json",
            "--ledger",
            "memory",
            "SELECT COUNT(*) FROM adult",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    error = json.loads(out.stdout)["error"]
    assert error["sqlstate"] == "08001"
    assert "not reachable" in error["message"]
    with pytest.raises(BackendUnavailable):
        open_backend(address)


def test_addresses_are_read_as_documented() -> None:
    assert parse_spark_url("spark+local[2]?parquet_dir=data").master == "local[2]"
    assert parse_spark_url("spark+local[*]").master == "local[*]"
    assert parse_spark_url("sc://h:15002").remote == "sc://h:15002"
    assert parse_spark_url("spark://h:7077").master == "spark://h:7077"
    for bad in ("spark+local[x]", "spark://h", "sc://h:15002?user=x"):
        with pytest.raises(InvalidParameter):
            parse_spark_url(bad)


def test_sessions_run_in_ansi_mode(backend: SparkBackend) -> None:
    assert backend._spark.conf.get("spark.sql.ansi.enabled") == "true"
    # ANSI: an integer overflow raises (a wrap would give a value); Spark's text stays out.
    with pytest.raises(InternalError) as raised:
        backend.execute("SELECT CAST(2147483647 AS INT) + CAST(id AS INT) AS x FROM range(1, 2)")
    assert raised.value.message == "the database failed to run the query"
    assert "ARITHMETIC" in (raised.value.log_detail or "")


def test_spark_proves_no_unit_unique(backend: SparkBackend, demo_catalog: Catalog) -> None:
    attached = backend.attach_catalog(demo_catalog)
    assert all(not t.unit_is_unique for t in attached.tables)


def _wait_for_a_job(backend: SparkBackend) -> None:
    tracker = backend._spark.sparkContext.statusTracker()
    for _ in range(600):
        if tracker.getActiveJobsIds():
            return
        time.sleep(0.1)
    raise AssertionError("the query never started a Spark job")


def test_a_cancel_interrupts_the_running_query(backend: SparkBackend) -> None:
    token = CancelToken()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            backend.execute(SLOW, token)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    _wait_for_a_job(backend)
    token.cancel()
    thread.join(timeout=300)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], QueryCanceled)
    assert outcome[0].sqlstate == "57014"
    assert backend.execute("SELECT 1 AS one").rows == ((1,),)  # the session still works


def test_the_statement_timeout_cancels_with_57014(spark_master: str) -> None:
    assert DEFAULT_STATEMENT_TIMEOUT_S == 300
    default = open_backend(spark_master)
    assert isinstance(default, SparkBackend) and default.statement_timeout == 300
    default.close()
    quick = open_backend(spark_master, statement_timeout=1.0)  # what --statement-timeout sets
    try:
        with pytest.raises(QueryCanceled) as raised:
            quick.execute(SLOW)
        assert "statement timeout" in raised.value.message
    finally:
        quick.close()


# Strings and separators where a regular expression, an empty element or a slice could make
# Spark's SPLIT differ from DuckDB's STRING_TO_ARRAY (rewrite/spark._split, _slice).
_SPLITS = [
    ("", " "),
    ("a  b", " "),
    (" a ", " "),
    ("abc", ""),
    ("a.b.c", "."),
    ("x\\Ey\\Ez", "\\E"),
    ("1+2+3", "+"),
    ("a|b||c", "||"),
    ("[a](b){c}^$*?", "]("),
    ("é,ü,ß", ","),
    ("a1b1c", "1"),
    (None, ","),
]


def test_split_and_slice_equal_duckdb(backend: Any) -> None:
    """The Spark pass's STRING_TO_ARRAY and slice give DuckDB's elements on text chosen to
    trip a regular expression, empty elements, NULL and short arrays."""
    import duckdb
    import sqlglot
    from sqlglot import exp

    from dpproxy.rewrite.spark import to_spark

    con = duckdb.connect()
    try:
        for text, sep in _SPLITS:
            for bounds in (None, (1, 2), (2, 3), (3, 8), (4, 3)):
                value = exp.Literal.string(text) if text is not None else exp.Null()
                split: exp.Expression = exp.StringToArray(
                    this=exp.cast(value, "VARCHAR"), expression=exp.Literal.string(sep)
                )
                if bounds is not None:
                    split = exp.Bracket(
                        this=exp.Paren(this=split),
                        expressions=[
                            exp.Slice(
                                this=exp.Literal.number(bounds[0]),
                                expression=exp.Literal.number(bounds[1]),
                            )
                        ],
                    )
                tree = exp.select(exp.alias_(split, "parts"))
                (want,) = con.execute(tree.sql("duckdb")).fetchone() or (None,)
                spark_sql = to_spark(sqlglot.parse_one(tree.sql("duckdb"), read="duckdb"), {})
                got = backend.execute(spark_sql.sql("spark")).rows[0][0]
                assert (list(got) if got is not None else None) == want, (text, sep, bounds)
    finally:
        con.close()


def test_numbers_beyond_38_digits_run_as_doubles(backend: Any) -> None:
    """The rewrite's limit 10²⁵⁰ (a DOUBLE measure's clamp, ``rewrite/perunit.py``) is a
    number Spark read as a DECIMAL of 251 digits and refused on every run
    (``DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION``, found by ``test_totality_spark.py``): the
    Spark pass writes it as a DOUBLE, and the comparisons give DuckDB's answers."""
    import duckdb
    import sqlglot

    from dpproxy.rewrite.spark import to_spark

    wide = "1" + "0" * 250
    sql = (
        f"SELECT CASE WHEN CAST(-5 AS DOUBLE) < -{wide} THEN -{wide} "
        f"WHEN CAST(7 AS DOUBLE) > {wide} THEN {wide} ELSE 3 END AS clamped, "
        f"CAST(1e300 AS DOUBLE) > {wide} AS above, 12345678901234567890 AS long_int"
    )
    (want,) = duckdb.connect().execute(sql).fetchall()
    tree = to_spark(sqlglot.parse_one(sql, read="duckdb"), {})
    assert wide not in tree.sql("spark")
    (got,) = backend.execute(tree.sql("spark")).rows
    assert [float(v) for v in got[:1]] == [float(want[0])] and got[1:] == want[1:], (got, want)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM adult WHERE TRUE",
        "SELECT SUM(age) FROM adult WHERE (age > 30) AND (hours_per_week < 60)",
        "SELECT sex, AVG(hours_per_week) FROM adult WHERE (TRUE) GROUP BY sex",
    ],
)
def test_a_where_clause_in_parentheses_is_not_read_as_an_alias(
    backend: SparkBackend, demo_catalog: Catalog, sql: str
) -> None:
    """Spark reads ``FROM t WHERE (c)`` as ``t`` aliased ``WHERE`` with the column list
    ``(c)`` (WHERE is not a reserved word): the query failed on every database with
    ASSIGNMENT_ARITY_MISMATCH, charged. The Spark pass aliases every table by its own name
    (rewrite/spark.py), and the statement runs."""
    from dpproxy.engine import Engine
    from tests.noise import NoNoise

    engine = Engine(demo_catalog, backend, noise=NoNoise())
    prepared = engine.prepare(sql)
    assert prepared.sql is not None and " WHERE (" in prepared.sql
    assert "FROM adult AS adult" in prepared.sql
    assert backend.execute(prepared.sql).rows  # it runs: one row or more
