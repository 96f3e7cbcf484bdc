"""dpproxy's side of the accuracy comparison alone, when the peers' environments are not installed.

Runs the workload's one-table queries (``workload.py``) and the issue-21 extra queries below
through dpproxy exactly as ``adapters/dpproxy.py`` does (the same DuckDB file with ``pid`` as
primary key, the same privacy schema, ε = 1, δ = 10⁻⁵, ``cache="off"``), ``--runs`` times each,
and writes one JSON line per query in the adapters' format (``INTERFACE.md``). With ``--before``
(a JSON-lines file written the same way by an earlier dpproxy) and ``--report``, it writes
``DPPROXY_ACCURACY.md``: per query, the median relative error over all runs and released cells
and the share of the exact answer's cells released, before and after, next to the best peer's
figures recorded in ``RESULTS.md``. With ``--peer`` (a peer rerun in the same session, e.g.
Tumult Analytics by ``tumult_rerun.py``), the report opens with dpproxy against that peer per
output column, the ratio with a bootstrap 95% interval (``report.ratio_ci``), and the summary
JSON and ``--readme`` state the target from that comparison.

Usage, from the repository root (``data.py --datasets pums`` first)::

    python benchmarks/compare/dpproxy_accuracy.py --runs 200 --out work/after.jsonl
    PYTHONPATH=<old checkout> python benchmarks/compare/dpproxy_accuracy.py --out work/before.jsonl
    python benchmarks/compare/dpproxy_accuracy.py --report --before work/before.jsonl \\
        --after work/after.jsonl [--peer work/tumult.jsonl]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import statistics
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402
import workload  # noqa: E402

# The issue's own cases, not in the peers' workload (no peer adapter speaks them).
EXTRA: dict[str, tuple[str, str]] = {
    "X01": (
        "grouped COUNT next to an AVG",
        "SELECT sex, COUNT(*) AS n, AVG(income) AS a FROM data GROUP BY sex",
    ),
    "X02": (
        "COUNT and AVG by private keys (educ)",
        "SELECT educ, COUNT(*) AS n, AVG(age) AS a FROM data GROUP BY educ",
    ),
}
OUT = HERE / "DPPROXY_ACCURACY.md"
SUMMARY = HERE / "DPPROXY_ACCURACY.json"


def _adapter() -> Any:
    spec = importlib.util.spec_from_file_location("dpproxy_adapter", HERE / "adapters/dpproxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def queries(only: list[str] | None = None) -> dict[str, tuple[str, str]]:
    """The measured queries by id, in order; with ``only``, just those (unknown ids refused)."""
    out = {q.id: (q.title, q.sql) for q in workload.queries_for("pums")}
    out.update(EXTRA)
    if only is None:
        return out
    unknown = sorted(set(only) - set(out))
    if unknown:
        raise ValueError(f"unknown query ids: {', '.join(unknown)}")
    return {qid: v for qid, v in out.items() if qid in only}


def source_commit(package: Path) -> str | None:
    """The git commit the measured ``dpproxy`` package was checked out at, ``+dirty`` if its
    files differ from that commit; None outside a git checkout."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(package), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain", "--", ".")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def measure(data_dir: Path, runs: int, out: Path, only: list[str] | None = None) -> None:
    adapter = _adapter()
    import dpproxy
    from dpproxy.engine import open_engine
    from dpproxy.values import Cost

    tmp = Path(tempfile.mkdtemp(prefix="dpproxy-acc-"))
    db = tmp / "pums.duckdb"
    adapter.build_database(data_dir / "pums.csv", db)
    schema = tmp / "schema.yaml"
    schema.write_text(adapter.schema_yaml("pums", workload.DATASETS["pums"], workload.DELTA))
    engine = open_engine(
        str(db), str(schema), budget=Cost(Fraction(10**12), Fraction(999, 1000)), cache="off"
    )
    eps, dlt = Fraction(str(workload.EPSILON)), Fraction(str(workload.DELTA))
    commit = source_commit(Path(dpproxy.__file__).parent)
    with out.open("w") as f:
        for qid, (_, sql) in queries(only).items():
            rec: dict[str, Any] = {
                "system": "dpproxy",
                "version": dpproxy.__version__,
                "dataset": "pums",
                "query": qid,
                "mode": "accuracy",
                "epsilon": float(eps),
                "supported": True,
                "error": None,
                "commit": commit,
                "runs": [],
            }
            try:
                for _ in range(runs):
                    ans = engine.run(sql, analyst="bench", epsilon=eps, delta=dlt)
                    rows = [
                        [str(v) if isinstance(v, str) else v for v in r] for r in ans.released.rows
                    ]
                    rec["runs"].append({"rows": rows})
                    rec["columns"] = [c.name for c in ans.released.columns]
            except Exception as e:  # a refusal: recorded, as the adapters do
                rec.update(supported=False, error=f"{type(e).__name__}: {e}", runs=[])
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(f"{qid}: {len(rec['runs'])} runs", file=sys.stderr)


def exact(data_dir: Path) -> dict[str, report.Answer]:
    import duckdb

    types = {"int": "BIGINT", "text": "VARCHAR"}
    read_types = ", ".join(f"'{c.name}': '{types[c.type]}'" for c in workload.COLUMNS)
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE {workload.TABLE} AS SELECT * FROM read_csv("
        f"'{data_dir / 'pums.csv'}', header = true, types = {{{read_types}}})"
    )
    out: dict[str, report.Answer] = {}
    for qid, (_, sql) in queries().items():
        cur = con.execute(sql)
        desc = cur.description
        rows = cur.fetchall()
        keys = sum(1 for d in desc if str(d[1]).upper() in ("VARCHAR", "STRING"))
        out[qid] = ([d[0] for d in desc], keys, report.normalise_rows(rows, keys))
    return out


def load(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    lines = path.read_text().splitlines()
    return {r["query"]: r for r in (json.loads(x) for x in lines if x.strip())}


PEERS = ("SmartNoise SQL", "Qrlew", "Tumult Analytics")


def recorded_peers(results_md: Path) -> dict[str, dict[str, float]]:
    """Every peer's recorded median relative error per query (RESULTS.md, pums table)."""
    text = results_md.read_text()
    start = text.index("## Accuracy on pums")
    table = text[start : text.index("Absolute error", start)]
    out: dict[str, dict[str, float]] = {}
    for line in table.splitlines():
        m = re.match(r"\| (Q\d\d) [^|]*\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|", line)
        if not m:
            continue
        cells = {
            name: cell.strip().strip("*") for name, cell in zip(PEERS, m.groups()[2:], strict=True)
        }
        out[m.group(1)] = {n: float(c) for n, c in cells.items() if c not in ("–", "")}
    return out


def best_peers(results_md: Path) -> dict[str, tuple[str, float]]:
    """The best peer's recorded median relative error per query (RESULTS.md, pums table)."""
    out: dict[str, tuple[str, float]] = {}
    for qid, peers in recorded_peers(results_md).items():
        if peers:
            v, name = min((v, n) for n, v in peers.items())
            out[qid] = (name, v)
    return out


def recorded_shares(results_md: Path) -> dict[str, tuple[str, float]]:
    """The best peer's recorded share of released groups (RESULTS.md), per query."""
    text = results_md.read_text()
    out: dict[str, tuple[str, float]] = {}
    for line in text.splitlines():
        m = re.match(r"\| (Q\d\d) [^|]*\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|\s*$", line)
        if not m or "%" not in line:
            continue
        shares = [
            (float(c.strip().split("%")[0]), n)
            for c, n in zip(
                m.groups()[2:], ["SmartNoise SQL", "Qrlew", "Tumult Analytics"], strict=True
            )
        ]
        v, name = max(shares)
        out[m.group(1)] = (name, v / 100)
    return out


def column_errors(rec: dict[str, Any] | None, ans: report.Answer) -> list[list[float]]:
    """Per output column: the relative errors of every run and released cell (report.py's)."""
    if rec is None or not rec.get("supported"):
        return []
    cols, keys, truth = ans
    out: list[list[float]] = []
    for j in range(len(cols) - keys):
        one = {
            "supported": True,
            "runs": [
                {"rows": [[*r[:keys], r[keys + j]] for r in run["rows"]]} for run in rec["runs"]
            ],
        }
        sub = ([*cols[:keys], cols[keys + j]], keys, [[*t[:keys], t[keys + j]] for t in truth])
        a = report.accuracy(one, sub)
        out.append(a.rel_errors if a is not None else [])
    return out


def metrics(rec: dict[str, Any] | None, ans: report.Answer) -> tuple[list[float | None], float]:
    """Per output column: the median relative error; and the share of cells released."""
    if rec is None or not rec.get("supported"):
        return [], float("nan")
    acc = report.accuracy(rec, ans)
    assert acc is not None
    per_col = [statistics.median(e) if e else None for e in column_errors(rec, ans)]
    return per_col, acc.share_released


def _fmt(v: float | None) -> str:
    return "–" if v is None else report._fmt_num(v)


def rerun(data_dir: Path, after: Path, peer: Path, model: Path | None = None) -> dict[str, Any]:
    """dpproxy (``after``) against a peer rerun in the same session (``peer``: the adapter's
    JSON lines, e.g. ``tumult_rerun.py --collect``), per workload query and output column: both
    medians and run counts, the other peers' recorded figures, the best peer (the rerun peer's
    own median, or a recorded one if lower) and the ratio dpproxy / best peer with report.py's
    bootstrap 95% interval (resampling the cells of each side; only against the rerun peer).
    With ``model`` (``tumult_model.py``'s draws), also the model's median and dpproxy / model."""
    answers = exact(data_dir)
    mine, theirs, drawn = load(after), load(peer), (load(model) if model else {})
    recorded = recorded_peers(HERE / "RESULTS.md")
    out: dict[str, Any] = {}
    for qid, rec in theirs.items():
        if qid not in answers or qid not in mine:
            continue
        name = {"tumult": "Tumult Analytics", "smartnoise": "SmartNoise SQL", "qrlew": "Qrlew"}.get(
            rec["system"], rec["system"]
        )
        ours, peers = column_errors(mine[qid], answers[qid]), column_errors(rec, answers[qid])
        others = {n: v for n, v in recorded.get(qid, {}).items() if n != name}
        cols = []
        sim = column_errors(drawn.get(qid), answers[qid]) or [None] * len(ours)
        for a, b, c in zip(ours, peers, sim, strict=True):
            ma, mb = statistics.median(a), statistics.median(b)
            best_name, best = min(
                [(name, mb), *((n, v) for n, v in others.items())],
                key=lambda x: (x[1], x[0] != name),
            )
            ci = report.ratio_ci(a, b) if best_name == name else None
            cols.append(
                {
                    "dpproxy": ma,
                    "peer": mb,
                    "best": [best_name, best],
                    "ratio": report.safe_ratio(ma, best),
                    "ci": ci,
                }
            )
            if c:
                mc = statistics.median(c)
                cols[-1].update(
                    model=mc,
                    model_draws=len(drawn[qid]["runs"]),
                    model_ratio=report.safe_ratio(ma, mc),
                    model_ci=report.ratio_ci(a, c),
                )
        out[qid] = {
            "peer_name": name,
            "columns": answers[qid][0][answers[qid][1] :],
            "dpproxy_runs": len(mine[qid]["runs"]),
            "peer_runs": len(rec["runs"]),
            "recorded": others,
            "per_column": cols,
        }
    return out


def _ratio(r: float | None, ci: Any = None) -> str:
    if r is None:
        return "–"
    text = "∞" if math.isinf(r) else f"{r:.2f}×"
    if ci is not None:
        lo, hi = ci
        text += f" [{lo:.2f}–{'∞' if math.isinf(hi) else f'{hi:.2f}'}]"
    return text


def render_rerun(data: dict[str, Any]) -> list[str]:
    """The Markdown table of :func:`rerun`."""
    if not data:
        return []
    name = next(iter(data.values()))["peer_name"]
    others = [n for n in PEERS if n != name]
    modelled = any("model" in c for q in data.values() for c in q["per_column"])
    model_head = " model | dpproxy / model |" if modelled else ""
    lines = [
        f"## dpproxy and {name}, both rerun in this session",
        "",
        f"Median relative error per output column; {name} rerun with its adapter's programs "
        "(`tumult_rerun.py`), the other peers as recorded in RESULTS.md (200 runs each). "
        "*ratio* is dpproxy's error over the best peer's, with a bootstrap 95% interval (cells "
        "of each side resampled) where the best peer is the rerun one; the ratio is "
        "significantly above 1 only where the whole interval is."
        + (
            f" *model*: {name}'s mechanisms restated without Spark (`tumult_model.py`, its "
            "noise laws and its own quantile sampler), many draws: where its ratio's interval "
            "holds 1, the two mechanisms are tied and a ratio above 1 in the rerun is sampling."
            if modelled
            else ""
        ),
        "",
        f"| query | column | dpproxy | {name} | "
        + " | ".join(f"{n} (recorded)" for n in others)
        + f" | ratio | runs (dpproxy / {name}) |"
        + model_head,
        "| --- | --- | ---: | ---: | "
        + " | ".join("---:" for _ in others)
        + " | ---: | ---: |"
        + (" ---: | ---: |" if modelled else ""),
    ]
    titles = queries()
    for qid, q in sorted(data.items()):
        for col, c in zip(q["columns"], q["per_column"], strict=True):
            rec = " | ".join(_fmt(q["recorded"].get(n)) for n in others)
            lines.append(
                f"| {qid} {titles[qid][0]} | `{col}` | {_fmt(c['dpproxy'])} | {_fmt(c['peer'])} "
                f"| {rec} | {_ratio(c['ratio'], c['ci'])} | {q['dpproxy_runs']} / "
                f"{q['peer_runs']} |"
                + (
                    ("" if not modelled else " – | – |")
                    if "model" not in c
                    else f" {_fmt(c['model'])} ({c['model_draws']:,} draws) | "
                    f"{_ratio(c['model_ratio'], c['model_ci'])} |"
                )
            )
    return [*lines, ""]


def render(
    data_dir: Path,
    before: Path,
    after: Path,
    runs_note: str,
    peer: Path | None = None,
    model: Path | None = None,
) -> str:
    answers = exact(data_dir)
    b, a = load(before), load(after)
    peers = best_peers(HERE / "RESULTS.md")
    shares = recorded_shares(HERE / "RESULTS.md")
    rerun_data = rerun(data_dir, after, peer, model) if peer is not None else {}
    who = (
        f"dpproxy and {next(iter(rerun_data.values()))['peer_name']} were rerun (below); the "
        "other peers' environments were not installed on this machine, so the table after "
        "that compares with"
        if rerun_data
        else "Only dpproxy was rerun: the peers' environments were not installed on this machine, "
        "so their figures are"
    )
    lines = [
        "# dpproxy's accuracy before and after the issue-21 changes (pums, ε = 1)",
        "",
        f"_Generated by `benchmarks/compare/dpproxy_accuracy.py`; do not edit by hand._ {who} "
        "the ones recorded in [RESULTS.md](RESULTS.md) (the best peer per "
        f"query). {runs_note}",
        "",
        *render_rerun(rerun_data),
        "## dpproxy before and after, against the recorded peers",
        "",
        "Median relative error per output column over all runs and released cells; *share* is "
        "the share of the exact answer's cells released. X01 and X02 are not in the peers' "
        "workload.",
        "",
        "| query | column | dpproxy before | dpproxy after | best peer (recorded) | after / peer "
        "| share before | share after | best peer share (recorded) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for qid, (title, _) in queries().items():
        ans = answers[qid]
        cols, keys, _ = ans
        before_cols, sb = metrics(b.get(qid), ans)
        after_cols, sa = metrics(a.get(qid), ans)
        peer = peers.get(qid)
        share_peer = shares.get(qid)
        for j, col in enumerate(cols[keys:]):
            bv = before_cols[j] if j < len(before_cols) else None
            av = after_cols[j] if j < len(after_cols) else None
            pv = peer[1] if peer is not None and len(cols) - keys == 1 else None
            ratio = (
                "–"
                if pv is None or av is None
                else ("1.00×" if pv == av == 0 else ("∞" if pv == 0 else f"{av / pv:.2f}×"))
            )
            peer_cell = f"{_fmt(pv)} ({peer[0]})" if pv is not None and peer else "–"
            share_cell = (
                f"{share_peer[1]:.1%} ({share_peer[0]})"
                if share_peer is not None and j == 0
                else "–"
            )
            lines.append(
                f"| {qid} {title} | `{col}` | {_fmt(bv)} | {_fmt(av)} | {peer_cell} | {ratio} "
                f"| {sb:.1%} | {sa:.1%} | {share_cell} |"
            )
    medians = [m for q in queries() for m in metrics(a.get(q), answers[q])[0] if m is not None]
    lines += ["", f"Median over all columns after: {_fmt(statistics.median(medians))}.", ""]
    return "\n".join(lines)


def summary(
    data_dir: Path,
    before: Path,
    after: Path,
    peer: Path | None = None,
    model: Path | None = None,
) -> dict[str, Any]:
    """The figures the README states, per query: errors per column and shares, both sides;
    with ``peer``, each query's comparison with the peer rerun (:func:`rerun`) as ``rerun``."""
    answers = exact(data_dir)
    b, a = load(before), load(after)
    peers, shares = best_peers(HERE / "RESULTS.md"), recorded_shares(HERE / "RESULTS.md")
    out: dict[str, Any] = {}
    for qid in queries():
        (bc, sb), (ac, sa) = metrics(b.get(qid), answers[qid]), metrics(a.get(qid), answers[qid])
        out[qid] = {
            "columns": answers[qid][0][answers[qid][1] :],
            "before": bc,
            "after": ac,
            "share_before": sb,
            "share_after": sa,
            "runs": len(a[qid]["runs"]) if qid in a else 0,
            "peer": peers.get(qid),
            "peer_share": shares.get(qid),
        }
    if peer is not None:
        for qid, r in rerun(data_dir, after, peer, model).items():
            out[qid]["rerun"] = r
    return out


def readme(data: dict[str, Any]) -> str:
    """README.md's lines on issue 21's accuracy targets, from the committed JSON."""
    ratios = []
    for qid, q in data.items():
        peer = q["peer"]
        if peer is None or len(q["after"]) != 1 or q["after"][0] is None:
            continue
        mine, theirs = q["after"][0], peer[1]
        ratios.append(
            (1.0 if mine == theirs else (math.inf if theirs == 0 else mine / theirs), qid, peer[0])
        )
    above = sorted((r for r in ratios if r[0] > 1), reverse=True)
    q09, x01 = data["Q09"], data["X01"]
    worse = ", ".join(f"{q} {r:.2f}×" for r, q, _ in above)
    runs = q09["runs"]
    reruns = {q: d["rerun"] for q, d in data.items() if "rerun" in d}
    if reruns:
        head, target = _readme_rerun(runs, reruns)
    else:
        head = (
            f"Issue 21's accuracy targets, dpproxy rerun alone ({runs} runs per query on pums, "
            "ε = 1; the peers' environments were not installed, so their figures are those "
            "recorded in RESULTS.md; `benchmarks/compare/dpproxy_accuracy.py`, "
            "[DPPROXY_ACCURACY.md](benchmarks/compare/DPPROXY_ACCURACY.md)):"
        )
        target = (
            f"| median relative error ≤ the best peer's on every output column | "
            f"**{'met' if not above else 'not met'}** | ≤ on {len(ratios) - len(above)}/"
            f"{len(ratios)} one-table queries; above: {worse or 'none'} |"
        )
    lines = [
        head,
        "",
        "| target | status | measured |",
        "|---|---|---|",
        target,
        f"| share of released groups with private keys ≥ the best peer's | "
        f"**{'met' if q09['share_after'] >= q09['peer_share'][1] else 'not met'}** | Q09: "
        f"{q09['share_after']:.1%} (was {q09['share_before']:.1%}) against "
        f"{q09['peer_share'][1]:.1%} ({q09['peer_share'][0]}); its median relative error "
        f"{_fmt(q09['after'][0])} (was {_fmt(q09['before'][0])}) |",
        f"| grouped COUNT next to an AVG (`SELECT sex, COUNT(*), AVG(income) … GROUP BY sex`) | "
        f"measured | COUNT {_fmt(x01['after'][0])} (was {_fmt(x01['before'][0])}), AVG "
        f"{_fmt(x01['after'][1])} (was {_fmt(x01['before'][1])}): the count is read off the "
        "AVG's joint release |",
        "",
    ]
    return "\n".join(lines)


def _readme_rerun(runs: int, reruns: dict[str, Any]) -> tuple[str, str]:
    """The heading and the target row when a peer was rerun in the same session."""
    name = next(iter(reruns.values()))["peer_name"]
    peer_runs = sorted({r["peer_runs"] for r in reruns.values()})
    span = f"{peer_runs[0]}" if len(peer_runs) == 1 else f"{peer_runs[0]}–{peer_runs[-1]}"
    cells = [(c, q) for q, r in sorted(reruns.items()) for c in r["per_column"]]
    above = sorted(
        ((c["ratio"], q, c["ci"]) for c, q in cells if c["ratio"] is not None and c["ratio"] > 1),
        reverse=True,
    )
    significant = [q for r, q, ci in above if ci is not None and ci[0] > 1]
    worse = ", ".join(f"{q} {_ratio(r, ci)}" for r, q, ci in above)
    head = (
        f"Issue 21's accuracy targets, dpproxy ({runs} runs per query on pums, ε = 1) and "
        f"{name} ({span} runs per query) rerun in one session, the other peers as recorded in "
        "RESULTS.md; ratios with bootstrap 95% intervals (`benchmarks/compare/"
        "dpproxy_accuracy.py`, [DPPROXY_ACCURACY.md](benchmarks/compare/DPPROXY_ACCURACY.md)):"
    )
    target = (
        f"| median relative error ≤ the best peer's on every output column | "
        f"**{'met' if not above else 'not met'}** | ≤ on {len(cells) - len(above)}/{len(cells)} "
        f"columns of the {len(reruns)} rerun queries; above: {worse or 'none'}; significantly "
        f"above (whole interval > 1): {', '.join(significant) or 'none'}{_vs_model(cells)} |"
    )
    return head, target


def _vs_model(cells: list[tuple[dict[str, Any], str]]) -> str:
    """The target row's clause on the mechanism model, if the columns have one."""
    modelled = [(c, q) for c, q in cells if c.get("model_ratio") is not None]
    if not modelled:
        return ""
    draws = min(c["model_draws"] for c, _ in modelled)
    above = [
        f"{q} {_ratio(c['model_ratio'], c['model_ci'])}"
        for c, q in modelled
        if c["model_ratio"] > 1
    ]
    worse = [q for c, q in modelled if c["model_ci"][0] > 1]
    return (
        f". Against Tumult's mechanisms restated without Spark (`tumult_model.py`, ≥ "
        f"{draws:,} draws): above 1 on {', '.join(above) or 'none'}; significantly above: "
        f"{', '.join(worse) or 'none'}"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=HERE / "work" / "data")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--out", type=Path, help="measure: the JSON-lines file to write")
    p.add_argument(
        "--queries",
        type=lambda s: [q.strip() for q in s.split(",") if q.strip()],
        help="measure only these query ids, comma-separated (default: all)",
    )
    p.add_argument("--report", action="store_true", help="write DPPROXY_ACCURACY.md")
    p.add_argument("--before", type=Path)
    p.add_argument("--after", type=Path)
    p.add_argument("--note", default="")
    p.add_argument("--peer", type=Path, help="a peer rerun in this session (JSON lines)")
    p.add_argument("--model", type=Path, help="tumult_model.py's draws (JSON lines)")
    p.add_argument("--summary", type=Path, default=SUMMARY, help="the figures, as JSON")
    p.add_argument("--readme", action="store_true", help="print README.md's lines")
    p.add_argument("--report-out", type=Path, default=OUT, help="the Markdown report")
    args = p.parse_args(argv)
    if args.readme:
        print(readme(json.loads(args.summary.read_text())), end="")
        return
    if args.report:
        if args.before is None or args.after is None:
            p.error("--report needs --before and --after")
        args.report_out.write_text(
            render(args.data_dir, args.before, args.after, args.note, args.peer, args.model)
        )
        args.summary.write_text(
            json.dumps(
                summary(args.data_dir, args.before, args.after, args.peer, args.model), indent=1
            )
            + "\n"
        )
        print(f"wrote {args.report_out} and {args.summary}")
        return
    if args.out is None:
        p.error("give --out (measure) or --report")
    measure(args.data_dir, args.runs, args.out, args.queries)


if __name__ == "__main__":
    main()
