"""MkDocs hooks (``mkdocs.yml``: ``hooks``) that keep the site in step with the repository.

- **Generated pages**: ``<!-- generated: cli -->`` and ``<!-- generated: sqlstates -->`` are
  replaced by the references ``docs/gen_reference.py`` builds from the click commands and from
  ``dpproxy/errors.py``, at every build.
- **Included files**: ``<!-- include: schemas/README.md -->`` is replaced by that repository
  file, its relative links re-based to the page, so ``schemas/README.md`` stays the one source.
- **Links out of ``docs/``**: a page may link to a repository file outside ``docs/``
  (``../SECURITY.md``, ``../benchmarks/figures/tpch.png``) as GitHub shows it. The hook checks
  that the file exists (a missing one is a warning, which ``mkdocs build --strict`` turns into
  a failure), copies images and other non-Markdown files into the site under ``_repo/`` and
  points the link there, and writes a link to Markdown outside ``docs/`` as its repository path.
- **Pages not in the nav**: every ``docs/*.md`` missing from ``nav`` is appended at the end, so
  a page added by anyone is published (and link-checked) without editing ``mkdocs.yml``.
"""

from __future__ import annotations

import importlib.util
import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REPO_PREFIX = "_repo"
log = logging.getLogger("mkdocs.hooks.dpproxy")

_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
_GENERATED = re.compile(r"<!-- generated: (\w+) -->")
_INCLUDE = re.compile(r"<!-- include: ([\w./-]+) -->")
_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) (.+?)[ \t]*$", re.M)  # not \s*: it would eat the blank lines


def github_slug(title: str) -> str:
    """The anchor GitHub gives a Markdown heading, so links work the same on GitHub and here."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _github_anchors(markdown: str) -> str:
    """Every heading outside code blocks gets GitHub's anchor (``{ #id }``; attr_list)."""
    seen: dict[str, int] = {}

    def anchor(match: re.Match[str]) -> str:
        hashes, title = match.groups()
        if title.endswith("}") and "{" in title:
            return match.group(0)
        slug = github_slug(title)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        return (
            f"{hashes} {title} {{ #{slug}-{count} }}"
            if count
            else f"{hashes} {title} {{ #{slug} }}"
        )

    return "".join(
        _HEADING.sub(anchor, chunk) if prose else chunk for prose, chunk in _outside_text(markdown)
    )


def _reference_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "dpproxy_docs_reference", DOCS / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outside_text(text: str) -> list[tuple[bool, str]]:
    """The text cut into (is_prose, chunk): links in fenced code blocks are left alone."""
    chunks: list[tuple[bool, str]] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line.lstrip()):
            if not fenced:
                chunks.append((True, "".join(current)))
                current = [line]
            else:
                current.append(line)
                chunks.append((False, "".join(current)))
                current = []
            fenced = not fenced
            continue
        current.append(line)
    chunks.append((not fenced, "".join(current)))
    return chunks


def _repo_target(source: str, target: str) -> str | None:
    """The repository path a relative link in repository file ``source`` points to, or None
    for an external link, an anchor or a mail address."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return None
    path = target.split("#", 1)[0]
    if not path:
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(source), path))


def rebase_links(text: str, source: str, page: str) -> str:
    """Relative links of ``text`` (written for repository file ``source``) re-based to the
    repository file ``page``."""

    def fix(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        resolved = _repo_target(source, target)
        if resolved is None:
            return match.group(0)
        anchor = target[len(target.split("#", 1)[0]) :]
        new = posixpath.relpath(resolved, posixpath.dirname(page) or ".") + anchor
        return f"{bang}[{label}]({new})"

    return "".join(
        _LINK.sub(fix, chunk) if prose else chunk for prose, chunk in _outside_text(text)
    )


def _external_files(text: str, page: str) -> set[str]:
    found = set()
    for prose, chunk in _outside_text(text):
        if not prose:
            continue
        for _bang, _label, target in _LINK.findall(chunk):
            resolved = _repo_target(page, target)
            if resolved and not resolved.startswith("docs/") and not resolved.endswith(".md"):
                found.add(resolved)
    return found


def _expand(markdown: str, page: str, *, generated: bool = True) -> str:
    def include(match: re.Match[str]) -> str:
        path = match.group(1)
        source = ROOT / path
        if not source.is_file():
            log.warning("%s includes %s, which does not exist", page, path)
            return ""
        return rebase_links(source.read_text(encoding="utf-8"), path, page)

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        reference = _reference_module()
        builders = {"cli": reference.cli_reference, "sqlstates": reference.sqlstate_reference}
        if name not in builders:
            log.warning("%s asks for an unknown generated page %r", page, name)
            return ""
        return str(builders[name]())

    markdown = _INCLUDE.sub(include, markdown)
    return _GENERATED.sub(generate, markdown) if generated else markdown


def _nav_files(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_files(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_nav_files(value) for value in nav.values()))
    return set()


def on_config(config: Any) -> Any:
    nav = config.get("nav")
    if nav is not None:
        listed = _nav_files(nav)
        docs = Path(config["docs_dir"])
        extra = sorted(p.name for p in docs.glob("*.md") if p.name not in listed)
        nav.extend(extra)
    return config


def on_files(files: Files, config: Any) -> Files:
    """Copy into the site the repository files (outside ``docs/``) that pages link to."""
    wanted: set[str] = set()
    for file in list(files):
        if file.is_documentation_page():
            page = f"docs/{file.src_uri}"
            wanted |= _external_files(
                _expand(Path(file.abs_src_path).read_text("utf-8"), page, generated=False), page
            )
    for path in sorted(wanted):
        source = ROOT / path
        if source.is_file():
            files.append(File.generated(config, f"{REPO_PREFIX}/{path}", abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    source = f"docs/{page.file.src_uri}"
    markdown = _github_anchors(_expand(markdown, source))

    def fix(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        resolved = _repo_target(source, target)
        if resolved is None or resolved.startswith("docs/"):
            return match.group(0)
        if resolved.startswith("../") or not (ROOT / resolved).exists():
            log.warning("%s links to %s, which is not in the repository", source, target)
            return match.group(0)
        if resolved.endswith(".md") or (ROOT / resolved).is_dir():
            return f"{label} (`{resolved}`)" if f"`{resolved}`" not in label else label
        anchor = target[len(target.split("#", 1)[0]) :]
        new = posixpath.relpath(
            f"{REPO_PREFIX}/{resolved}", posixpath.dirname(page.file.src_uri) or "."
        )
        return f"{bang}[{label}]({new}{anchor})"

    return "".join(
        _LINK.sub(fix, chunk) if prose else chunk for prose, chunk in _outside_text(markdown)
    )
