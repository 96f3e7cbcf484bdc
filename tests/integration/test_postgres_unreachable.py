"""A PostgreSQL that does not answer (a closed port on 127.0.0.1): ``dpproxy.connect()`` and
``dpproxy query`` fail at once with 08001 (PEP 249's OperationalError) and PostgreSQL client's
reason in the hint, and nothing else on standard error (no pool retries logged)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from dpproxy.demo import demo_schema_path
from tests.commands import dpproxy_command


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


CHILD = """
import json, sys, dpproxy
try:
    dpproxy.connect(sys.argv[1], schema=sys.argv[2])
except dpproxy.OperationalError as e:
    print(json.dumps({"sqlstate": e.sqlstate, "message": e.message, "hint": e.hint}))
"""


def test_connect_to_a_closed_port_fails_quietly_with_08001() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test"
    p = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(demo_schema_path())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr
    err = json.loads(p.stdout)
    assert err["sqlstate"] == "08001"
    assert err["message"] == f"cannot connect to PostgreSQL at {url}"
    assert "Connection refused" in err["hint"] and "check that the server runs" in err["hint"]


def test_query_to_a_closed_port_prints_one_error() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test"
    p = subprocess.run(
        [
            *dpproxy_command(),
            "query",
            "--ledger",
            "memory",
            "-d",
            url,
            "-s",
            str(demo_schema_path()),
            "SELECT COUNT(*) FROM adult",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 2, p.stderr
    assert (
        lines[0].startswith("ERROR:  cannot connect to PostgreSQL")
        and "(SQLSTATE 08001)" in lines[0]
    )
    assert lines[1].startswith("HINT:  ") and "Connection refused" in lines[1]
