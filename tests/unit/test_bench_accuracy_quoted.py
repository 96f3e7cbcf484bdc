"""README.md and docs/performance.md quote ``benchmarks/ACCURACY.md`` (``bench_accuracy.py``):
the range of the reported bounds' coverage, over every cell and per kind of query."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _coverage() -> dict[str, list[float]]:
    """Each query's coverage figures (%), by the query's first word (COUNT, AVG, …)."""
    out: dict[str, list[float]] = {}
    for line in (REPO / "benchmarks" / "ACCURACY.md").read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[5].endswith("%") and cells[1][:1].isdigit():
            out.setdefault(cells[0].split()[0].split("(")[0], []).append(float(cells[5][:-1]))
    return out


def _pct(x: float) -> str:
    return f"{x:g}"


def test_the_readme_and_docs_quote_the_committed_coverage() -> None:
    cov = _coverage()
    assert set(cov) == {"COUNT", "AVG", "VAR_POP", "SUM"}
    every = [x for xs in cov.values() for x in xs]
    readme = " ".join((REPO / "README.md").read_text("utf-8").split())
    assert f"held the exact value in {_pct(min(every))}–{_pct(max(every))}% of cells" in readme
    docs = " ".join((REPO / "docs" / "performance.md").read_text("utf-8").split())
    for kind, words in (("COUNT", "of COUNT cells"), ("SUM", "of SUM cells")):
        lo, hi = min(cov[kind]), max(cov[kind])
        assert f"{_pct(lo)}–{_pct(hi)}% {words}" in docs, kind
    means = cov["AVG"] + cov["VAR_POP"]
    assert f"{_pct(min(means))}–{_pct(max(means))}% of AVG and VAR cells" in docs
