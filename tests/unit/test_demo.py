"""The bundled demo: the Adult CSV, the DuckDB file built from it, and its privacy schema.

The database is built for real into a temporary cache directory (``$DPPROXY_CACHE_DIR``).
The schema tests check that the demo schema is truthful: every value in the data lies in the
declared domains and bounds, and NULLs occur exactly in the columns declared nullable.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from dpproxy.catalog.load import load_catalog
from dpproxy.catalog.model import ColumnType, Table
from dpproxy.demo import (
    build_demo_database,
    cache_dir,
    demo_csv_path,
    demo_database_path,
    demo_schema_path,
)

REPO = Path(__file__).resolve().parents[2]
RAW = REPO.parent / "shared" / "data" / "adult" / "adult.data"
N_ROWS = 32_561
COLUMNS = [
    ("person_id", "INTEGER"),
    ("age", "INTEGER"),
    ("workclass", "VARCHAR"),
    ("fnlwgt", "INTEGER"),
    ("education", "VARCHAR"),
    ("education_num", "INTEGER"),
    ("marital_status", "VARCHAR"),
    ("occupation", "VARCHAR"),
    ("relationship", "VARCHAR"),
    ("race", "VARCHAR"),
    ("sex", "VARCHAR"),
    ("capital_gain", "INTEGER"),
    ("capital_loss", "INTEGER"),
    ("hours_per_week", "INTEGER"),
    ("native_country", "VARCHAR"),
    ("income_class", "VARCHAR"),
]
NULLABLE = {"workclass", "occupation", "native_country"}  # where adult.data has "?"

needs_raw = pytest.mark.skipif(not RAW.is_file(), reason=f"{RAW} (the UCI source) is absent")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The demo database, built once for this module in a fresh cache directory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPPROXY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield demo_database_path(progress=False)


@pytest.fixture(scope="module")
def con(built: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the built demo database."""
    c = duckdb.connect(str(built), read_only=True)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def table() -> Table:
    """The ``adult`` table of the packaged demo schema."""
    t = load_catalog(demo_schema_path()).table("adult")
    assert t is not None
    return t


def one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[object, ...]:
    """The single row of a query."""
    row = con.execute(sql).fetchone()
    assert row is not None
    return row


def raw_rows() -> list[list[str | None]]:
    """The UCI source, trimmed, with ``?`` as None, blank lines dropped."""
    rows: list[list[str | None]] = []
    for line in RAW.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append([None if f.strip() == "?" else f.strip() for f in line.split(",")])
    return rows


def load_script() -> ModuleType:
    """Import ``benchmarks/make_demo_data.py`` (not a package) from its file."""
    spec = importlib.util.spec_from_file_location(
        "make_demo_data", REPO / "benchmarks" / "make_demo_data.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- packaged files


def test_schema_copies_are_identical() -> None:
    shipped = demo_schema_path()
    assert shipped == REPO / "dpproxy" / "data" / "adult.yaml"
    assert shipped.read_bytes() == (REPO / "schemas" / "adult.yaml").read_bytes()


def test_csv_has_a_header_and_empty_fields_for_missing_values() -> None:
    with gzip.open(demo_csv_path(), "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0] == ",".join(name for name, _ in COLUMNS[1:])
    assert len(lines) == 1 + N_ROWS
    assert not any("?" in line or ", " in line or line != line.strip() for line in lines)


@needs_raw
def test_make_demo_data_reproduces_the_packaged_csv() -> None:
    script = load_script()
    rows = script.clean_rows(RAW.read_text(encoding="utf-8"))
    assert len(rows) == N_ROWS
    assert script.to_csv_gz(rows) == demo_csv_path().read_bytes()


def test_make_demo_data_answers_help_and_bad_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is written for ``--help`` or a source it cannot read (it read ``--help`` as a
    path and raised FileNotFoundError), and the message names what to do."""
    script = load_script()
    assert script.main(["make_demo_data.py", "--help"]) == 0
    assert "make_demo_data.py [path/to/adult.data]" in capsys.readouterr().err
    assert script.main(["make_demo_data.py", "a", "b"]) == 2
    capsys.readouterr()
    missing = tmp_path / "adult.data"
    assert script.main(["make_demo_data.py", str(missing)]) == 1
    assert f"cannot read {missing}: No such file or directory" in capsys.readouterr().err


# ---------------------------------------------------------------------------- building


def test_builds_once_with_progress_then_reuses_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPPROXY_CACHE_DIR", str(tmp_path / "cache"))
    first = demo_database_path()
    err = capsys.readouterr().err
    assert re.search(r"building the demo database … done in \d+\.\d s", err), err
    assert first.parent == tmp_path / "cache"
    assert re.fullmatch(r"adult-[^-]+-[0-9a-f]{8}\.duckdb", first.name), first.name
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary files left
    before = first.stat()

    second = demo_database_path()
    assert second == first
    assert capsys.readouterr().err == ""
    after = second.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


def test_concurrent_builds_agree(tmp_path: Path) -> None:
    """Processes racing to build the same cache file all get the same, complete file."""
    env = {**os.environ, "DPPROXY_CACHE_DIR": str(tmp_path)}
    code = "from dpproxy.demo import demo_database_path as p; print(p(progress=False))"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = {proc.communicate(timeout=120)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    (path,) = outputs
    assert [p.name for p in tmp_path.iterdir()] == [Path(path).name]
    with duckdb.connect(path, read_only=True) as c:
        assert c.execute("SELECT count(*) FROM adult").fetchone() == (N_ROWS,)


def test_quiet_build_prints_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPPROXY_CACHE_DIR", str(tmp_path))
    assert demo_database_path(progress=False).is_file()
    assert capsys.readouterr() == ("", "")


def test_cache_directory_fallbacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPPROXY_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("DPPROXY_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "dpproxy"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "dpproxy"


def test_build_replaces_a_broken_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "demo.duckdb"
    target.parent.mkdir()
    target.write_bytes(b"half-built garbage")
    build_demo_database(target)
    with duckdb.connect(str(target), read_only=True) as c:
        assert c.execute("SELECT count(*) FROM adult").fetchone() == (N_ROWS,)
    assert [p.name for p in target.parent.iterdir()] == ["demo.duckdb"]


def test_failed_build_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "demo.duckdb"
    target.mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(OSError):
        build_demo_database(target)
    assert [p.name for p in tmp_path.iterdir()] == ["demo.duckdb"]
    assert target.is_dir() and not any(target.iterdir())


# ---------------------------------------------------------------------------- the data


def test_table_has_the_rows_and_typed_columns(con: duckdb.DuckDBPyConnection) -> None:
    described = con.execute("DESCRIBE adult").fetchall()
    assert [(r[0], r[1]) for r in described] == COLUMNS
    assert con.execute(
        "SELECT count(*), count(DISTINCT person_id), min(person_id), max(person_id) FROM adult"
    ).fetchone() == (N_ROWS, N_ROWS, 1, N_ROWS)
    keys = con.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() "
        "WHERE table_name = 'adult' AND constraint_type = 'PRIMARY KEY'"
    ).fetchall()
    assert keys == [(["person_id"],)]


def test_nulls_exactly_where_the_source_had_question_marks(
    con: duckdb.DuckDBPyConnection,
) -> None:
    for name, _ in COLUMNS:
        (nulls,) = one(con, f"SELECT count(*) FROM adult WHERE {name} IS NULL")
        assert (nulls != 0) == (name in NULLABLE), name
        (marks,) = one(con, f"SELECT count(*) FROM adult WHERE {name}::VARCHAR = '?'")
        assert marks == 0, name


def test_text_values_are_trimmed(con: duckdb.DuckDBPyConnection) -> None:
    for name, kind in COLUMNS:
        if kind == "VARCHAR":
            (untrimmed,) = one(
                con, f"SELECT count(*) FROM adult WHERE {name} <> trim({name}) OR {name} = ''"
            )
            assert untrimmed == 0, name


def test_income_class_values(con: duckdb.DuckDBPyConnection) -> None:
    values = {v for (v,) in con.execute("SELECT DISTINCT income_class FROM adult").fetchall()}
    assert values == {">50K", "<=50K"}


@needs_raw
def test_rows_match_the_source_in_file_order(con: duckdb.DuckDBPyConnection) -> None:
    expected = raw_rows()
    got = con.execute("SELECT * FROM adult ORDER BY person_id").fetchall()
    assert len(got) == len(expected) == N_ROWS
    kinds = [kind for _, kind in COLUMNS[1:]]
    for i, (row, src) in enumerate(zip(got, expected, strict=True), start=1):
        want = tuple(
            v if v is None or k == "VARCHAR" else int(v) for v, k in zip(src, kinds, strict=True)
        )
        assert row == (i, *want), i
    nulls = {COLUMNS[1 + j][0] for src in expected for j, v in enumerate(src) if v is None}
    assert nulls == NULLABLE


# ---------------------------------------------------------------------------- schema truth


def test_schema_describes_the_table(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    assert [c.name for c in table.columns] == [name for name, _ in COLUMNS]
    sql_type = {ColumnType.INTEGER: "INTEGER", ColumnType.TEXT: "VARCHAR"}
    assert [(c.name, sql_type[c.type]) for c in table.columns] == COLUMNS
    assert {c.name for c in table.columns if c.nullable} == NULLABLE
    assert table.privacy_unit == "person_id" and table.bound.max_rows == 1


def test_every_text_value_is_in_its_domain(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    for column in table.columns:
        if column.type is not ColumnType.TEXT:
            continue
        assert column.domain is not None, column.name
        seen = {v for (v,) in con.execute(f"SELECT DISTINCT {column.name} FROM adult").fetchall()}
        assert (None in seen) == column.nullable, column.name
        outside = seen - {None} - set(column.domain)
        assert not outside, (column.name, outside)


def test_every_number_is_within_its_bounds(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    for column in table.columns:
        if column.type is not ColumnType.INTEGER or column.name == "person_id":
            continue
        assert column.bounded, column.name
        lo, hi, nulls = one(
            con,
            f"SELECT min({column.name}), max({column.name}), count(*) - count({column.name}) "
            "FROM adult",
        )
        assert isinstance(lo, int) and isinstance(hi, int), column.name
        assert column.lower is not None and column.upper is not None
        assert column.lower <= lo and hi <= column.upper, (column.name, lo, hi)
        assert nulls == 0, column.name
