"""docs/spark.md's Spark speed sentences (moved there from the README) quote the committed
``benchmarks/SPARK.json`` (written by ``benchmarks/bench_spark.py``, which also writes
``SPARK.md`` from it; no time is asserted)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNS = json.loads((REPO / "benchmarks" / "SPARK.json").read_text(encoding="utf-8"))["runs"]
README = " ".join((REPO / "docs" / "spark.md").read_text(encoding="utf-8").split())


def _span(rows: int, a: str, b: str) -> str:
    results = RUNS[str(rows)]["results"].values()
    ratios = [r[f"{a}_s"] / r[f"{b}_s"] for r in results]
    return f"{min(ratios):.2f}× to {max(ratios):.2f}×"


def _bullet(start: str) -> str:
    return README.split(start, 1)[1].split(" - ", 1)[0]


def test_readme_quotes_the_committed_spark_figures_against_raw_spark() -> None:
    meta = RUNS[str(10**7)]["meta"]
    assert meta["runs"] == 2 and meta["threads"] == "2" and meta["bounded_runs"] == 1
    sentence = _bullet("Speed (`benchmarks/bench_spark.py`")
    assert "10⁷ rows of Parquet with one row per unit" in sentence
    assert "medians of 2 rounds" in sentence
    lo, hi = meta["load_average"]
    assert f"load average {lo:.0f}-{hi:.0f}" in sentence
    assert f"dpproxy took {_span(10**7, 'unique', 'raw')} the time" in sentence
    assert f"one round) {_span(10**7, 'bounded', 'raw')}" in sentence
    assert f"took {meta['open_unique_s']:.0f} s" in sentence
    results = RUNS[str(10**7)]["results"].values()
    met = sum(r["unique_s"] / r["raw_s"] <= 1.5 for r in results)
    assert f"met on {met} of the {len(results)} queries" in sentence


def test_readme_quotes_the_committed_tumult_figures() -> None:
    meta = RUNS[str(10**6)]["meta"]
    assert meta["tmlt_analytics"] == "0.21.0" and meta["tumult_pyspark"] == "3.5.9"
    sentence = _bullet("Against Tumult Analytics")
    assert "10⁶ rows" in sentence and f"PySpark {meta['tumult_pyspark']}" in sentence
    assert f"took {_span(10**6, 'unique', 'tumult_rows')} Tumult's time" in sentence
    assert f"bounded: {_span(10**6, 'bounded', 'tumult_ids')}" in sentence
    results = RUNS[str(10**6)]["results"].values()
    faster = all(r["unique_s"] < r["tumult_rows_s"] for r in results)
    faster = faster and all(r["bounded_s"] < r["tumult_ids_s"] for r in results)
    assert faster and "faster on all three shared queries" in sentence
    assert (
        "over a minute a run" in sentence
        and results
        and max(r["tumult_rows_s"] for r in results) > 60
    )


def test_spark_md_is_written_from_spark_json() -> None:
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from bench_spark import render
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    report = (REPO / "benchmarks" / "SPARK.md").read_text(encoding="utf-8")
    assert report == render(RUNS)
    assert re.search(r"^## 10,000,000 rows$", report, re.M)
