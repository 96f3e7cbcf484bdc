"""Tumult Analytics' mechanisms for the lagging pums queries, restated without Spark (its venv).

A check on ``tumult_rerun.py``, whose Spark runs are slow (tens of seconds a run on the shared
2-core machine): the same released values' distribution, drawn many times in seconds. Each
query is Tumult Core's measurement as its source builds it (``tmlt/core/measurements/
aggregations.py``; tmlt.core 0.19.1, the version tmlt-analytics 0.21.0 pins, ``>=0.19.1,<0.20``,
as installed by ``envs.py``), on the exact aggregates of ``work/data/pums.csv`` (one row per pid, so
``MaxRowsPerID(1)`` drops nothing), with PureDP ε = 1 and d_in = 1:

* COUNT (Q02, Q14): two-sided geometric noise, α = 1/ε; Q14's HAVING/ORDER BY/LIMIT on the
  noisy counts of the six races, as the adapter does.
* SUM (Q03, of the whole table; Q16, by sex): geometric, α = max(|lo|, |hi|)/ε = 500,000 per
  sum.
* AVG (Q05, Q10, Q15): the sum of deviations from the integer midpoint (α = (w/2)/(ε/2)) and
  the count (α = 1/(ε/2)), average = sod / max(1, count) + midpoint.
* STDDEV_SAMP (Q07): ε/3 each to the sum of deviations (α = 3·w/2), the sum of x² − m₂ with m₂
  the midpoint of [0, hi²] (α = 3·hi²/2) and the count (α = 3); Tumult's sample-variance
  formula, NaN when count ≤ 1, clamped to [0, w²/4], then the square root.
* PERCENTILE (Q12): Tumult Core's own ``_select_quantile_interval`` and ``uniform`` (its
  exponential mechanism over the intervals between the sorted values) on the clamped incomes.

Tumult's own ``Session._noise_info`` gives the same mechanisms and parameters (geometric; Q05:
α = 500,000 and 2; Q07: 750,000, 3.75·10¹¹ and 3; Q10: 100 and 2; Q16: 500,000; checked once
by hand). Geometric noise at α > 1,000 is drawn as rounded Laplace (indistinguishable at these
scales).
Output: the adapters' JSON lines (``INTERFACE.md``) with ``"system": "tumult_model"``.

Usage: ``work/venvs/tumult/bin/python tumult_model.py --draws 20000 --out model.jsonl``
(``--queries Q12`` draws only those; ``--seed`` seeds numpy's and Tumult's generators).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402

COL = {c.name: c for c in workload.COLUMNS}


def geometric(rng: np.random.Generator, alpha: float, size: int) -> np.ndarray:
    """Two-sided geometric noise with P(k) ∝ exp(−|k|/α)."""
    if alpha > 1000:
        return np.round(rng.laplace(0, alpha, size))
    p = 1 - math.exp(-1 / alpha)
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(float)


def bounds(name: str) -> tuple[int, int]:
    c = COL[name]
    return int(c.lower), int(c.upper)


def clamped(rows: list[dict[str, str]], name: str) -> np.ndarray:
    lo, hi = bounds(name)
    return np.clip(np.array([int(float(r[name])) for r in rows], dtype=float), lo, hi)


def average(rng: np.random.Generator, x: np.ndarray, name: str, eps: float, n: int) -> np.ndarray:
    lo, hi = bounds(name)
    mid = (lo + hi) // 2  # Tumult's integer midpoint (both bounds even here)
    sod = (x - mid).sum() + geometric(rng, max(abs(lo - mid), abs(hi - mid)) / (eps / 2), n)
    count = len(x) + geometric(rng, 1 / (eps / 2), n)
    return sod / np.maximum(1, count) + mid


def stdev(rng: np.random.Generator, x: np.ndarray, name: str, eps: float, n: int) -> np.ndarray:
    lo, hi = bounds(name)
    mid = (lo + hi) // 2
    sq_lo, sq_hi = (0 if lo <= 0 <= hi else min(lo * lo, hi * hi)), max(lo * lo, hi * hi)
    mid2 = (sq_lo + sq_hi) // 2
    sod = (x - mid).sum() + geometric(rng, max(abs(lo - mid), abs(hi - mid)) / (eps / 3), n)
    sos = (x * x - mid2).sum() + geometric(rng, max(abs(sq_lo - mid2), sq_hi - mid2) / (eps / 3), n)
    c = len(x) + geometric(rng, 1 / (eps / 3), n)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = sos / (c - 1) + mid2 * (c / (c - 1)) - (sod / c + mid) ** 2 * (c / (c - 1))
    var = np.where(c <= 1, np.nan, np.clip(var, 0, (hi - lo) ** 2 / 4))
    return np.sqrt(var)


def quantile(x: np.ndarray, name: str, q: float, eps: float, n: int, seed: int) -> list[float]:
    from tmlt.core.measurements.pandas_measurements.series import _select_quantile_interval
    from tmlt.core.random.uniform import uniform

    seed_tumult(seed)

    lo, hi = bounds(name)
    values = sorted(float(v) for v in x)
    out = []
    for _ in range(n):
        left, right = _select_quantile_interval(values, q, eps, lo, hi)
        out.append(uniform(lower=left, upper=right))
    return out


def seed_tumult(seed: int) -> None:
    """Seed Tumult Core's own generator (RDRAND or os.urandom, read through ``prng()`` at each
    call), which its quantile sampler draws from, so that a model run is reproducible. A model
    of the law only: the released distribution is the same for any source of uniform bits."""
    from tmlt.core.random import rng as tumult_rng

    tumult_rng._core_privacy_prng = np.random.Generator(np.random.PCG64([seed, 1]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=HERE / "work" / "data")
    p.add_argument("--draws", type=int, default=20000)
    p.add_argument("--quantile-draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=21)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--queries",
        type=lambda s: [q.strip() for q in s.split(",") if q.strip()],
        help="draw only these query ids, comma-separated (default: all)",
    )
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    eps, n = workload.EPSILON, args.draws
    with (args.data_dir / "pums.csv").open() as f:
        rows = list(csv.DictReader(f))
    age, income = clamped(rows, "age"), clamped(rows, "income")
    sexes = sorted(COL["sex"].domain)
    races = sorted(COL["race"].domain)
    by_sex = {s: np.array([x["sex"] == s for x in rows]) for s in sexes}

    def q14() -> list[list[list[object]]]:
        noisy = {
            r: sum(1 for x in rows if x["race"] == r) + geometric(rng, 1 / eps, n) for r in races
        }
        out = []
        for i in range(n):
            kept = [(r, noisy[r][i]) for r in races if noisy[r][i] > 50]
            kept.sort(key=lambda kv: -kv[1])  # stable, as the adapter's sort
            out.append(sorted([[r, v] for r, v in kept[:3]]))
        return out

    def q16() -> list[list[list[object]]]:
        sums = {
            s: income[m].sum() + geometric(rng, max(bounds("income")) / eps, n)
            for s, m in by_sex.items()
        }
        return [[[s, sums[s][i]] for s in sexes] for i in range(n)]

    def q10() -> list[list[list[object]]]:
        avgs = {s: average(rng, age[m], "age", eps, n) for s, m in by_sex.items()}
        return [[[s, avgs[s][i]] for s in sexes] for i in range(n)]

    # In this order (the draws of numpy's generator follow it); --queries keeps a subset.
    builders = {
        "Q02": lambda: [[[v]] for v in (age > 40).sum() + geometric(rng, 1 / eps, n)],
        "Q14": q14,
        "Q16": q16,
        "Q05": lambda: [[[v]] for v in average(rng, income, "income", eps, n)],
        "Q15": lambda: [[[v]] for v in average(rng, income[age > 30], "income", eps, n)],
        "Q10": q10,
        "Q07": lambda: [
            [[None if math.isnan(v) else v]] for v in stdev(rng, income, "income", eps, n)
        ],
        "Q12": lambda: [
            [[v]] for v in quantile(income, "income", 0.9, eps, args.quantile_draws, args.seed)
        ],
        # last, so that the queries above draw what they drew before it was added
        "Q03": lambda: [
            [[v]] for v in income.sum() + geometric(rng, max(map(abs, bounds("income"))) / eps, n)
        ],
    }
    unknown = sorted(set(args.queries or ()) - set(builders))
    if unknown:
        p.error(f"unknown query ids: {', '.join(unknown)}")
    runs = {
        q: build() for q, build in builders.items() if args.queries is None or q in args.queries
    }
    with args.out.open("w") as out:
        for qid, rs in sorted(runs.items()):
            rec = {
                "system": "tumult_model",
                "version": "0.21.0",
                "dataset": "pums",
                "query": qid,
                "mode": "accuracy",
                "epsilon": eps,
                "supported": True,
                "error": None,
                "seed": args.seed,
                "runs": [
                    {"rows": [[*r[:-1], float(r[-1]) if r[-1] is not None else None] for r in rr]}
                    for rr in rs
                ],
            }
            out.write(json.dumps(rec) + "\n")
            print(f"{qid}: {len(rs)} draws", file=sys.stderr)


if __name__ == "__main__":
    main()
