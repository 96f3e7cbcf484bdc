"""The documentation site cannot drift: it is built strictly as part of the suite.

``mkdocs build --strict`` (mkdocs.yml, docs/hooks.py) fails on a broken link, a missing anchor
or a repository file a page names that does not exist; the CLI reference and the SQLSTATE table
are generated from the click commands and from ``dpproxy/errors.py`` at every build
(docs/gen_reference.py). README.md's own links are checked here the same way."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from dpproxy import errors

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"dpproxy_docs_{name}", DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs-material is not installed: pip install '.[docs]' (or '.[test]')")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = _build(ROOT / "mkdocs.yml", out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_site_builds_strictly_with_every_docs_page(site: Path) -> None:
    pages = sorted(p.stem for p in DOCS.glob("*.md"))
    assert {"index", "privacy", "schema", "sql", "sqlstates", "cli"} <= set(pages)
    for page in pages:
        html = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert html.is_file(), f"docs/{page}.md is not in the built site"


def test_the_sqlstate_page_lists_every_error_class(site: Path) -> None:
    html = (site / "sqlstates" / "index.html").read_text(encoding="utf-8")
    codes = _module("gen_reference").registry()
    assert set(errors.DPProxyError._by_code) <= set(codes)
    for code, cls in codes.items():
        assert f"<code>{code}</code>" in html, f"{code} is missing from the SQLSTATE page"
        assert f"<code>{cls.__module__}.{cls.__name__}</code>" in html


def test_every_sqlstate_has_a_condition_name_and_none_is_stale() -> None:
    reference = _module("gen_reference")
    names = reference.CONDITION_NAMES
    codes = reference.registry()
    registered = set(codes)
    assert registered - set(names) == set(), "add the condition names to docs/gen_reference.py"
    assert set(names) - registered == set(), "docs/gen_reference.py names codes errors.py lacks"
    table = reference.sqlstate_reference()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == len(registered)
    for row in rows:
        code, _name, cls, category, _doc = (c.strip() for c in row.strip("|").split(" | "))
        error = codes[code.strip("`")]
        assert cls == f"`{error.__module__}.{error.__name__}`"
        expected = reference.pep249_category(error)
        assert category == (f"`{expected.__name__}`" if expected else "—")
        if error.__module__ == "dpproxy.errors":  # raised to Python code: PEP 249's table
            assert expected is errors.dbapi_category(error.sqlstate), code


def test_the_cli_page_is_every_commands_own_help(site: Path) -> None:
    reference = _module("gen_reference")
    html = (site / "cli" / "index.html").read_text(encoding="utf-8")
    found = reference.commands()
    assert len(found) >= 15
    for path, command, _ctx in found:
        title = " ".join(path)
        assert f"<code>{title}</code>" in html, f"{title} is missing from the CLI page"
        assert f"Usage: {title}" in html, f"the help of {title} is missing from the CLI page"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in html, f"{title} {opt} is missing from the CLI page"


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("__pycache__"))
    (docs / "zz-broken.md").write_text(
        "# Broken\n\n[a page](no-such-page.md), [an anchor](sql.md#no-such-anchor), "
        "[a file](../no/such/file.py)\n",
        encoding="utf-8",
    )
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.replace("docs_dir: docs", f"docs_dir: {docs}")
    config = config.replace("  - docs/hooks.py", f"  - {DOCS / 'hooks.py'}")
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    result = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "no-such-page.md" in log and "no-such-anchor" in log and "no/such/file.py" in log
    assert "zz-broken.md" in log  # a page missing from the nav is built (and checked) too


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_a_heading_keeps_the_blank_line_before_a_code_block() -> None:
    """The anchor added to a heading must not swallow the blank lines after it: a fence right
    after the heading line would no longer start a code block."""
    anchors = _module("hooks")._github_anchors
    text = "# Run it\n\n```\ndpproxy query\n```\n\n## Run it\n\ntext\n"
    assert anchors(text) == (
        "# Run it { #run-it }\n\n```\ndpproxy query\n```\n\n## Run it { #run-it-1 }\n\ntext\n"
    )


def _anchors(path: Path) -> set[str]:
    slug = _module("hooks").github_slug
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    found: set[str] = set()
    for title in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M):
        anchor, n = slug(title), 0
        while (f"{anchor}-{n}" if n else anchor) in found:
            n += 1
        found.add(f"{anchor}-{n}" if n else anchor)
    return found


@pytest.mark.parametrize(
    "name", ["README.md", "SECURITY.md", "schemas/README.md", "docker/README.md"]
)
def test_every_relative_link_of_the_markdown_read_on_github_resolves(name: str) -> None:
    """README.md and the other Markdown files read on GitHub, not built: their links to files
    and headings are checked here as the site's are by mkdocs."""
    source = ROOT / name
    text = re.sub(r"^```.*?^```", "", source.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    links = [t for t in _LINK.findall(text) if not re.match(r"^[a-z]+:", t)]
    if name == "README.md":
        assert any(t.startswith("docs/") for t in links), "README.md links into the docs site"
    for target in links:
        path, _, anchor = target.partition("#")
        file = (source.parent / path).resolve() if path else source
        assert file.exists(), f"{name} links to {path}, which does not exist"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file), f"{name} links to {target}: no such heading"


def test_the_architecture_figure_shows_the_engines_pipeline() -> None:
    """docs/architecture.svg names the steps of
    docs/mechanisms.md's pipeline, in that order."""
    svg = (DOCS / "architecture.svg").read_text(encoding="utf-8")
    steps = re.findall(r">([^<]*→[^<]*)<", svg)
    drawn = [s.strip() for part in steps for s in part.split("→") if s.strip()]
    pipeline = (DOCS / "mechanisms.md").read_text(encoding="utf-8")
    line = re.search(r"^`(parse → .*?)`", pipeline, re.M)
    assert line is not None
    assert [s.strip() for s in line.group(1).split("→")] == [
        s.replace(" (OpenDP)", "") for s in drawn
    ]


def _readme_section(title: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_first_screen_has_the_picture_the_plot_and_the_quick_subset() -> None:
    """The README's first screen: the architecture picture under "What it does", the
    error-against-ε plot right after the `--errors` example, with coverage figures that are
    ACCURACY.md's, and the quick subset of the tests."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'src="docs/architecture.svg"' in _readme_section("What it does")
    top = readme.split("\n## ", 1)[0]
    example = top.index("--errors\n")
    plot = top.index("](benchmarks/figures/error_vs_epsilon.png)")
    assert example < plot and (ROOT / "benchmarks/figures/error_vs_epsilon.png").is_file()
    accuracy = (ROOT / "benchmarks" / "ACCURACY.md").read_text(encoding="utf-8")
    assert "200 runs per (query, ε)" in accuracy and "over 200 runs per ε" in " ".join(top.split())
    rows = [r for r in accuracy.splitlines() if r.startswith("| ") and r.rstrip().endswith("% |")]
    coverage = [float(r.rstrip(" |").rsplit("|", 1)[1].strip().rstrip("%")) for r in rows]
    assert len(coverage) >= 20
    low, high = min(coverage), max(coverage)
    assert f"in {low:g}–{high:g}% of cells" in " ".join(top.split())
    assert "pip install '.[test]' && python -m pytest" in top
    assert "`python -m pytest tests/unit`" in top


def _collected(*paths: str) -> int:
    """How many tests pytest collects (the project's configuration: doctests included)."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    count = re.search(r"^(\d+) tests? collected", collected.stdout, re.M)
    assert count is not None, collected.stdout[-2000:] + collected.stderr[-2000:]
    return int(count.group(1))


def test_the_quick_subset_has_the_stated_number_of_tests() -> None:
    """The README says how many tests `python -m pytest tests/unit` runs (rounded to the
    hundred); the count is what pytest collects, within the growth of a busy week (±25%)."""
    top = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0].split())
    stated = re.search(r"`python -m pytest tests/unit` runs the unit tests \(about ([\d,]+)\)", top)
    assert stated is not None
    n, claim = _collected("tests/unit"), int(stated.group(1).replace(",", ""))
    assert 0.75 * claim <= n <= 1.25 * claim, (n, claim)


def test_the_whole_suite_has_the_stated_number_of_tests() -> None:
    """The README's "runs the test suite (N tests)": what `python -m pytest` collects, within
    the growth of a busy week (±25%)."""
    top = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0].split())
    stated = re.search(r"runs the test suite \(([\d,]+) tests\)", top)
    assert stated is not None
    n, claim = _collected(), int(stated.group(1).replace(",", ""))
    assert 0.75 * claim <= n <= 1.25 * claim, (n, claim)


def test_the_readme_documentation_section_names_the_docs_extra() -> None:
    """README "Documentation": `pip install '.[docs]'` installs what the site build needs."""
    text = " ".join(_readme_section("Documentation").split())
    assert "`mkdocs build --strict` (`pip install '.[docs]'`" in text
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^docs = \["mkdocs-material', pyproject, re.M)
    assert "[docs/](docs/index.md)" in text


def test_the_readme_threat_paragraph_is_the_privacy_pages() -> None:
    """The one paragraph README "What it does" shares with docs/privacy.md cannot drift apart."""
    readme = _readme_section("What it does")
    privacy = (DOCS / "privacy.md").read_text(encoding="utf-8")
    section = privacy.split("\n## What it does, and the threat model\n", 1)[1]
    first = section.strip().split("\n\n", 1)[0]
    assert first.startswith("The analyst is untrusted")
    assert first in readme
    assert "[Privacy model](docs/privacy.md)" in " ".join(readme.split())


def test_the_coverage_ranges_in_performance_md_are_accuracy_md_s() -> None:
    """docs/performance.md's coverage of the reported 95% bounds, per statistic, is the range of
    benchmarks/ACCURACY.md's last column (COUNT, SUM; AVG and VAR together)."""
    table = (ROOT / "benchmarks" / "ACCURACY.md").read_text(encoding="utf-8")
    cover: dict[str, list[float]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[5].endswith("%") and cells[1][:1].isdigit():
            cover.setdefault(cells[0].split("(")[0].split()[0], []).append(float(cells[5][:-1]))

    def span(values: list[float]) -> str:
        return f"{min(values):g}–{max(values):g}%"

    text = " ".join((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").split())
    assert f"{span(cover['COUNT'])} of COUNT cells" in text
    assert f"{span(cover['SUM'])} of SUM cells" in text
    assert f"{span(cover['AVG'] + cover['VAR_POP'])} of AVG and VAR cells" in text
