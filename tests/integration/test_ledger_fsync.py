"""The ledger's durability per query: one fsync, the commit's (``Ledger._write``).

A reservation commits at ``synchronous = NORMAL`` (no fsync of its own); the commit that turns
it into spent budget, before any answer leaves, is durable and its fsync of the WAL makes the
reservation durable too. Counted here with ``strace`` on a real process answering real
queries from the demo database with a ledger file; the same-process state (the connection back
at FULL after every reservation, granted or refused) is read from SQLite itself. That a
reservation still survives ``kill -9`` of its process is ``test_ledger_crash.py``'s.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest

from dpproxy.accounting.ledger import Ledger
from dpproxy.errors import BudgetExhausted
from dpproxy.values import Cost
from tests.pg import skip_or_fail

QUERIES = 6
MARK = "/dpproxy-test-fsync-mark"

# The child: one warm-up query (it opens the analyst's account: a durable transaction of its
# own), then QUERIES distinct queries between two marker syscalls that strace also records.
CHILD = f"""
import os, sys
import dpproxy
from dpproxy.demo import demo_schema_path
db, ledger, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = dpproxy.connect(
    db, schema=str(demo_schema_path()), ledger=ledger, analyst="ana", budget_epsilon=100,
    cache="off",
)
cur = con.cursor()
cur.execute("SELECT COUNT(*) FROM adult WHERE age > 20")
cur.fetchall()
os.access("{MARK}-start", os.F_OK)
for i in range(n):
    cur.execute(f"SELECT COUNT(*) FROM adult WHERE age > {{30 + i}}")
    cur.fetchall()
os.access("{MARK}-end", os.F_OK)
con.close()
"""


def _syncs_between_marks(trace: str) -> list[str]:
    """The fsync/fdatasync calls strace saw between the two markers, any thread."""
    lines = trace.splitlines()
    start = next(i for i, line in enumerate(lines) if f"{MARK}-start" in line)
    end = next(i for i, line in enumerate(lines) if f"{MARK}-end" in line)
    return [line for line in lines[start:end] if re.search(r"\b(fsync|fdatasync)\(", line)]


def test_a_query_on_a_ledger_costs_one_fsync(tmp_path: Path, demo_db: Path) -> None:
    strace = shutil.which("strace")
    if strace is None:
        skip_or_fail("strace is not installed (apt-get install strace)")
    ledger = tmp_path / "ledger.sqlite"
    out = tmp_path / "trace.txt"
    done = subprocess.run(
        [
            strace,
            "-f",
            "-e",
            "trace=fsync,fdatasync,access",
            "-o",
            str(out),
            sys.executable,
            "-c",
            CHILD,
            str(demo_db),
            str(ledger),
            str(QUERIES),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    syncs = _syncs_between_marks(out.read_text())
    # each query: its reservation (no fsync), its commit (one), nothing else
    assert len(syncs) == QUERIES, syncs
    led = Ledger(ledger, "adult", Cost(F(100), F(0)))
    try:
        assert led.verify().ok
        releases = [e for e in led.entries("ana") if e.kind == "release"]
        assert len(releases) == QUERIES + 1  # the warm-up's and each query's, all charged
        assert led.status("ana").reserved == Cost.zero()
    finally:
        led.close()


def _synchronous(led: Ledger) -> int:
    row = led._con().execute("PRAGMA synchronous").fetchone()
    assert row is not None
    return int(row[0])


def test_the_connection_is_durable_again_after_every_reservation(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "ledger.sqlite", "adult", Cost(F(1), F(0)))
    try:
        assert _synchronous(led) == 2  # FULL
        r = led.reserve("ana", Cost(F(1, 2), F(0)))
        assert _synchronous(led) == 2
        with pytest.raises(BudgetExhausted):  # refused inside the reservation's transaction
            led.reserve("ana", Cost(F(1), F(0)))
        assert _synchronous(led) == 2
        led.commit(r)
        claimed = led.claim("ana", Cost(F(1, 4), F(0)), "some answer")
        assert not isinstance(claimed, str)
        assert _synchronous(led) == 2
        led.commit(claimed, ("some answer", "payload"))
        assert led.claim("ana", Cost(F(1, 4), F(0)), "some answer") == "payload"
        assert led.status("ana").spent == Cost(F(3, 4), F(0))
    finally:
        led.close()
