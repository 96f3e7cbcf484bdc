"""``rewrite/clamps.column_clamp`` hands out copies of a template hashed when it was made:
each copy's leaves carry the hashes that hashing the copy itself would give, its inner nodes
none, and a change to a copy (a taming put in its ELSE, the copy put under another node)
leaves no stale hash, so ``==`` on clamps answers as it does on freshly built ones."""

from __future__ import annotations

from fractions import Fraction

import pytest
from sqlglot import exp

from dpproxy.rewrite.clamps import _double_column, clamp, column_clamp

BOUNDS = [
    (Fraction(0), Fraction(100000)),
    (Fraction(-5, 2), Fraction(29, 4)),
    (Fraction(1, 3), None),
    (None, Fraction(7)),
    (Fraction(-(2**70)), Fraction(2**70)),
]


@pytest.mark.parametrize(("lo", "hi"), BOUNDS)
def test_copies_carry_the_hashes_of_fresh_clamps(lo: Fraction | None, hi: Fraction | None) -> None:
    copy = column_clamp("x", lo, hi)
    fresh = clamp(_double_column("x"), lo, hi)  # built anew, never hashed
    assert all((n._hash is not None) == (not list(n.iter_expressions())) for n in copy.walk())
    assert all(n._hash is None for n in fresh.walk())
    assert [hash(n) for n in copy.walk()] == [hash(n) for n in fresh.walk()]
    assert copy == fresh and copy.sql() == fresh.sql()


def test_a_changed_copy_is_hashed_anew() -> None:
    copy = column_clamp("x", Fraction(0), Fraction(9))
    before = hash(copy)
    copy.set("default", exp.Case(ifs=[], default=copy.args["default"]))
    fresh = clamp(_double_column("x"), Fraction(0), Fraction(9))
    fresh.set("default", exp.Case(ifs=[], default=fresh.args["default"]))
    assert hash(copy) == hash(fresh) != before
    holder = exp.Paren(this=exp.column("y"))
    hash(holder)
    holder.set("this", column_clamp("x", Fraction(0), Fraction(9)))
    assert holder == exp.Paren(this=clamp(_double_column("x"), Fraction(0), Fraction(9)))
