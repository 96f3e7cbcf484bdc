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


# Every kind of first look at a text: private aggregates (no look changes anything), public
# tables, UNION ALL, scalar subqueries, an aggregate relation, and refusals of each.
_LOOKED_AT = (
    "SELECT COUNT(*) FROM orders WHERE o_orderstatus = 'F'",
    "SELECT c_mktsegment, AVG(c_acctbal) FROM customer GROUP BY c_mktsegment",
    "SELECT n_name FROM nation WHERE n_nationkey < 5 ORDER BY n_name",
    "SELECT r_name, COUNT(*) FROM region GROUP BY r_name",
    "SELECT COUNT(*) AS n FROM orders UNION ALL SELECT COUNT(*) FROM customer ORDER BY n",
    "SELECT n_name AS name, 1 AS n FROM nation WHERE n_nationkey = 3 UNION ALL "
    "SELECT 'customers', COUNT(*) FROM customer",
    "SELECT COUNT(*) FROM customer WHERE c_acctbal > (SELECT AVG(c_acctbal) FROM customer)",
    "/*+ dpproxy max_rows=1000 */ SELECT p_partkey, p_size FROM part WHERE p_brand = "
    "'Brand#13' AND p_size > (SELECT COUNT(*) FROM lineitem WHERE l_partkey = p_partkey)",
    "WITH seg AS (SELECT c_mktsegment AS s, COUNT(*) AS n FROM customer GROUP BY c_mktsegment) "
    "SELECT s, n FROM seg ORDER BY s",
    "SELECT COUNT(*) FROM orders UNION ALL SELECT o_comment FROM orders",  # refused
    "SELECT COUNT(*) FROM customer WHERE c_acctbal + (SELECT AVG(c_acctbal) FROM customer) > 0",
    "SELECT c_name FROM customer",  # refused: not an aggregate
)


def test_the_first_looks_leave_the_kept_trees_as_parsed(
    tpch_db: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``peek`` hands the kept tree itself to the engine's first looks (public tables, UNION,
    subqueries): were any of them to change it, a later caller of the same text would plan
    another query. Planning and running a query of every kind leaves each kept tree equal to
    a fresh parse of its text."""
    from fractions import Fraction

    from dpproxy.accounting.memory import MemoryAccountant
    from dpproxy.backends.duckdb import DuckDBBackend
    from dpproxy.engine import Engine
    from dpproxy.errors import DPProxyError
    from dpproxy.values import Cost
    from tests.noise import NoNoise

    PARSED.clear()
    monkeypatch.setattr(parse_module, "PARSED_TEXTS", 1000)  # every text kept to the end
    path, catalog = tpch_db.path, tpch_db.catalog()  # type: ignore[attr-defined]
    budget = MemoryAccountant(Cost(Fraction(10**6), Fraction(1, 2)), cache="off")
    engine = Engine(catalog, DuckDBBackend(path), accountant=budget, noise=NoNoise())
    outcomes = {}
    try:
        for sql in _LOOKED_AT:
            try:
                engine.prepare(sql)
                engine.run(sql, analyst="memo")
                outcomes[sql] = "answered"
            except DPProxyError as e:
                outcomes[sql] = e.sqlstate
    finally:
        engine.close()
    assert list(outcomes.values()).count("answered") >= 8, outcomes  # each kind was planned
    assert set(outcomes.values()) - {"answered"}, outcomes  # and refusals too
    kept = {sql: tree for sql, tree in PARSED._trees.items() if sql in _LOOKED_AT}
    assert set(kept) == set(_LOOKED_AT)
    for sql, tree in kept.items():
        fresh = parse_module._parse_one(sql)
        assert tree == fresh and tree.sql() == fresh.sql(), sql
