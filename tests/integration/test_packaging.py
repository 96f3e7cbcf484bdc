"""A package people can install: the wheel and sdist that ``python -m build`` makes.

The repository (its tracked and new, not ignored, files: what a fresh clone plus this checkout's
work holds) is copied to a temporary directory and built there with ``python -m build`` (an
isolated build environment: the sdist first, then the wheel from the sdist), so the working
tree gets no ``build/`` or ``*.egg-info``. The wheel must carry the demo data, pass
``twine check --strict``, and, installed into a fresh virtual environment (``python -m venv``
and pip; the dependencies come from the package index pip is configured with) or with
``pipx install``, give a ``dpproxy`` that answers ``SELECT COUNT(*) FROM adult`` from the demo
database it builds from the packaged data.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
N_ROWS = 32_561


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]


def _clean_env(tmp: Path) -> dict[str, str]:
    """This environment without the test venv's traces, with dpproxy's state under ``tmp``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
        and not k.startswith("DPPROXY_")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if Path(sys.executable).parent != Path(p)
    )
    env["DPPROXY_CACHE_DIR"] = str(tmp / "cache")
    env["DPPROXY_LEDGER"] = str(tmp / "ledger.sqlite")
    return env


def test_the_changelog_keeps_a_changelog() -> None:
    """CHANGELOG.md in the Keep a Changelog 1.1.0 form: release headings newest first
    (``[Unreleased]`` on top), each with only the standard sections; the version that
    pyproject.toml declares is named."""
    import tomllib

    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com/en/1.1.0" in text
    releases = re.findall(r"^## \[(.+?)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert releases and releases[0] == ("Unreleased", "")
    assert all(date for name, date in releases[1:]), releases
    sections = re.findall(r"^### (.+)$", text, re.M)
    assert sections and set(sections) <= {
        "Added",
        "Changed",
        "Deprecated",
        "Removed",
        "Fixed",
        "Security",
    }
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version in text


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"wheel": …, "sdist": …, "src": the copy}`` built from a copy of the repository."""
    root = tmp_path_factory.mktemp("packaging")
    files = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO)
    assert files.returncode == 0, f"the packaging test needs a git checkout: {files.stderr}"
    src = root / "src"
    for name in filter(None, files.stdout.split("\0")):
        if (REPO / name).is_file():  # a tracked file deleted in the work tree is skipped
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    out = root / "dist"
    built = _run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = out.glob("dpproxy-*-py3-none-any.whl")
    (sdist,) = out.glob("dpproxy-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist, "src": src}


def test_the_wheel_carries_the_demo_data_the_schema_and_the_console_script(
    dist: dict[str, Path],
) -> None:
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
        for data in ("adult.csv.gz", "adult.yaml"):
            assert (
                whl.read(f"dpproxy/data/{data}") == (REPO / "dpproxy" / "data" / data).read_bytes()
            )
        assert "dpproxy/py.typed" in names
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "dpproxy = dpproxy.cli:main" in whl.read(info).decode()
        metadata = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
    src = dist["src"]
    tracked = {p.relative_to(src).as_posix() for p in (src / "dpproxy").rglob("*.py")}
    assert {n for n in names if n.startswith("dpproxy/") and n.endswith(".py")} == tracked


def test_the_sdist_carries_the_sources_the_data_and_the_changelog(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for name in (
        "pyproject.toml",
        "README.md",
        "CHANGELOG.md",
        "SECURITY.md",
        "dpproxy/data/adult.csv.gz",
        "dpproxy/data/adult.yaml",
        "schemas/adult.yaml",
        "schemas/README.md",
        "dpproxy/cli/__init__.py",
    ):
        assert name in names, name


def test_twine_check_passes(dist: dict[str, Path]) -> None:
    proc = _run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(dist["wheel"]),
            str(dist["sdist"]),
        ],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2, proc.stdout


def _answers_the_count(dpproxy: Path, tmp: Path) -> None:
    """``dpproxy query "SELECT COUNT(*) FROM adult"`` from an install: a noisy count near the
    demo's 32,561 rows (Laplace noise of scale 1 at ε = 1: never off by 500)."""
    env = _clean_env(tmp)
    proc = _run(
        [str(dpproxy), "query", "SELECT COUNT(*) FROM adult"], env=env, cwd=tmp, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    # built from the packaged CSV into this test's cache: the wheel carries the data
    assert list((tmp / "cache").glob("adult-*.duckdb")), proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == "count" and set(lines[1].strip()) == {"-"}, proc.stdout
    assert abs(int(lines[2]) - N_ROWS) < 500, proc.stdout
    where = _run([str(dpproxy), "demo", "path"], env=env, cwd=tmp, timeout=300)
    assert where.returncode == 0, where.stderr
    schema = Path(re.search(r"^schema:\s+(.+)$", where.stdout, re.M).group(1))  # type: ignore[union-attr]
    assert REPO not in schema.parents and schema.is_file(), schema  # the installed copy


def test_the_wheel_installs_into_a_fresh_venv_and_answers(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    assert made.returncode == 0, made.stderr
    env = _clean_env(tmp_path)
    pip = _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(dist["wheel"])],
        env=env,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    where = _run(
        [str(venv / "bin" / "python"), "-c", "import dpproxy; print(dpproxy.__file__)"],
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    _answers_the_count(venv / "bin" / "dpproxy", tmp_path)


def test_pipx_install_of_the_wheel_gives_a_working_dpproxy(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    env = {
        **_clean_env(tmp_path),
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    proc = _run([sys.executable, "-m", "pipx", "install", str(dist["wheel"])], env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    dpproxy = tmp_path / "bin" / "dpproxy"
    assert dpproxy.is_file(), proc.stdout
    _answers_the_count(dpproxy, tmp_path)


def test_what_the_dockerfile_copies_is_enough_for_its_pip_install(tmp_path: Path) -> None:
    """docker/Dockerfile's ``pip install .`` sees only what its COPY lines bring into
    WORKDIR: those files alone build a wheel that carries the demo data (which the next
    build step, ``dpproxy demo path``, needs)."""
    lines = re.sub(r"\\\n", " ", (REPO / "docker" / "Dockerfile").read_text()).splitlines()
    context = tmp_path / "workdir"
    context.mkdir()
    for line in lines:
        words = line.split()
        if not words or words[0] != "COPY":
            continue
        *sources, dest = words[1:]
        for source in sources:
            target = context / dest if not dest.endswith("/") else context / dest / source
            if (REPO / source).is_dir():
                shutil.copytree(REPO / source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / source, target)
    out = tmp_path / "wheels"
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(out),
            str(context),
        ],
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = out.glob("dpproxy-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        assert {"dpproxy/data/adult.csv.gz", "dpproxy/data/adult.yaml"} <= set(whl.namelist())
