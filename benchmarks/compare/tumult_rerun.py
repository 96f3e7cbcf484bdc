"""Many accuracy runs of Tumult Analytics on pums, round-robin over the queries (run with its venv).

``adapters/tumult.py`` answers ``--runs`` runs of one query before the next and writes a query's
line only when all its runs are done. This driver uses the same programs, the same Spark set-up
and the same two Sessions (``adapters/tumult.py``: ``start_spark``, ``load``, ``Ctx``,
``PROGRAMS``, ``timed_run`` with its check that each run spent exactly (ε, δ), ``normalise``),
but runs the queries in rounds (one run of each query per round) and appends every run to
``--out`` as soon as it is released, so a rerun cut short by a deadline keeps an equal number of
runs for every query and loses nothing. ``--collect`` turns such a file into the adapters'
JSON lines (``INTERFACE.md``), one per query, with every run.

Spark's settings only change the seconds, not the released values' distribution; for these
accuracy runs ``TUMULT_SHUFFLE_PARTITIONS=1`` and ``TUMULT_SPARK_CONF=spark.sql.adaptive.
enabled=false`` (read by ``start_spark``) cut the seconds of a run on 1,000 rows. The seconds
recorded here are not latency figures.

Usage, from ``benchmarks/compare``::

    work/venvs/tumult/bin/python tumult_rerun.py --queries Q02,Q14 --rounds 200 --out runs.jsonl
    python tumult_rerun.py --collect runs.jsonl --out tumult_pums.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402


def adapter() -> Any:
    spec = importlib.util.spec_from_file_location("tumult_adapter", HERE / "adapters/tumult.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(args: argparse.Namespace) -> None:
    warnings.filterwarnings("ignore")
    t_ad = adapter()
    tmp = Path(tempfile.mkdtemp(prefix="dpproxy-tumult-rerun-"))
    spark = t_ad.start_spark(tmp)
    import tmlt.analytics as tmlt

    df = t_ad.load(spark, args.data_dir / "pums.csv")
    change = tmlt.AddRowsWithID(workload.UNIT)
    pure = tmlt.Session.from_dataframe(
        privacy_budget=tmlt.PureDPBudget(1e9), source_id=t_ad.SOURCE, dataframe=df,
        protected_change=change,
    )
    approx = tmlt.Session.from_dataframe(
        privacy_budget=tmlt.ApproxDPBudget(1e9, 0.5), source_id=t_ad.SOURCE, dataframe=df,
        protected_change=change,
    )
    ctx = t_ad.Ctx(tmlt, pure, approx, args.epsilon, args.delta, True)
    qids = args.queries.split(",")
    deadline = time.time() + args.seconds if args.seconds else None
    with args.out.open("a") as out:
        for r in range(args.rounds):
            if deadline is not None and time.time() > deadline:
                break
            for qid in qids:
                want = (args.epsilon, args.delta if qid in t_ad.APPROX else 0.0)
                res, seconds = t_ad.timed_run(ctx, qid, t_ad.PROGRAMS[qid], want)
                line = {"query": qid, "version": tmlt.__version__, "round": r,
                        "seconds": seconds, "rows": t_ad.normalise(qid, res)}
                out.write(json.dumps(line) + "\n")
                out.flush()
            print(f"tumult_rerun: round {r + 1} done", file=sys.stderr, flush=True)


def collect(args: argparse.Namespace) -> None:
    """The runs of ``--collect`` files as one adapter line per query (all of each query's runs;
    the report states each query's count)."""
    by_q: dict[str, list[dict[str, Any]]] = {}
    version = None
    for path in args.collect:
        for text in path.read_text().splitlines():
            if text.strip():
                line = json.loads(text)
                version = line["version"]
                by_q.setdefault(line["query"], []).append(line)
    t_ad = adapter()
    with args.out.open("w") as out:
        for qid, lines in sorted(by_q.items()):
            rec = {"system": "tumult", "version": version, "dataset": "pums", "query": qid,
                   "mode": "accuracy", "epsilon": args.epsilon, "supported": True,
                   "error": None, "columns": t_ad.COLUMNS[qid],
                   "runs": [{"rows": x["rows"], "seconds": x["seconds"]} for x in lines]}
            out.write(json.dumps(rec) + "\n")
            print(f"{qid}: {len(lines)} runs", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=HERE / "work" / "data")
    p.add_argument("--queries", default=",".join(q.id for q in workload.queries_for("pums")))
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--seconds", type=float, default=0, help="start no round after this")
    p.add_argument("--epsilon", type=float, default=workload.EPSILON)
    p.add_argument("--delta", type=float, default=workload.DELTA)
    p.add_argument("--collect", type=Path, nargs="*", help="files of runs to merge")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    if args.collect:
        collect(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
