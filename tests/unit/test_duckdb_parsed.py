"""``DuckDBBackend`` keeps DuckDB's parsed statement of a text run twice and runs it again:
the same rows, the same errors, a bounded number kept, safe across threads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from dpproxy.backends import duckdb as backend_module
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.errors import InternalError


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[DuckDBBackend]:
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS i, range % 7 AS g FROM range(1000)")
    con.close()
    b = DuckDBBackend(path)
    yield b
    b.close()


SQL = "SELECT g, COUNT(*), SUM(i) FROM t GROUP BY g ORDER BY g"


def test_a_text_seen_twice_is_kept_parsed_and_gives_the_same_rows(backend: DuckDBBackend) -> None:
    first = backend.execute(SQL)
    assert SQL not in backend._statements  # seen once: remembered by hash only
    second = backend.execute(SQL)
    assert SQL in backend._statements
    third = backend.execute(SQL)  # from the parsed statement
    assert first.rows == second.rows == third.rows and len(first.rows) == 7
    assert first.columns == third.columns


def test_errors_are_the_same_from_a_parsed_statement(backend: DuckDBBackend) -> None:
    bad = "SELECT 1 / 0 FROM t WHERE CAST('x' AS INTEGER) = 1"
    for _ in range(3):
        with pytest.raises(InternalError):
            backend.execute(bad)
    with pytest.raises(InternalError):  # a parse error: InternalError, never DuckDB's text
        backend.execute("SELEC 1")
    with pytest.raises(InternalError):
        backend.execute("SELEC 1")
    assert backend.execute(SQL).rows  # the backend still answers


def test_the_kept_statements_are_bounded(
    backend: DuckDBBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backend_module, "PARSED_KEPT", 3)
    monkeypatch.setattr(backend_module, "SEEN_KEPT", 5)
    for i in range(10):
        for _ in range(2):
            backend.execute(f"SELECT COUNT(*) + {i} FROM t")
    assert len(backend._statements) == 3
    assert len(backend._seen) <= 5
    assert backend.execute("SELECT COUNT(*) + 9 FROM t").rows == ((1009,),)


def test_two_statements_in_one_text_run_as_text(backend: DuckDBBackend) -> None:
    two = "SELECT 1; SELECT 2"
    for _ in range(3):
        assert backend.execute(two).rows == ((2,),)
    assert two not in backend._statements


def test_threads_share_the_parsed_statements(backend: DuckDBBackend) -> None:
    expected = backend.execute(SQL).rows
    errors: list[object] = []

    def run() -> None:
        for k in range(50):
            got = backend.execute(SQL).rows
            other = backend.execute(f"SELECT COUNT(*) + {k % 5} FROM t").rows
            if got != expected or other != ((1000 + k % 5,),):
                errors.append((got, other))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
