"""``rewrite/guard``'s shortcuts give the guards' full result: a node of a class no rule of
``_guard_node`` tests for (``_PLAIN``) is only promoted, and ``real_safe`` returns a literal of
at most 38 ASCII digits as it is. Compared with every rule applied to every node (``_PLAIN``
answering "not plain" for each class) and with ``real_safe``'s exact test."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from sqlglot import exp

from dpproxy.catalog.model import Column, ColumnType, Table
from dpproxy.errors import DPProxyError
from dpproxy.rewrite import guard
from dpproxy.rewrite.clamps import clamp_values
from dpproxy.rewrite.guard import guard_row_expression, real_safe
from dpproxy.sql.mathargs import numeric_constant

TABLE = Table(
    "t",
    True,
    (
        Column("i", ColumnType.INTEGER, Fraction(-10), Fraction(10)),
        Column("j", ColumnType.INTEGER),
        Column("x", ColumnType.FLOAT, Fraction(-5, 2), Fraction(29, 4)),
        Column("y", ColumnType.FLOAT),
        Column("s", ColumnType.TEXT),
        Column("d", ColumnType.DATE),
        Column("b", ColumnType.BOOLEAN),
    ),
)
EXPRESSIONS = (
    "i",
    "i - j",
    "i * x + y",
    "-(i + j) * 2",
    "i / (j - 1)",
    "DIV(i, j) + i % 3",
    "x % 3",
    "ROUND(x, 1) + ROUND(i)",
    "CASE WHEN i > 0 THEN x ELSE -y END",
    "CASE WHEN s = 'a' THEN 1 END",
    "CASE WHEN s = 'a' THEN 1 WHEN b THEN 2 ELSE 1e300 END",
    "CASE i WHEN 1 THEN 'a' ELSE s END",
    "COALESCE(i, j, 1e39) - 1",
    "COALESCE(y, -1e-39) * 2",
    "GREATEST(i, x, -y) * LEAST(j, 7)",
    "i IN (1, 2, 1e300)",
    "NOT (i > 0 AND (j < 3 OR b))",
    "i BETWEEN x AND y",
    "SQRT(j) + LN(j + 1) - EXP(i) + LOG(10, y) + POWER(x, 2)",
    "ABS(i - x) / NULLIF(j, 0)",
    "SIGN(i) * FLOOR(x) + CEIL(y)",
    "CAST(i AS DOUBLE) * x",
    "CAST(s AS INT) + CAST(s AS DOUBLE) + CAST(s AS DATE) - d",
    "CAST(x AS REAL) * 2",
    "TRY_CAST(s AS INT) + 1",
    "LENGTH(s) * 2 + LENGTH(UPPER(s))",
    "SUBSTRING(s, 2, 3) || LOWER(s) || TRIM(s)",
    "s LIKE 'a%' OR s ILIKE 'B_'",
    "EXTRACT(YEAR FROM d) * 12 + EXTRACT(MONTH FROM d)",
    "DATE_TRUNC('month', d) = d",
    "d + INTERVAL '1' DAY > d",
    "DATE_DIFF('day', d, d) + 1",
    "WIDTH_BUCKET(x, 0, 10, 5) * 1",
    "TO_CHAR(d, 'YYYY-MM')",
    "2147483647 + 1",
    "(i > 0) = (x < 1)",
    "i IS NULL OR s IS NOT NULL",
    "-i * -(x)",
)


class _NeverPlain:
    """``_PLAIN`` answering "not plain" for every class: each node gets every rule."""

    def get(self, key: type) -> bool:
        return False


def _guarded(sql: str, clamped: bool) -> str:
    node: exp.Expression = exp.maybe_parse(sql, dialect="postgres")
    if clamped:
        node = clamp_values(node, TABLE)
    try:
        out = guard_row_expression(node, TABLE)
    except DPProxyError as e:
        return f"refused: {type(e).__name__} {e}"
    return f"{out.sql('duckdb')}\n{out!r}"


@pytest.mark.parametrize("clamped", [False, True])
@pytest.mark.parametrize("sql", EXPRESSIONS)
def test_plain_nodes_guard_as_every_rule_does(
    sql: str, clamped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _guarded(sql, clamped)
    monkeypatch.setattr(guard, "_PLAIN", _NeverPlain())
    assert fast == _guarded(sql, clamped)


def test_a_plain_class_has_no_rule() -> None:
    """Each class the guards treat specially is not plain; the common structural ones are."""
    ruled: tuple[type, ...] = (exp.Case, exp.Literal, exp.Cast, exp.TryCast, exp.Div, exp.Like)
    plain: tuple[type, ...] = (exp.Column, exp.Identifier, exp.If, exp.EQ, exp.And, exp.Neg)
    assert all(issubclass(kind, guard._RULED) for kind in ruled)
    assert not any(issubclass(kind, guard._RULED) for kind in plain)


def _reference_real_safe(e: exp.Expression) -> bool:
    """Does ``real_safe`` keep ``e`` (its test without the digits' shortcut)?"""
    v = numeric_constant(e)
    return v is None or v == 0 or Fraction(1.2e-38) <= abs(v) <= Fraction(3.4e38)


def test_real_safe_keeps_what_its_exact_test_keeps() -> None:
    rng = random.Random(7)
    texts = ["0", "00", "1", "007", "3" * 38, "9" * 38, "9" * 39, "1" + "0" * 38, "4" + "0" * 38]
    texts += ["1e300", "1e-300", "0.5", "1.2e-38", "3.4e38", "3.5e38", "1e38", "٣", "²", ""]
    for _ in range(3000):
        digits = rng.randint(1, 45)
        texts.append(str(rng.randint(10 ** (digits - 1), 10**digits - 1)))
    for text in texts:
        for is_string in (False, True):
            literal = exp.Literal(this=text, is_string=is_string)
            try:
                keep = _reference_real_safe(literal)
            except (ValueError, ZeroDivisionError):
                continue
            assert (real_safe(literal) is literal) == keep, (text, is_string)


def _reference_case_is_double(n: exp.Expression) -> bool:
    """``_case_is_double`` as it was written: the WHENs' values first, then the ELSE."""
    values = [i.args.get("true") for i in n.args.get("ifs") or []]
    values.append(n.args.get("default"))
    return any(v is not None and guard.is_double(v, TABLE) for v in values)


@pytest.mark.parametrize("clamped", [False, True])
def test_case_is_double_in_any_order(clamped: bool) -> None:
    """``_case_is_double`` tests the ELSE first: the same answer on every CASE, raw, clamped
    and guarded."""
    cases = 0
    for sql in EXPRESSIONS:
        node: exp.Expression = exp.maybe_parse(sql, dialect="postgres")
        trees = [clamp_values(node, TABLE) if clamped else node]
        try:
            trees.append(guard_row_expression(trees[0], TABLE))
        except DPProxyError:
            pass
        for tree in trees:
            for case in tree.find_all(exp.Case):
                cases += 1
                assert guard._case_is_double(case, TABLE) == _reference_case_is_double(case)
    assert cases > 20


def _tested_classes() -> set[type]:
    """Every class ``_guard_node`` tests its node ``n`` for (``isinstance(n, …)``,
    ``type(n) is …``), read from its source: names of sqlglot classes, tuples of them and
    unions written with ``|``."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(guard._guard_node))
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "n"
        ):
            found.append(node.args[1])
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Call)
            and isinstance(node.left.func, ast.Name)
            and node.left.func.id == "type"
            and isinstance(node.left.args[0], ast.Name)
            and node.left.args[0].id == "n"
        ):
            found.extend(node.comparators)
    classes: set[type] = set()

    def add(value: object) -> None:
        if isinstance(value, tuple):
            for v in value:
                add(v)
        elif isinstance(value, type):
            classes.add(value)
        else:  # a union of classes (A | B)
            for v in getattr(value, "__args__", ()):
                add(v)

    for expr in found:
        add(eval(compile(ast.Expression(expr), "<guard>", "eval"), vars(guard)))  # its own source
    return classes


def test_every_class_a_guard_rule_tests_for_is_ruled() -> None:
    """A rule added to ``_guard_node`` for a class missing from ``_RULED`` would be skipped
    for nodes of that class (they would count as plain): every class the function tests its
    node for must be one ``_RULED`` covers."""
    classes = _tested_classes()
    assert {exp.Literal, exp.Cast, exp.Div, exp.Like, exp.Round, exp.Coalesce} <= classes
    missing = sorted(c.__name__ for c in classes if not issubclass(c, guard._RULED))
    assert not missing, f"add to guard._RULED: {missing}"
