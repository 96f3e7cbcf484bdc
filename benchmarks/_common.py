"""Shared helpers of the benchmark scripts: timing statistics, machine notes, markdown tables.

Not part of the dpproxy package; imported by ``bench_plan.py``, ``bench_embedded.py`` and
``report.py`` when they run as scripts from any directory.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
FIGURES = HERE / "figures"
REPO = HERE.parent


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / min / mean of a sample (same unit as the input), with its size."""
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "min": min(values),
        "mean": sum(values) / len(values),
        "n": len(values),
    }


def time_call(fn: Callable[[], Any]) -> float:
    """Wall-clock seconds of one call."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (``ru_maxrss`` is KiB on Linux)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 1024 / 1024


def loadavg() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:  # pragma: no cover - not on Linux
        return (float("nan"),) * 3


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, memory, versions, load."""
    import duckdb
    import sqlglot
    import sqlglot.parser

    # sqlglotc installs mypyc-compiled modules inside the sqlglot package itself.
    compiled = str(getattr(sqlglot.parser, "__file__", "")).endswith((".so", ".pyd"))
    import dpproxy

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "sqlglot": sqlglot.__version__,
        "sqlglotc": compiled,
        "dpproxy": dpproxy.__version__,
        "loadavg_start": loadavg(),
    }


def machine_line(m: dict[str, Any]) -> str:
    mem = f", {m['memory_gib']:.0f} GiB" if m.get("memory_gib") else ""
    la = m.get("loadavg_start")
    la_end = m.get("loadavg_end")
    load = ""
    if la:
        load = f"; load average (1/5/15 min) at start {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}"
        if la_end:
            load += f", at end {la_end[0]:.2f}/{la_end[1]:.2f}/{la_end[2]:.2f}"
    return (
        f"{m['date']}: {m['cpu']}, {m['cores']} cores{mem}, {m['os']}; Python {m['python']}, "
        f"DuckDB {m['duckdb']}, sqlglot {m['sqlglot']}"
        f"{' + sqlglotc' if m['sqlglotc'] else ' (pure Python)'}, dpproxy {m['dpproxy']}{load}"
    )


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A GitHub markdown table; ``align`` is one letter per column (l/r), default l then r."""
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with 2–3 significant digits."""
    ms = seconds * 1e3
    if abs(ms) >= 100:
        return f"{ms:,.0f}"
    if abs(ms) >= 10:
        return f"{ms:.1f}"
    if abs(ms) >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_ratio(x: float) -> str:
    return f"{x:,.0f}×" if x >= 100 else (f"{x:.1f}×" if x >= 10 else f"{x:.2f}×")


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def write_json(name: str, data: dict[str, Any]) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    return path


def read_json(name: str) -> dict[str, Any] | None:
    path = OUT / name
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
