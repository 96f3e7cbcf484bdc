"""``benchmarks/compare/report.py``: metrics and target verdicts on synthetic adapter JSON.

No virtual environments, no peers, no data files: the exact answers are given, not computed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

COMPARE = Path(__file__).resolve().parents[2] / "benchmarks" / "compare"


def _load(name: str) -> ModuleType:
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(f"compare_{name}", COMPARE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved


report = _load("report")
workload = report.workload
IDS = [q.id for q in workload.queries_for("pums")]  # the one-table queries
GROUPED = {"Q08": ["0", "1"], "Q09": ["1", "2", "3"], "Q10": ["0", "1"], "Q14": ["1", "3", "4"],
           "Q16": ["0", "1"]}


def exact() -> dict[tuple[str, str], Any]:
    """Every query's exact answer on 'pums': 100 per cell (keys as listed in GROUPED)."""
    out = {}
    for q in IDS:
        keys = GROUPED.get(q)
        if keys:
            out[("pums", q)] = (["k", "v"], 1, [[k, 100.0] for k in keys])
        else:
            out[("pums", q)] = (["v"], 0, [[100.0]])
    return out


def rec(system: str, qid: str, mode: str = "accuracy", *, value: float = 100.0,
        seconds: float = 0.01, runs: int = 4, dataset: str = "pums",
        supported: bool = True, epsilon: float = 1.0) -> dict[str, Any]:
    keys = GROUPED.get(qid)
    row = [[k, value] for k in keys] if keys else [[value]]
    return {
        "system": system, "version": "9.9", "dataset": dataset, "query": qid, "mode": mode,
        "epsilon": epsilon, "supported": supported, "error": None if supported else "Nope: x",
        "columns": ["k", "v"] if keys else ["v"],
        "runs": [] if not supported else [
            {"seconds": seconds, **({"rows": row} if mode == "accuracy" else {})}
            for _ in range(runs)
        ],
        "setup_s": 0.5, "predicted_error95": [3.0] if system == "dpproxy" else None,
    }


def by_name(targets: list[Any]) -> dict[str, Any]:
    return {t.name: t for t in targets}


def test_accuracy_counts_missing_and_spurious_groups_and_errors_on_released_cells() -> None:
    truth = (["k", "v"], 1, [["1", 10.0], ["2", 20.0], ["3", 40.0]])
    r = {
        "supported": True,
        "runs": [
            {"rows": [["1", 11.0], ["2", 18.0], ["3", 40.0]], "seconds": 0.1},
            {"rows": [["1.0", 10.0], ["9", 5.0]], "seconds": 0.1},  # "1.0" is key "1"
            {"rows": [["2", None], ["3", 44.0]], "seconds": 0.1},  # a null value: not released
        ],
    }
    a = report.accuracy(r, truth)
    assert a.runs == 3 and a.true_cells == 3
    assert a.released == 5  # 3 + 1 + 1 of 9 cells
    assert a.share_released == pytest.approx(5 / 9)
    assert a.spurious == 1
    assert sorted(a.abs_errors) == [0.0, 0.0, 1.0, 2.0, 4.0]
    assert sorted(a.rel_errors) == pytest.approx([0.0, 0.0, 0.1, 0.1, 0.1])
    assert a.median_rel == pytest.approx(0.1)
    assert a.median_abs == 1.0
    assert a.p95_abs == pytest.approx(2.0 + 0.8 * 2.0)  # linear interpolation


def test_accuracy_of_an_unsupported_record_is_none() -> None:
    truth = (["v"], 0, [[1.0]])
    assert report.accuracy({"supported": False, "runs": []}, truth) is None


def test_latency_median_and_p95() -> None:
    r = {"supported": True, "setup_s": 1.5,
         "runs": [{"seconds": s} for s in (0.01 * i for i in range(1, 21))]}
    lat = report.latency(r)
    assert lat.median == pytest.approx(0.105)
    assert lat.p95 == pytest.approx(0.1905)
    assert lat.runs == 20 and lat.setup_s == 1.5


def test_safe_ratio() -> None:
    assert report.safe_ratio(0, 0) == 1.0
    assert report.safe_ratio(1, 0) == float("inf")
    assert report.safe_ratio(2, 4) == 0.5
    assert report.safe_ratio(None, 1) is None


def _world(overrides: dict[tuple[str, str], float] | None = None) -> Any:
    """dpproxy, SmartNoise and Qrlew on every query, plus both DuckDB baselines."""
    overrides = overrides or {}
    records = []
    for q in IDS:
        records.append(rec("dpproxy", q, value=overrides.get(("dp", q), 101.0)))
        records.append(rec("smartnoise", q, value=overrides.get(("sn", q), 104.0)))
        records.append(rec("qrlew", q, value=102.0))
        records.append(rec("dpproxy", q, "latency", seconds=0.001))
        records.append(rec("smartnoise", q, "latency", seconds=overrides.get(("sn_s", q), 0.02)))
        records.append(rec("qrlew", q, "latency", seconds=0.005))
        records.append(rec("dpproxy", q, "latency", dataset="synthetic_1m",
                           seconds=overrides.get(("dp_1m", q), 0.012)))
        records.append(rec("dpproxy_sql", q, "latency", dataset="synthetic_1m", seconds=0.011))
        records.append(rec("duckdb", q, "latency", dataset="synthetic_1m", seconds=0.010))
    return report.Metrics(records, exact())


def test_targets_all_met() -> None:
    t = by_name(report.targets(_world()))
    assert t["Coverage"].status == "met"
    assert t["Accuracy vs the best peer"].status == "met"  # 1% against 2% (Qrlew)
    assert t["AVG vs SmartNoise SQL"].status == "met"  # 4% / 1% = 4×
    assert "Q04 4.00×" in t["AVG vs SmartNoise SQL"].measured
    assert t["Speed vs SmartNoise SQL"].status == "met"  # 20×
    assert t["Speed vs Qrlew"].status == "met"  # 5×
    assert t["1 M rows vs raw DuckDB"].status == "met"  # 1.2×
    assert "Tumult" not in " ".join(x.why for x in t.values())


def test_targets_missed_say_where_and_by_how_much() -> None:
    m = _world({("dp", "Q11"): 110.0, ("sn", "Q05"): 101.2, ("sn_s", "Q03"): 0.005,
                ("dp_1m", "Q12"): 0.05})
    t = by_name(report.targets(m))
    acc = t["Accuracy vs the best peer"]
    assert acc.status == "not met"
    assert "Q11 (5.00× vs Qrlew" in acc.why  # 10% against Qrlew's 2%
    avg = t["AVG vs SmartNoise SQL"]
    assert avg.status == "not met" and "Q05" in avg.why and "Q05 1.20×" in avg.measured
    speed = t["Speed vs SmartNoise SQL"]
    assert speed.status == "not met" and "Q03 (5.00×)" in speed.why
    assert "15/16 queries" in speed.measured
    raw = t["1 M rows vs raw DuckDB"]
    assert raw.status == "not met" and "Q12 (5.00×)" in raw.why
    # The split: dpproxy's SQL alone is 1.1× raw; its own work 50 - 11 = 39 ms.
    assert "1.10×" in raw.why and "39.0 ms" in raw.why


def test_coverage_not_met_names_the_query_and_the_error() -> None:
    m = _world()
    m.records[("dpproxy", "pums", "accuracy", 1.0, "Q07")] = rec("dpproxy", "Q07",
                                                                 supported=False)
    t = by_name(report.targets(m))
    assert t["Coverage"].status == "not met"
    assert t["Coverage"].measured == "15/16 queries"
    assert "Q07 (Nope: x)" in t["Coverage"].why


def test_a_peer_that_was_not_run_leaves_its_targets_not_evaluated() -> None:
    m = _world()
    m.records = {k: v for k, v in m.records.items() if k[0] != "smartnoise"}
    t = by_name(report.targets(m, {"smartnoise": "SmartNoise SQL not run: no adapter"}))
    assert t["AVG vs SmartNoise SQL"].status == "not evaluated"
    assert t["Speed vs SmartNoise SQL"].status == "not evaluated"
    assert "no adapter" in t["Speed vs SmartNoise SQL"].why
    assert t["Accuracy vs the best peer"].status == "met"  # against Qrlew alone


def test_render_lists_systems_not_run_and_every_target() -> None:
    m = _world()
    manifest = {"systems": {"tumult": {"status": "not run: no adapter"}},
                "settings": {"accuracy_runs": 4, "latency_runs": 4, "warmup": 1}}
    text = report.render(m, manifest, [])
    assert "**Not run:** Tumult Analytics (not run: no adapter)" in text
    for name in ("Coverage", "Accuracy vs the best peer", "AVG vs SmartNoise SQL",
                 "Speed vs SmartNoise SQL", "Speed vs Qrlew", "1 M rows vs raw DuckDB"):
        assert f"| {name} |" in text
    assert "do not edit by hand" in text


def test_a_hung_adapter_is_killed_and_the_rest_still_runs(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run = _load("run")
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    # A fake adapter: answers every query at once, except that it hangs on Q02.
    (adapters / "fake.py").write_text(textwrap.dedent("""
        import json, sys, time
        args = sys.argv[1:]
        queries = args[args.index("--queries") + 1].split(",")
        out = open(args[args.index("--out") + 1], "w")
        for q in queries:
            if q == "Q02":
                time.sleep(60)
            out.write(json.dumps({"system": "fake", "query": q, "supported": True,
                                  "runs": [{"seconds": 0.1}]}) + "\\n")
            out.flush()
    """))
    monkeypatch.setattr(run, "ADAPTERS", adapters)
    out = tmp_path / "fake.jsonl"
    res = run.run_adapter("fake", sys.executable, "pums", "latency", ["Q01", "Q02", "Q03"],
                          1, 0, 1.0, out, setup_timeout=0.6, query_timeout=0.6)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["query"] for x in lines] == ["Q01", "Q02", "Q03"]
    assert [x["supported"] for x in lines] == [True, False, True]
    assert lines[1]["error"].startswith("TimeoutError")
    assert res["incidents"] == [{"query": "Q02", "error": lines[1]["error"]}]


def test_run_time_target_counts_every_call_and_names_the_slowest() -> None:
    calls = [{"system": "tumult", "seconds": 1500.0}, {"system": "dpproxy", "seconds": 60.0},
             {"system": "qrlew", "seconds": 300.0}]
    manifest = {"calls": calls, "data_s": 3.0, "systems": {"tumult": {"env_s": 30.0}},
                "machine": {"loadavg_start": [5.2, 5.0, 4.0], "cores": 2}}
    t = by_name(report.targets(_world(), {}, manifest))["Run time"]
    assert t.status == "not met"
    assert t.measured.startswith("31.7 min")  # 1860 + 3 + 30 + 10 s for the report
    assert "Tumult Analytics 25.0 min" in t.why and "load average 5.2" in t.why
    calls[0]["seconds"] = 600.0
    assert by_name(report.targets(_world(), {}, manifest))["Run time"].status == "met"


# ---------------------------------------------------------------------------- TPC-H

TPCH_KEYS = {"T01": [["A", "F"], ["N", "F"], ["N", "O"], ["R", "F"]],
             "T03": [["1-URGENT"], ["2-HIGH"], ["3-MEDIUM"], ["4-NOT SPECIFIED"], ["5-LOW"]]}
TPCH_VALUES = {"T01": 4, "T03": 2}  # aggregates per group


def tpch_exact() -> dict[tuple[str, str], Any]:
    """Every TPC-H query's exact answer: 100 in every cell."""
    out = {}
    for q, keys in TPCH_KEYS.items():
        cols = [f"k{i}" for i in range(len(keys[0]))] + [f"v{j}" for j in range(TPCH_VALUES[q])]
        out[("tpch", q)] = (cols, len(keys[0]), [[*k] + [100.0] * TPCH_VALUES[q] for k in keys])
    return out


def tpch_rec(system: str, qid: str, mode: str = "accuracy", *, value: float = 100.0,
             seconds: float = 0.5, runs: int = 3, supported: bool = True,
             extra_groups: int = 0, **extra: Any) -> dict[str, Any]:
    keys = TPCH_KEYS[qid] + [["X", "O"][: len(TPCH_KEYS[qid][0])]] * extra_groups
    rows = [[*k] + [value] * TPCH_VALUES[qid] for k in keys]
    taus = extra.pop("taus", None)
    return {
        "system": system, "version": "9.9", "dataset": "tpch", "query": qid, "mode": mode,
        "epsilon": 1.0, "supported": supported,
        "error": None if supported else "ValueError: JOIN not allowed here",
        "columns": [], "setup_s": 2.0, "predicted_error95": None,
        "runs": [] if not supported else [
            {"seconds": seconds, **({"rows": rows} if mode == "accuracy" else {}),
             **({"tau": taus[i % len(taus)]} if taus else {})}
            for i in range(runs)
        ],
        **extra,
    }


def _tpch_world() -> Any:
    """The one-table world of _world(), plus the TPC-H queries: dpproxy (bound drawn with DP),
    SmartNoise (cannot express them), Qrlew (given TPCH_GUESS_ROWS), and the baselines."""
    m = _world()
    records = list(m.records.values())
    for q in TPCH_KEYS:
        records.append(tpch_rec("dpproxy", q, value=101.0, taus=[150, 140, 160],
                                extra_groups=1 if q == "T01" else 0,
                                predicted_note="rows per unit chosen with DP at run time"))
        records.append(tpch_rec("dpproxy", q, "latency", seconds=2.0, taus=[150]))
        records.append(tpch_rec("duckdb", q, "latency", seconds=0.1))
        records.append(tpch_rec("dpproxy_sql", q, "latency", seconds=1.5))
        records.append(tpch_rec("smartnoise", q, supported=False))
        records.append(tpch_rec("smartnoise", q, "latency", supported=False))
        records.append(tpch_rec("qrlew", q, value=110.0, rows_per_unit=100))
        records.append(tpch_rec("qrlew", q, "latency", seconds=20.0, rows_per_unit=100))
        # A slow peer with accuracy runs only (no latency call on tpch): given the bound as a
        # float, as Qrlew's max_multiplicity is.
        records.append(tpch_rec("tumult", q, value=120.0, seconds=30.0, max_multiplicity=100.0))
    return report.Metrics(records, {**exact(), **tpch_exact()})


def test_the_tpch_queries_run_on_tpch_only() -> None:
    assert workload.DATASETS["tpch"] == 6_001_215 and workload.TPCH_SCALE == 1.0
    assert [q.id for q in workload.queries_for("tpch")] == ["T01", "T03"]
    assert len(workload.queries_for("pums")) == len(workload.queries_for("synthetic_1m")) == 16
    assert all(q.kind == "join" for q in workload.queries_for("tpch"))
    assert workload.TPCH_UNIT_PATHS["lineitem"][-1] == ("o_custkey", *workload.TPCH_UNIT)


def test_tpch_counts_in_coverage_and_accuracy_and_renders_its_own_section() -> None:
    m = _tpch_world()
    t = by_name(report.targets(m))
    assert t["Coverage"].status == "met" and t["Coverage"].measured == "18/18 queries"
    acc = t["Accuracy vs the best peer"]
    assert "T01, T03 on TPC-H scale 1" in acc.goal
    assert acc.status == "met"  # 1% against Qrlew's 10% on T01/T03 too
    assert "18/18 queries ≤ 1" in acc.measured
    rows = {r["query"]: r for r in report.accuracy_vs_best(m)}
    assert rows["T01"]["best"] == "qrlew" and rows["T01"]["ratio"] == pytest.approx(0.1)

    text = report.render(m, {"settings": {"warmup": 1}}, [])
    section = text.split("## TPC-H scale 1: the customer as privacy unit", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "Wilson et al." in section
    assert "T01 150 (140–160), T03 150 (140–160)" in section  # the bounds dpproxy drew
    assert "Qrlew was given 100 rows per customer (`TPCH_GUESS_ROWS`)" in section
    assert "SmartNoise SQL T01: ValueError: JOIN not allowed here" in section
    assert "| T01 | TPC-H Q1 style (line items, customer as unit) | ✓ | ✗ [1] | ✓ | ✓ |" in section
    assert "Tumult Analytics was given 100 rows per customer" in section
    # Accuracy: dpproxy 1% with one zero-filled extra group on T01; Qrlew 10%, Tumult 20%.
    assert ("| 0.01 (100%, 1.00 extra) | – | 0.1 (100%, 0.00 extra) | 0.2 (100%, 0.00 extra) "
            "| 0.10× |") in section
    assert "| T01 | `v3` | 0.01 | – | 0.1 | 0.2 |" in section  # per aggregate
    # Tumult's latency comes from its accuracy runs, marked.
    assert "| 30,000 (30,000) † |" in section and "† No separate latency runs" in section
    assert "predicted 95% errors (`explain`) are not shown" in section
    # Latency: the raw baseline and the ratio.
    assert "dpproxy / raw" in section and "| 20.0× |" in section
    # The one-table sections stay at 16 queries; the runs table has TPC-H columns.
    assert "T01" not in text.split("## Coverage", 1)[1].split("## Accuracy on pums", 1)[0]
    assert "(#tpc-h-scale-1-the-customer-as-privacy-unit)" in text


def test_exact_answers_of_the_tpch_queries_come_from_tpch_duckdb(tmp_path: Path) -> None:
    import duckdb

    (tmp_path / "tpch").mkdir()
    con = duckdb.connect(str(tmp_path / "tpch" / "tpch.duckdb"))
    con.execute("CREATE TABLE customer (c_custkey BIGINT, c_mktsegment VARCHAR)")
    con.execute("CREATE TABLE orders (o_orderkey BIGINT, o_custkey BIGINT, o_orderdate DATE, "
                "o_orderpriority VARCHAR)")
    con.execute("CREATE TABLE lineitem (l_orderkey BIGINT, l_quantity DOUBLE, "
                "l_extendedprice DOUBLE, l_discount DOUBLE, l_returnflag VARCHAR, "
                "l_linestatus VARCHAR, l_shipdate DATE)")
    con.execute("INSERT INTO customer VALUES (1, 'BUILDING'), (2, 'MACHINERY')")
    con.execute("INSERT INTO orders VALUES (10, 1, DATE '1994-01-01', '1-URGENT'), "
                "(20, 2, DATE '1994-01-01', '2-HIGH')")
    con.execute("INSERT INTO lineitem VALUES (10, 5, 500, 0.05, 'R', 'F', DATE '1994-02-01'), "
                "(10, 7, 700, 0.01, 'R', 'F', DATE '1994-02-01'), "
                "(20, 1, 100, 0.1, 'N', 'O', DATE '1998-12-01')")
    con.close()
    ex = report.exact_answers(tmp_path, ["tpch"], ["Q01", "T01", "T03"])
    assert set(ex) == {("tpch", "T01"), ("tpch", "T03")}  # Q01 is not a tpch query
    cols, keys, rows = ex[("tpch", "T01")]
    assert keys == 2 and cols[:2] == ["l_returnflag", "l_linestatus"]
    assert rows == [["R", "F", 12.0, 1200.0, pytest.approx(0.03), 2.0]]  # shipped after the cut
    assert ex[("tpch", "T03")][1:] == (1, [["1-URGENT", 1200.0, 2.0]])


def test_dpproxy_on_postgres_gets_its_own_table_next_to_qrlew() -> None:
    """The PostgreSQL records (adapters/dpproxy.py --backend postgres) are latency only: they
    form their own table, with Qrlew (same server), and stay out of every other table."""
    m = _world()
    for q in IDS:
        for system, s in (("dpproxy_pg", 0.002), ("postgres", 0.001), ("dpproxy_pg_sql", 0.0015)):
            r = rec(system, q, "latency", seconds=s)
            m.records[(system, "pums", "latency", 1.0, q)] = r
    text = report.render(m, {"settings": {"warmup": 1}}, [])
    section = text.split("### On PostgreSQL", 1)[1].split("\n## ", 1)[0]
    head = next(line for line in section.splitlines() if line.startswith("| query"))
    assert head.split(" | ")[1:5] == ["dpproxy (PostgreSQL)", "Qrlew",
                                      "PostgreSQL (raw, no privacy)",
                                      "dpproxy's SQL alone (PostgreSQL)"]
    q01 = next(line for line in section.splitlines() if line.startswith("| Q01"))
    assert "2.00×" in q01  # dpproxy 2 ms against 1 ms raw
    assert "2.50×" in q01  # Qrlew 5 ms against dpproxy's 2 ms
    coverage = text.split("## Coverage", 1)[1].split("\n## ", 1)[0]
    assert "PostgreSQL" not in coverage
    # Still the same verdicts: the PostgreSQL lines are not a system of the comparison.
    assert by_name(report.targets(m))["Speed vs Qrlew"].status == "met"


def test_a_slow_peers_latency_comes_from_accuracy_runs_only_when_they_ran_alone() -> None:
    m = _world()
    for q in IDS:
        r = rec("tumult", q, seconds=3.0)
        m.records[("tumult", "pums", "accuracy", 1.0, q)] = r
    assert m.latency("tumult", "pums", "Q01") is None  # ran next to other systems: no
    m = _world()
    for q in IDS:
        m.records[("tumult", "pums", "accuracy", 1.0, q)] = {**rec("tumult", q, seconds=3.0),
                                                            "alone": True}
    lat = m.latency("tumult", "pums", "Q01")
    assert lat is not None and lat.median == 3.0
    assert m.setup("tumult", "pums") == 0.5
    text = report.render(m, {"settings": {"warmup": 1}}, [])
    assert "3,000 (3,000) †" in text
    assert "† Tumult Analytics: no separate latency call" in text


def test_run_time_of_a_complete_fresh_invocation_is_its_wall_clock() -> None:
    """Calls that ran side by side (run.py --jobs) must not be added up."""
    calls = [{"system": "tumult", "seconds": 1500.0}, {"system": "dpproxy", "seconds": 600.0}]
    manifest = {"calls": calls, "data_s": 3.0, "systems": {}, "complete": True,
                "total_s": 1200.0, "machine": {"cores": 2}}
    t = by_name(report.targets(_world(), {}, manifest))["Run time"]
    assert t.status == "met" and t.measured.startswith("20.2 min")
    calls[1]["reused"] = True  # a resumed invocation: back to the sum
    t = by_name(report.targets(_world(), {}, manifest))["Run time"]
    assert t.status == "not met" and t.measured.startswith("35.2 min")
