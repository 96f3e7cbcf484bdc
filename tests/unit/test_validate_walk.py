"""``sql/validate._nodes`` is sqlglot's breadth-first walk, node for node, on the analyst and
TPC-H corpora: ``validate`` reads the FROM items' column lists, and whether a WHERE, a CTE or a
division occurs, off that one list (issue 21) instead of four walks of the tree."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from dpproxy.sql.validate import _nodes
from tests.fixtures import parse_cases

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def statements() -> list[str]:
    """Every statement of the corpora: the analyst cases as ``tests/fixtures.py`` reads them
    (a ``;`` inside a comment is not a statement's end), the TPC-H queries one per file."""
    texts: list[str] = []
    for path in sorted((CORPUS / "analyst").glob("*.sql")):
        cases = parse_cases(path.read_text(encoding="utf-8"), str(path))
        texts.extend(s for case in cases for s in case.statements)
    for path in sorted((CORPUS / "tpch").glob("*.sql")):
        texts.append(path.read_text(encoding="utf-8").strip().rstrip(";"))
    return texts


STATEMENTS = statements()


def test_the_corpus_is_read() -> None:
    assert len(STATEMENTS) > 50


@pytest.mark.parametrize("sql", STATEMENTS, ids=range(len(STATEMENTS)))
def test_nodes_are_the_walk(sql: str) -> None:
    tree = sqlglot.parse_one(sql, read="postgres")
    nodes = _nodes(tree)
    walked = list(tree.walk())
    assert len(nodes) == len(walked) and all(a is b for a, b in zip(nodes, walked, strict=True))
    for kind in (exp.Table, exp.Where, exp.CTE, exp.Div):
        found = list(tree.find_all(kind))
        mine = [n for n in nodes if isinstance(n, kind)]
        assert len(found) == len(mine) and all(a is b for a, b in zip(found, mine, strict=True))
