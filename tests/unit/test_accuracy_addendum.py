"""``benchmarks/compare/accuracy_addendum.py``: the committed ACCURACY_ADDENDUM.md is what its
JSON renders to and is linked from DPPROXY_ACCURACY.md; docs/performance.md's paragraph on it is
the one ``--docs`` prints from the JSON (so each figure there is the measured one); a peer rerun
for the addendum is compared cell by cell, and queries not remeasured are kept; Q14's law
(an ε-DP integer noise on a count is exact with probability at most tanh(ε/2), which the
two-sided geometric attains) in exact arithmetic; and the ``--queries`` filters of
``dpproxy_accuracy.py`` and ``tumult_model.py``."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPARE = REPO / "benchmarks" / "compare"
sys.path.insert(0, str(COMPARE))

import accuracy_addendum as add  # noqa: E402
import dpproxy_accuracy as acc  # noqa: E402


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return json.loads(add.JSON_OUT.read_text())


def test_the_markdown_is_the_json_rendered_and_linked(committed: dict[str, Any]) -> None:
    data = committed
    assert add.MD_OUT.read_text() == add.render(data)
    link = f"{add.LINK} ({', '.join(sorted(data['queries']))})."
    assert link in acc.OUT.read_text().splitlines()


def test_the_standing_is_recomputed_from_both_jsons(committed: dict[str, Any]) -> None:
    data = committed
    recorded = json.loads(acc.SUMMARY.read_text())
    assert data["now"] == json.loads(json.dumps(add.standing(recorded, data["queries"])))
    # what the docs claim: Q12 remeasured at 400 runs, no longer above the best peer
    q12 = data["queries"]["Q12"]
    assert q12["dpproxy_runs"] >= 400 and q12["commit"] and "dirty" not in q12["commit"]
    assert q12["per_column"][0]["ratio"] < 1
    assert q12["per_column"][0]["model_draws"] >= 10_000
    assert "Q12" not in {a["query"] for a in data["now"]["above"]}
    law = dict(data["q14_law"])
    rerun, ours = law.pop("rerun"), law.pop("dpproxy")
    assert law == add.exact_chance(3, recorded["Q14"]["rerun"]["peer_runs"])
    # Q10 and Q14: dpproxy remeasured and Tumult rerun for the addendum (its own runs, not the
    # recorded median); the point ratio is what "met" means, the interval says how firmly
    for qid in ("Q10", "Q14"):
        q = data["queries"][qid]
        assert q["dpproxy_runs"] >= 400 and q["commit"] and "dirty" not in q["commit"]
        assert q["peer_rerun"] and q["peer_runs"] > q["earlier_peer_runs"]
        col = q["per_column"][0]
        assert col["both_resampled"] and col["best"] == ["Tumult Analytics", col["peer"]]
        assert col["ratio_ci"][0] <= col["ratio"] <= col["ratio_ci"][1]
        assert col["model_draws"] == 20_000
        met = qid not in {a["query"] for a in data["now"]["above"]}
        assert met == (col["ratio"] <= 1)
    assert rerun["runs"] == data["queries"]["Q14"]["peer_runs"] and rerun["cells"] >= 3 * 200
    assert ours["runs"] == data["queries"]["Q14"]["dpproxy_runs"]
    # each side's share of exact cells is near the law's tanh(1/2) (4 binomial sd): both add
    # two-sided geometric noise of scale 1/ε to each count
    p = add.geometric_exact_share(1.0)
    for side in (rerun, ours):
        n = side["cells"]
        assert abs(side["exact"] / n - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_the_docs_state_the_committed_figures(committed: dict[str, Any]) -> None:
    data = committed
    text = subprocess.run(
        [sys.executable, str(COMPARE / "accuracy_addendum.py"), "--docs"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert text == add.docs(data)
    docs = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert text in docs, "regenerate: python benchmarks/compare/accuracy_addendum.py --docs"
    for figure in ("0.462", f"{data['q14_law']['chance_median_zero']:.2f}", "tanh(ε/2)"):
        assert figure in text
    # the lead sentence above the accuracy table states the same standing
    now = data["now"]
    standing = f"≤ the best peer's on {now['columns'] - len(now['above'])}/{now['columns']} output"
    assert standing in " ".join(docs.split()), "update docs/performance.md's accuracy standing"


@pytest.mark.parametrize("r", [Fraction(1, 3), Fraction(1, 2), Fraction(3, 8), Fraction(9, 10)])
def test_geometric_noise_attains_the_exactness_bound(r: Fraction) -> None:
    """With r = e^(−ε): any pmf f on the integers with f(k) ≥ f(0)·r^|k| (ε-DP between the
    counts c and c + k, by group privacy) sums to ≥ f(0)·Σ r^|k| = f(0)·(1 + r)/(1 − r), so
    f(0) ≤ (1 − r)/(1 + r) = tanh(ε/2); the two-sided geometric f(k) = f(0)·r^|k| is that."""
    bound = (1 - r) / (1 + r)
    partial = [sum((r ** abs(k) for k in range(-n, n + 1)), Fraction(0)) for n in range(60)]
    # the truncated sums give bounds 1 / Σ_{|k|≤n} that decrease to (1 − r)/(1 + r), exactly
    assert all(1 / a > 1 / b > bound for a, b in itertools.pairwise(partial))
    assert (1 + r) / (1 - r) - partial[-1] == 2 * r**60 / (1 - r)  # the tail, exactly
    # the geometric pmf at 0, and its ε-DP ratio between neighbouring shifts
    f = [bound * r ** abs(k) for k in range(-5, 6)]
    assert f[5] == bound and all(a / b in (r, 1 / r) for a, b in itertools.pairwise(f))
    eps = -math.log(r)
    assert math.isclose(float(bound), math.tanh(eps / 2), rel_tol=1e-12)
    assert math.isclose(add.geometric_exact_share(eps), math.tanh(eps / 2), rel_tol=1e-15)
    # below 1/2 (so P(|error| ≥ 1) > 1/2, the median absolute error ≥ 1) iff ε < ln 3
    assert (bound < Fraction(1, 2)) == (r > Fraction(1, 3))
    assert add.geometric_exact_share(1.0) < 0.5 and math.log(3) > 1.0


def test_the_chance_of_a_zero_median() -> None:
    p = add.geometric_exact_share(1.0)
    assert round(p, 3) == 0.462
    assert math.isclose(add.binomial_tail(219, p, 0), 1.0, rel_tol=1e-12)
    # exactly, at a rational p near tanh(1/2): the float sum agrees
    q = Fraction(p)
    exact = sum(math.comb(219, i) * q**i * (1 - q) ** (219 - i) for i in range(110, 220))
    assert math.isclose(add.binomial_tail(219, p, 110), float(exact), rel_tol=1e-9)
    assert 0.12 < float(exact) < 0.14


def test_queries_filter() -> None:
    assert list(acc.queries(["Q12", "Q11"])) == ["Q11", "Q12"]
    assert list(acc.queries()) == list(acc.queries(None))
    with pytest.raises(ValueError, match="Q99"):
        acc.queries(["Q12", "Q99"])


@pytest.fixture(scope="module")
def pums(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("data")
    subprocess.run(
        [sys.executable, str(COMPARE / "data.py"), "--datasets", "pums", "--data-dir", str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return data


def test_measure_only_the_given_queries(pums: Path, tmp_path: Path) -> None:
    out = tmp_path / "after.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(COMPARE / "dpproxy_accuracy.py"),
            *("--runs", "2", "--data-dir", str(pums), "--out", str(out)),
            *("--queries", "Q12,Q11"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["query"] for r in records] == ["Q11", "Q12"]
    assert all(r["supported"] and len(r["runs"]) == 2 and "commit" in r for r in records)
    # and the addendum builds from such a subset (its own files, not the committed ones)
    add.main(
        [
            *("--data-dir", str(pums), "--after", str(out)),
            *("--json", str(tmp_path / "a.json"), "--md", str(tmp_path / "a.md")),
            *("--report-md", str(_copy(acc.OUT, tmp_path / "r.md"))),
        ]
    )
    built = json.loads((tmp_path / "a.json").read_text())
    assert sorted(built["queries"]) == ["Q11", "Q12"]
    assert (tmp_path / "a.md").read_text() == add.render(built)
    # against a peer rerun (here dpproxy's own runs as the peer: the same cells, so a ratio of
    # exactly 1); the committed addendum's other queries are kept as they were
    committed = json.loads(add.JSON_OUT.read_text())
    _copy(add.JSON_OUT, tmp_path / "b.json")
    add.main(
        [
            *("--data-dir", str(pums), "--after", str(out), "--peer", str(out)),
            *("--json", str(tmp_path / "b.json"), "--md", str(tmp_path / "b.md")),
            *("--report-md", str(_copy(acc.OUT, tmp_path / "r.md"))),
        ]
    )
    again = json.loads((tmp_path / "b.json").read_text())
    assert sorted(again["queries"]) == sorted({*committed["queries"], "Q11", "Q12"})
    for qid in set(committed["queries"]) - {"Q11", "Q12"}:
        assert again["queries"][qid] == json.loads(json.dumps(committed["queries"][qid]))
    q12 = again["queries"]["Q12"]
    assert q12["peer_rerun"] and q12["peer_runs"] == 2
    col = q12["per_column"][0]
    assert col["both_resampled"] and col["ratio"] == 1.0 and col["peer"] == col["dpproxy"]
    assert col["earlier_peer"] == committed["queries"]["Q12"]["per_column"][0]["peer"]
    text = (tmp_path / "r.md").read_text()
    assert text.count(add.LINK) == 1 and acc.with_addendum_link(text, None).count("\n") == (
        text.count("\n") - 2
    )


def _copy(src: Path, dst: Path) -> Path:
    dst.write_text(src.read_text())
    return dst


def test_tumult_model_draws_only_the_given_queries(pums: Path, tmp_path: Path) -> None:
    """Without Tumult's venv: the numpy-only queries (Q12 needs tmlt.core)."""
    pytest.importorskip("numpy")
    import tumult_model

    out = tmp_path / "model.jsonl"
    tumult_model.main(
        ["--data-dir", str(pums), "--draws", "50", "--queries", "Q10,Q02", "--out", str(out)]
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["query"] for r in records] == ["Q02", "Q10"]
    assert all(len(r["runs"]) == 50 and r["seed"] == 21 for r in records)
    with pytest.raises(SystemExit):
        tumult_model.main(["--data-dir", str(pums), "--queries", "Q99", "--out", str(out)])


def test_every_query_remeasured_and_none_above_the_best_peer(committed: dict[str, Any]) -> None:
    """What docs/performance.md's accuracy standing says of the addendum: every query of the
    full rerun remeasured at one commit with ≥ 1,000 runs; no column above the best peer; the
    two sums drawn from the staircase (Q03, Q16) below both the peer and Tumult's model
    (20,000 draws), each ratio's interval below 1, as the docs quote them."""
    recorded = json.loads(acc.SUMMARY.read_text())
    rerun = sorted(q for q, d in recorded.items() if "rerun" in d)
    assert sorted(committed["queries"]) == rerun and len(rerun) == 16
    commits = {q["commit"] for q in committed["queries"].values()}
    assert len(commits) == 1 and "dirty" not in next(iter(commits))
    assert all(q["dpproxy_runs"] >= 1000 for q in committed["queries"].values())
    assert not committed["now"]["above"] and not committed["now"]["ci_above_1"]
    text = " ".join((REPO / "docs" / "performance.md").read_text(encoding="utf-8").split())
    for qid in ("Q03", "Q16"):
        col = committed["queries"][qid]["per_column"][0]
        assert col["ratio_ci"][1] < 1 and col["model_draws"] == 20_000
        assert col["model_ratio_ci"][1] < 1
        assert f"{acc._ratio(col['ratio'], col['ratio_ci'])}" in text
        assert f"{acc._ratio(col['model_ratio'], col['model_ratio_ci'])}" in text


def test_the_sums_are_drawn_from_the_staircase(pums: Path, tmp_path: Path) -> None:
    """Q03 and Q16 on the comparison's own database and schema: planned as Laplace noise of
    scale 500,000 (the income bound over ε = 1), as Tumult's geometric noise of α = 500,000;
    drawn from the staircase at the same ε = 1 with a step of 500,064 (the bound widened by
    the SUM guard's h = 64) and γ = 1/(e − 1), whose median |noise| is 0.84× the Laplace's
    (docs/performance.md)."""
    import tumult_model
    import workload

    from dpproxy.engine import open_engine
    from dpproxy.mechanisms.base import Laplace
    from dpproxy.mechanisms.staircase import Staircase
    from dpproxy.release.noise import drawn

    adapter = acc._adapter()
    db, schema = tmp_path / "pums.duckdb", tmp_path / "schema.yaml"
    adapter.build_database(pums / "pums.csv", db)
    schema.write_text(adapter.schema_yaml("pums", workload.DATASETS["pums"], workload.DELTA))
    engine = open_engine(str(db), str(schema), cache="off")
    try:
        for qid in ("Q03", "Q16"):
            sql = acc.queries([qid])[qid][1]
            plan = engine.prepare(sql, epsilon=Fraction(1), delta=Fraction(1, 10**5)).plan
            (release,) = plan.releases
            assert release.mechanism == Laplace(Fraction(500_000))
            law = drawn(plan, release).mechanism
            assert isinstance(law, Staircase) and law.epsilon == 1
            assert math.ldexp(law.shift, law.k) == 500_064
            assert law.inner / law.shift == pytest.approx(1 / (math.e - 1), rel=1e-9)
            assert law.median / (math.log(2) * 500_000) == pytest.approx(0.8396, abs=1e-3)
    finally:
        engine.close()
    assert max(map(abs, tumult_model.bounds("income"))) / workload.EPSILON == 500_000
