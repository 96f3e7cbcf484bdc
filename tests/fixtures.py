"""A reader for the SQL fixture files under ``tests/fixtures/`` (in the style of sqlglot's).

A file is a sequence of cases. A case starts with ``-- title:`` and has more ``-- key: value``
header lines, then its statements, each ending with ``;`` at the end of a line::

    -- title: avg with group by
    -- schema: adult
    -- execute: true
    SELECT sex, AVG(age) FROM adult GROUP BY sex;
    WITH __rows AS (...) SELECT ...;

Rewrite fixtures have two statements (the input and the expected rewritten SQL); refusal
fixtures have one (and a ``-- sqlstate:`` header). A header value may continue on following
lines that start with ``--   `` (two or more spaces after the dashes). Other comment lines
(``-- some words`` with no ``key:``, or ``--- ...``) are ignored.

>>> cases = parse_cases("-- title: t\\n-- schema: adult\\nSELECT 1\\n  FROM x;\\nSELECT 2;\\n")
>>> cases[0].title, cases[0].statements, cases[0].get("schema")
('t', ('SELECT 1\\n  FROM x', 'SELECT 2'), 'adult')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

_HEADER = re.compile(r"^--\s?([a-z_]+):\s*(.*)$")
_CONTINUATION = re.compile(r"^--\s{2,}(\S.*)$")


@dataclass(frozen=True)
class Case:
    title: str
    file: str
    line: int
    statements: tuple[str, ...]
    headers: dict[str, str] = field(default_factory=dict)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.headers.get(key, default)

    def flag(self, key: str) -> bool:
        return (self.headers.get(key) or "false").strip().lower() == "true"

    @property
    def id(self) -> str:
        return f"{Path(self.file).stem}:{self.title}"


def parse_cases(text: str, file: str = "<string>") -> list[Case]:
    """Split fixture text into cases; see the module docstring."""
    cases: list[Case] = []
    headers: dict[str, str] = {}
    statements: list[str] = []
    buffer: list[str] = []
    start = 0
    last_key: str | None = None

    def finish() -> None:
        if buffer:
            raise ValueError(f"{file}:{start}: statement without a final ';'")
        if "title" in headers:
            title = headers.pop("title")
            cases.append(Case(title, file, start, tuple(statements), dict(headers)))
        elif statements:
            raise ValueError(f"{file}:{start}: statements before any '-- title:'")

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not buffer and line.startswith("--"):
            cont = _CONTINUATION.match(line)
            header = _HEADER.match(line)
            if cont and last_key is not None:
                headers[last_key] += " " + cont.group(1)
            elif header:
                key, value = header.groups()
                if key == "title":
                    finish()
                    headers, statements, start = {}, [], number
                if key in headers:
                    raise ValueError(f"{file}:{number}: duplicate header {key!r}")
                headers[key] = value.strip()
                last_key = key
            else:
                last_key = None
            continue
        if not line.strip() and not buffer:
            last_key = None
            continue
        last_key = None
        buffer.append(line)
        if line.endswith(";"):
            statement = "\n".join(buffer)[:-1].strip()
            statements.append(statement)
            buffer = []
    finish()
    return cases


def load_cases(*names: str) -> list[Case]:
    """Every case of the fixture files ``names`` (relative to ``tests/fixtures``, globs allowed)."""
    cases: list[Case] = []
    for name in names:
        paths = sorted(FIXTURES.glob(name))
        if not paths:
            raise FileNotFoundError(f"no fixture file matches {name}")
        for path in paths:
            rel = str(path.relative_to(FIXTURES))
            cases.extend(parse_cases(path.read_text(encoding="utf-8"), rel))
    return cases
