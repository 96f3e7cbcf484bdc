"""``benchmarks/compare/speed_1m.py`` end to end on a few hundred rows: it runs, and its JSON
has every field the report reads. No assertion on time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compare" / "speed_1m.py"
PUMS = Path(__file__).resolve().parents[3] / "shared" / "data" / "pums" / "PUMS_pid.csv"


@pytest.mark.skipif(not PUMS.is_file(), reason=f"{PUMS} (the generator's source) is missing")
def test_speed_1m_tiny(tmp_path: Path) -> None:
    out = tmp_path / "speed.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--rows",
            "300",
            "--runs",
            "2",
            "--warmup",
            "1",
            "--queries",
            "Q01,Q03,Q12,Q16",
            "--data-dir",
            str(tmp_path / "data"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "speed_1m: Q03" in done.stderr  # progress on stderr
    assert "| Q16 |" in done.stdout  # the table on stdout
    res = json.loads(out.read_text())
    assert res["rows"] == 300 and res["runs"] == 2 and res["target"] == 1.5
    assert len(res["loadavg_before"]) == 3
    current = res["checkouts"]["current"]
    assert list(current["rows"]) == ["Q01", "Q03", "Q12", "Q16"]
    for row in current["rows"].values():
        for key in ("raw", "dpproxy", "sql", "ratio", "sql_ratio", "overhead_ms", "raw_cpu"):
            assert isinstance(row[key], float) and row[key] == row[key], key
        assert isinstance(row["met"], bool)
        assert row["cpu_ratio"] is None or row["cpu_ratio"] > 0
        assert row["statements"] and all(isinstance(s, str) for s in row["statements"])
    assert "commit" in current and current["dpproxy"].endswith("__init__.py")
    assert current["summary"]["queries"] == 4
    assert 0 <= current["summary"]["met"] <= 4


def test_speed_1m_help() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--rows" in done.stdout and "--base" in done.stdout


@pytest.mark.skipif(not PUMS.is_file(), reason=f"{PUMS} (the generator's source) is missing")
def test_speed_1m_checks_leaves_the_clamp_out(tmp_path: Path) -> None:
    """``--checks``: the same rows in a table that declares the schema's integer bounds as
    CHECK constraints; dpproxy's SQL for ``SUM(income)`` then has no clamp, and the JSON says
    which table was measured."""
    out = tmp_path / "speed.json"
    args = ["--rows", "300", "--runs", "1", "--warmup", "0", "--queries", "Q03"]
    args += ["--data-dir", str(tmp_path / "data"), "--checks", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    res = json.loads(out.read_text())
    assert res["checks"] is True
    (statement,) = res["checkouts"]["current"]["rows"]["Q03"]["statements"]
    assert "CASE" not in statement and "CAST(income AS BIGINT)" in statement
    assert (tmp_path / "data" / "speed_checks.duckdb").is_file()
