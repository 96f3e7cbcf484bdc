"""A connection served by its worker between DP statements (``server/worker.py``,
``Linger``) over real psycopg connections (``prepare_threshold=None``: no named statements):
repeated simple queries are read and answered by the worker (the release log says
``linger``), and so are Parse/Bind/Describe/Execute/Sync batches of known statements; any
other message — a new statement, SET, a catalog query, two statements in one string, a
transaction block's commands — goes back to the loop with
nothing lost; a refusal (budget exhausted), a cancel request, the statement timeout, the idle
timeout and shutdown all behave as on the loop's path."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import psycopg
import pytest
import yaml

from dpproxy.demo import demo_schema_path
from tests.integration.test_server import start_server, stop_server

COUNT = "SELECT COUNT(*) FROM adult"
AVG = "SELECT sex, AVG(age) FROM adult GROUP BY sex ORDER BY sex"


def _releases(log: str) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in log.splitlines() if '"event": "release"' in ln]


def _one(c: psycopg.Connection, sql: str) -> object:  # simple protocol (no parameters)
    row = c.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _schema(tmp_path: Path, epsilon: float) -> Path:
    data = yaml.safe_load(demo_schema_path().read_text(encoding="utf-8"))
    data["privacy"]["budget"] = {"epsilon": epsilon, "delta": 1e-3}
    path = tmp_path / "adult.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_the_worker_answers_repeats_and_hands_everything_else_back(
    tmp_path: Path, demo_db: Path
) -> None:
    schema = str(_schema(tmp_path, 16))
    run = start_server(tmp_path, "--database", str(demo_db), "--schema", schema, "--cache", "off")
    try:
        with psycopg.connect(run.dsn(), autocommit=True, prepare_threshold=None) as c:
            counts = [_one(c, COUNT) for _ in range(3)]  # the loop's, then the worker's two
            assert all(isinstance(n, int) and n > 30_000 for n in counts)
            assert [r[0] for r in c.execute(AVG).fetchall()] == ["Female", "Male"]  # new text
            assert [r[0] for r in c.execute(AVG).fetchall()] == ["Female", "Male"]
            c.execute("SET application_name = 'linger'")  # back to the loop
            assert c.info.parameter_status("application_name") == "linger"
            assert int(_one(c, COUNT)) > 30_000  # type: ignore[call-overload]
            assert _one(c, "SELECT 1") == 1  # a catalog query after a lingering worker
            assert int(_one(c, COUNT)) > 30_000  # type: ignore[call-overload]
            c.execute(f"{COUNT}; {COUNT}")  # two statements: the loop's
            assert int(_one(c, COUNT)) > 30_000  # type: ignore[call-overload]
            for _ in range(3):  # Parse/Bind/Describe/Execute/Sync: the loop's, the worker's
                row = c.execute("SELECT COUNT(*) FROM adult WHERE age > %s", (30,)).fetchone()
                assert row is not None and row[0] > 10_000
            row = c.execute("SELECT COUNT(*) FROM adult WHERE age > %s", (31,)).fetchone()
            assert row is not None and row[0] > 10_000  # a new text to describe: the loop's
            assert int(_one(c, COUNT)) > 30_000  # type: ignore[call-overload]
            assert int(_one(c, COUNT)) > 30_000  # type: ignore[call-overload]
            # 16 answers so far; the budget (16) is spent: the worker refuses an Execute
            with pytest.raises(psycopg.Error) as refused:
                c.execute("SELECT COUNT(*) FROM adult WHERE age > %s", (30,))
            assert refused.value.sqlstate is not None and refused.value.sqlstate != "XX000"
            assert _one(c, "SELECT 1") == 1  # the session goes on
            with pytest.raises(psycopg.Error) as again:
                c.execute(COUNT)  # the loop's refusal
            assert again.value.sqlstate == refused.value.sqlstate
        with psycopg.connect(run.dsn()) as c:  # in a transaction block ReadyForQuery says T
            with pytest.raises(psycopg.Error):
                c.execute(COUNT)
            c.rollback()
    finally:
        log = stop_server(run)
    releases = _releases(log)
    assert len(releases) == 16
    assert [r["linger"] for r in releases] == [
        False, True, True,  # COUNT ×3
        False, True,  # AVG ×2
        False,  # COUNT after SET
        False,  # COUNT after SELECT 1
        False, False,  # two statements in one string
        False,  # COUNT after them (its text, not the string's, is known: a new episode)
        False, True, True,  # extended protocol ×3 (a new statement text for Parse first)
        False,  # new parameters: Parse and Bind by the worker, a new portal text to describe
        True, True,  # COUNT ×2
    ]  # fmt: skip
    assert all(r["direct"] for r in releases if r["linger"])
    assert '"level": "error"' not in log and "Traceback" not in log


def _big_database(tmp_path: Path) -> tuple[Path, Path]:
    """``events``: 20 M rows, whose bounded SUM runs for seconds; ``small``: 100 rows."""
    import duckdb

    db = tmp_path / "big.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE events AS SELECT (i // 10)::INTEGER AS uid, "
        "(hash(i) % 1000)::DOUBLE AS amount FROM range(20000000) t(i)"
    )
    con.execute("CREATE TABLE small AS SELECT i::INTEGER AS uid FROM range(100) t(i)")
    con.close()
    schema = tmp_path / "big.yaml"
    schema.write_text(
        """\
version: 1
dataset: big
privacy:
  neighbouring: add_remove
  epsilon: 1
  delta: 1e-5
  budget: {epsilon: 1000, delta: 1e-3}
tables:
  events:
    privacy_unit: uid
    max_rows_per_unit: 5
    columns:
      uid: {type: integer}
      amount: {type: float, lower: 0, upper: 1000}
  small:
    privacy_unit: uid
    max_rows_per_unit: 1
    columns:
      uid: {type: integer}
""",
        encoding="utf-8",
    )
    return db, schema


SLOW = "SELECT SUM(amount), COUNT(*) FROM events"
FAST = "SELECT COUNT(*) FROM small"
SLOW_X = "SELECT SUM(amount), COUNT(*) FROM events WHERE amount >= %s"  # extended protocol
FAST_X = "SELECT COUNT(*) FROM small WHERE uid >= %s"


def test_cancel_and_statement_timeout_reach_a_statement_the_worker_read(
    tmp_path: Path,
) -> None:
    db, schema = _big_database(tmp_path)
    run = start_server(
        tmp_path, "--database", str(db), "--schema", str(schema), "--statement-timeout", "0.5"
    )
    try:
        with psycopg.connect(run.dsn(), autocommit=True, prepare_threshold=None) as c:
            with pytest.raises(psycopg.errors.QueryCanceled) as err:
                c.execute(SLOW)  # the loop's: its text is now a known DP statement
            assert "statement timeout" in str(err.value)
            for _ in range(2):
                assert _one(c, FAST) is not None  # the loop's, then the worker's
                with pytest.raises(psycopg.errors.QueryCanceled) as err:
                    c.execute(SLOW)  # read by the lingering worker, stopped by the watchdog
                assert "statement timeout" in str(err.value)
            assert _one(c, FAST) is not None
            assert _one(c, FAST) is not None
            timer = threading.Timer(0.3, c.cancel_safe)
            timer.start()
            with pytest.raises(psycopg.errors.QueryCanceled) as err:
                c.execute(SLOW)  # read by the lingering worker, stopped by a CancelRequest
            timer.join()
            assert "user request" in str(err.value)
            assert _one(c, "SELECT 1") == 1
            with pytest.raises(psycopg.errors.QueryCanceled) as err:
                c.execute(SLOW_X, (0,))  # Parse/Bind/Describe/Execute/Sync: the loop's
            for _ in range(2):
                assert c.execute(FAST_X, (0,)).fetchone() is not None  # the loop's, a worker's
                with pytest.raises(psycopg.errors.QueryCanceled) as err:
                    c.execute(SLOW_X, (0,))  # read by the lingering worker
                assert "statement timeout" in str(err.value)
            assert c.execute(FAST_X, (0,)).fetchone() is not None
    finally:
        log = stop_server(run)
    lingered = [r["linger"] for r in _releases(log)]
    # FAST by the loop (the worker then read SLOW) twice, then FAST by the loop and by the
    # worker (which then read SLOW); the same with FAST_X and SLOW_X; no release for SLOW
    assert lingered == [False, False, False, True, False, False, False]
    assert '"level": "error"' not in log and "Traceback" not in log


def test_idle_timeout_and_shutdown_while_the_worker_waits(tmp_path: Path, demo_db: Path) -> None:
    run = start_server(tmp_path, "--idle-timeout", "1")
    try:
        with psycopg.connect(run.dsn(), autocommit=True, prepare_threshold=None) as c:
            assert _one(c, COUNT) is not None
            assert _one(c, COUNT) is not None  # the worker waits for the next message
            threading.Event().wait(2.5)  # > idle timeout: 57P05 and the connection closes
            with pytest.raises(psycopg.OperationalError):
                c.execute(COUNT)
        with psycopg.connect(run.dsn(), autocommit=True, prepare_threshold=None) as c:
            assert _one(c, COUNT) is not None
            assert _one(c, COUNT) is not None
            log = stop_server(run)  # SIGTERM while the worker waits on this connection
            assert run.proc.returncode == 0
            with pytest.raises(psycopg.OperationalError):
                c.execute(COUNT)
    finally:
        if run.proc.poll() is None:
            stop_server(run)
    assert [r["linger"] for r in _releases(log)] == [False, True, False, True]
    assert "Traceback" not in log
