"""Strict tooling is part of the suite: ruff on code and tests, mypy --strict on dpproxy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    if shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists():
        pytest.fail("ruff is not installed: pip install '.[test]'")
    result = _run(sys.executable, "-m", "ruff", "check", "dpproxy", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run(sys.executable, "-m", "mypy", "--no-incremental")
    assert result.returncode == 0, result.stdout + result.stderr
