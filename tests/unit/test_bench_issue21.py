"""``benchmarks/bench_issue21.py``: a smoke run (this checkout as its own baseline, tiny sizes)
writes figures that make sense, and README.md's section on issue 21's speed targets is the one
``--readme`` prints from the committed ``benchmarks/ISSUE21.json`` (so each "met" / "not met"
is what the last run measured)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_issue21.py"


def test_smoke_run(tmp_path: Path) -> None:
    results = tmp_path / "issue21.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--base",
            str(REPO),
            "--rounds",
            "1",
            "--iterations",
            "3",
            "--join-rows",
            "2000",
            "--join-runs",
            "1",
            "--small-runs",
            "1",
            "--results",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "round 1/1: join with current" in done.stderr  # progress goes to stderr
    data = json.loads(results.read_text(encoding="utf-8"))
    for side in ("base", "current"):
        res = data["results"][side]
        assert len(res["plan"]) == 10 and len(res["small"]) == 10 and len(res["join"]) == 3
        for v in res["plan"].values():
            assert 0 < v["plan"] < v["total"]
        for task in ("small", "join"):
            for v in res[task].values():
                assert v["raw"] > 0 and v["dpproxy"] > 0
                assert v["raw_cpu"] >= 0 and v["dpproxy_cpu"] > 0
        # This checkout skips contribution bounding for the join on a unit that is the
        # PRIMARY KEY of both tables.
        assert not any(v["bounded"] for v in res["join"].values())
    section = subprocess.run(
        [sys.executable, str(SCRIPT), "--readme", "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "bounding in 0 of 3" in section and "| target |" in section


def test_the_readme_states_the_committed_figures() -> None:
    section = subprocess.run(
        [sys.executable, str(SCRIPT), "--readme"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    data = json.loads((REPO / "benchmarks" / "ISSUE21.json").read_text(encoding="utf-8"))
    assert data["meta"]["join_rows"] == 1_000_000 and data["meta"]["rounds"] >= 3
    # the README's Performance section moved to docs/performance.md, links re-based to docs/
    readme = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    section = section.replace("](benchmarks/", "](../benchmarks/")
    assert section in readme, "regenerate it: python benchmarks/bench_issue21.py --readme"
    row = subprocess.run(
        [sys.executable, str(SCRIPT), "--cold-row"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert row in readme, "regenerate it: python benchmarks/bench_issue21.py --cold-row"


def test_merge_takes_one_task_and_names_its_run(tmp_path: Path) -> None:
    into = tmp_path / "issue21.json"
    committed = json.loads((REPO / "benchmarks" / "ISSUE21.json").read_text(encoding="utf-8"))
    into.write_text(json.dumps(committed), encoding="utf-8")
    run = json.loads(json.dumps(committed))
    for side in ("base", "current"):
        for v in run["results"][side]["small"].values():
            v["dpproxy"] = v["raw"]  # every class at 1.00×
    run["meta"].update(base_commit="f" * 40, rounds=7, load_start=[1.5], load_end=[2.5])
    source = tmp_path / "run.json"
    source.write_text(json.dumps(run), encoding="utf-8")
    subprocess.run(
        [sys.executable, str(SCRIPT), "--results", str(into), "--merge", "small", str(source)],
        check=True,
        timeout=60,
    )
    merged = json.loads(into.read_text(encoding="utf-8"))
    assert merged["results"]["current"]["small"] == run["results"]["current"]["small"]
    assert merged["results"]["current"]["plan"] == committed["results"]["current"]["plan"]
    assert merged["meta"]["base_commit"] == committed["meta"]["base_commit"]
    section = subprocess.run(
        [sys.executable, str(SCRIPT), "--readme", "--results", str(into)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    row = next(line for line in section.splitlines() if line.startswith("| 1,000 rows"))
    assert "baseline `fffffff`, 7 rounds, load average 1.5 at the start, 2.5 at the end" in row
    assert "1.00–1.00×" in row and "**met**" in row


def test_the_amd_run_at_1000_rows_is_quoted() -> None:
    """docs/performance.md's sentence on the 1,000-row run on the AMD machine quotes
    ``benchmarks/ISSUE21_SMALL_AMD.json``: how many classes met 2×, in both checkouts, and
    every class's ratio."""
    data = json.loads((REPO / "benchmarks" / "ISSUE21_SMALL_AMD.json").read_text("utf-8"))
    doc = " ".join((REPO / "docs" / "performance.md").read_text(encoding="utf-8").split())
    now, base = data["results"]["current"]["small"], data["results"]["base"]["small"]
    ratios = {k: v["dpproxy"] / v["raw"] for k, v in now.items()}
    met = sum(r <= 2 for r in ratios.values())
    met_base = sum(v["dpproxy"] / v["raw"] <= 2 for v in base.values())
    assert data["meta"]["machine"]["cpu"] == "AMD EPYC" and data["meta"]["rounds"] == 3
    assert f"{met} of 10 classes meet it ({met_base} of 10 for `e1e8581`" in doc
    assert ", ".join(f"{k} {r:.2f}×" for k, r in ratios.items()) + "." in doc
