"""What every adapter of the peer comparison does alike (INTERFACE.md): its command line, the
JSON line of one query, the timed loop of runs, and how answers and errors are written down.

Standard library only, like ``workload.py``: each adapter imports it by path from its own
virtual environment. What differs between systems (set-up, the call itself, extra fields)
stays in ``adapters/<system>.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import workload

T = TypeVar("T")
# The PostgreSQL server of the adapters that use one (Qrlew's backend; dpproxy's, too).
DEFAULT_PG = os.environ.get("QRLEW_PG_URL", "postgresql://postgres@127.0.0.1:5432")
_ADDRESS = re.compile(r"<([\w.]+) object at 0x[0-9a-fA-F]+>")


def with_database(url: str, database: str | None) -> str:
    """``url`` naming ``database`` instead of the one it names (None: no database, the server)."""
    parts = urlsplit(url.rstrip("/"))
    return urlunsplit(parts._replace(path=f"/{database}" if database else ""))


def parser(description: str, datasets: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The options every adapter takes (INTERFACE.md); an adapter adds its own after these."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dataset", required=True,
                   **({"choices": sorted(datasets)} if datasets is not None else {}))
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--queries", default="all")
    p.add_argument("--mode", choices=("accuracy", "latency"), default="accuracy")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--epsilon", type=float, default=workload.EPSILON)
    p.add_argument("--delta", type=float, default=workload.DELTA)
    p.add_argument("--out", type=Path, required=True)
    return p


def queries(args: argparse.Namespace) -> list[workload.Query]:
    """``--queries``: ``all`` or a list, keeping only the queries of the data set (in workload
    order for ``all``, as listed otherwise)."""
    if args.queries == "all":
        return list(workload.queries_for(args.dataset))
    return [workload.BY_ID[i] for i in args.queries.split(",")
            if args.dataset in workload.BY_ID[i].datasets]


def value(v: Any) -> float | None:
    """A released number as a float; None for NULL, text or a non-finite value."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def rows_keys_first(rows: Iterable[Sequence[Any]], keys: int) -> list[list[Any]]:
    """Rows whose first ``keys`` cells are the group keys: keys as text, values as floats,
    sorted by the keys (NULL first)."""
    out = [
        [None if r[i] is None else str(r[i]) for i in range(keys)]
        + [value(r[i]) for i in range(keys, len(r))]
        for r in rows
    ]
    out.sort(key=lambda r: tuple("" if k is None else k for k in r[:keys]))
    return out


def normalise(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], keys: Sequence[str]
) -> tuple[list[str], list[list[Any]]]:
    """Key columns (named in ``keys``, any case) moved first, then :func:`rows_keys_first`."""
    lower = [c.lower() for c in columns]
    key_idx = [lower.index(k) for k in keys if k in lower]
    order = key_idx + [i for i in range(len(columns)) if i not in key_idx]
    moved = ([r[i] for i in order] for r in rows)
    return [columns[i] for i in order], rows_keys_first(moved, len(key_idx))


def group_keys(sql: str) -> list[str]:
    """The GROUP BY columns of a workload query (plain column names there)."""
    m = re.search(r"\bGROUP\s+BY\s+(.+?)(?:\s+HAVING\b|\s+ORDER\b|\s+LIMIT\b|$)", sql, re.I | re.S)
    return [k.strip().lower() for k in m.group(1).split(",")] if m else []


def one_line(e: BaseException, *, limit: int = 300, first_line: bool = True) -> str:
    """An exception as ``Type: message`` on one line, without memory addresses."""
    text = str(e).strip()
    if first_line and text:
        text = text.splitlines()[0]
    msg = " ".join(_ADDRESS.sub(r"<\1>", text).split())
    return f"{type(e).__name__}: {msg}"[:limit]


def record(
    system: str, version: str | None, args: argparse.Namespace, qid: str,
    setup_s: float | None, **extra: Any,
) -> dict[str, Any]:
    """The JSON line of one query before it runs (INTERFACE.md); ``extra``: the system's own
    fields."""
    return {
        "system": system,
        "version": version,
        "dataset": args.dataset,
        "query": qid,
        "mode": args.mode,
        "epsilon": args.epsilon,
        "supported": True,
        "error": None,
        "columns": [],
        "runs": [],
        "setup_s": setup_s,
        "predicted_error95": None,
        **extra,
    }


def timed_runs(
    args: argparse.Namespace,
    once: Callable[[], T],
    describe: Callable[[T, float], tuple[dict[str, Any], list[list[Any]]]],
) -> list[dict[str, Any]]:
    """``--warmup`` untimed calls (latency mode only), then ``--runs`` timed ones, each end to
    end. ``describe(result, seconds)`` gives the run's fields and its normalised rows; the rows
    are kept in accuracy mode only."""
    if args.mode == "latency":
        for _ in range(args.warmup):
            once()
    runs: list[dict[str, Any]] = []
    for _ in range(args.runs):
        t = time.perf_counter()
        result = once()
        seconds = time.perf_counter() - t
        run, rows = describe(result, seconds)
        run = {"seconds": seconds, **run}
        if args.mode == "accuracy":
            run["rows"] = rows
        runs.append(run)
    return runs


def refuse(rec: dict[str, Any], e: BaseException, *, debug: bool = False, **how: Any) -> None:
    """Mark the query unsupported with the system's own error, and say so on stderr."""
    rec.update(supported=False, error=one_line(e, **how), runs=[])
    print(f"{rec['system']} {rec['query']}: {rec['error']}", file=sys.stderr, flush=True)
    if debug:
        traceback.print_exc()


def write(out: IO[str], rec: dict[str, Any]) -> None:
    """One JSON line, flushed at once (run.py watches the file for progress)."""
    out.write(json.dumps(rec) + "\n")
    out.flush()
