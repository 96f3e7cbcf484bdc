"""Start-up cost of the ``dpproxy`` command: CPU (user + system) per call, before and after.

The baseline is the commit before the lazy imports (``BASELINE``), checked out with ``git
worktree add`` into ``--base-path`` (default ``/tmp/startup-base``) and run side by side with
this working tree in one interleaved run: each round runs every command once on each side, in
alternating order. Each side is imported from its own tree (``PYTHONPATH``), through the body
of the console script pip writes for ``dpproxy`` (``from dpproxy.cli import main;
sys.exit(main())``), run by the interpreter of a throwaway virtual environment whose only
``.pth`` file adds this environment's ``site-packages``: the same dependencies as an installed
wheel, without the import hook of an editable install (``__editable__…finder``, about 0.014 s
of CPU per process) that this development environment's own ``.pth`` files load. CPU is
``resource.getrusage`` of the
children (what the operating system charged the process, on both cores), so a busy machine
inflates it less than wall time; medians of ``--runs`` rounds are reported.

Two bytecode set-ups:

* ``cached``: compiled modules are kept (in a private ``PYTHONPYCACHEPREFIX``, written by the
  warm-up rounds), as for an installed wheel — the figure a user sees;
* ``no-cache``: ``PYTHONDONTWRITEBYTECODE=1`` as in this project's development environment,
  where dpproxy's own modules are compiled from source on every call.

The floor is the import, without dpproxy, of the third-party modules a DP query on DuckDB
cannot do without (click, PyYAML, sqlglot with its PostgreSQL and DuckDB dialects, DuckDB's
engine module ``_duckdb``, OpenDP's samplers; without numpy, which OpenDP treats as optional,
and ``deprecated.sphinx``, which a one-shot ``dpproxy query`` keeps from loading).
``-X importtime`` of one query per side lists the packages imported and their import time.
Writes ``benchmarks/STARTUP.md`` and ``benchmarks/STARTUP.json`` (``--out-dir`` to choose).

    python benchmarks/bench_startup.py            # --runs 15 --warmup 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import site
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from _common import loadavg, machine, machine_line, md_table  # noqa: E402

BASELINE = "23da74f"  # the commit before the fast-start work (issue 20, item 4)
SCHEMA = REPO / "schemas" / "adult.yaml"
COMMANDS: dict[str, list[str]] = {
    "import": [],  # python -c "import dpproxy"
    "help": ["--help"],
    "schema-check": ["schema", "check", str(SCHEMA)],
    "query-count": ["query", "SELECT COUNT(*) FROM adult"],
    "query-avg": ["query", "SELECT sex, AVG(age) FROM adult GROUP BY sex"],
    "floor": [],  # the third-party imports a DP query on DuckDB needs, nothing of dpproxy
}
# OpenDP imported as a one-shot ``dpproxy query`` imports it: with numpy hidden (optional to
# OpenDP, unused by dpproxy) and a stand-in for ``deprecated.sphinx``, whose decorator OpenDP's
# sampler modules import but apply to nothing dpproxy calls (mechanisms/noise._one_shot_imports).
FLOOR = ("import sys, types; sys.modules['numpy'] = None; "
         "d = sys.modules['deprecated.sphinx'] = types.ModuleType('deprecated.sphinx'); "
         "d.deprecated = lambda *a, **k: lambda f: f; "
         "import click, yaml, sqlglot, sqlglot.dialects.duckdb, sqlglot.dialects.postgres, "
         "_duckdb, opendp.domains, opendp.measurements, opendp.measures, opendp.metrics; "
         "del sys.modules['numpy'], sys.modules['deprecated.sphinx']")
LABELS = {
    "import": "`python -c 'import dpproxy'`",
    "help": "`dpproxy --help`",
    "schema-check": "`dpproxy schema check schemas/adult.yaml`",
    "query-count": '`dpproxy query "SELECT COUNT(*) FROM adult"` (demo)',
    "query-avg": '`dpproxy query "SELECT sex, AVG(age) … GROUP BY sex"` (demo)',
    "floor": "floor: `python -c 'import click, yaml, sqlglot, _duckdb, opendp.measurements, …'`"
             " (numpy and `deprecated` kept out, as in `dpproxy query`)",
}
HEAVY = ("opendp", "numpy", "sqlglot", "duckdb", "_duckdb", "psycopg", "psycopg_pool", "yaml",
         "click", "wrapt", "asyncio", "ssl", "sqlite3", "pandas", "sqlalchemy", "matplotlib",
         "dpproxy")
# The console script pip writes for ``[project.scripts] dpproxy = "dpproxy.cli:main"``.
CLI = ("import re, sys; from dpproxy.cli import main; "
       "sys.argv[0] = 'dpproxy'; sys.exit(main())")
PYTHON = [sys.executable]  # replaced by wheel_python() in main()


def _argv(command: str) -> list[str]:
    if command == "import":
        return [*PYTHON, "-c", "import dpproxy"]
    if command == "floor":
        return [*PYTHON, "-c", FLOOR]
    return [*PYTHON, "-c", CLI, *COMMANDS[command]]


def wheel_python(where: Path) -> str:
    """A virtual environment at ``where`` that sees this environment's packages through one
    ``.pth`` line, so no other ``.pth`` file (an editable install's import hook) runs at start."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   capture_output=True)
    python = where / "bin" / "python"
    target = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                            check=True, capture_output=True, text=True).stdout.strip()
    Path(target, "dpproxy-bench-deps.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    return str(python)


def _env(tree: Path, mode: str, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DPPROXY_LEDGER", "DPPROXY_LOG", "PYTHONDONTWRITEBYTECODE",
                        "PYTHONPYCACHEPREFIX", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tree)
    env["DPPROXY_LEDGER"] = "memory"  # never charge (or exhaust) the user's default ledger
    if mode == "cached":
        env["PYTHONPYCACHEPREFIX"] = str(pycache / tree.name)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str, str]:
    """(CPU seconds, wall seconds, stdout, stderr) of one call; a failure stops the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, p.stdout, p.stderr


def ensure_worktree(path: Path, commit: str) -> bool:
    """Check ``commit`` out at ``path`` (``git worktree add``); True if this call created it."""
    if (path / "dpproxy" / "__init__.py").is_file():
        return False
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit],
                   check=True, capture_output=True)
    return True


def imported_packages(stderr: str) -> dict[str, float]:
    """Milliseconds of import time (self) per top-level package in ``-X importtime`` output."""
    per: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        fields = line.split("|")
        self_us = int(fields[0].split(":")[1])
        top = fields[2].strip().split(".")[0]
        per[top] = per.get(top, 0.0) + self_us / 1000
    return per


def measure(sides: dict[str, Path], commands: list[str], modes: list[str], runs: int,
            warmup: int, pycache: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for mode in modes:
        cpu: dict[str, dict[str, list[float]]] = {c: {s: [] for s in sides} for c in commands}
        wall: dict[str, dict[str, list[float]]] = {c: {s: [] for s in sides} for c in commands}
        for r in range(warmup + runs):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for command in commands:
                for side in order:
                    c, w, _, _ = _run(_argv(command), _env(sides[side], mode, pycache))
                    if r >= warmup:
                        cpu[command][side].append(c)
                        wall[command][side].append(w)
            print(f"  {mode}: round {r + 1}/{warmup + runs}", file=sys.stderr, flush=True)
        results[mode] = {
            command: {
                side: {
                    "cpu_p50": statistics.median(cpu[command][side]),
                    "cpu_min": min(cpu[command][side]),
                    "wall_p50": statistics.median(wall[command][side]),
                    "n": len(cpu[command][side]),
                }
                for side in sides
            }
            for command in commands
        }
    return results


def import_profile(sides: dict[str, Path], commands: list[str], pycache: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for command in commands:
        out[command] = {}
        for side, tree in sides.items():
            argv = [*PYTHON, "-X", "importtime", *_argv(command)[1:]]
            _, _, _, err = _run(argv, _env(tree, "cached", pycache))
            per = imported_packages(err)
            out[command][side] = {p: round(per[p], 1) for p in HEAVY if p in per}
    return out


def report(data: dict[str, Any]) -> str:
    lines = [
        "# Start-up cost of the dpproxy command",
        "",
        "Generated by `python benchmarks/bench_startup.py`; do not edit by hand.",
        "",
        f"Machine: {machine_line(data['machine'])}. Baseline: commit `{data['baseline']}` "
        f"(before the lazy imports), after: `{data['after']}`, side by side in one interleaved "
        f"run, {data['runs']} rounds after {data['warmup']} warm-up rounds. CPU = user + system "
        "time of the process (`getrusage`), median; wall time for reference. Each command runs "
        "as the `dpproxy` console script of an installed wheel: the script's body, in a virtual "
        "environment with the same packages and no editable-install import hook.",
        "",
    ]
    titles = {
        "cached": "Bytecode cached (as an installed wheel)",
        "no-cache": "`PYTHONDONTWRITEBYTECODE=1` (this development environment: dpproxy's "
                    "modules compiled on every call)",
    }
    for mode, per in data["results"].items():
        rows = []
        for command, sides in per.items():
            b, a = sides["base"], sides["after"]
            rows.append([
                LABELS[command], f"{b['cpu_p50']:.3f} s", f"{a['cpu_p50']:.3f} s",
                f"{a['cpu_p50'] / b['cpu_p50']:.2f}", f"{b['wall_p50']:.3f} s",
                f"{a['wall_p50']:.3f} s",
            ])
        lines += [f"## {titles[mode]}", "", md_table(
            ["command", "CPU before", "CPU after", "after / before", "wall before", "wall after"],
            rows, "lrrrrr"), ""]
    lines += ["## Packages imported (`-X importtime`, self time in ms, bytecode cached)", "",
              "A package missing from a cell is not imported at all.", ""]
    rows = []
    for command, sides in data["imports"].items():
        for side in ("base", "after"):
            pk = sides[side]
            rows.append([LABELS[command], side,
                         ", ".join(f"{p} {ms:g}" for p, ms in pk.items()) or "—"])
    lines += [md_table(["command", "side", "packages"], rows, "lll"), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--baseline", default=BASELINE, help="commit to compare against")
    ap.add_argument("--base-path", type=Path, default=Path("/tmp/startup-base"),
                    help="where the baseline is checked out (an existing tree is reused)")
    ap.add_argument("--commands", default=",".join(COMMANDS),
                    help=f"comma-separated subset of {', '.join(COMMANDS)}")
    ap.add_argument("--modes", default="cached,no-cache")
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--after", metavar="COMMIT",
                    help="measure this commit (checked out at --after-path) instead of the "
                    "working tree, e.g. HEAD while others edit the tree")
    ap.add_argument("--after-path", type=Path, default=Path("/tmp/startup-after"))
    ap.add_argument("--keep-worktree", action="store_true",
                    help="leave the baseline worktree in place for another run")
    args = ap.parse_args()
    commands = [c for c in args.commands.split(",") if c]
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        ap.error(f"unknown command(s) {unknown}")
    m = machine()
    created = [args.base_path] if ensure_worktree(args.base_path, args.baseline) else []
    after_tree = REPO
    if args.after:
        if ensure_worktree(args.after_path, args.after):
            created.append(args.after_path)
        after_tree = args.after_path.resolve()
    sides = {"base": args.base_path.resolve(), "after": after_tree}
    head = subprocess.run(["git", "-C", str(after_tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    if not args.after:
        head += " (working tree)"
    try:
        with tempfile.TemporaryDirectory(prefix="dpproxy-startup-") as tmp:
            pycache = Path(tmp) / "pycache"
            PYTHON[:] = [wheel_python(Path(tmp) / "venv")]
            for side, tree in sides.items():  # each side really imports its own tree
                where = [*PYTHON, "-c", "import sys, dpproxy; print(dpproxy.__file__); "
                         "print(sorted(m for m in sys.modules if 'editable' in m))"]
                _, _, out, _ = _run(where, _env(tree, "cached", pycache))
                assert out.strip().startswith(str(tree)), (side, out)
                assert out.strip().endswith("[]"), (side, out)  # no editable-install hook
            modes = [m for m in args.modes.split(",") if m]
            results = measure(sides, commands, modes, args.runs, args.warmup, pycache)
            imports = import_profile(sides, commands, pycache)
    finally:
        for path in created if not args.keep_worktree else []:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                           check=False, capture_output=True)
    m["loadavg_end"] = loadavg()
    data = {"machine": m, "baseline": args.baseline, "after": head, "runs": args.runs,
            "warmup": args.warmup, "results": results, "imports": imports}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "STARTUP.json").write_text(json.dumps(data, indent=1) + "\n",
                                               encoding="utf-8")
    (args.out_dir / "STARTUP.md").write_text(report(data), encoding="utf-8")
    print(report(data))


if __name__ == "__main__":
    main()
