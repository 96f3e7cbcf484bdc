"""Dates that Python's ``datetime.date`` cannot hold, ordered among the dates.

Both engines store dates beyond 0001…9999: BC dates, years past 9999 (and ±infinity, which
the backends read as ``date.max`` and ``date.min``). DuckDB's client gives them as the text it
prints, PostgreSQL's client (psycopg) raised on them (``backends/postgres.py`` now reads them
as that text). A date group key then held a ``date`` beside a ``str``, and an ``ORDER BY`` of
the released keys failed in Python ("'<' not supported between instances of 'str' and
'datetime.date'") after the query had run and been charged. :class:`FarDate` is that text
(so it prints, encodes and compares equal as before) ordered by the day it names, among
``date`` values and other far dates: BC years count astronomically (1 BC is year 0).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

_FAR = re.compile(r"([0-9]+)-([0-9]{2})-([0-9]{2})( \(BC\))?")


class FarDate(str):
    """A date beyond 0001…9999 as DuckDB prints it (``'5874897-12-31'``,
    ``'4713-01-01 (BC)'``), ordered as a date.

    >>> sorted([datetime.date(2000, 1, 1), FarDate("10000-01-01"), FarDate("0001-01-01 (BC)")])
    ['0001-01-01 (BC)', datetime.date(2000, 1, 1), '10000-01-01']
    """

    __slots__ = ()

    def _day(self) -> tuple[int, int, int]:
        m = _FAR.fullmatch(self)
        if m is None:  # not a date: after every date (never made so by the backends)
            return (2**63, 0, 0)
        year = int(m.group(1))
        return (1 - year if m.group(4) else year, int(m.group(2)), int(m.group(3)))

    @staticmethod
    def _of(other: Any) -> tuple[int, int, int] | None:
        if isinstance(other, FarDate):
            return other._day()
        if isinstance(other, datetime.date):
            return (other.year, other.month, other.day)
        return None

    def __lt__(self, other: Any) -> bool:
        o = self._of(other)
        return self._day() < o if o is not None else str.__lt__(self, other)

    def __le__(self, other: Any) -> bool:
        o = self._of(other)
        return self._day() <= o if o is not None else str.__le__(self, other)

    def __gt__(self, other: Any) -> bool:
        o = self._of(other)
        return self._day() > o if o is not None else str.__gt__(self, other)

    def __ge__(self, other: Any) -> bool:
        o = self._of(other)
        return self._day() >= o if o is not None else str.__ge__(self, other)

    __hash__ = str.__hash__
