"""The trees of texts parsed lately (``sql/parse.PARSED``): one parse per new query text.

A query's first run reads its text up to five times (the public-table, UNION, composition and
main planners, and the answer cache's canonical text); each used to tokenize and parse it
again. Every caller still gets a tree of its own."""

from __future__ import annotations

import threading

import pytest
from sqlglot import exp

from dpproxy.engine import open_engine
from dpproxy.errors import SQLSyntaxError
from dpproxy.sql import parse as parse_module
from dpproxy.sql.parse import (
    PARSED,
    PARSED_CHARACTERS,
    PARSED_LARGEST,
    PARSED_TEXTS,
    normalised_text,
    parse,
)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts tokenized and parsed from here on (the real parser, counted)."""
    PARSED.clear()
    normalised_text.cache_clear()
    seen: list[str] = []
    real = parse_module._parse_with

    def counted(pair: object, sql: str) -> object:
        seen.append(sql)
        return real(pair, sql)  # type: ignore[arg-type]

    monkeypatch.setattr(parse_module, "_parse_with", counted)
    return seen


def test_a_text_is_parsed_once_and_every_caller_gets_its_own_tree(parses: list[str]) -> None:
    sql = "SELECT sex, COUNT(*) FROM adult WHERE age > 30 GROUP BY sex"
    first = parse(sql)
    first.set("where", None)  # a caller changes its tree
    second = parse(sql)
    assert parses == [sql]
    assert second is not first and second.args.get("where") is not None
    assert second == parse_module._parse_one(sql)  # the same tree as a new parse
    third = parse(sql)
    assert third is not second and third == second


def test_a_refused_text_is_refused_every_time_and_not_kept(parses: list[str]) -> None:
    for _ in range(3):
        with pytest.raises(SQLSyntaxError):
            parse("SELECT COUNT(* FROM adult")
    assert len(parses) == 3
    assert PARSED.get("SELECT COUNT(* FROM adult") is None


def test_the_memo_keeps_at_most_its_limit(parses: list[str]) -> None:
    for i in range(PARSED_TEXTS + 10):
        parse(f"SELECT {i}")
    assert len(PARSED._trees) == PARSED_TEXTS
    assert PARSED.get("SELECT 0") is None  # the oldest went first
    assert PARSED.get(f"SELECT {PARSED_TEXTS + 9}") is not None
    huge = "SELECT COUNT(*) FROM adult WHERE age IN (" + ", ".join(["1"] * 90_000) + ")"
    assert len(huge) > PARSED_LARGEST
    parse(huge)
    parse(huge)
    assert parses.count(huge) == 2  # too long to keep: parsed each time
    assert PARSED.get(huge) is None


def test_one_long_text_is_kept_beside_the_short_ones(parses: list[str]) -> None:
    """A text longer than the short texts' limit is kept alone: the last one parsed."""

    def long(n: int) -> str:
        return f"SELECT COUNT(*) FROM adult WHERE age IN ({', '.join([str(n)] * 6000)})"

    assert PARSED_CHARACTERS < len(long(1)) <= PARSED_LARGEST
    parse("SELECT 1")
    first = parse(long(1))
    assert parse(long(1)) == first and parses.count(long(1)) == 1
    parse(long(2))  # takes the long text's place
    assert PARSED.get(long(1)) is None and PARSED.get(long(2)) is not None
    parse(long(1))
    assert parses.count(long(1)) == 2
    assert PARSED.get("SELECT 1") is not None  # the short texts are kept as before
    assert len(PARSED._trees) == 1


def test_a_first_query_through_the_engine_parses_its_text_once(parses: list[str]) -> None:
    engine = open_engine(cache="off")
    try:
        for sql in (
            "SELECT SUM(capital_gain - capital_loss), AVG(hours_per_week * 52) FROM adult",
            "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
            # a long text (a 10,000-item IN list, 59 KB), kept alone
            f"SELECT COUNT(*) FROM adult WHERE fnlwgt IN ({', '.join(map(str, range(10_000)))})",
        ):
            parses.clear()
            engine.prepare(sql)
            normalised_text(sql)  # the answer cache's key, computed by Engine.run
            assert parses == [sql]
    finally:
        engine.close()


def test_threads_parsing_the_same_texts_get_equal_trees_of_their_own(parses: list[str]) -> None:
    texts = [f"SELECT COUNT(*) FROM adult WHERE age > {i}" for i in range(8)]
    expected = {t: parse_module._parse_one(t) for t in texts}
    got: list[tuple[str, exp.Expression]] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(20):
            for t in texts:
                tree = parse(t)
                with lock:
                    got.append((t, tree))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(got) == 4 * 20 * len(texts)
    assert all(tree == expected[t] for t, tree in got)
    assert len({id(tree) for _, tree in got}) == len(got)  # no tree handed out twice
