"""Smoke test of ``benchmarks/bench_tpch.py`` on TPC-H scale 0.01: two queries, two releases
and two latency rounds each write the JSON (also printed with ``--json``), the report and the
figure, with figures that make sense."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_tpch.py"
QUERIES = ("q06", "q10")  # a private aggregate (answered) and a GROUP BY the unit (refused)


def _positive_stats(stats: dict[str, Any], n: int) -> None:
    assert stats["n"] == n == len(stats["samples"])
    assert 0 < stats["min"] <= stats["p50"] <= stats["max"] and math.isfinite(stats["max"])


def test_bench_tpch_smoke(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--sf", "0.01", "--queries", ",".join(QUERIES)),
            *("--runs", "2", "--latency-runs", "2", "--json"),
            *("--data-dir", str(tmp_path), "--out-dir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[SF 0.01 2/2] q10" in result.stderr  # progress goes to stderr
    assert (tmp_path / "tpch-sf0.01.duckdb").is_file()  # generated into --data-dir
    data: dict[str, Any] = json.loads((tmp_path / "TPCH.json").read_text(encoding="utf-8"))
    assert json.loads(result.stdout) == data  # --json prints the same figures
    assert data["epsilon"] == 1 and data["queries"] == list(QUERIES)
    assert list(data["scales"]) == ["0.01"]
    scale = data["scales"]["0.01"]
    assert scale["sizes"]["customer"] == 1500 and scale["runs"] == scale["latency_rounds"] == 2
    assert list(scale["queries"]) == list(QUERIES)
    answered = 0
    for name, q in scale["queries"].items():
        assert q["outcome"] in {"answered", "refused"}, name
        if q["outcome"] == "refused":
            assert len(q["sqlstate"]) == 5 and q["message"] and "\n" not in q["message"], name
            assert "__" not in q["message"] and "Traceback" not in q["message"], name
            continue
        answered += 1
        lat, acc = q["latency"], q["accuracy"]
        _positive_stats(lat["raw"], 2)
        _positive_stats(lat["cold"], 2)
        _positive_stats(lat["warm"], 1)  # rounds after the first, which warms the analyst
        _positive_stats(lat["ratio_cold"], 2)
        assert acc["runs"] == 2 and len(acc["per_run_share"]) == 2, name
        assert q["epsilon_charged"] >= 0 and q["rows_released"] >= 0, name
        for key in ("median_rel_error", "p90_rel_error"):
            value = acc[key]
            assert value is None or (value >= 0 and math.isfinite(value)), (name, key)
        assert acc["share_released"] is None or 0 <= acc["share_released"] <= 1, name
        assert all(e is None or math.isfinite(e) for e in acc["per_run_median_rel_error"])
    assert scale["answered"] == answered
    q06 = scale["queries"]["q06"]  # one SUM over private rows: one cell per release
    assert q06["outcome"] == "answered" and q06["accuracy"]["cells"] == 2
    assert q06["accuracy"]["key_columns"] == [] and q06["accuracy"]["share_released"] == 1
    assert math.isfinite(q06["accuracy"]["median_rel_error"])
    report = tmp_path / "TPCH.md"
    text = report.read_text(encoding="utf-8")
    assert "do not edit by hand" in text and "## Scale factor 0.01" in text
    assert f"**SF 0.01: {answered} of 2 answered.**" in text
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "figures" / "tpch.png").stat().st_size > 0
    # The report is a function of the JSON: --report-only writes it again without measuring.
    report.unlink()
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--report-only", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert report.read_text(encoding="utf-8") == text


def test_the_readme_states_the_committed_figures() -> None:
    """README.md's TPC-H benchmark section is the one ``--readme`` prints from the committed
    ``benchmarks/TPCH.json``: its counts and ratios are what the last run measured."""
    section = subprocess.run(
        [sys.executable, str(SCRIPT), "--readme"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    data = json.loads((REPO / "benchmarks" / "TPCH.json").read_text(encoding="utf-8"))
    for sf, scale in data["scales"].items():
        answered = sum(q["outcome"] == "answered" for q in scale["queries"].values())
        assert scale["answered"] == answered and f"SF {sf}" in section
    # the README's Performance section moved to docs/performance.md, links re-based to docs/
    readme = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    section = section.replace("](benchmarks/", "](../benchmarks/")
    assert section in readme, "regenerate it: python benchmarks/bench_tpch.py --readme"
