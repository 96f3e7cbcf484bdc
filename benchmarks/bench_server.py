"""Latency and throughput of DP queries through ``dpproxy serve``, the embedded API and PostgreSQL.

In one run, the wire server is measured against the embedded API and against the same
aggregates sent directly to PostgreSQL over its own protocol.

``dpproxy serve`` runs as a subprocess (``python -m dpproxy serve --listen 127.0.0.1:0``) on
the bundled Adult demo (embedded DuckDB), with a users file made by ``dpproxy user add`` and a
copy of the demo schema whose budget is too large to run out (``out/adult_big_budget.yaml``).
The same rows are loaded into a real PostgreSQL (database ``dpproxy_bench_wire``, created if
missing, with ``dpproxy.demo.load_demo_postgres(..., replace=True)`` and ``ANALYZE``) for the
baseline. psycopg 3 is the client of both servers, on autocommit connections without
server-side prepared statements (``prepare_threshold=None``) unless marked.

1. **SELECT 1 round trips** on one connection, through dpproxy and directly to PostgreSQL:
   the simple query protocol (``conn.execute(..., prepare=False)``), the extended protocol
   with an unnamed statement (``binary=True`` makes psycopg send Parse/Bind/Execute), and a
   named prepared statement (``prepare=True``: Bind/Execute only). The six variants run
   interleaved in blocks after a warm-up.
2. **DP query latency** on one connection: COUNT(*), a grouped AVG, a filtered COUNT with
   parameters and a VARIANCE through (i) the embedded API (``dpproxy.connect`` cursor,
   in-process), (ii) psycopg through ``dpproxy serve`` and (iii) the analyst's aggregate sent
   as-is to PostgreSQL, interleaved run by run. The wire overhead is (ii) − (i).
   Also the cost of a wake-up on this machine at this load, without dpproxy: a round trip
   over a socket pair to a process that computes for X ms before answering, minus X (on the
   wire path the client sleeps while a query runs, and the server's event loop and a worker
   thread unless the worker that answered the previous query reads this one itself,
   ``server/linger.py``; the embedded API has no thread that sleeps).
3. **Throughput** with 1, 8 and 32 concurrent clients (asyncio, one ``AsyncConnection`` each)
   running the same query mix for a fixed time, through dpproxy and directly to PostgreSQL,
   alternating the two in rounds (ABBA).

    python benchmarks/bench_server.py [--select1 5000] [--runs 500] [--duration 10]
        [--clients 1,8,32] [--dsn postgresql://postgres@127.0.0.1:5432/postgres]

Progress goes to stderr; results to ``out/server.json`` (the server's log to
``out/server.log``); then ``report.py`` refreshes ``RESULTS.md`` and the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
import yaml
from _common import OUT, fmt_ms, loadavg, machine, peak_rss_mb, progress, summary, write_json
from bench_postgres import database_url
from psycopg import sql as pgsql

import dpproxy
from dpproxy.backends.postgres import redact_dsn
from dpproxy.demo import demo_database_path, demo_schema_path, load_demo_postgres

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_DATABASE = "dpproxy_bench_wire"
USER = "bench"
BIG_BUDGET = {"epsilon": 1_000_000_000, "delta": 0.5}
TARGET_OVERHEAD_MS = 0.5  # the wire layer adds at most this much p50 per query
TARGET_SELECT1_RATE = 1500  # SELECT 1 round trips per second on one connection
TARGET_SELECT1_PG_RATIO = 0.6  # ... and at least this share of PostgreSQL's (issue 21)
SELECT1_BLOCK = 500  # SELECT 1 calls per variant between switches

# The DP query mix: (SQL with psycopg/pyformat placeholders, parameters).
QUERIES: dict[str, tuple[str, tuple[Any, ...] | None]] = {
    "count": ("SELECT COUNT(*) FROM adult", None),
    "avg_grouped": (
        "SELECT sex, race, AVG(hours_per_week) FROM adult GROUP BY sex, race",
        None,
    ),
    "filtered_count_param": (
        "SELECT COUNT(*) FROM adult WHERE age >= %s AND sex = %s",
        (40, "Female"),
    ),
    "variance": ("SELECT VARIANCE(age) FROM adult", None),
}
# SELECT 1 variants: protocol → keyword arguments of psycopg's Connection.execute.
PROTOCOLS: dict[str, dict[str, Any]] = {
    "simple": {"prepare": False},
    "extended": {"prepare": False, "binary": True},
    "prepared": {"prepare": True},
}
TARGETS = ("dpproxy", "postgres")


# --------------------------------------------------------------------------------------------
# Set-up: schema, users file, the server subprocess, the PostgreSQL baseline


def big_budget_schema() -> Path:
    """``out/adult_big_budget.yaml``: the demo schema with a budget too large to run out."""
    data = yaml.safe_load(demo_schema_path().read_text(encoding="utf-8"))
    data["privacy"]["budget"] = dict(BIG_BUDGET)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "adult_big_budget.yaml"
    path.write_text(
        "# Generated by benchmarks/bench_server.py: dpproxy/data/adult.yaml with a budget\n"
        "# large enough that no benchmark run can exhaust it.\n"
        + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100),
        encoding="utf-8",
    )
    return path


def dpproxy_command() -> list[str]:
    return [sys.executable, "-m", "dpproxy"]


def make_users(path: Path) -> str:
    """A fresh users file with the user ``bench``; returns its (random) password."""
    password = secrets.token_urlsafe(18)
    path.unlink(missing_ok=True)
    subprocess.run(
        [*dpproxy_command(), "user", "--users", str(path), "add", USER, "--password-stdin"],
        input=password + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return password


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path
    command: list[str]
    started_s: float

    def cpu_s(self) -> float | None:
        return _proc_cpu_s(self.proc.pid)


def start_server(
    db: Path, schema: Path, users: Path, log_path: Path, log_level: str, timeout: float
) -> Server:
    """``dpproxy serve`` on a free port; its stderr goes to ``log_path`` (never a pipe that
    could fill up and block it). Waits for ``dpproxy serving on (HOST, PORT)``."""
    cmd = [
        *dpproxy_command(),
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--users",
        str(users),
        "--database",
        str(db),
        "--schema",
        str(schema),
        # budgets in memory, never the user's ledger; no answer cache: repeated queries must
        # measure real releases, not cache hits
        "--ledger",
        "memory",
        "--cache",
        "off",
    ]
    env = dict(os.environ, DPPROXY_LOG_LEVEL=log_level)
    t = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    deadline = time.monotonic() + timeout
    pattern = re.compile(r"dpproxy serving on \('([\d.]+)', (\d+)\)")
    while time.monotonic() < deadline:
        text = log_path.read_text(encoding="utf-8", errors="replace")
        m = pattern.search(text)
        if m:
            return Server(proc, m.group(1), int(m.group(2)), log_path, cmd, time.perf_counter() - t)
        if proc.poll() is not None:
            raise RuntimeError(
                f"dpproxy serve exited with status {proc.returncode} before serving:\n"
                + text[-4000:]
            )
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(
        f"dpproxy serve did not print its address within {timeout:.0f} s:\n"
        + log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
    )


def stop_server(server: Server) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()
    return server.proc.returncode


def load_postgres(admin_dsn: str, dbname: str) -> tuple[str, dict[str, Any]]:
    """Create ``dbname`` if missing and (re)load the Adult demo into it; returns its URL."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
        if exists.fetchone() is None:
            progress(f"creating database {dbname} ...")
            admin.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(dbname)))
    url = database_url(admin_dsn, dbname)
    t = time.perf_counter()
    rows = load_demo_postgres(url, replace=True)
    loaded = time.perf_counter() - t
    with psycopg.connect(url, autocommit=True) as conn:
        t = time.perf_counter()
        conn.execute("ANALYZE adult")
        analyzed = time.perf_counter() - t
        version = conn.execute("SELECT version()").fetchone()[0]  # type: ignore[index]
        settings = {
            s: conn.execute("SELECT current_setting(%s)", (s,)).fetchone()[0]  # type: ignore[index]
            for s in ("shared_buffers", "max_connections", "max_parallel_workers_per_gather")
        }
    info = {
        "version": version,
        "settings": settings,
        "dsn": redact_dsn(url),
        "database": dbname,
        "rows": rows,
        "load_s": loaded,
        "analyze_s": analyzed,
    }
    return url, info


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process (all its threads) from /proc, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".strip()


# --------------------------------------------------------------------------------------------
# 1. SELECT 1 round trips on one connection


def bench_select1(conns: dict[str, psycopg.Connection], n: int, warmup: int) -> dict[str, Any]:
    """Every (target, protocol) pair: ``warmup`` calls, then ``n`` timed calls in blocks of
    ``SELECT1_BLOCK``, the pairs taking turns block by block."""
    out: dict[str, Any] = {}
    calls: dict[str, Callable[[], Any]] = {}
    for target, conn in conns.items():
        for proto, kw in PROTOCOLS.items():
            key = f"{target}_{proto}"

            def call(conn: psycopg.Connection = conn, kw: dict[str, Any] = kw) -> Any:
                return conn.execute("SELECT 1", **kw).fetchone()

            try:
                row = call()
                if row is None or int(row[0]) != 1:
                    raise AssertionError(f"SELECT 1 returned {row!r}")
                for _ in range(warmup):
                    call()
            except Exception as e:  # recorded, not hidden
                out[key] = {"error": _error(e)}
                progress(f"  SELECT 1 {target} {proto}: FAILED: {_error(e)}")
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.rollback()
                continue
            calls[key] = call
    samples: dict[str, list[float]] = {k: [] for k in calls}
    wall: dict[str, float] = dict.fromkeys(calls, 0.0)
    done = 0
    perf = time.perf_counter
    while done < n:
        block = min(SELECT1_BLOCK, n - done)
        for key, call in list(calls.items()):
            lat = samples[key]
            t0 = perf()
            try:
                for _ in range(block):
                    t = perf()
                    call()
                    lat.append(perf() - t)
            except Exception as e:  # recorded, not hidden
                out[key] = {"error": _error(e)}
                del calls[key]
                progress(f"  SELECT 1 {key}: FAILED after {len(lat)} calls: {_error(e)}")
                continue
            wall[key] += perf() - t0
        done += block
    for key in calls:
        out[key] = {
            **summary(samples[key]),
            "wall_s": wall[key],
            "per_second": len(samples[key]) / wall[key],
        }
    for key, r in out.items():
        if "per_second" in r:
            progress(
                f"  SELECT 1 {key.replace('_', ' ')}: {r['per_second']:,.0f}/s, "
                f"p50 {fmt_ms(r['p50'])} ms, p95 {fmt_ms(r['p95'])} ms"
            )
    return out


# --------------------------------------------------------------------------------------------
# 2. DP query latency on one connection


def _psycopg_call(
    conn: psycopg.Connection, sql: str, params: tuple[Any, ...] | None
) -> Callable[[], list]:
    return lambda: conn.execute(sql, params).fetchall()


def _embedded_call(cur: Any, sql: str, params: tuple[Any, ...] | None) -> Callable[[], list]:
    def run() -> list:
        cur.execute(sql, params)
        return cur.fetchall()

    return run


def _release_ms(log: Path, start: int) -> tuple[list[float], int, int]:
    """The ``ms`` of every ``release`` line the server logged after byte ``start`` of its log
    (from the hand-off to the worker thread, or from the moment a lingering worker read the
    query itself, until the reply was written: by the worker itself when the line says
    ``direct``, else until the loop had the answer back), how many of those lines say
    ``linger`` (server/linger.py), and the new end."""
    with open(log, "rb") as f:
        f.seek(start)
        data = f.read()
    out = []
    lingered = 0
    for line in data.decode("utf-8", errors="replace").splitlines():
        if '"event": "release"' in line:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                record = json.loads(line)
                out.append(float(record["ms"]) / 1e3)
                lingered += bool(record.get("linger"))
    return out, lingered, start + len(data)


def bench_latency(
    embedded_cur: Any,
    wire: psycopg.Connection,
    pg: psycopg.Connection,
    runs: int,
    warmup: int,
    server_log: Path | None = None,
) -> dict[str, Any]:
    """Per query, the three variants interleaved run by run (order rotated every run).

    With the server's log (at INFO), also the server-side time of each timed wire query, from
    the ``ms`` of its ``release`` line."""
    out: dict[str, Any] = {}
    for i, (name, (sql, params)) in enumerate(QUERIES.items(), 1):
        t_start = time.perf_counter()
        fns = {
            "embedded": _embedded_call(embedded_cur, sql, params),
            "wire": _psycopg_call(wire, sql, params),
            "postgres": _psycopg_call(pg, sql, params),
        }
        res: dict[str, Any] = {"sql": sql, "params": list(params) if params else None}
        errors: dict[str, str] = {}
        first: dict[str, list] = {}
        for k, f in list(fns.items()):
            try:
                first[k] = f()
                for _ in range(warmup - 1):
                    f()
            except Exception as e:  # recorded, not hidden
                errors[k] = _error(e)
                del fns[k]
                progress(f"  [{i}/{len(QUERIES)}] {name} {k}: FAILED: {errors[k]}")
                conn = {"wire": wire, "postgres": pg}.get(k)
                if (
                    conn is not None
                    and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
                ):
                    conn.rollback()
        res["rows"] = {k: len(v) for k, v in first.items()}
        samples: dict[str, list[float]] = {k: [] for k in fns}
        keys = list(fns)
        log_start = server_log.stat().st_size if server_log else 0
        for r in range(runs):
            for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
                t = time.perf_counter()
                fns[k]()
                samples[k].append(time.perf_counter() - t)
        for k, v in samples.items():
            res[k] = summary(v)
        if server_log and "wire" in samples:
            time.sleep(0.05)  # the server writes its log line after sending the answer
            inside, lingered, _ = _release_ms(server_log, log_start)
            res["wire_lingered"] = lingered  # answered by a worker that read the query itself
            if len(inside) == len(samples["wire"]):
                res["wire_server_side"] = summary(inside)
            else:
                res["wire_server_side_note"] = (
                    f"{len(inside)} release lines for {len(samples['wire'])} wire queries"
                )
        if "wire" in samples and "embedded" in samples:
            diffs = [w - e for w, e in zip(samples["wire"], samples["embedded"], strict=True)]
            res["overhead"] = {
                "p50_difference": res["wire"]["p50"] - res["embedded"]["p50"],
                "paired_median": summary(diffs)["p50"],
            }
        res["errors"] = errors
        out[name] = res

        def p50(k: str, res: dict[str, Any] = res) -> str:
            return fmt_ms(res[k]["p50"]) if k in res else "FAILED"

        over = res.get("overhead", {}).get("p50_difference")
        over_ms = fmt_ms(over) if over is not None else "–"
        progress(
            f"  [{i}/{len(QUERIES)}] {name}: embedded {p50('embedded')} ms, wire {p50('wire')} "
            f"ms, PostgreSQL {p50('postgres')} ms; overhead {over_ms} ms "
            f"({time.perf_counter() - t_start:.1f} s)"
        )
    return out


def bench_wakeup(work_ms: tuple[float, ...] = (0.0, 0.5, 2.0, 5.0), n: int = 200) -> dict[str, Any]:
    """p50 of (round trip − X) over a socket pair to a forked process that busy-waits X ms
    before it answers, per X, the values taking turns: what waking a thread that slept for as
    long as a query ran costs here (no dpproxy involved)."""
    if not hasattr(os, "fork"):
        return {"error": "no os.fork"}
    import socket

    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the answering process
        a.close()
        while data := b.recv(16):
            end = time.perf_counter() + float(data) / 1e3
            while time.perf_counter() < end:
                pass
            b.send(b"k")
        os._exit(0)
    b.close()
    extra: dict[float, list[float]] = {x: [] for x in work_ms}
    try:
        for _ in range(n):
            for x in work_ms:
                t = time.perf_counter()
                a.send(f"{x:.3f}".encode())
                a.recv(1)
                extra[x].append(time.perf_counter() - t - x / 1e3)
    finally:
        a.close()
        os.waitpid(pid, 0)
    out = {f"{x:g}": summary(v) for x, v in extra.items()}
    progress(
        "  wake-up: round trip minus X ms of work in the other process, p50: "
        + ", ".join(f"X={k} ms: {fmt_ms(v['p50'])} ms" for k, v in out.items())
    )
    return out


# --------------------------------------------------------------------------------------------
# 3. Throughput with concurrent clients


async def _phase(dsn: str, clients: int, duration: float, server_pid: int | None) -> dict[str, Any]:
    """``clients`` connections, each cycling through the query mix for ``duration`` seconds."""
    mix = list(QUERIES.values())
    conns = await asyncio.gather(
        *(
            psycopg.AsyncConnection.connect(dsn, autocommit=True, prepare_threshold=None)
            for _ in range(clients)
        )
    )
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    try:
        backend_pids = []
        for c in conns:  # warm-up: every query once per connection
            for sql, params in mix:
                await (await c.execute(sql, params)).fetchall()
        if server_pid is None:  # PostgreSQL: one backend process per connection
            for c in conns:
                backend_pids.append(c.info.backend_pid)
        pids = [server_pid] if server_pid is not None else backend_pids
        cpu0 = [_proc_cpu_s(p) for p in pids]
        start = asyncio.Event()
        stop_at = 0.0

        async def client(j: int) -> None:
            conn, lat = conns[j], latencies[j]
            k = j % len(mix)
            await start.wait()
            perf = time.perf_counter
            while True:
                t = perf()
                if t >= stop_at:
                    return
                sql, params = mix[k]
                k = (k + 1) % len(mix)
                try:
                    await (await conn.execute(sql, params)).fetchall()
                except psycopg.Error as e:  # recorded; the client carries on
                    errors.append(_error(e))
                    if len(errors) > 100:
                        return
                    continue
                lat.append(perf() - t)

        tasks = [asyncio.ensure_future(client(j)) for j in range(clients)]
        await asyncio.sleep(0)
        client_cpu0 = time.process_time()
        t0 = time.perf_counter()
        stop_at = t0 + duration
        start.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
        client_cpu = time.process_time() - client_cpu0
        cpu1 = [_proc_cpu_s(p) for p in pids]
        server_cpu = (
            sum(b - a for a, b in zip(cpu0, cpu1, strict=True))  # type: ignore[operator]
            if all(x is not None for x in cpu0 + cpu1)
            else None
        )
    finally:
        for c in conns:
            await c.close()
    flat = [x for lat in latencies for x in lat]
    return {
        "latencies": flat,
        "elapsed_s": elapsed,
        "errors": errors,
        "client_cpu_s": client_cpu,
        "server_cpu_s": server_cpu,
    }


def bench_throughput(
    dsns: dict[str, str],
    levels: list[int],
    duration: float,
    rounds: int,
    server_pid: int,
) -> dict[str, Any]:
    """Per level of concurrency, ``rounds`` rounds of ``duration / rounds`` seconds per target,
    in the order dpproxy, PostgreSQL, PostgreSQL, dpproxy, … (ABBA)."""
    out: dict[str, Any] = {}
    part = duration / rounds
    for n in levels:
        acc: dict[str, dict[str, Any]] = {
            t: {
                "latencies": [],
                "elapsed_s": 0.0,
                "errors": [],
                "client_cpu_s": 0.0,
                "server_cpu_s": 0.0,
            }
            for t in TARGETS
        }
        for r in range(rounds):
            order = TARGETS if r % 2 == 0 else TARGETS[::-1]
            for target in order:
                pid = server_pid if target == "dpproxy" else None
                try:
                    ph = asyncio.run(_phase(dsns[target], n, part, pid))
                except Exception as e:  # recorded, not hidden
                    acc[target]["errors"].append(_error(e))
                    progress(f"  {n} clients, {target}: FAILED: {_error(e)}")
                    continue
                a = acc[target]
                a["latencies"] += ph["latencies"]
                a["elapsed_s"] += ph["elapsed_s"]
                a["errors"] += ph["errors"]
                a["client_cpu_s"] += ph["client_cpu_s"]
                if a["server_cpu_s"] is not None and ph["server_cpu_s"] is not None:
                    a["server_cpu_s"] += ph["server_cpu_s"]
                else:
                    a["server_cpu_s"] = None
        level: dict[str, Any] = {}
        for target, a in acc.items():
            lat = a["latencies"]
            entry: dict[str, Any] = {
                "queries": len(lat),
                "elapsed_s": a["elapsed_s"],
                "errors": len(a["errors"]),
                "first_errors": sorted(set(a["errors"]))[:5],
            }
            if lat:
                q = len(lat)
                entry.update(
                    {
                        "per_second": q / a["elapsed_s"],
                        "latency": summary(lat),
                        "client_cpu_ms_per_query": a["client_cpu_s"] * 1e3 / q,
                        "server_cpu_ms_per_query": (
                            a["server_cpu_s"] * 1e3 / q if a["server_cpu_s"] is not None else None
                        ),
                    }
                )
            level[target] = entry

        def line(t: str, level: dict[str, Any] = level) -> str:
            e = level[t]
            if "per_second" not in e:
                return f"{t} FAILED"
            return (
                f"{t} {e['per_second']:,.0f} q/s, p50 {fmt_ms(e['latency']['p50'])} ms, "
                f"p95 {fmt_ms(e['latency']['p95'])} ms"
                + (f", {e['errors']} errors" if e["errors"] else "")
            )

        progress(f"  {n} client{'s' if n > 1 else ''}: {line('dpproxy')}; {line('postgres')}")
        out[str(n)] = level
    return out


# --------------------------------------------------------------------------------------------


def verdicts(select1: dict[str, Any], latency: dict[str, Any]) -> dict[str, Any]:
    """The two targets of the issue, with the measured figures."""
    over = {n: r["overhead"]["p50_difference"] * 1e3 for n, r in latency.items() if "overhead" in r}
    simple = select1.get("dpproxy_simple", {}).get("per_second")
    postgres = select1.get("postgres_simple", {}).get("per_second")
    to_pg = simple / postgres if simple and postgres else None
    return {
        "overhead_target_ms": TARGET_OVERHEAD_MS,
        "overhead_ms": over,
        "overhead_met": {n: v <= TARGET_OVERHEAD_MS for n, v in over.items()},
        "overhead_all_met": bool(over) and all(v <= TARGET_OVERHEAD_MS for v in over.values()),
        "select1_target_per_second": TARGET_SELECT1_RATE,
        "select1_simple_per_second": simple,
        "select1_ratio": simple / TARGET_SELECT1_RATE if simple else None,
        "select1_met": bool(simple and simple >= TARGET_SELECT1_RATE),
        "select1_postgres_per_second": postgres,
        "select1_postgres_ratio_target": TARGET_SELECT1_PG_RATIO,
        "select1_postgres_ratio": to_pg,
        "select1_postgres_ratio_met": bool(to_pg and to_pg >= TARGET_SELECT1_PG_RATIO),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--select1", type=int, default=5000, help="timed SELECT 1 round trips per variant"
    )
    ap.add_argument(
        "--select1-warmup", type=int, default=500, help="untimed SELECT 1 calls per variant first"
    )
    ap.add_argument(
        "--runs", type=int, default=500, help="timed runs per DP query and variant (latency)"
    )
    ap.add_argument(
        "--warmup", type=int, default=20, help="untimed runs per DP query and variant first"
    )
    ap.add_argument(
        "--duration",
        type=float,
        default=10.0,
        help="seconds of load per concurrency level and target (throughput)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="split --duration into this many alternating rounds (dpproxy/PostgreSQL, ABBA)",
    )
    ap.add_argument(
        "--clients", default="1,8,32", help="comma-separated numbers of concurrent clients"
    )
    ap.add_argument(
        "--dsn",
        default=DEFAULT_DSN,
        help="admin DSN of the PostgreSQL baseline, used to create the benchmark database "
        f"(URL or key=value; default {DEFAULT_DSN})",
    )
    ap.add_argument(
        "--database",
        default=DEFAULT_DATABASE,
        help=f"PostgreSQL database for the Adult demo: created if missing, table adult "
        f"replaced on every run (default {DEFAULT_DATABASE})",
    )
    ap.add_argument(
        "--log-level",
        default="INFO",
        help="DPPROXY_LOG_LEVEL of the server (INFO, its default, logs a line per release; "
        "the log goes to out/server.log)",
    )
    ap.add_argument(
        "--start-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for `dpproxy serve` to print its address",
    )
    ap.add_argument("--no-report", action="store_true", help="do not refresh RESULTS.md")
    args = ap.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",") if c.strip()]
    warmup = max(1, args.warmup)

    started = time.perf_counter()
    info = machine()
    info["psycopg"] = psycopg.__version__
    info["libpq"] = psycopg.pq.version()
    info["psycopg_impl"] = psycopg.pq.__impl__
    schema = big_budget_schema()
    db = demo_database_path(progress=True)

    progress(f"loading the Adult demo into PostgreSQL database {args.database} ...")
    pg_url, pg_info = load_postgres(args.dsn, args.database)
    progress(
        f"  {pg_info['rows']:,} rows in {pg_info['load_s']:.1f} s, ANALYZE "
        f"{pg_info['analyze_s']:.2f} s; {pg_info['version'].split(',')[0]}"
    )

    users = OUT / "server_users.json"
    password = make_users(users)
    progress("starting dpproxy serve ...")
    server = start_server(db, schema, users, OUT / "server.log", args.log_level, args.start_timeout)
    progress(
        f"  dpproxy serving on {server.host}:{server.port} (pid {server.proc.pid}, "
        f"ready in {server.started_s:.1f} s)"
    )
    wire_dsn = (
        f"host={server.host} port={server.port} user={USER} password='{password}' "
        "dbname=dpproxy sslmode=disable connect_timeout=10"
    )
    dsns = {"dpproxy": wire_dsn, "postgres": pg_url}
    results: dict[str, Any] = {
        "machine": info,
        "postgres": pg_info,
        "server": {
            "command": [
                *server.command[:3],
                *(a if a != str(users) else "USERS" for a in server.command[3:]),
            ],
            "database": str(db),
            "schema": str(schema),
            "log_level": args.log_level,
            "startup_s": server.started_s,
            "event_loop": _event_loop(server.log),
        },
        "queries": {
            n: {"sql": q, "params": list(p) if p else None} for n, (q, p) in QUERIES.items()
        },
        "select1_n": args.select1,
        "select1_warmup": args.select1_warmup,
        "runs": args.runs,
        "warmup": warmup,
        "duration_s": args.duration,
        "rounds": args.rounds,
        "clients": levels,
    }
    load: dict[str, tuple[float, float, float]] = {"at start": info["loadavg_start"]}
    status = 0
    try:
        conns = {
            t: psycopg.connect(d, autocommit=True, prepare_threshold=None) for t, d in dsns.items()
        }
        try:
            server_version = conns["dpproxy"].info.parameter_status("server_version")
            results["server"]["server_version"] = server_version
            progress(
                f"SELECT 1 round trips on one connection ({args.select1:,} per variant after "
                f"{args.select1_warmup} warm-up, blocks of {SELECT1_BLOCK}):"
            )
            results["select1"] = bench_select1(conns, args.select1, args.select1_warmup)
            load["after SELECT 1"] = loadavg()

            progress(
                f"DP query latency on one connection ({args.runs} runs after {warmup} warm-up):"
            )
            # as the server: budgets in memory, no answer cache (a cached answer would skip
            # the release the wire side pays for)
            emb = dpproxy.connect(str(db), schema=str(schema), ledger="memory", cache="off")
            try:
                cur = emb.cursor()
                results["latency"] = bench_latency(
                    cur,
                    conns["dpproxy"],
                    conns["postgres"],
                    args.runs,
                    warmup,
                    server.log if args.log_level.upper() in ("INFO", "DEBUG") else None,
                )
                cur.close()
            finally:
                emb.close()
            results["wakeup"] = bench_wakeup()
            load["after latency"] = loadavg()
        finally:
            for c in conns.values():
                c.close()

        progress(
            f"throughput, {args.duration:g} s per level and target in {args.rounds} "
            f"round(s), clients {levels}:"
        )
        results["throughput"] = bench_throughput(
            dsns, levels, args.duration, args.rounds, server.proc.pid
        )
        load["after throughput"] = loadavg()
        results["server"]["peak_rss_mb"] = _peak_rss_of(server.proc.pid)
    finally:
        code = stop_server(server)
        results.setdefault("server", {})["exit_status"] = code
        log_text = server.log.read_text(encoding="utf-8", errors="replace")
        results["server"]["log_lines"] = log_text.count("\n")
        results["server"]["log_errors"] = [
            ln for ln in log_text.splitlines() if '"ERROR"' in ln or "Traceback" in ln
        ][:10]
        users.unlink(missing_ok=True)

    results["targets"] = verdicts(results["select1"], results["latency"])
    failures = {
        **{f"select1/{k}": v["error"] for k, v in results["select1"].items() if "error" in v},
        **{
            f"latency/{n}/{k}": e
            for n, r in results["latency"].items()
            for k, e in r["errors"].items()
        },
        **{
            f"throughput/{n}/{t}": e["first_errors"]
            for n, lv in results["throughput"].items()
            for t, e in lv.items()
            if e["errors"]
        },
    }
    results["failures"] = failures
    info["loadavg_end"] = loadavg()
    load["at end"] = info["loadavg_end"]
    results["loadavg"] = load
    results["peak_rss_mb"] = peak_rss_mb()
    results["elapsed_s"] = time.perf_counter() - started
    path = write_json("server.json", results)
    progress(f"wrote {path} in {results['elapsed_s']:.0f} s")
    tg = results["targets"]
    for n, v in tg["overhead_ms"].items():
        progress(
            f"wire overhead {n}: {v:+.3f} ms p50 "
            f"({'meets' if tg['overhead_met'][n] else 'MISSES'} ≤ {TARGET_OVERHEAD_MS} ms)"
        )
    if tg["select1_simple_per_second"]:
        progress(
            f"SELECT 1 through dpproxy: {tg['select1_simple_per_second']:,.0f}/s, "
            f"{tg['select1_ratio']:.2f}× the target of {TARGET_SELECT1_RATE:,}/s"
        )
    if tg["select1_postgres_ratio"]:
        progress(
            f"SELECT 1 through dpproxy: {tg['select1_postgres_ratio']:.2f}× PostgreSQL's "
            f"{tg['select1_postgres_per_second']:,.0f}/s "
            f"({'meets' if tg['select1_postgres_ratio_met'] else 'MISSES'} "
            f"≥ {TARGET_SELECT1_PG_RATIO}×)"
        )
    for k, e in failures.items():
        progress(f"FAILED {k}: {e}")
        status = 1
    if not args.no_report:
        import report

        report.main()
        progress(f"refreshed {OUT.parent / 'RESULTS.md'}")
    return status


def _event_loop(log: Path) -> str | None:
    """The event loop serve reported on its listen line (uvloop when installed, else asyncio)."""
    m = re.search(r'"loop": "(\w+)"', log.read_text(encoding="utf-8", errors="replace"))
    return m.group(1) if m else None


def _peak_rss_of(pid: int) -> float | None:
    """Peak RSS (VmHWM) of another process in MiB, from /proc, or None."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


if __name__ == "__main__":
    raise SystemExit(main())
