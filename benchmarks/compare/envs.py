"""One virtual environment per peer system, with pinned versions, under ``work/venvs/<system>``.

Each peer is installed from PyPI (through pip's configured index) into its own venv made with
``python3 -m venv``, so their dependency pins (pandas, PySpark, OpenDP, ...) never meet
dpproxy's. An environment whose pinned packages are already installed at the pinned versions is
kept as it is. dpproxy itself needs no environment of its own: the harness runs from dpproxy's
venv, and its adapter uses that interpreter (``sys.executable``).

Usage: ``python benchmarks/compare/envs.py [--systems smartnoise,qrlew,tumult] [--force]``;
prints one line per system: name, interpreter, seconds spent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / "work" / "venvs"

# The top-level pins (the newest releases on PyPI when the harness was written; each resolves
# and installs on Python 3.11 / x86-64 Linux). Their own dependencies are whatever pip resolves.
PINS: dict[str, list[str]] = {
    "smartnoise": ["smartnoise-sql==1.0.10"],
    "qrlew": ["pyqrlew==0.9.27"],
    "tumult": ["tmlt-analytics==0.21.0"],
}
# What the adapters import besides the system itself (each package pulls these anyway; listed
# so an adapter never depends on an accident of resolution).
EXTRAS: dict[str, list[str]] = {
    "smartnoise": ["numpy", "pandas"],
    "qrlew": ["numpy", "pandas"],
    "tumult": ["numpy", "pandas"],
}
SYSTEMS = ("dpproxy", *PINS)
# Distributions whose versions the report lists, per system (absent ones are skipped).
REPORTED: dict[str, list[str]] = {
    "dpproxy": ["dpproxy", "opendp", "duckdb", "sqlglot", "numpy"],
    "smartnoise": ["smartnoise-sql", "opendp", "sqlalchemy", "pandas", "numpy"],
    "qrlew": ["pyqrlew", "qrlew-datasets", "sqlalchemy", "pandas", "numpy"],
    "tumult": ["tmlt-analytics", "tmlt-core", "pyspark", "pandas", "numpy"],
}


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def base_python() -> str:
    """The interpreter new venvs are made from: ``python3`` on PATH, else this one's base."""
    return shutil.which("python3") or getattr(sys, "_base_executable", sys.executable)


def venv_python(system: str, venvs: Path = VENVS) -> Path:
    if system == "dpproxy":
        return Path(sys.executable)
    return venvs / system / "bin" / "python"


def installed_versions(python: Path, names: list[str]) -> dict[str, str | None]:
    """{distribution: version or None} as that interpreter sees them."""
    code = (
        "import json, sys\n"
        "from importlib.metadata import version, PackageNotFoundError\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = version(n)\n"
        "    except PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run(
        [str(python), "-c", code, *names], capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        return dict.fromkeys(names)
    return json.loads(res.stdout)


def _pinned(spec: str) -> tuple[str, str]:
    name, _, version = spec.partition("==")
    return name, version


def is_ready(system: str, venvs: Path = VENVS) -> bool:
    python = venv_python(system, venvs)
    if system == "dpproxy":
        return True
    if not python.exists():
        return False
    pins = [_pinned(s) for s in PINS[system]]
    extras = EXTRAS.get(system, [])
    have = installed_versions(python, [n for n, _ in pins] + extras)
    return all(have.get(n) == v for n, v in pins) and all(have.get(e) for e in extras)


def ensure(system: str, venvs: Path = VENVS, force: bool = False) -> dict[str, object]:
    """Create or reuse the system's venv; {system, python, seconds, created}."""
    started = time.perf_counter()
    python = venv_python(system, venvs)
    if system == "dpproxy" or (not force and is_ready(system, venvs)):
        progress(f"envs: {system} ready ({python})")
        return {"system": system, "python": str(python), "seconds": 0.0, "created": False}
    target = venvs / system
    if force and target.exists():
        shutil.rmtree(target)
    if not python.exists():
        progress(f"envs: creating {target}")
        subprocess.run([base_python(), "-m", "venv", str(target)], check=True)
    specs = PINS[system] + EXTRAS.get(system, [])
    progress(f"envs: pip install {' '.join(specs)} into {target} (may take minutes)")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    res = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *specs],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"pip install for {system} failed:\n{tail}")
    seconds = time.perf_counter() - started
    progress(f"envs: {system} installed in {seconds:.0f} s")
    return {"system": system, "python": str(python), "seconds": seconds, "created": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(PINS), help="comma-separated")
    parser.add_argument("--force", action="store_true", help="recreate the venvs")
    args = parser.parse_args()
    for system in args.systems.split(","):
        r = ensure(system.strip(), force=args.force)
        print(f"{r['system']}\t{r['python']}\t{r['seconds']:.1f}")


if __name__ == "__main__":
    main()
