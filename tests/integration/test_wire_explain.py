"""Error bars, EXPLAIN and the per-release NOTICE over the wire (``dpproxy serve``, a real
subprocess on the demo), driven by psycopg 3 and by psql; EXPLAIN also in the embedded DB-API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dpproxy import dbapi
from tests.commands import dpproxy_command
from tests.integration.test_server import PASSWORD, Running, start_server, stop_server

AVG_SQL = (
    "SELECT sex, AVG(age), DP_INTERVAL_LOW(AVG(age)), DP_INTERVAL_HIGH(AVG(age)) "
    "FROM adult GROUP BY sex"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Running]:
    run = start_server(tmp_path_factory.mktemp("serve-explain"))
    yield run
    stop_server(run)


@pytest.fixture
def con(server: Running) -> Iterator[tuple[psycopg.Connection, list[str]]]:
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        yield c, notices


def _budget(c: psycopg.Connection) -> str:
    row = c.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


def test_intervals_over_psycopg_cost_the_same_as_the_aggregate(
    con: tuple[psycopg.Connection, list[str]],
) -> None:
    c, notices = con
    cur = c.execute(AVG_SQL)
    assert [d.name for d in cur.description or ()] == [
        "sex",
        "avg",
        "dp_interval_low",
        "dp_interval_high",
    ]
    rows = cur.fetchall()
    assert [r[0] for r in rows] == ["Female", "Male"]
    for _, value, lo, hi in rows:
        assert isinstance(lo, float) and isinstance(hi, float)
        assert 17 <= lo <= value <= hi <= 90
        assert hi - lo < 1  # thousands of people: a narrow interval
    # one release of AVG(age) (ε = 1, the default), not three
    left = re.fullmatch(
        r"dpproxy: this answer cost ε=1, δ=0; budget left (ε=\d+, δ=1e-05)", notices[-1]
    )
    assert left is not None, notices
    # the same query again comes from the cache, at no cost
    again = c.execute(AVG_SQL).fetchall()
    assert again == rows
    assert (
        notices[-1] == f"dpproxy: this answer came from the cache, no cost; budget left {left[1]}"
    )


def test_median_interval_is_null_with_a_notice(
    con: tuple[psycopg.Connection, list[str]],
) -> None:
    c, notices = con
    row = c.execute(
        "SELECT MEDIAN(age), DP_INTERVAL_LOW(MEDIAN(age)), DP_INTERVAL_HIGH(MEDIAN(age)) "
        "FROM adult WHERE age > 30"
    ).fetchone()
    assert row is not None and row[0] is not None and row[1:] == (None, None)
    assert any("DP_INTERVAL_LOW/HIGH of MEDIAN(age) is NULL" in n for n in notices), notices
    assert notices[-1].startswith("dpproxy: this answer cost ε=1")


def test_interval_of_a_non_aggregate_is_refused(
    con: tuple[psycopg.Connection, list[str]],
) -> None:
    c, _ = con
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="one aggregate"):
        c.execute("SELECT COUNT(*), DP_INTERVAL_LOW(COUNT(*) + 1) FROM adult")
    assert c.execute("SELECT 1").fetchone() == (1,)


def test_explain_over_psycopg_spends_nothing(
    con: tuple[psycopg.Connection, list[str]],
) -> None:
    c, _ = con
    before = _budget(c)
    cur = c.execute("EXPLAIN SELECT education, COUNT(*) FROM adult GROUP BY education")
    assert [d.name for d in cur.description or ()] == ["QUERY PLAN"]
    lines = [r[0] for r in cur.fetchall()]
    text = "\n".join(lines)
    assert any(line.startswith("cost:") and "ε = 1" in line for line in lines), text
    assert "Laplace" in text and "count: integer, ±" in text
    assert "budget:" in text
    assert cur.statusmessage == "EXPLAIN"
    plan = c.execute("EXPLAIN (FORMAT JSON) SELECT AVG(age) FROM adult").fetchall()
    assert len(plan) == 1
    data = json.loads(plan[0][0])
    assert data["cost"]["epsilon"] == 1.0 and data["columns"][0]["name"] == "avg"
    # parameters in the extended protocol, and the lower-case and VERBOSE spellings
    rows = c.execute("explain verbose SELECT COUNT(*) FROM adult WHERE age > %s", [40]).fetchall()
    assert any(r[0].startswith("query:") and "40" in r[0] for r in rows), rows
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="ANALYZE"):
        c.execute("EXPLAIN ANALYZE SELECT COUNT(*) FROM adult")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        c.execute("EXPLAIN SELECT * FROM adult")
    assert _budget(c) == before


def _psql(server: Running, *commands: str) -> subprocess.CompletedProcess[str]:
    args = ["psql", "-X", "-v", "ON_ERROR_STOP=1"]
    for command in commands:
        args += ["-c", command]
    env = dict(os.environ, PGPASSWORD=PASSWORD, PGSSLMODE="disable")
    dsn = f"host={server.host} port={server.port} user=ana dbname=dpproxy"
    return subprocess.run(
        [*args, dsn], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_psql_shows_explain_intervals_notices_and_conninfo(server: Running) -> None:
    out = _psql(
        server,
        "EXPLAIN SELECT sex, SUM(age) FROM adult GROUP BY sex",
        "SELECT sex, COUNT(*), DP_INTERVAL_LOW(COUNT(*)), DP_INTERVAL_HIGH(COUNT(*)) "
        "FROM adult GROUP BY sex",
        "\\conninfo",
    )
    assert out.returncode == 0, out.stderr
    assert "QUERY PLAN" in out.stdout and "cost:         ε = 1, δ = 0" in out.stdout
    assert "dp_interval_low | dp_interval_high" in out.stdout
    assert "NOTICE:  dpproxy: this answer cost ε=1, δ=0; budget left ε=" in out.stderr
    assert 'You are connected to database "dpproxy" as user "ana"' in out.stdout
    assert "ERROR" not in out.stderr


def test_explain_in_the_embedded_dbapi(demo_db: Path) -> None:
    with dbapi.connect() as con:
        cur = con.cursor().execute("EXPLAIN (FORMAT TEXT) " + AVG_SQL)
        assert cur.description is not None and cur.description[0][0] == "QUERY PLAN"
        text = "\n".join(r[0] for r in cur.fetchall())
        assert "cost:         ε = 1, δ = 0" in text
        assert "dp_interval_low: double" in text
        assert cur.privacy_cost is not None and cur.privacy_cost.epsilon == 0
        assert con.remaining_budget.epsilon == 10
        cur.execute(AVG_SQL)
        assert cur.notices == []
        assert con.remaining_budget.epsilon == 9


def test_cli_prints_intervals_and_the_null_interval_notice(demo_db: Path) -> None:
    out = subprocess.run(
        [
            *dpproxy_command(),
            "query",
            "--format",
            "csv",
            "SELECT sex, COUNT(*) AS n, DP_INTERVAL_LOW(COUNT(*)) AS lo, "
            "DP_INTERVAL_HIGH(COUNT(*)) AS hi, DP_INTERVAL_LOW(MEDIAN(age)) AS m_lo "
            "FROM adult GROUP BY sex",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "sex,n,lo,hi,m_lo"
    for line in lines[1:]:
        _, n, lo, hi, m_lo = line.split(",")
        assert float(lo) <= int(n) <= float(hi) and m_lo == ""
    assert "DP_INTERVAL_LOW/HIGH of MEDIAN(age) is NULL" in out.stderr
    assert "privacy cost: ε=1;" in out.stderr  # COUNT and MEDIAN share ε = 1 between them
    explained = subprocess.run(
        [*dpproxy_command(), "query", "EXPLAIN SELECT COUNT(*) FROM adult"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert explained.returncode == 0 and "QUERY PLAN" in explained.stdout
    assert "privacy cost: ε=0;" in explained.stderr


def test_declare_cursor_carries_the_release_notice(
    con: tuple[psycopg.Connection, list[str]],
) -> None:
    c, notices = con
    c.execute("BEGIN")
    c.execute("DECLARE c CURSOR FOR SELECT sex, SUM(hours_per_week) FROM adult GROUP BY sex")
    assert notices and notices[-1].startswith("dpproxy: this answer cost ε=1, δ=0;")
    count = len(notices)
    assert len(c.execute("FETCH ALL FROM c").fetchall()) == 2
    assert len(notices) == count  # paging through released rows releases nothing
    c.execute("COMMIT")
