"""``dpproxy serve`` over a real socket, driven by psycopg 3 (the protocol itself; the other
clients are in ``tests/clients/``).

The server runs as a real subprocess (``python -m dpproxy serve``) on the bundled demo, with
a users file made by ``dpproxy user add``: what a user would start.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.commands import dpproxy_command

PASSWORD = "correct horse battery staple"


@dataclass
class Running:
    host: str
    port: int
    proc: subprocess.Popen[str]
    users: Path

    def dsn(self, user: str = "ana", password: str = PASSWORD, **extra: str) -> str:
        opts = " ".join(f"{k}={v}" for k, v in extra.items())
        return (
            f"host={self.host} port={self.port} user={user} password='{password}' "
            f"dbname=dpproxy sslmode=disable connect_timeout=10 {opts}"
        )


def start_server(tmp: Path, *args: str, users: bool = True) -> Running:
    path = tmp / "users.json"
    if users and not path.exists():
        subprocess.run(
            [*dpproxy_command(), "user", "--users", str(path), "add", "ana", "--password-stdin"],
            input=PASSWORD + "\n",
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )
    cmd = [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", *args]
    if users:
        cmd += ["--users", str(path)]
    env = dict(os.environ, DPPROXY_LOG_LEVEL="INFO")
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"dpproxy serving on \('([\d.]+)', (\d+)\)", line)
        if m:
            return Running(m.group(1), int(m.group(2)), proc, path)
    proc.kill()
    raise AssertionError("server did not start:\n" + "".join(lines))


def stop_server(run: Running) -> str:
    run.proc.send_signal(signal.SIGTERM)
    try:
        _, err = run.proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        _, err = run.proc.communicate()
    return err


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    run = start_server(tmp_path_factory.mktemp("serve"))
    yield run
    stop_server(run)


@pytest.fixture
def con(server: Running) -> Iterator[psycopg.Connection]:
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        yield c


def _budget(con: psycopg.Connection) -> str:
    row = con.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


# ------------------------------------------------------------------------- basics


def test_select_one_and_version(con: psycopg.Connection) -> None:
    assert con.execute("SELECT 1").fetchone() == (1,)
    (version,) = con.execute("SELECT version()").fetchone()  # type: ignore[misc]
    assert "PostgreSQL 15" in version
    assert (
        con.info.parameter_status(
            "server_version",
        )
        is not None
    )
    assert con.info.parameter_status("server_version").startswith("15.")  # type: ignore[union-attr]
    assert con.info.parameter_status("standard_conforming_strings") == "on"
    assert con.info.parameter_status("client_encoding") == "UTF8"


def test_dp_query_answers_and_charges(con: psycopg.Connection) -> None:
    before = _budget(con)
    rows = con.execute("SELECT sex, AVG(age) FROM adult GROUP BY sex").fetchall()
    assert sorted(r[0] for r in rows) == ["Female", "Male"]
    assert all(30 < r[1] < 45 for r in rows)
    assert _budget(con) != before


def test_server_side_parameters_text_and_binary(con: psycopg.Connection) -> None:
    for binary in (False, True):
        cur = con.cursor(binary=binary)
        cur.execute("SELECT COUNT(*) FROM adult WHERE age > %s AND sex = %s", (40, "Female"))
        (n,) = cur.fetchone()  # type: ignore[misc]
        assert 3_000 < n < 6_000


def test_refused_row_read_keeps_the_session_usable(con: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
        con.execute("SELECT * FROM adult LIMIT 10000")
    assert err.value.sqlstate == "42501"
    assert con.execute("SELECT COUNT(*) FROM adult").fetchone()[0] > 30_000  # type: ignore[index]


def test_several_statements_in_one_query_string(server: Running) -> None:
    raw = psycopg.pq.PGconn.connect(server.dsn().encode())
    try:
        results = raw.exec_(b"SELECT 1; SELECT COUNT(*) FROM adult; SELECT 2")
        # exec_ returns the last result; check the statements ran one by one
        assert results.status == psycopg.pq.ExecStatus.TUPLES_OK
        assert results.get_value(0, 0) == b"2"
    finally:
        raw.finish()


def test_describe_does_not_spend(con: psycopg.Connection) -> None:
    before = _budget(con)
    cur = con.cursor()
    # prepare without executing: Parse + Describe only
    con.pgconn.prepare(b"stmt_a", b"SELECT sex, COUNT(*) FROM adult WHERE age > $1 GROUP BY sex")
    desc = con.pgconn.describe_prepared(b"stmt_a")
    assert desc.nfields == 2
    assert desc.nparams == 1 and desc.param_type(0) in (20, 23)  # age is an integer
    assert _budget(con) == before
    cur.close()


def test_transactions_and_settings(con: psycopg.Connection) -> None:
    con.autocommit = False
    con.execute("SELECT COUNT(*) FROM adult")
    assert con.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute("SELECT age FROM adult")
    assert con.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    with pytest.raises(psycopg.errors.InFailedSqlTransaction):
        con.execute("SELECT COUNT(*) FROM adult")
    con.rollback()
    con.autocommit = True
    con.execute("SET application_name = 'tests'")
    assert con.execute("SHOW application_name").fetchone() == ("tests",)
    assert con.execute("SHOW transaction isolation level").fetchone() == ("read committed",)
    con.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")
    con.execute("RESET application_name")
    con.execute("DISCARD ALL")


def test_dpproxy_settings_can_lower_but_not_raise(con: psycopg.Connection) -> None:
    con.execute("SET dpproxy.epsilon = 0.5")
    assert con.execute("SHOW dpproxy.epsilon").fetchone() == ("0.5",)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute("SET dpproxy.epsilon = 100")
    for setting in ("dpproxy.epsilon = '1e-300'", "dpproxy.delta = '1e-305'"):
        with pytest.raises(psycopg.errors.InvalidParameterValue):  # at SET, not at a query
            con.execute(f"SET {setting}")
    assert con.execute("SHOW dpproxy.epsilon").fetchone() == ("0.5",)
    con.execute("RESET dpproxy.epsilon")
    assert con.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)


def test_a_session_can_force_a_plan_and_hints_override_it(con: psycopg.Connection) -> None:
    con.execute("SET dpproxy.epsilon = 0.3")  # the tests' analyst has one budget for all
    assert con.execute("SHOW dpproxy.mechanism").fetchone() == ("laplace, plan auto",)
    con.execute("SET dpproxy.mechanism = 'smooth'")
    assert con.execute("SHOW dpproxy.mechanism").fetchone() == ("laplace, plan smooth",)
    ((median, p90),) = con.execute(
        "SELECT MEDIAN(age), PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM adult"
    ).fetchall()
    assert 17 <= median <= 90 and 17 <= p90 <= 90  # smooth noise at ε = 0.3 is wide
    # a hint in the query wins over the session's choice
    (mean,) = con.execute("SELECT /*+ dpproxy mechanism=joint */ AVG(age) FROM adult").fetchone()
    assert 35 < mean < 42
    with pytest.raises(psycopg.errors.InvalidParameterValue):  # smooth cannot answer CORR
        con.execute("SELECT /*+ dpproxy mechanism=smooth */ CORR(age, hours_per_week) FROM adult")
    with pytest.raises(psycopg.Error) as unknown:
        con.execute("SET dpproxy.mechanism = 'magic'")
    assert unknown.value.sqlstate == "ZD003"
    con.execute("SET dpproxy.mechanism = 'ptr'")
    with pytest.raises(psycopg.Error) as refused:  # PTR refuses an unstable median
        con.execute("SELECT /*+ dpproxy ptr_bound=0.000001 */ MEDIAN(fnlwgt) FROM adult")
    assert refused.value.sqlstate == "ZD005"
    con.execute("RESET dpproxy.mechanism")
    assert con.execute("SHOW dpproxy.mechanism").fetchone() == ("laplace, plan auto",)
    rows = con.execute("SELECT sex, MEDIAN(age) FROM adult GROUP BY sex ORDER BY sex").fetchall()
    assert [r[0] for r in rows] == ["Female", "Male"]
    con.execute("RESET dpproxy.epsilon")


def test_own_spending_is_a_read_only_virtual_table(con: psycopg.Connection) -> None:
    con.execute("SET dpproxy.epsilon = 0.25")
    con.execute("SELECT COUNT(*) FROM adult WHERE age > 77")
    rows = con.execute(
        "SELECT query, plan, mechanism, epsilon FROM dpproxy.spending WHERE query LIKE '%age > 77%'"
    ).fetchall()
    assert rows == [
        (
            "SELECT COUNT(*) FROM adult WHERE age > 77",
            "count(*):gs; 1 row(s)/unit, 1 group(s)/unit",
            "laplace",
            0.25,
        )
    ]
    # the same query again comes from the answer cache: identical and not charged again
    assert (
        len(con.execute("SELECT * FROM dpproxy.spending WHERE query LIKE '%> 77%'").fetchall()) == 1
    )
    ((total, spent, remaining),) = con.execute(
        "SELECT total_epsilon, spent_epsilon, remaining_epsilon FROM dpproxy.budget"
    ).fetchall()
    assert remaining == total - spent and spent >= 0.25
    (shown,) = con.execute("SHOW dpproxy.budget").fetchone()  # type: ignore[misc]
    assert shown.startswith("remaining ε=") and "spent ε=" in shown
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute("SELECT * FROM read_csv('/etc/passwd'), dpproxy.spending")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute("DELETE FROM dpproxy.spending")
    con.execute("RESET dpproxy.epsilon")


def test_server_side_cursor_pages_without_recharging(con: psycopg.Connection) -> None:
    con.autocommit = False
    before = None
    with con.cursor(name="c1") as cur:
        cur.execute("SELECT education, COUNT(*) FROM adult GROUP BY education")
        before = _budget(con)
        first = cur.fetchmany(5)
        rest = cur.fetchall()
    assert len(first) == 5 and len(first) + len(rest) == 16
    assert _budget(con) == before  # FETCH pages through released rows
    con.rollback()


def test_copy_and_function_call_are_refused(con: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        con.execute("COPY adult TO STDOUT")
    assert con.execute("SELECT 1").fetchone() == (1,)


def test_empty_query(server: Running) -> None:
    raw = psycopg.pq.PGconn.connect(server.dsn().encode())
    try:
        assert raw.exec_(b"").status == psycopg.pq.ExecStatus.EMPTY_QUERY
        assert raw.exec_(b"  -- nothing\n").status == psycopg.pq.ExecStatus.EMPTY_QUERY
    finally:
        raw.finish()


# ------------------------------------------------------------------- authentication


def test_wrong_password_and_unknown_user_look_the_same(server: Running) -> None:
    messages = []
    for user, password in (("ana", "wrong"), ("nobody", PASSWORD)):
        with pytest.raises(psycopg.OperationalError) as err:
            psycopg.connect(server.dsn(user=user, password=password))
        messages.append(str(err.value).replace(user, "<user>"))
    assert "password authentication failed" in messages[0]
    assert messages[0] == messages[1]


def test_ssl_is_declined_without_a_certificate(server: Running) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(struct.pack("!ii", 8, 80877103))
        assert s.recv(1) == b"N"
        s.sendall(struct.pack("!ii", 8, 80877104))  # GSSENCRequest
        assert s.recv(1) == b"N"


# ------------------------------------------------------------------------- lifecycle


def test_sigterm_refuses_new_work_and_exits(tmp_path: Path) -> None:
    run = start_server(tmp_path)
    with psycopg.connect(run.dsn(), autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
        run.proc.send_signal(signal.SIGTERM)
        run.proc.wait(timeout=60)
    assert run.proc.returncode == 0
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(run.dsn())
    assert run.proc.stderr is not None
    err = run.proc.stderr.read()
    run.proc.stderr.close()
    assert PASSWORD not in err  # logs never contain credentials
    assert '"event": "shutdown"' in err


def test_connection_cap(tmp_path: Path) -> None:
    run = start_server(tmp_path, "--max-connections", "1")
    try:
        with psycopg.connect(run.dsn(), autocommit=True):
            with pytest.raises(psycopg.OperationalError) as err:
                psycopg.connect(run.dsn())
            assert "too many clients" in str(err.value)
    finally:
        stop_server(run)


def test_clients_that_never_log_in_hold_nothing(tmp_path: Path) -> None:
    """A connection that sends no startup is dropped after --authentication-timeout, and
    while it waits it counts against the cap of connections still logging in: the next one
    beyond --max-connections gets 53300 at once; a real client then logs in normally."""
    run = start_server(tmp_path, "--max-connections", "2", "--authentication-timeout", "2")
    silent = [socket.create_connection((run.host, run.port), timeout=60) for _ in range(2)]
    try:
        with socket.create_connection((run.host, run.port), timeout=60) as third:
            third.sendall(struct.pack("!ii", 8, 80877103))  # SSLRequest: the server reads it
            reply = third.recv(4096)  # the cap answers before reading anything
            assert reply[:1] == b"E" and b"53300" in reply, reply
        for s in silent:  # the timeout closes them: recv returns end-of-file, no error
            assert s.recv(4096) == b""
        with psycopg.connect(run.dsn(), autocommit=True) as con:
            (count,) = con.execute("SELECT COUNT(*) FROM adult").fetchone() or (None,)
            assert isinstance(count, int)
    finally:
        for s in silent:
            s.close()
        stop_server(run)


def test_no_users_file_without_trust_is_refused(tmp_path: Path) -> None:
    out = subprocess.run(
        [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, DPPROXY_USERS=str(tmp_path / "none.json")),
    )
    assert out.returncode == 1
    assert "dpproxy user add" in out.stderr


BIG_SCHEMA = """\
version: 1
dataset: big
privacy:
  neighbouring: add_remove
  epsilon: 1
  delta: 1e-5
  budget: {epsilon: 100, delta: 1e-3}
tables:
  events:
    privacy_unit: uid
    max_rows_per_unit: 5
    columns:
      uid: {type: integer}
      amount: {type: float, lower: 0, upper: 1000}
"""


def _big_database(tmp_path: Path) -> tuple[Path, Path]:
    """20 M rows, ~10 per unit: a query that bounds contributions runs for a while."""
    import duckdb

    db = tmp_path / "big.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE events AS SELECT (i // 10)::INTEGER AS uid, "
        "(hash(i) % 1000)::DOUBLE AS amount FROM range(20000000) t(i)"
    )
    con.close()
    schema = tmp_path / "big.yaml"
    schema.write_text(BIG_SCHEMA, encoding="utf-8")
    return db, schema


def test_statement_timeout_cancels_a_long_query(tmp_path: Path) -> None:
    db, schema = _big_database(tmp_path)
    run = start_server(
        tmp_path, "--database", str(db), "--schema", str(schema), "--statement-timeout", "0.2"
    )
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as c:
            with pytest.raises(psycopg.errors.QueryCanceled) as err:
                c.execute("SELECT SUM(amount), COUNT(*) FROM events")
            assert "statement timeout" in str(err.value)
            assert c.execute("SELECT 1").fetchone() == (1,)
    finally:
        stop_server(run)


def test_cancel_request_stops_a_running_query(tmp_path: Path) -> None:
    """psycopg's cancel (a CancelRequest on a new socket, with BackendKeyData's key) stops the
    query in the database; the client gets 57014 and the session stays usable."""
    db, schema = _big_database(tmp_path)
    run = start_server(tmp_path, "--database", str(db), "--schema", str(schema))
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as c:
            timer = threading.Timer(0.3, c.cancel_safe)
            timer.start()
            started = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                c.execute("SELECT SUM(amount), COUNT(*) FROM events")
            timer.join()
            assert c.execute("SELECT 1").fetchone() == (1,)
            assert time.monotonic() - started > 0.2
    finally:
        stop_server(run)


def test_tls_when_a_certificate_is_configured(tmp_path: Path) -> None:
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.fail(f"openssl could not make a test certificate: {made.stderr}")
    run = start_server(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        dsn = run.dsn().replace("sslmode=disable", "sslmode=require")
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.pgconn.ssl_in_use
            assert c.execute("SELECT COUNT(*) FROM adult").fetchone()[0] > 30_000  # type: ignore[index]
    finally:
        stop_server(run)


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    run = start_server(tmp_path, "--idle-timeout", "0.5")
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
            time.sleep(1.5)
            with pytest.raises(psycopg.OperationalError):
                c.execute("SELECT 1")
    finally:
        stop_server(run)


def test_oversized_messages_are_refused(tmp_path: Path) -> None:
    run = start_server(tmp_path, "--max-message-size", "2048")
    try:
        with psycopg.connect(run.dsn(), autocommit=True) as c:
            long_query = "SELECT COUNT(*) FROM adult WHERE " + " OR ".join(
                f"age = {i}" for i in range(400)
            )
            with pytest.raises(psycopg.OperationalError) as err:
                c.execute(long_query)
            assert "exceeds the maximum" in str(err.value)
    finally:
        stop_server(run)


def test_an_error_in_a_pipeline_skips_to_sync(con: psycopg.Connection) -> None:
    """After an ErrorResponse the server discards messages until Sync, as the protocol says:
    the later statements of the pipeline are not run (psycopg reports them as aborted)."""
    before = _budget(con)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with con.pipeline():
            con.execute("SELECT * FROM adult")
            con.execute("SELECT COUNT(*) FROM adult")  # never runs
    assert _budget(con) == before  # nothing ran, nothing was charged
    assert con.execute("SELECT COUNT(*) FROM adult").fetchone()[0] > 30_000  # type: ignore[index]


def test_a_missing_users_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    out = subprocess.run(
        [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", "--users", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "does not exist" in out.stderr and "dpproxy user" in out.stderr
