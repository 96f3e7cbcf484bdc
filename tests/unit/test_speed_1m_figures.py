"""docs/performance.md's 1 M-row paragraph quotes ``benchmarks/SPEED_1M.json`` (the last
``benchmarks/compare/speed_1m.py`` run): how many queries met the 1.5× target, the geometric
means, the queries above it with their ratios, and "not met" unless every query met it; and
``benchmarks/SPEED_1M_CHECKS.json`` (the same with ``--checks``) for the bounds declared as
CHECK constraints."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _paragraph() -> str:
    doc = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    i = doc.index("**1 M rows, the comparison workload, dpproxy only**")
    return " ".join(doc[i : doc.index("\n\n", i)].split())


def test_the_paragraph_quotes_the_last_run() -> None:
    data = json.loads((REPO / "benchmarks" / "SPEED_1M.json").read_text(encoding="utf-8"))
    run = data["checkouts"]["current"]
    summary, rows = run["summary"], run["rows"]
    text = _paragraph()
    assert f"**{summary['met']} of {summary['queries']}** queries within 1.5×" in text
    assert f"geometric mean {summary['geomean_ratio']:.2f}×" in text
    assert f"({summary['geomean_cpu_ratio']:.2f}× in CPU time)" in text
    assert f"p50 of {data['runs']} runs" in text
    for q, r in rows.items():
        assert r["met"] == (r["ratio"] <= data["target"])
        if not r["met"]:
            assert f"{q} {r['ratio']:.2f}× (its SQL alone {r['sql_ratio']:.2f}×)" in text
    met_all = summary["met"] == summary["queries"]
    assert ("**not met**" in text) == (not met_all)


def test_the_checks_run_is_quoted() -> None:
    data = json.loads((REPO / "benchmarks" / "SPEED_1M_CHECKS.json").read_text(encoding="utf-8"))
    assert data["checks"] is True
    run = data["checkouts"]["current"]
    summary, rows = run["summary"], run["rows"]
    text = _paragraph()
    assert f"**{summary['met']} of {summary['queries']}** within 1.5×" in text
    assert f"geometric mean {summary['geomean_ratio']:.2f}×; above it:" in text
    if summary["met"] == summary["queries"]:
        assert f"geometric mean {summary['geomean_ratio']:.2f}×; above it: none." in text
    for q, r in rows.items():
        if not r["met"]:
            assert f"{q} {r['ratio']:.2f}×" in text
    clamped = ", ".join(f"{rows[q]['ratio']:.2f}×" for q in ("Q03", "Q04", "Q05", "Q15"))
    assert f"Q03–Q05 and Q15 are then {clamped}." in text


def test_the_run_against_the_earlier_commit_is_quoted() -> None:
    """The paragraph's before → after ratios of Q03, Q04 and Q15 are those of
    ``benchmarks/SPEED_1M_AB.json`` (``speed_1m.py --base``: both checkouts in one run)."""
    data = json.loads((REPO / "benchmarks" / "SPEED_1M_AB.json").read_text(encoding="utf-8"))
    base, now = data["checkouts"]["base"]["rows"], data["checkouts"]["current"]["rows"]
    text = _paragraph()
    assert f"`{data['checkouts']['base']['commit'][:7]}`, `--base`" in text
    q03, q04, q15 = (
        f"from {base[q]['ratio']:.2f}× to {now[q]['ratio']:.2f}×" for q in ("Q03", "Q04", "Q15")
    )
    assert f"Q03 went {q03}, Q04 {q04}, Q15 {q15}:" in text


def test_the_run_before_and_the_base_in_the_same_run_are_quoted() -> None:
    """The paragraph's figures for the run before the last (``SPEED_1M_PREVIOUS.json``: the
    count within 1.5× and the queries above it) and the last run's before → after ratios of
    Q03–Q05 and Q15 against its ``--base`` checkout, with the SQL-alone ratios."""
    text = _paragraph()
    prev = json.loads(
        (REPO / "benchmarks" / "SPEED_1M_PREVIOUS.json").read_text(encoding="utf-8")
    )["checkouts"]["current"]
    assert f"(commit `{prev['commit'][:7]}`" in text
    assert f"gave {prev['summary']['met']} of {prev['summary']['queries']}" in text
    above = [q for q, r in prev["rows"].items() if not r["met"]]
    quoted = ", ".join(f"{q} {prev['rows'][q]['ratio']:.2f}×" for q in above[:-1])
    assert f"{quoted} and {above[-1]} {prev['rows'][above[-1]]['ratio']:.2f}× above" in text

    data = json.loads((REPO / "benchmarks" / "SPEED_1M.json").read_text(encoding="utf-8"))
    base, now = data["checkouts"]["base"], data["checkouts"]["current"]
    assert f"commit `{now['commit'][:7]}` on" in text and f"with `{base['commit'][:7]}`" in text
    b, n = base["rows"], now["rows"]
    met, geomean = base["summary"]["met"], base["summary"]["geomean_ratio"]
    assert f"against {met} of 16 and {geomean:.2f}×" in text
    for q in ("Q03", "Q04", "Q05"):
        assert (
            f"{q} went from {b[q]['ratio']:.2f}× to {n[q]['ratio']:.2f}×" in text
            or f"{q} from {b[q]['ratio']:.2f}× to {n[q]['ratio']:.2f}×" in text
        )
        assert f"{b[q]['sql_ratio']:.2f}× to {n[q]['sql_ratio']:.2f}×" in text
    assert f"Q15 from {b['Q15']['ratio']:.2f}× to {n['Q15']['ratio']:.2f}×" in text
    assert f"({b['Q12']['ratio']:.2f}× and {n['Q12']['ratio']:.2f}× in this run)" in text


def test_the_run_on_the_xeon_is_quoted() -> None:
    """The third run (``SPEED_1M_INTEL.json``, both checkouts in one run): its count within
    1.5×, geometric mean, the base's count and the two queries closest to the line."""
    data = json.loads((REPO / "benchmarks" / "SPEED_1M_INTEL.json").read_text(encoding="utf-8"))
    now, base = data["checkouts"]["current"], data["checkouts"]["base"]
    rows = now["rows"]
    top = sorted(rows, key=lambda q: -rows[q]["ratio"])[:2]
    text = _paragraph()
    assert (
        f"(commit `{now['commit'][:7]}` against `{base['commit'][:7]}`, 3 rounds of "
        f"{data['runs']} runs; `benchmarks/SPEED_1M_INTEL.json`), gave {now['summary']['met']} "
        f"of 16 again, geometric mean {now['summary']['geomean_ratio']:.2f}× "
        f"({base['summary']['met']} of 16 for `{base['commit'][:7]}`), the closest "
        f"{top[0]} {rows[top[0]]['ratio']:.2f}× and {top[1]} {rows[top[1]]['ratio']:.2f}×."
    ) in text
    assert all(r["met"] for r in rows.values()) == (now["summary"]["met"] == 16)
