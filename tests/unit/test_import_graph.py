"""No import circles among dpproxy's modules, and no module over 600 lines.

STYLE.md asks for no import circles and for modules of about 400 lines at most; this test
holds the line at 600.

The graph is built with ``ast`` from every ``import`` statement in ``dpproxy/``: at module
level, under ``if TYPE_CHECKING:`` and inside functions alike. A circle hidden behind a
type-checking or a deferred import is still a circle: the two modules cannot be read, tested
or moved one without the other. ``from package import name`` counts as importing the
submodule ``package.name`` when there is one, else the package; the implicit import of a
module's parent packages does not count.

Both rules have an explicit list of today's exceptions. They can only shrink: a new circle
or a new long module fails, and so does an entry that no longer applies (delete it then).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpproxy"
MAX_LINES = 600

# Imports that close one of today's circles, as (importer, imported). Without them the graph
# has no circle; each is a debt to pay by moving the shared part into a module of its own.
KNOWN_CYCLE_EDGES = {
    # open_backend() imports the implementations, which import CancelToken from the package.
    ("dpproxy.backends", "dpproxy.backends.duckdb"),
    ("dpproxy.backends", "dpproxy.backends.postgres"),
    ("dpproxy.backends", "dpproxy.backends.spark"),
    # _version() reads dpproxy.__version__; dpproxy.connect is dbapi.connect, which needs the
    # engine, which opens the demo.
    ("dpproxy.demo", "dpproxy"),
}



def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The dpproxy modules that ``name`` (at ``path``) imports anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..y import z
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif base in known:
                    out.add(base)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycle_finder() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_deferred_and_relative_imports_count(tmp_path: Path) -> None:
    path = tmp_path / "b.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from dpproxy.pkg.a import A\n"
        "def f():\n"
        "    import dpproxy.pkg.c\n"
        "from . import d\n"
        "from .e import E\n"
    )
    known = {"dpproxy.pkg.a", "dpproxy.pkg.b", "dpproxy.pkg.c", "dpproxy.pkg.d", "dpproxy.pkg.e"}
    found = imports_of("dpproxy.pkg.b", path, known)
    assert found == known - {"dpproxy.pkg.b"}


def test_no_import_cycles() -> None:
    graph = import_graph()
    for importer, imported in KNOWN_CYCLE_EDGES:
        graph[importer].discard(imported)
    found = cycles(graph)
    assert not found, "import circles among dpproxy modules: " + "; ".join(
        " ↔ ".join(c) for c in found
    )


@pytest.mark.parametrize("edge", sorted(KNOWN_CYCLE_EDGES), ids=" -> ".join)
def test_known_cycle_edges_still_exist(edge: tuple[str, str]) -> None:
    importer, imported = edge
    graph = import_graph()
    assert imported in graph.get(importer, set()), f"{edge} is gone: delete it from the list"
    graph[importer].discard(imported)
    before = {tuple(c) for c in cycles(import_graph())}
    after = {tuple(c) for c in cycles(graph)}
    assert before != after, f"{edge} closes no circle any more: delete it from the list"


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_module_is_at_most_600_lines(path: Path) -> None:
    """Every module, with no exception since the last long ones were split (2026-11-29)."""
    rel = path.relative_to(PACKAGE).as_posix()
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"dpproxy/{rel} has {lines} lines (at most {MAX_LINES}): split it"
