"""explain's text cuts long IN lists and VALUES relations (``explain_notes.abbreviated``)."""

from __future__ import annotations

from dpproxy.explain_notes import LIST_KEEP, abbreviated


def test_long_lists_are_cut_and_counted() -> None:
    keys = ", ".join(str(k) for k in range(100))
    text = abbreviated(f"SELECT k, COUNT(*) FROM t WHERE k IN ({keys}) AND j IN (1, 2) GROUP BY k")
    assert text == (
        "SELECT k, COUNT(*) FROM t WHERE k IN (0, 1, 2, 3, 4, 5, … 94 more) AND j IN (1, 2) "
        "GROUP BY k"
    )
    rows = ", ".join(f"({k}, 'x')" for k in range(20))
    assert abbreviated(f"SELECT * FROM (VALUES {rows}) AS v(a, b)").endswith(
        "(5, 'x'), … 14 more) AS v(a, b)"
    )


def test_short_lists_and_unparsed_text_stay_as_written() -> None:
    written = "select k\n  from t\n where k in (1,2,3,4,5,6,7,8)"  # LIST_KEEP + 2 items
    assert LIST_KEEP == 6 and abbreviated(written) == written
    assert abbreviated("not sql at all " + "," * 30) == "not sql at all " + "," * 30


def test_what_stays_too_long_is_cut_at_the_limit() -> None:
    text = abbreviated("SELECT " + " + ".join(["a"] * 2000) + " FROM t", limit=100)
    assert len(text) == 102 and text.endswith(" …")
