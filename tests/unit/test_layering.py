"""The functional core imports only layers to its left; I/O lives in the shell (STYLE.md §3.1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpproxy"

# Each layer may import itself and the layers before it.
ORDER = [
    "errors", "pep249", "dsn", "values", "catalog", "sql", "analysis", "mechanisms", "planning",
    "rewrite", "release", "explain_notes", "explain_errors", "explain", "backends", "accounting",
    "prefetch", "demo", "tpch",
    "drawn", "composed", "union", "engine_plans", "engine",
    "explain_command", "dbapi", "notebook", "sqlalchemy_dialect", "output", "server",
    "console", "logsetup", "config", "cli",
]
# I/O: only the shell uses them
SHELL = {"drawn", "composed", "union", "engine_plans", "engine", "dbapi", "server", "console",
         "cli"}
SHELL_ONLY = {"backends", "accounting", "prefetch", "demo", "tpch"}
PURE = {"values", "catalog", "sql", "analysis", "mechanisms", "planning", "rewrite", "release",
        "explain_notes", "explain_errors", "explain"}
IMPURE_MODULES = {"duckdb", "psycopg", "psycopg_pool", "socket", "sqlite3", "subprocess",
                  "threading", "os"}
# Command groups kept beside what they administer, and what their commands share, belong to the
# outermost layer, ``cli``: they may use what ``dpproxy.cli`` may (the budget commands default
# to the demo's schema). Nothing else may import them (only ``dpproxy.cli`` registers them).
CLI_MODULES = {"accounting/budget_cli.py", "accounting/budget_support.py"}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "dpproxy" or len(parts) < 2:
        return None
    return parts[1]


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_respect_the_layers(path: Path) -> None:
    rel = path.relative_to(PACKAGE)
    own = rel.parts[0].removesuffix(".py")
    if own == "__init__":
        return
    if rel.as_posix() in CLI_MODULES:
        own = "cli"
    assert own in ORDER, f"{rel}: add its layer to ORDER"
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            target = layer_of(name)
            for cli_module in CLI_MODULES:
                dotted = "dpproxy." + cli_module.removesuffix(".py").replace("/", ".")
                if name == dotted or name.startswith(dotted + "."):
                    assert own == "cli", f"{rel} imports the command group {name}"
            if own in PURE:
                root = name.split(".")[0]
                assert root not in IMPURE_MODULES, f"{rel}: pure layer imports {name}"
            if target is None or target == "__init__" or target == own:
                continue
            if name == "dpproxy":
                continue
            assert ORDER.index(target) < ORDER.index(own), f"{rel} imports {name}"
            if target in SHELL_ONLY:
                assert own in SHELL, f"{rel} imports the I/O layer {name}"
