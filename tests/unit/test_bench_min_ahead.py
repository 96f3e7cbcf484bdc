"""``benchmarks/min_ahead_ab.py``: a smoke run, its argument checks, and the committed run that
``dpproxy/prefetch.py`` quotes for ``MIN_AHEAD``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dpproxy import prefetch

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "min_ahead_ab.py"
RUN = REPO / "benchmarks" / "MIN_AHEAD_AB.json"


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout
    )


def test_smoke_run(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    done = _run("--runs", "2", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    # five values: the two columns are NOT NULL, so their counts are one COUNT(*)
    assert "min_ahead_ab: var_stddev (5 values)" in done.stderr  # progress goes to stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    rows = data["results"]["small"]
    assert list(rows) == ["var_stddev", "expression_aggregates", "sum", "count"]
    assert [r["values"] for r in rows.values()] == [5, 4, 1, 1]
    for r in rows.values():
        assert r["raw"] > 0 and r["min_ahead_4"] > 0 and r["min_ahead_16"] > 0
    assert "| var_stddev | 5 |" in done.stdout


def test_bad_settings_are_refused() -> None:
    done = _run("--low", "16", "--high", "4", timeout=60)
    assert done.returncode == 2 and "--low must be at least 1 and below --high" in done.stderr
    done = _run("--runs", "0", timeout=60)
    assert done.returncode == 2 and "--runs must be at least 1" in done.stderr


def test_the_committed_run_is_what_prefetch_quotes() -> None:
    """``MIN_AHEAD``'s comment quotes the committed run: the two 1,000-row classes that drew
    4-15 values were faster drawing ahead, and the 1 M-row queries in that range moved by
    the stated amounts."""
    data = json.loads(RUN.read_text(encoding="utf-8"))
    assert (data["meta"]["low"], data["meta"]["high"]) == (prefetch.MIN_AHEAD, 16)
    text = " ".join((REPO / "dpproxy" / "prefetch.py").read_text(encoding="utf-8").split())
    text = text.replace("#: ", "")

    def gain(rows: dict[str, dict[str, float]], name: str) -> float:
        return rows[name]["min_ahead_4"] - rows[name]["min_ahead_16"]

    small, large = data["results"]["small"], data["results"]["1m"]
    assert f"(6 values) {-gain(small, 'var_stddev'):.2f} ms faster" in text
    assert f"(4 values) {-gain(small, 'expression_aggregates'):.2f} ms;" in text
    assert gain(small, "var_stddev") < 0 and gain(small, "expression_aggregates") < 0
    assert sorted(large) == ["Q10", "Q14"]
    assert [large[q]["values"] for q in ("Q10", "Q14")] == [4, 6]
    assert (
        f"moved by {gain(large, 'Q10'):+.2f} and {gain(large, 'Q14'):+.2f} ms".replace("-", "−")
        in text
    )
