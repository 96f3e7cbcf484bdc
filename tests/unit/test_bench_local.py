"""Smoke test of ``benchmarks/bench_local.py``: a 3-run pass writes a report with every plan."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_local.py"


def test_bench_local_smoke(tmp_path: Path, demo_db: Path) -> None:
    args = ["--runs", "3", "--out-dir", str(tmp_path), "--database", str(demo_db)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "local.json").read_text(encoding="utf-8"))
    plans = data["plans"]
    expected = {"gs", "joint", "ptr", "ptr_auto", "smooth", "saa_k10", "saa_k1000", "saa_k6000"}
    assert set(plans) == expected
    for name, r in plans.items():
        assert r["runs"] == 3 and len(r["released"]) == 3, name
        assert r["method"] == name.split("_")[0], name
        assert r["predicted_error95"] is not None and r["predicted_error95"] > 0, name
        answered = [v for v in r["released"] if v is not None]
        # fresh noise every run: the answer cache must be off in an accuracy benchmark
        assert len(set(answered)) == len(answered), name
    assert abs(data["true_mean"] - 38.5816) < 1e-3
    assert data["smooth"]["two_s_exact"] == "200/32561"
    report = (tmp_path / "LOCAL.md").read_text(encoding="utf-8")
    assert "do not edit by hand" in report and "| SMOOTH |" in report
