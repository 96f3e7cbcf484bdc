"""docs/performance.md's table of the peer comparison quotes the committed report.

``benchmarks/compare/RESULTS.md`` is written by ``benchmarks/compare/run.py`` (through
``report.py``) from one run; the docs restate its summary. Each figure the docs' table gives
is checked against the report's own summary rows, so a rerun that changes the report fails
here until the docs say what it measured."""

from __future__ import annotations

import math
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPORT = (REPO / "benchmarks" / "compare" / "RESULTS.md").read_text(encoding="utf-8")
DOCS = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")


def _summary(target: str) -> str:
    """The report's summary row whose first cell is ``target``."""
    rows = [r for r in REPORT.splitlines() if r.startswith(f"| {target} |")]
    assert len(rows) == 1, target
    return rows[0]


def _docs_row(start: str) -> str:
    rows = [r for r in DOCS.splitlines() if r.startswith(f"| {start}")]
    assert len(rows) == 1, start
    return rows[0]


def test_the_run_date_and_minutes_are_the_reports() -> None:
    started = re.search(
        r"started (\d{4}-\d\d-\d\d) \d\d:\d\d UTC; the whole comparison took "
        r"([\d.]+) min",
        REPORT,
    )
    assert started is not None
    day, minutes = started.groups()
    assert f"Last run: {day}" in DOCS
    assert f"**{minutes} minutes** in all" in DOCS
    assert f"| **met** | {minutes} min," in _docs_row("the whole comparison in under 30")
    load = re.search(
        r"load average \(1/5/15 min\) at start ([\d.]+)/[\d./]+, at end ([\d.]+)/", REPORT
    )
    assert load is not None
    assert f"load average was {load[1]} at the start and {load[2]} at" in DOCS.replace("\n", " ")


def test_coverage_and_accuracy_rows_are_the_reports() -> None:
    table = REPORT.split("| system | coverage |")[1].split("\n\n")[0]
    cover = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in table.splitlines()[2:]}
    docs = _docs_row("dpproxy answers every workload query")
    assert (
        f"**met** | {cover['dpproxy']} (SmartNoise SQL {cover['SmartNoise SQL'][:2]}, "
        f"Qrlew {cover['Qrlew'][:2]}, Tumult {cover['Tumult Analytics'][:2]})" in docs
    )
    row = _summary("Accuracy vs the best peer")
    below = re.search(r"(\d+)/18 queries ≤ 1; none of the (\d+) above 1 is significant", row)
    assert below is not None and "**not met**" in row
    docs = _docs_row("median relative error ≤ the best peer's on every query")
    assert f"≤ on {below[1]}/18. The {below[2]} above 1 are all against Tumult" in docs
    above = re.findall(r"(Q\d\d|T\d\d) \(([^ ]+) vs ([A-Za-z ]+?),", row)
    assert above and all(peer == "Tumult Analytics" for _, _, peer in above)
    infinite = sorted(q for q, ratio, _ in above if ratio == "∞")
    assert f"{' and '.join(infinite)} read ∞" in docs


def test_speed_rows_are_the_reports() -> None:
    sns = _summary("Speed vs SmartNoise SQL")
    low, mean = re.search(r"min ([\d.]+)× \(Q\d\d\), geometric mean ([\d.]+)×", sns).groups()
    assert f"≥ {low}× on every query (geometric mean {mean}×)" in _docs_row(
        "1,000 rows: latency ≥ 10× lower"
    )
    qrlew = _summary("Speed vs Qrlew")
    low, mean = re.search(r"min ([\d.]+)× \(Q\d\d\), geometric mean ([\d.]+)×", qrlew).groups()
    assert f"≥ {low}× (geometric mean {mean}×)" in _docs_row("1,000 rows: latency ≥ 4× lower")
    big = _summary("1 M rows vs raw DuckDB")
    worst, q, mean, n = re.search(
        r"max ([\d.]+)× \((Q\d\d)\), geometric mean ([\d.]+)×, (\d+)/16 queries", big
    ).groups()
    docs = _docs_row("1 M rows: ≤ 1.5× raw DuckDB")
    assert ("**met**" in big) == ("**met**" in docs)
    assert f"{n}/16 queries; geometric mean {mean}×" in docs and f"worst {worst}× ({q})" in docs


def test_avg_row_is_the_reports() -> None:
    ratios = [float(x) for x in re.findall(r"Q\d\d ([\d.]+)×", _summary("AVG vs SmartNoise SQL"))]
    docs = _docs_row("AVG ≥ 1.5× more accurate than SmartNoise SQL")
    assert f"{min(ratios):.1f}–{max(ratios):.1f}×" in docs


def test_postgres_geometric_means_are_the_reports() -> None:
    section = REPORT.split("### On PostgreSQL")[1].split("One-time set-up")[0]
    parts = re.split(r"\n(pums|adult|synthetic_1m) \(", section)
    names = {"pums": "PUMS", "adult": "Adult", "synthetic_1m": "1 M rows"}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        raw, qrlew = [], []
        for line in body.splitlines():
            if line.startswith("| Q"):
                cells = [c.strip() for c in line.split("|")[1:-1]]
                raw += [float(cells[5][:-1])] if cells[5].endswith("×") else []
                qrlew += [float(cells[6][:-1])] if cells[6].endswith("×") else []

        def gmean(v: list[float]) -> float:
            return math.exp(sum(map(math.log, v)) / len(v))

        row = _docs_row(f"{names[name]} |")
        shown = re.findall(r"([\d.]+)×", row)
        assert math.isclose(float(shown[0]), gmean(raw), rel_tol=0.02), (name, shown, gmean(raw))
        assert math.isclose(float(shown[1]), gmean(qrlew), rel_tol=0.03), (name, gmean(qrlew))
