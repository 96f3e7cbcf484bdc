"""``dpproxy/mechanisms/dp_domains.py``: the split of (ε, δ), the threshold, the choice, and the
draft's domain lines. (The sensitivity is checked by brute force in
tests/property/test_dp_domains_bruteforce.py, the release rates in
tests/audit/test_audit_dp_domains.py, the command in tests/integration/test_dp_domains_cli.py.)"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpproxy.backends.steward import DEFAULT_DELTA, bounded_columns, domain_columns, parse_delta
from dpproxy.catalog.draft import ColumnShape, TableShape, draft_schema, find_todos
from dpproxy.catalog.load import parse_catalog
from dpproxy.errors import InvalidParameter
from dpproxy.mechanisms.dp_domains import (
    EXCLUSIVE,
    SENSITIVITY,
    choose_domain,
    scale,
    split,
    threshold,
)
from dpproxy.mechanisms.selection import sampled_scale, selection_threshold
from tests.noise import NoNoise


def test_the_split_adds_up_to_epsilon_and_delta_exactly() -> None:
    for eps, dlt, bounded, text in [
        (Fraction(1), Fraction(1, 10**6), 2, 1),
        (Fraction(7, 3), Fraction(1, 3 * 10**5), 5, 7),
        (Fraction(1, 1000), Fraction(1, 2), 0, 3),
        (Fraction(100), Fraction(0), 4, 0),
    ]:
        s = split(eps, dlt, bounded, text)
        assert 2 * bounded * s.bound_each + text * s.domain_epsilon == eps
        assert text * s.domain_delta == dlt
        if bounded and text:
            assert s.domain_epsilon == 2 * s.bound_each == eps / (bounded + text)
    assert split(Fraction(1), Fraction(0), 2, 0).bound_each == Fraction(1, 4)  # as before
    for bad in [
        (Fraction(0), Fraction(1, 10**6), 1, 1),
        (Fraction(1), Fraction(0), 0, 1),  # a domain needs δ > 0
        (Fraction(1), Fraction(1), 0, 1),
        (Fraction(1), Fraction(1, 10**6), 0, 0),
    ]:
        with pytest.raises(ValueError):
            split(*bad)


def test_the_threshold_bounds_the_release_of_a_one_unit_value_at_the_sampled_scale() -> None:
    assert SENSITIVITY == 2 and EXCLUSIVE == 2
    for eps, dlt in [(Fraction(1, 3), Fraction(1, 10**6)), (Fraction(4), Fraction(7, 50))]:
        tau = threshold(eps, dlt)
        assert tau == selection_threshold(Fraction(2) / eps, 2, dlt)
        assert scale(eps) == 2 / eps
        p = math.exp(-1 / float(sampled_scale(scale(eps))))
        assert p**tau / (1 + p) <= float(dlt) / EXCLUSIVE  # kept with probability ≤ δ/N
        assert p ** (tau - 1) / (1 + p) > float(dlt) / EXCLUSIVE  # and τ is the smallest
    assert threshold(Fraction(1, 3), Fraction(1, 10**6)) == 84  # the README's people.csv


def test_without_noise_values_above_the_threshold_are_kept_sorted() -> None:
    noise = NoNoise()
    eps, dlt = Fraction(1), Fraction(1, 10**6)
    tau = threshold(eps, dlt)
    counts = [("b", tau + 1), ("a", tau + 50), ("rare", tau), ("one", 1)]
    chosen = choose_domain(counts, eps, dlt, noise, cap=10)
    assert chosen.values == ("a", "b") and chosen.threshold == tau and not chosen.capped
    assert noise.calls == [("laplace", 4, Fraction(2), True)]  # discrete, at Δ₁/ε
    capped = choose_domain(counts, eps, dlt, NoNoise(), cap=1)
    assert capped.values == ("a",) and capped.capped  # the largest noisy count stays
    assert choose_domain([("x", 1)], eps, dlt, NoNoise(), cap=5).values == ()
    with pytest.raises(ValueError):
        choose_domain(counts, eps, dlt, NoNoise(), cap=0)


def test_delta_option() -> None:
    assert parse_delta(None) == DEFAULT_DELTA == Fraction(1, 10**6)
    assert parse_delta("1e-6") == Fraction(1, 10**6)  # exact, not the float
    assert parse_delta("0") == 0 and parse_delta("1/3") == Fraction(1, 3)
    for bad in ("1", "-1e-6", "abc", "nan", "inf", "1/0", ""):
        with pytest.raises(InvalidParameter) as e:
            parse_delta(bad)
        assert e.value.sqlstate == "22023"


TRICKY = ["F", 'a"b', "x: y # z", "\n", "tab\there", "é", "😀", "\x85", "\x00", "\U0010ffff"]
TRICKY += ["yes", "null", "~", "", "  sp ", "\\", "#TODO no", "[1, 2]", "{a: b}", "'q'"]


def test_the_draft_writes_the_domain_so_that_it_loads_back_exactly() -> None:
    shape = TableShape(
        "t",
        (
            ColumnShape("id", "INTEGER"),
            ColumnShape("s", "VARCHAR"),
            ColumnShape("none", "VARCHAR"),
            ColumnShape("plain", "VARCHAR"),
        ),
    )
    values = tuple(sorted(TRICKY))
    domains = {
        ("t", "s"): (values, "DP domain (ε = 1/3): the note"),
        ("t", "none"): ((), "TODO domain: no value passed the DP threshold"),
    }
    text = draft_schema("t", (shape,), source="t.csv", units={"t": "id"}, domains=domains)
    catalog = parse_catalog(text)
    table = catalog.tables[0]
    assert table.column("s").domain == values  # type: ignore[union-attr]
    assert table.column("none").domain is None  # type: ignore[union-attr]
    assert "# DP domain (ε = 1/3): the note" in text
    todos = [(t.path, t.text) for t in find_todos(text)]
    assert todos == [
        ("tables.t.columns.none", "domain: no value passed the DP threshold"),
        ("tables.t.columns.plain", "domain: the public list of values, if any"),
    ]  # a "#" in a value is escaped: never read as a comment


def test_only_columns_the_draft_writes_get_a_release() -> None:
    shape = TableShape(
        "t",
        (
            ColumnShape("id", "VARCHAR"),
            ColumnShape("città", "VARCHAR"),  # left out of the draft: nothing released
            ColumnShape("größe", "INTEGER"),
            ColumnShape("x y", "VARCHAR"),
            ColumnShape("city", "VARCHAR"),
            ColumnShape("ok", "BOOLEAN"),  # [true, false] already
            ColumnShape("n", "BIGINT"),
        ),
    )
    assert domain_columns(shape, "id") == ["city"]
    assert bounded_columns(shape, "id") == ["n"]
    text = draft_schema("t", (shape,), source="t.csv", units={"t": "id"})
    assert '# "città": left out, not a plain identifier' in text
