"""Smoke test of ``benchmarks/bench_joins.py`` on TPC-H scale 0.01: a few runs per method write
the JSON, the report and the figures, with numbers that make sense."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from dpproxy.tpch import QUERIES, generate_tpch, load_tpch_postgres

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_joins.py"
MODES = {"raw", "rewritten", "dpproxy_dp", "dpproxy_fixed"}
METHODS = {"fixed_1", "fixed_10", "fixed_100", "fixed_1000", "dp", "dp_99"}


def _run(out: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "accuracy q" in result.stderr  # progress goes to stderr
    if importlib.util.find_spec("matplotlib") is not None:  # the bench extra draws figures
        for name in ("joins_latency.png", "joins_accuracy.png", "joins_tau.png"):
            assert (out / "figures" / name).stat().st_size > 0, name
    else:
        assert "matplotlib is not installed" in result.stderr
    report = (out / "JOINS.md").read_text(encoding="utf-8")
    assert "do not edit by hand" in report and "## Findings" in report
    data: dict[str, Any] = json.loads((out / "joins.json").read_text(encoding="utf-8"))
    return data


def _check_latency(results: dict[str, Any], grids: dict[str, list[int]], runs: int) -> None:
    for q, r in results.items():
        assert set(r["stats"]) == MODES, q
        for mode, stats in r["stats"].items():
            assert stats["n"] == runs and 0 < stats["p50"] <= stats["p95"], (q, mode)
        assert all(x > 0 and math.isfinite(x) for x in r["ratios"].values()), q
        assert r["tau_fixed"] in grids[q], q
        assert len(r["dp_taus"]) == runs and set(r["dp_taus"]) <= set(grids[q]), q


def test_bench_joins_smoke(tmp_path: Path) -> None:
    data = _run(
        tmp_path,
        *("--scale", "0.01", "--runs", "3", "--q1-runs", "2", "--latency-runs", "2"),
    )
    assert (tmp_path / "tpch-sf0.01.duckdb").is_file()  # generated into --out-dir
    assert data["scale"] == 0.01 and data["sizes"]["customer"] == 1500
    assert data["queries"] == QUERIES  # dpproxy.tpch's queries, unchanged
    assert set(data["latency"]) == {"duckdb"}
    grids = {q: a["units"]["check"]["grid"] for q, a in data["accuracy"].items()}
    _check_latency(data["latency"]["duckdb"], grids, 2)
    assert set(data["accuracy"]) == set(QUERIES)
    for q, a in data["accuracy"].items():
        units = a["units"]
        assert units["check"]["match"] is True, q  # dpproxy's bins = the per-customer counts
        assert sum(units["distribution"].values()) == units["customers"] > 0, q
        assert a["runs"] == (2 if q == "q1" else 3)
        assert set(a["methods"]) == METHODS, q
        for key, r in a["methods"].items():
            where = (q, key)
            assert len(r["taus"]) == len(r["rel_errors"]) == a["runs"], where
            errors = [e for run in r["rel_errors"] for e in run]
            assert errors and all(e >= 0 and math.isfinite(e) for e in errors), where
            assert math.isfinite(r["median_rel_error"]), where
            assert r["missing_groups"] == 0, where
            assert 0 <= r["units_kept_share"] <= 1 and 0 <= r["rows_kept_share"] <= 1, where
            if r["dp"]:
                assert set(r["taus"]) <= set(grids[q]) and r["bias"]["tau"] in grids[q], where
            else:
                assert set(r["taus"]) == {int(key.removeprefix("fixed_"))}, where
            bias = r["bias"]["total"]
            assert bias <= 1e-9, where  # truncation only drops rows of non-negative sums
            if r["bias"]["tau"] >= units["max"]:  # nothing dropped: the exact answer
                assert abs(bias) < 1e-9 and r["units_kept_share"] == 1, where
        assert a["methods"]["fixed_1"]["bias"]["total"] < 0, q  # some customer has 2+ rows
    # The report is a function of the JSON: --report-only rewrites it without measuring.
    report = tmp_path / "JOINS.md"
    before = report.read_text(encoding="utf-8")
    report.unlink()
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--report-only", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert report.read_text(encoding="utf-8") == before


def test_bench_joins_postgres(tmp_path: Path, pg_dsn: str) -> None:
    database = generate_tpch(tmp_path / "tpch.duckdb", 0.01)
    load_tpch_postgres(database, pg_dsn)
    out = tmp_path / "out"
    data = _run(
        out,
        *("--database", str(database), "--postgres", pg_dsn, "--queries", "q3,q10"),
        *("--runs", "2", "--latency-runs", "1"),
    )
    assert set(data["latency"]) == {"duckdb", "postgres"}
    assert data["postgres_check"]["same"] is True
    assert set(data["accuracy"]) == {"q3", "q10"}
    grids = {q: a["units"]["check"]["grid"] for q, a in data["accuracy"].items()}
    for backend in ("duckdb", "postgres"):
        assert set(data["latency"][backend]) == {"q3", "q10"}
        _check_latency(data["latency"][backend], grids, 1)
    assert "PostgreSQL" in (out / "JOINS.md").read_text(encoding="utf-8")
