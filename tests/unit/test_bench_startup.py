"""``benchmarks/bench_startup.py``: a one-round smoke run writes its report, and the README's
start-up sentence quotes the committed ``benchmarks/STARTUP.json`` (no time is asserted)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_startup.py"


def test_bench_startup_smoke(tmp_path: Path) -> None:
    # the working tree as its own baseline: no worktree is created
    args = ["--runs", "1", "--warmup", "0", "--commands", "import,help", "--modes", "cached",
            "--base-path", str(REPO), "--out-dir", str(tmp_path)]
    result = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "STARTUP.json").read_text(encoding="utf-8"))
    for command in ("import", "help"):
        for side in ("base", "after"):
            cell = data["results"]["cached"][command][side]
            assert cell["n"] == 1 and cell["cpu_p50"] > 0
    # --help imports click, never the engine
    assert "click" in data["imports"]["help"]["after"]
    assert "sqlglot" not in data["imports"]["help"]["after"]
    report = (tmp_path / "STARTUP.md").read_text(encoding="utf-8")
    assert "do not edit by hand" in report and "`dpproxy --help`" in report


def test_readme_quotes_the_committed_figures() -> None:
    data = json.loads((REPO / "benchmarks" / "STARTUP.json").read_text(encoding="utf-8"))
    doc = REPO / "docs" / "performance.md"  # the README's Performance section moved there
    readme = " ".join(doc.read_text(encoding="utf-8").split())
    sentence = readme.split("**Start-up**", 1)[1].split("\n\n", 1)[0]
    cached, nocache = data["results"]["cached"], data["results"]["no-cache"]

    def cpu(per: dict[str, dict[str, dict[str, float]]], command: str, side: str) -> str:
        return f"{per[command][side]['cpu_p50']:.2f} s"

    expected = [
        cpu(cached, "query-count", "after"), cpu(cached, "query-count", "base"),
        cpu(nocache, "query-count", "after"), cpu(nocache, "query-count", "base"),
        cpu(cached, "help", "after"), cpu(cached, "schema-check", "after"),
        cpu(cached, "floor", "after"),
    ]
    quoted = re.findall(r"\d+\.\d\d s", sentence)
    assert quoted[: len(expected)] == expected
