"""The README's Spark speed sentence quotes the committed ``benchmarks/SPARK.json`` (written by
``benchmarks/bench_spark.py``; no time is asserted)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_quotes_the_committed_spark_figures() -> None:
    data = json.loads((REPO / "benchmarks" / "SPARK.json").read_text(encoding="utf-8"))
    assert data["meta"]["rows"] == 10**7 and data["meta"]["rows_per_unit"] == 1
    assert data["meta"]["runs"] == 2 and data["meta"]["threads"] == "2"
    ratios = [r["dpproxy_s"] / r["raw_s"] for r in data["results"].values()]
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    sentence = readme.split("Speed (`benchmarks/bench_spark.py`", 1)[1].split(" - ", 1)[0]
    found = re.search(r"dpproxy took (\d+)× to (\d+)× the time", sentence)
    assert found is not None, sentence
    assert int(found.group(1)) == round(min(ratios))
    assert int(found.group(2)) == round(max(ratios))
    assert "10⁷ rows of Parquet with one row per unit" in sentence
    assert "medians of 2 rounds" in sentence
    report = (REPO / "benchmarks" / "SPARK.md").read_text(encoding="utf-8")
    for name, r in data["results"].items():
        assert f"| {name} | {r['raw_s']:.2f} | {r['dpproxy_s']:.2f} | {r['ratio']:.2f} |" in report
