"""PostgreSQL's names: a table or column is named exactly as the database spells it.

PostgreSQL folds a name written without double quotes to lower case (the ASCII letters only)
and compares names exactly, so a table created as ``"Sales"`` (Prisma, Django's ``db_table``,
many ORMs) is read as ``"Sales"`` and never as ``sales``. The privacy schema names each table
and column exactly as the database does (``backends/postgres.py`` resolves it so at attach),
while dpproxy's planning compares names regardless of case, as DuckDB resolves them. The two
meet here:

* :func:`spellings`: the one spelling of each name of the catalog, by its lower case; a
  catalog that spells one name two ways (``"createdAt"`` in one table, ``createdat`` in
  another) is refused at attach (0A000), since planning could not tell them apart;
* :func:`check_names`: each table and column the analyst's SQL names must resolve as
  PostgreSQL would resolve it: ``sales``, ``SALES`` and ``"sales"`` do not name ``"Sales"``
  (42P01, 42703, with a hint naming the close match), though planning, blind to case, would
  have matched them. Run before planning, on PostgreSQL only;
* :func:`quoted_names` (``sql/qualify.py``): the spellings that every statement dpproxy sends
  writes in double quotes: all of them (a bare ``user`` is ``current_user``, a bare ``order``
  a syntax error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from sqlglot import exp

from dpproxy.catalog.model import Table
from dpproxy.errors import UndefinedColumn, UndefinedTable, UnsupportedQuery

T = TypeVar("T", bound=exp.Expression)
_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """``name`` as PostgreSQL reads it without double quotes: its ASCII letters in lower case
    (``downcase_identifier``; a letter beyond ASCII is kept in a UTF-8 database).

    >>> fold("createdAt"), fold("Größe")
    ('createdat', 'größe')
    """
    return name.translate(_UPPER)


def spellings(tables: Iterable[Table]) -> dict[str, str]:
    """{lower-case name: its spelling} of every table and column of ``tables``; a name spelled
    two ways is refused (0A000): planning compares names regardless of case."""
    out: dict[str, str] = {}
    for t in tables:
        for name in (t.name, *(c.name for c in t.columns)):
            seen = out.setdefault(name.lower(), name)
            if seen != name:
                raise UnsupportedQuery(
                    f'the schema spells one name two ways, "{seen}" and "{name}"',
                    hint="dpproxy tells PostgreSQL's names apart by more than their case only "
                    "within one spelling: rename one of them in the database (ALTER TABLE ... "
                    "RENAME) and in the schema",
                )
    return out


def quoted_names(tables: Iterable[Table]) -> dict[str, str]:
    """The spellings (:func:`spellings`) that every statement writes in double quotes: all of
    them, not only those PostgreSQL would fold. A name that needs no folding may still not be
    a name when bare: ``user``, ``current_user`` and ``current_date`` are functions (a unit
    column ``user`` written bare read ``current_user``, one value for every row, so the
    contribution bounding kept ``max_rows_per_unit`` rows of the whole table), and ``order``
    or ``end`` bare are syntax errors (XX000 after the charge): ``tests/attacks/
    test_keyword_names.py``. Why quoting every one is right: a double-quoted identifier is
    always an identifier to PostgreSQL, whatever its text (no keyword list to keep up to
    date), and names exactly the spelling inside it, which is the database's (attach checked
    it); a lower-case name quoted means what it means bare wherever bare it is a name."""
    return spellings(tables)


def _read(ident: exp.Identifier) -> str:
    """The name PostgreSQL reads for ``ident``: as written when quoted, else folded."""
    return ident.this if ident.quoted else fold(ident.this)


def _hint(spelled: str) -> str:
    return (
        f'did you mean "{spelled}"? PostgreSQL folds a name written without double quotes '
        f'to lower case: write "{spelled}"'
    )


def check_names(tree: T, names: Mapping[str, str]) -> T:
    """Refuse a table (42P01) or column (42703) of ``tree`` that planning would match to a
    name of the catalog (``names``: :func:`spellings`) but PostgreSQL would not: its name as
    PostgreSQL reads it is not the catalog's spelling. A name the query itself defines (a CTE,
    a table alias, an output alias) is left alone, as are names the catalog lacks (planning
    refuses those). Nothing to check without ``names`` (DuckDB, Spark). Returns ``tree``."""
    if not names:
        return tree
    ctes: set[str] = set()  # CTE names, as PostgreSQL reads them
    relations: set[str] = set()  # CTE names and table aliases
    outputs: set[str] = set()  # output and derived-column aliases
    for node in tree.find_all(exp.TableAlias, exp.Alias):
        if isinstance(node, exp.TableAlias):
            if isinstance(node.this, exp.Identifier):
                relations.add(_read(node.this))
                if isinstance(node.parent, exp.CTE):
                    ctes.add(_read(node.this))
            outputs.update(_read(c) for c in node.columns if isinstance(c, exp.Identifier))
        elif isinstance(node.args.get("alias"), exp.Identifier):
            outputs.add(_read(node.args["alias"]))
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, exp.Identifier):
            _relation(table.this, names, ctes, f'relation "{_read(table.this)}"')
    for col in tree.find_all(exp.Column):
        qualifier = col.args.get("table")
        if isinstance(qualifier, exp.Identifier):
            what = f'missing FROM-clause entry for table "{_read(qualifier)}"'
            _relation(qualifier, names, relations, what)
        if isinstance(col.this, exp.Identifier):
            spelled = names.get(col.this.this.lower())
            read = _read(col.this)
            if spelled is not None and read != spelled and read not in outputs:
                raise UndefinedColumn(f'column "{read}" does not exist', hint=_hint(spelled))
    return tree


def _relation(
    ident: exp.Identifier, names: Mapping[str, str], defined: set[str], what: str
) -> None:
    spelled = names.get(ident.this.lower())
    read = _read(ident)
    if spelled is not None and read != spelled and read not in defined:
        message = what if what.startswith("missing") else f"{what} does not exist"
        raise UndefinedTable(message, hint=_hint(spelled))
