"""TPC-H Q1–Q22 at SF 0.01 and 1: answered or refused, accuracy at ε = 1, latency against DuckDB.

The 22 queries in their standard text: which are answered, their accuracy at ε = 1, and their
latency against raw DuckDB, at scale factors 0.01 and 1.

The queries are ``tests/corpus/tpch/qNN.sql`` (the specification's text with its validation
parameters), the privacy schema ``schemas/tpch.yaml`` (the customer is the privacy unit). The
databases are generated once with :func:`dpproxy.tpch.generate_tpch` (``tpchgen-cli``, offline)
into ``--data-dir`` (default: dpproxy's cache directory, ``$DPPROXY_CACHE_DIR`` or
``~/.cache/dpproxy``) as ``tpch-sf<scale>.duckdb`` and reused afterwards.

Every query runs through the real engine (:class:`dpproxy.engine.Engine` over
:class:`~dpproxy.backends.duckdb.DuckDBBackend`, OpenDP noise, an in-memory accountant with
ε = 10⁹ so the budget never runs out, and its answer cache off so every run is a new release),
asking ε = 1 per release. Per query and scale:

* **Outcome**: answered, or refused with the SQLSTATE and the first line of the message.
* **Latency**, in rounds whose order rotates, each run timed alone: *raw* (the same SQL text on
  a read-only DuckDB connection to the same file, ``fetchall``), *cold* (``Engine.run`` after
  clearing the engine's plan caches, for an analyst never seen before, so the rows-per-customer
  bound is drawn again) and *warm* (plans cached, an analyst who ran the query before, so a
  bound drawn earlier is reused; still a fresh release with fresh noise). Reported: p50, min,
  max, and the median over rounds of the per-round ratio dpproxy / raw.
* **Accuracy**, over the answers of independent releases (the cold runs and further runs by new
  analysts, never the warm runs, which share a drawn bound). Rows are matched to the exact
  answer (the SQL run directly on DuckDB) by their *key columns*: the output columns in the
  outer GROUP BY; none for a single aggregate row; for an outer query with neither (Q15, Q20),
  every column whose exact values are not floating-point. *Relative error* of a released cell:
  ``|released − exact| / |exact|`` for each numeric non-key column of a released row whose key is
  in the exact answer without its LIMIT (cells with an exact 0 or a NULL on either side left
  out and counted); reported as the median (and 90th percentile) over all such cells of all runs.
  *Share released*: the mean over runs of the fraction of the exact answer's keys (with its
  LIMIT) that the released answer has; groups of private keys pass a noisy threshold, so small
  groups are often withheld.

Each query gets ``--latency-runs`` rounds and ``--runs`` accuracy runs, cut short when it has
used ``--query-seconds`` (at least one round and one release always run).

    python benchmarks/bench_tpch.py                        # SF 0.01 and 1, ≈ 10 min
    python benchmarks/bench_tpch.py --sf 0.01 --queries q01,q06 --runs 5 --json
    python benchmarks/bench_tpch.py --report-only          # TPCH.md and the figure from TPCH.json
    python benchmarks/bench_tpch.py --readme               # README.md's section, from TPCH.json

Writes ``benchmarks/TPCH.json`` (raw figures), ``benchmarks/TPCH.md`` and
``benchmarks/figures/tpch.png`` (with ``--out-dir D``: ``D/TPCH.json``, ``D/TPCH.md``,
``D/figures/tpch.png``). Progress goes to stderr, one line per query.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb
import sqlglot
from _common import (
    HERE,
    REPO,
    fmt_ms,
    fmt_ratio,
    loadavg,
    machine,
    machine_line,
    md_table,
    percentile,
    progress,
)
from sqlglot import exp

from dpproxy.accounting.memory import MemoryAccountant
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.catalog.load import load_catalog
from dpproxy.demo import cache_dir
from dpproxy.engine import Answer, Engine
from dpproxy.errors import DPProxyError
from dpproxy.planning.public import PublicPlan
from dpproxy.sql import parse as parse_module
from dpproxy.tpch import TABLE_NAMES, generate_tpch
from dpproxy.values import Cost

SCHEMA = REPO / "schemas" / "tpch.yaml"
CORPUS = REPO / "tests" / "corpus" / "tpch"
QUERIES = {p.stem: p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("q*.sql"))}
BUDGET = Cost(Fraction(10**9), Fraction(1, 2))  # never runs out
EPSILON = Fraction(1)
# (accuracy runs, latency rounds) per scale when --runs / --latency-runs are not given
DEFAULTS = {0.01: (100, 15), 1.0: (20, 5)}
FALLBACK = (20, 5)
QUERY_SECONDS = 30.0
WARM_UP = "SELECT COUNT(*), SUM(o_totalprice) FROM orders"
_analysts = itertools.count(1)


def fresh_analyst() -> str:
    return f"bench-{next(_analysts)}"


def clear_plan_caches() -> None:
    """Forget every plan the engine cached (per SQL text), and the parser's text cache."""
    for fn in (Engine._plan, Engine.public_plan, Engine._composed, parse_module.normalised_text):
        inner: Any = fn
        while not hasattr(inner, "cache_clear"):
            inner = inner.__wrapped__  # under the before_the_data guard
        inner.cache_clear()


# --------------------------------------------------------------------------------- matching


def _norm(v: Any) -> Any:
    """A key value comparable between DuckDB's answer and dpproxy's."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | float | Decimal):
        return float(v)
    if isinstance(v, datetime.datetime) and v.time() == datetime.time():
        return v.date().isoformat()
    if isinstance(v, datetime.date):
        return v.isoformat()
    return str(v)


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float | Decimal):
        return None
    x = float(v)
    return x if math.isfinite(x) else None


def key_positions(sql: str, exact: Sequence[tuple[Any, ...]], width: int) -> list[int]:
    """The output columns that identify a row (see the module docstring)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    assert select is not None
    items = select.expressions
    group = select.args.get("group")
    if group is not None:
        texts = {g.sql() for g in group.expressions}
        keys = []
        for i, item in enumerate(items):
            ordinal = exp.Literal.number(i + 1).sql()
            if item.unalias().sql() in texts or item.alias_or_name in texts or ordinal in texts:
                keys.append(i)
        return keys
    if any(item.find(exp.AggFunc) for item in items):
        return []  # one row
    floats = {i for row in exact for i, v in enumerate(row) if isinstance(v, float | Decimal)}
    return [i for i in range(width) if i not in floats]


class Truth:
    """The exact answer of one query, indexed by key."""

    def __init__(self, sql: str, top: list[tuple[Any, ...]], whole: list[tuple[Any, ...]]):
        self.width = len(whole[0]) if whole else len(top[0]) if top else 0
        self.keys = key_positions(sql, whole, self.width)
        self.rows = {self.key(r): r for r in whole}
        self.top = {self.key(r) for r in top}
        self.values = [
            i
            for i in range(self.width)
            if i not in self.keys and any(_number(r[i]) is not None for r in whole)
        ]

    def key(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(_norm(row[i]) for i in self.keys)

    def score(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """One release against the truth: relative errors, keys released, the rest counted."""
        errors: list[float] = []
        zero = null = extra = 0
        seen = set()
        for row in rows:
            k = self.key(row)
            exact = self.rows.get(k)
            if exact is None or len(row) != self.width:
                extra += 1
                continue
            seen.add(k)
            for i in self.values:
                got, want = _number(row[i]), _number(exact[i])
                if got is None or want is None:
                    null += 1
                elif want == 0:
                    zero += 1
                else:
                    errors.append(abs(got - want) / abs(want))
        share = len(seen & self.top) / len(self.top) if self.top else None
        return {"errors": errors, "share": share, "extra": extra, "zero": zero, "null": null}


# --------------------------------------------------------------------------------- measuring


def _stats(values: Sequence[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {
        "p50": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "samples": list(values),
    }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _kind(answer: Answer) -> str:
    if isinstance(answer.plan, PublicPlan):
        return "public tables only" if not answer.cost.epsilon else "released per key, then exact"
    return "private"


def measure_query(
    engine: Engine,
    raw: duckdb.DuckDBPyConnection,
    sql: str,
    runs: int,
    rounds: int,
    seconds: float,
) -> dict[str, Any]:
    started = time.perf_counter()

    def out_of_time() -> bool:
        return time.perf_counter() - started >= seconds

    def run_raw() -> list[Any]:
        return raw.execute(sql).fetchall()

    def run_dp(analyst: str) -> Answer:
        return engine.run(sql, analyst=analyst, epsilon=EPSILON)

    def cold() -> Answer:
        clear_plan_caches()
        return run_dp(fresh_analyst())

    top = run_raw()  # also warms DuckDB's buffers
    columns = [d[0] for d in raw.description or ()]
    tree = sqlglot.parse_one(sql, read="postgres")
    if tree.args.get("limit") is not None:
        tree.set("limit", None)
        whole = raw.execute(tree.sql("duckdb")).fetchall()
    else:
        whole = top
    truth = Truth(sql, top, whole)
    result: dict[str, Any] = {"columns": columns, "exact_rows": len(top)}
    try:
        took, answer = _timed(cold)
    except DPProxyError as e:
        result.update(
            outcome="refused",
            sqlstate=e.sqlstate,
            message=e.message.splitlines()[0] if e.message else "",
            refused_after_s=time.perf_counter() - started,
        )
        return result
    samples: dict[str, list[float]] = {"raw": [], "cold": [], "warm": []}
    ratios: dict[str, list[float]] = {"cold": [], "warm": []}
    releases = [answer]
    first_raw, _ = _timed(run_raw)
    samples["raw"].append(first_raw)
    samples["cold"].append(took)
    ratios["cold"].append(took / first_raw)
    warm_analyst = None
    if not out_of_time():
        warm_analyst = fresh_analyst()
        run_dp(warm_analyst)  # draws (and keeps) its bound; not timed
    for r in range(1, rounds):
        if out_of_time():
            break
        modes = ["raw", "cold", "warm"] if warm_analyst else ["raw", "cold"]
        shift = r % len(modes)
        times: dict[str, float] = {}
        for mode in modes[shift:] + modes[:shift]:
            if mode == "raw":
                times[mode], _ = _timed(run_raw)
            elif mode == "cold":
                times[mode], got = _timed(cold)
                releases.append(got)
            else:
                assert warm_analyst is not None
                times[mode], _ = _timed(lambda: run_dp(warm_analyst))
        for mode, t in times.items():
            samples[mode].append(t)
            if mode != "raw":
                ratios[mode].append(t / times["raw"])
    while len(releases) < runs and not out_of_time():
        releases.append(run_dp(fresh_analyst()))
    scores = [truth.score(a.released.rows) for a in releases]
    errors = sorted(e for s in scores for e in s["errors"])
    shares = [s["share"] for s in scores if s["share"] is not None]
    result.update(
        outcome="answered",
        kind=_kind(answer),
        epsilon_charged=float(answer.cost.epsilon),
        rows_released=len(answer.released.rows),
        latency={
            **{mode: _stats(v) for mode, v in samples.items()},
            **{f"ratio_{mode}": _stats(v) for mode, v in ratios.items()},
        },
        accuracy={
            "runs": len(releases),
            "key_columns": [columns[i] for i in truth.keys] if columns else truth.keys,
            "value_columns": [columns[i] for i in truth.values] if columns else truth.values,
            "cells": len(errors),
            "median_rel_error": statistics.median(errors) if errors else None,
            "p90_rel_error": percentile(errors, 90) if errors else None,
            "share_released": statistics.fmean(shares) if shares else None,
            "per_run_share": [s["share"] for s in scores],
            "per_run_median_rel_error": [
                statistics.median(s["errors"]) if s["errors"] else None for s in scores
            ],
            "extra_rows_per_run": statistics.fmean(s["extra"] for s in scores),
            "zero_cells": sum(s["zero"] for s in scores),
            "null_cells": sum(s["null"] for s in scores),
        },
        seconds=time.perf_counter() - started,
    )
    return result


def measure_scale(args: argparse.Namespace, scale: float, names: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    path = args.data_dir / f"tpch-sf{scale:g}.duckdb"
    progress(f"SF {scale:g}: data in {path}")
    generate_tpch(path, scale, progress=True)
    runs, rounds = DEFAULTS.get(scale, FALLBACK)
    runs = args.runs or runs
    rounds = args.latency_runs or rounds
    raw = duckdb.connect(str(path), read_only=True)
    engine = Engine(
        load_catalog(SCHEMA),
        DuckDBBackend(path),
        accountant=MemoryAccountant(BUDGET, cache="off"),  # every run a new release
    )
    sizes = {t: int(raw.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in TABLE_NAMES}  # type: ignore[index]
    queries: dict[str, Any] = {}
    try:
        # One-time costs of the process (imports, OpenDP's samplers) are not any query's.
        engine.run(WARM_UP, analyst=fresh_analyst(), epsilon=EPSILON)
        raw.execute(WARM_UP).fetchall()
        for i, name in enumerate(names, 1):
            r = measure_query(engine, raw, QUERIES[name], runs, rounds, args.query_seconds)
            queries[name] = r
            if r["outcome"] == "refused":
                note = f"refused {r['sqlstate']}: {r['message'][:90]}"
            else:
                lat, acc = r["latency"], r["accuracy"]
                err = acc["median_rel_error"]
                note = (
                    f"raw {lat['raw']['p50'] * 1e3:,.1f} ms, dpproxy cold "
                    f"{lat['cold']['p50'] * 1e3:,.1f} ms, {acc['runs']} releases, median rel. "
                    f"error {'—' if err is None else f'{err:.3g}'}"
                )
            progress(f"[SF {scale:g} {i}/{len(names)}] {name}: {note}")
    finally:
        engine.close()
        raw.close()
    return {
        "scale": scale,
        "database": str(path),
        "sizes": sizes,
        "runs": runs,
        "latency_rounds": rounds,
        "query_seconds": args.query_seconds,
        "answered": sum(q["outcome"] == "answered" for q in queries.values()),
        "queries": queries,
        "seconds": time.perf_counter() - started,
    }


# ---------------------------------------------------------------------------------- reporting


def _ms_range(s: dict[str, Any] | None) -> str:
    if not s:
        return "—"
    if s["n"] == 1:
        return fmt_ms(s["p50"])
    return f"{fmt_ms(s['p50'])} ({fmt_ms(s['min'])}–{fmt_ms(s['max'])})"


def _ratio(s: dict[str, Any] | None) -> str:
    return fmt_ratio(s["p50"]) if s else "—"


def _pct(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.2%}" if x < 0.1 else f"{x:.1%}"


def _row(name: str, q: dict[str, Any]) -> list[str]:
    label = name.upper().replace("Q0", "Q")
    if q["outcome"] != "answered":
        msg = q.get("message", "").replace("|", "\\|")
        return [label, f"refused **{q.get('sqlstate')}**: {msg}"] + ["—"] * 8
    lat, acc = q["latency"], q["accuracy"]
    err = acc["median_rel_error"]
    err_text = "no matched cell" if err is None else f"{_pct(err)} ({_pct(acc['p90_rel_error'])})"
    return [
        label,
        f"answered ({q['kind']})",
        f"{q['epsilon_charged']:g}",
        _ms_range(lat["raw"]),
        _ms_range(lat["cold"]),
        _ms_range(lat["warm"]),
        _ratio(lat["ratio_cold"]),
        _ratio(lat["ratio_warm"]),
        err_text,
        f"{_pct(acc['share_released'])} · {acc['runs']}",
    ]


HEADER = (
    "query",
    "outcome",
    "ε charged",
    "raw ms p50 (min–max)",
    "dpproxy cold ms",
    "dpproxy warm ms",
    "ratio cold",
    "ratio warm",
    "median rel. error (p90)",
    "share released · releases",
)


def headline(sc: dict[str, Any]) -> dict[str, Any]:
    """Figures of one scale for the README: the count answered, the median ratios, errors."""
    done = [q for q in sc["queries"].values() if q["outcome"] == "answered"]
    private = [q for q in done if q["kind"] != "public tables only"]

    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    errors = [q["accuracy"]["median_rel_error"] for q in private]
    numeric = [e for e in errors if e is not None]
    return {
        "answered": len(done),
        "of": len(sc["queries"]),
        "median_ratio_warm": med(
            [q["latency"]["ratio_warm"]["p50"] for q in done if q["latency"]["ratio_warm"]]
        ),
        "median_ratio_cold": med([q["latency"]["ratio_cold"]["p50"] for q in done]),
        "private_answered": len(private),
        "with_numeric_cells": len(numeric),
        "error_below_1pct": sum(e < 0.01 for e in numeric),
        "error_below_10pct": sum(e < 0.1 for e in numeric),
    }


def _headline_text(sf: str, h: dict[str, Any]) -> str:
    ratio = h["median_ratio_warm"]
    return (
        f"**SF {sf}: {h['answered']} of {h['of']} answered.** Median over the answered queries "
        f"of the per-query latency ratio dpproxy / raw DuckDB: "
        f"{'—' if ratio is None else fmt_ratio(ratio)} warm, "
        f"{'—' if h['median_ratio_cold'] is None else fmt_ratio(h['median_ratio_cold'])} cold. "
        f"Of the {h['with_numeric_cells']} answered queries over private data with numeric cells "
        f"released, {h['error_below_1pct']} have a median relative error below 1% and "
        f"{h['error_below_10pct']} below 10%."
    )


METHOD = """\
**How it is measured.** The 22 queries are `tests/corpus/tpch/qNN.sql`, the specification's
text with its validation parameters, unchanged; the privacy schema is `schemas/tpch.yaml` (the
customer is the privacy unit). The databases are generated offline with `tpchgen-cli`
(`dpproxy.tpch.generate_tpch`) as DuckDB files. dpproxy is the embedded engine
(`dpproxy.engine.Engine` on `DuckDBBackend`) with OpenDP noise, ε = 1 asked per release (a query
released in parts, such as a scalar subquery first, is charged ε = 1 for each part: column
*ε charged*), an in-memory accountant with a budget that never runs out, and the answer cache off.

* **Latency**: rounds of *raw* (the same SQL text on a read-only DuckDB connection to the same
  file, `fetchall`), *cold* (`Engine.run` after clearing the engine's plan caches, by a new
  analyst, so a rows-per-customer bound is drawn again) and *warm* (plans cached, an analyst who
  ran the query before and whose drawn bound is reused; still a new release with new noise),
  their order rotated from round to round. p50 (min–max) in milliseconds; *ratio* is the median
  over rounds of dpproxy / raw within the round, so load shared by the runs of a round cancels.
* **Accuracy**: the releases of new analysts (the cold runs, then more runs up to the release
  count) against the exact answer of the same SQL on DuckDB. A released row is matched to an
  exact row by its *key columns*: the output columns named in the outer `GROUP BY`; none when the
  query returns one aggregate row; for an outer query with neither (Q15, Q20), the columns whose
  exact values are not floating-point. *Relative error* of a cell: |released − exact| / |exact|,
  for each numeric column outside the key, over the released rows whose key is in the exact
  answer without its `LIMIT` (cells whose exact value is 0 or with a NULL on either side are left
  out and counted in the JSON); the median and 90th percentile over all such cells of all
  releases (*no matched cell*: no release had a row of the exact answer with a numeric value,
  for instance every group withheld). *Share released*: the mean over releases of the fraction
  of the exact answer's keys (with its `LIMIT`) present in the release. Groups of private keys
  are selected with noise, so groups of few customers are often withheld; groups of a public
  domain are all released (including empty ones, which are not in the exact answer and are
  counted as extra rows in the JSON).
* **Run counts**: per query, up to the given number of rounds and releases, cut short once the
  query has used its time allowance (at least one round and one release always run); the counts
  reached are in the last column and in the JSON.
"""


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    la = m.get("loadavg_start") or (0.0,)
    shared = (
        f" The figures were taken on a shared machine: other engineers' jobs ran during the "
        f"benchmark (1-minute load average {la[0]:.2f} before it started, on {m['cores']} cores), "
        f"so absolute times are noisy; the ratios are measured within each round."
        if la[0] >= 0.5
        else ""
    )
    parts = [
        "# TPC-H Q1–Q22: answered, accuracy at ε = 1, latency against DuckDB",
        "",
        "_Generated by `benchmarks/bench_tpch.py`; do not edit by hand._",
        "",
        f"Machine: {machine_line(m)}. Total run time {data['seconds'] / 60:.1f} min.{shared}",
        "",
    ]
    for sf, sc in data["scales"].items():
        parts += [_headline_text(sf, headline(sc)), ""]
    parts += [METHOD, ""]
    for sf, sc in data["scales"].items():
        sizes = ", ".join(f"{t} {n:,}" for t, n in sc["sizes"].items())
        parts += [
            f"## Scale factor {sf}",
            "",
            f"{sizes} rows. Up to {sc['latency_rounds']} latency rounds and {sc['runs']} releases "
            f"per query, {sc['query_seconds']:g} s allowance per query; "
            f"{sc['seconds'] / 60:.1f} min in all.",
            "",
            md_table(HEADER, [_row(n, q) for n, q in sc["queries"].items()], "llrrrrrrrr"),
            "",
        ]
    parts += ["![TPC-H latency ratio and error per query](figures/tpch.png)", ""]
    return "\n".join(parts)


def _label(name: str) -> str:
    return name.upper().replace("Q0", "Q")


def readme_section(data: dict[str, Any]) -> str:
    """The README's TPC-H benchmark paragraph and table, from the figures alone (``--readme``;
    ``tests/unit/test_bench_tpch.py`` checks that README.md holds it as generated)."""
    scales = data["scales"]
    heads = {sf: headline(sc) for sf, sc in scales.items()}
    m = data["machine"]
    la = m.get("loadavg_start") or (0.0,)
    where = "a shared 2-core machine" if la[0] >= 0.5 else f"a {m['cores']}-core machine"

    def ratio(x: float | None) -> str:
        return "—" if x is None else fmt_ratio(x)

    def slowest(sc: dict[str, Any]) -> str:
        done = {n: q for n, q in sc["queries"].items() if q["outcome"] == "answered"}
        if not done:
            return "—"
        pick = {
            n: q["latency"]["ratio_warm"] or q["latency"]["ratio_cold"] for n, q in done.items()
        }
        name = max(pick, key=lambda n: pick[n]["p50"])
        mode = "warm" if done[name]["latency"]["ratio_warm"] else "cold"
        return f"{_label(name)}, {fmt_ratio(pick[name]['p50'])} ({mode})"

    def refused(sc: dict[str, Any]) -> str:
        out = [
            f"{_label(n)} ({q.get('sqlstate')})"
            for n, q in sc["queries"].items()
            if q["outcome"] != "answered"
        ]
        return ", ".join(out) or "none"

    cols = list(scales)
    rows = [
        ["answered", *(f"{heads[sf]['answered']} of {heads[sf]['of']}" for sf in cols)],
        ["refused (SQLSTATE)", *(refused(scales[sf]) for sf in cols)],
        [
            "latency dpproxy / raw DuckDB, median over the answered queries: warm (cold)",
            *(
                f"{ratio(heads[sf]['median_ratio_warm'])} ({ratio(heads[sf]['median_ratio_cold'])})"
                for sf in cols
            ),
        ],
        ["slowest against raw", *(slowest(scales[sf]) for sf in cols)],
        [
            "answered private queries with a median relative error < 1% / < 10%",
            *(
                f"{heads[sf]['error_below_1pct']} / {heads[sf]['error_below_10pct']} of "
                f"{heads[sf]['with_numeric_cells']}"
                for sf in cols
            ),
        ],
    ]
    table = md_table(["", *(f"SF {sf}" for sf in cols)], rows, "l" + "r" * len(cols))
    head = textwrap.fill(
        f"**TPC-H Q1–Q22 at scale {' and '.join(cols)}** (`bench_tpch.py`: the standard text of "
        "`tests/corpus/tpch/`, the customer as privacy unit, ε = 1 per release, against the same "
        "SQL run directly on DuckDB; per-query latency, error, refusal messages and the "
        "definitions in [benchmarks/TPCH.md](benchmarks/TPCH.md)). Last run "
        f"{m['date'][:10]} on {where}, {data['seconds'] / 60:.0f} minutes in all:",
        width=100,
        break_long_words=False,
        break_on_hyphens=False,
    )
    figure = "![TPC-H latency ratio and error per query](benchmarks/figures/tpch.png)"
    return f"{head}\n\n{table}\n\n{figure}\n"


def plot(data: dict[str, Any], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib is not installed (pip install -e '.[bench]'): no figure")
        return None
    names = data["queries"]
    scales = list(data["scales"].items())
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    width = 0.8 / max(len(scales), 1)
    for j, (sf, sc) in enumerate(scales):
        xs = [i + (j - (len(scales) - 1) / 2) * width for i in range(len(names))]
        ratios, hatches, errors, notes = [], [], [], []
        for name in names:
            q = sc["queries"].get(name, {})
            ok = q.get("outcome") == "answered"
            warm = q["latency"]["ratio_warm"] if ok else None
            lat = warm or (q["latency"]["ratio_cold"] if ok else None)
            ratios.append(lat["p50"] if lat else 0)
            hatches.append("" if warm or not ok else "//")
            err = q["accuracy"]["median_rel_error"] if ok else None
            errors.append(err or 0)
            notes.append("" if not ok or err else "exact" if err == 0 else "no cells")
        bars = top.bar(xs, ratios, width, label=f"SF {sf}", color=f"C{j}")
        for bar, hatch in zip(bars, hatches, strict=True):
            bar.set_hatch(hatch)
        bottom.bar(xs, errors, width, label=f"SF {sf}", color=f"C{j}")
        for x, name, note in zip(xs, names, notes, strict=True):
            if sc["queries"].get(name, {}).get("outcome") != "answered":
                top.text(x, 1, "refused", rotation=90, ha="center", va="bottom", fontsize=7)
            elif note:
                bottom.text(x, 1e-4, note, rotation=90, ha="center", va="bottom", fontsize=7)
    top.set_yscale("log")
    top.axhline(1, color="black", linewidth=0.6)
    top.set_ylabel("latency dpproxy / raw DuckDB\n(median per-round ratio, warm;\nhatched: cold)")
    bottom.set_yscale("log")
    bottom.set_ylim(bottom=1e-4)
    bottom.set_ylabel("median relative error\nat ε = 1")
    bottom.set_xticks(range(len(names)), [n.upper().replace("Q0", "Q") for n in names])
    top.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(data: dict[str, Any], out: Path) -> str:
    text = markdown(data)
    (out / "TPCH.md").write_text(text, encoding="utf-8")
    plot(data, out / "figures" / "tpch.png")
    return text


# --------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sf", type=float, nargs="+", default=[0.01, 1.0], help="scale factors (default 0.01 1)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="accuracy releases per query (100 at SF 0.01, else 20)",
    )
    parser.add_argument(
        "--latency-runs",
        type=int,
        default=None,
        help="latency rounds per query (15 at SF 0.01, else 5)",
    )
    parser.add_argument("--queries", default=None, help="e.g. q01,q06 (default: all 22)")
    parser.add_argument(
        "--query-seconds",
        type=float,
        default=QUERY_SECONDS,
        help=f"stop adding runs to a query after this long (default {QUERY_SECONDS:g})",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON on stdout")
    parser.add_argument("--data-dir", type=Path, default=None, help="where the databases live")
    parser.add_argument("--out-dir", type=Path, default=None, help="instead of benchmarks/")
    parser.add_argument("--report-only", action="store_true", help="TPCH.md from TPCH.json")
    parser.add_argument(
        "--readme", action="store_true", help="print README.md's section from TPCH.json"
    )
    args = parser.parse_args(argv)
    out = (args.out_dir or HERE).resolve()
    json_path = out / "TPCH.json"
    if args.readme:
        print(readme_section(json.loads(json_path.read_text(encoding="utf-8"))), end="")
        return 0
    if args.report_only:
        data = json.loads(json_path.read_text(encoding="utf-8"))
        write_outputs(data, out)
        return 0
    names = [q.strip().lower() for q in (args.queries or ",".join(QUERIES)).split(",") if q.strip()]
    unknown = sorted(set(names) - set(QUERIES))
    if unknown or not names:
        parser.error(f"--queries: unknown {', '.join(unknown) or '(none given)'}")
    if min(args.runs or 1, args.latency_runs or 1) < 1:
        parser.error("--runs and --latency-runs must be at least 1")
    args.data_dir = (args.data_dir or cache_dir()).resolve()
    started = time.perf_counter()
    meta = machine()
    scales = {f"{sf:g}": measure_scale(args, sf, names) for sf in args.sf}
    meta["loadavg_end"] = loadavg()
    data = {
        "machine": meta,
        "epsilon": float(EPSILON),
        "queries": names,
        "scales": scales,
        "seconds": time.perf_counter() - started,
    }
    out.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    text = write_outputs(data, out)
    print(json.dumps(data, indent=1, default=str) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
