"""``dpproxy schema check``: a schema file's problems, its TODOs, and (given the database's
table shapes) every table, column and type the data does not have. Pure: the caller reads the
file and the metadata."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpproxy.catalog.draft import TableShape, Todo, check_against, find_todos
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.errors import (
    DatatypeMismatch,
    DPProxyError,
    SchemaError,
    UndefinedColumn,
    UndefinedTable,
)

_MISMATCH: dict[str, type[DPProxyError]] = {
    "42P01": UndefinedTable,
    "42703": UndefinedColumn,
    "42804": DatatypeMismatch,
}


@dataclass(frozen=True, slots=True)
class SchemaReport:
    """What ``schema check`` prints about one file. ``problems`` make it fail (exit 1); each
    line names the file and the key path, and a mismatch with the data its SQLSTATE.
    ``todos`` are the comments the draft left (or the steward wrote) that still say TODO."""

    source: str
    catalog: Catalog | None
    problems: tuple[str, ...]
    todos: tuple[str, ...]
    codes: tuple[str, ...] = ()  # each problem's SQLSTATE (ZD004 unless the data disagrees)

    @property
    def ok(self) -> bool:
        return not self.problems

    def findings(self) -> list[tuple[str, dict[str, str]]]:
        """``("problem", {"sqlstate", "message"})`` then ``("todo", {"message"})`` pairs."""
        codes = self.codes or ("ZD004",) * len(self.problems)
        out = [
            ("problem", {"sqlstate": c, "message": p})
            for c, p in zip(codes, self.problems, strict=True)
        ]
        return out + [("todo", {"message": t}) for t in self.todos]

    def as_json(self) -> dict[str, object]:
        """The report for ``schema check --format json``: ``file``, ``ok``, ``problems`` as
        ``{"sqlstate", "message"}``, ``todos``, and the dataset, table and column counts of a
        schema that loads."""
        found = self.findings()
        doc: dict[str, object] = {
            "file": self.source,
            "ok": self.ok,
            "problems": [item for kind, item in found if kind == "problem"],
            "todos": list(self.todos),
        }
        if self.catalog is not None:
            doc["dataset"] = self.catalog.dataset
            doc["tables"] = len(self.catalog.tables)
            doc["columns"] = sum(len(t.columns) for t in self.catalog.tables)
        return doc


def check_schema(
    text: str, source: str, shapes: tuple[TableShape, ...] | None = None
) -> SchemaReport:
    """Check a schema's text; with ``shapes``, also against the database they describe."""
    todos = find_todos(text)
    blocking = {t.path for t in todos if t.blocking}
    problems = [f"{source}: line {t.line}: {t.path}: TODO: {t.text}" for t in todos if t.blocking]
    notes = tuple(
        f"{source}: line {t.line}: {t.path}: TODO: {t.text}" for t in todos if not t.blocking
    )
    catalog: Catalog | None = None
    try:
        catalog = parse_catalog(text, source=source)
    except SchemaError as err:
        # A TODO value is reported above, in words that say what to write there.
        problems += [p for p in err.problems if not _about(p, source, blocking)]
    if catalog is not None:  # the unit column needs no bounds: nobody sums it
        units = {f"tables.{t.name}.columns.{t.privacy_unit}" for t in catalog.tables}
        notes = tuple(n for n, t in zip(notes, _notes_of(todos), strict=True) if t not in units)
    codes = ["ZD004"] * len(problems)  # the schema itself: it cannot load as written
    if catalog is not None and shapes is not None:
        found = check_against(catalog, shapes)
        problems += [f"{source}: {m.path}: {m.text} (SQLSTATE {m.sqlstate})" for m in found]
        codes += [m.sqlstate for m in found]
        notes += tuple(f"{source}: {n}" for n in _null_promises(catalog, shapes))
        notes += tuple(f"{source}: {n}" for n in _key_promises(catalog, shapes))
    return SchemaReport(source, catalog, tuple(problems), notes, tuple(codes))


def _null_promises(catalog: Catalog, shapes: tuple[TableShape, ...]) -> list[str]:
    """Each column the schema says holds no NULL (no ``nullable: true``) that the database does
    not declare NOT NULL (a CSV or Parquet file never does): from the metadata only, a note,
    since only the data's documentation can say whether the promise holds. dpproxy trusts it:
    a COUNT(*) beside an AVG of such a column counted only the rows where it was not NULL
    (measured on a CSV whose column had 10% NULLs)."""
    found = {s.name.lower(): s for s in shapes}
    out = []
    for table in catalog.tables:
        shape = found.get(table.name.lower())
        for col in table.columns if shape is not None else ():
            actual = shape.column(col.name) if shape is not None else None
            if actual is not None and actual.nullable and not col.nullable:
                out.append(
                    f"tables.{table.name}.columns.{col.name}: TODO: nullable: the schema promises"
                    " no NULL, which the database does not declare (NOT NULL); dpproxy trusts it"
                    " (a NULL there can leave rows out of a COUNT(*) beside an AVG of the"
                    " column): keep it only if the data's documentation makes it, else write"
                    " nullable: true"
                )
    return out


def _key_promises(catalog: Catalog, shapes: tuple[TableShape, ...]) -> list[str]:
    """Each ``privacy_unit: {via: COLUMN, references: TABLE.KEY}`` whose KEY the database does
    not declare the single-column PRIMARY KEY of TABLE (``TableShape.primary_key``): a note,
    as for :func:`_null_promises`. dpproxy trusts KEY unique (schemas/README.md) and does not
    check it: a KEY value on two rows of TABLE, two units, gives each row that references it
    to both, and one person's rows then count in another's unit too."""
    found = {s.name.lower(): s for s in shapes}
    out = []
    for table in catalog.tables:
        via = table.unit_via
        shape = found.get(via.table.lower()) if via is not None else None
        if via is None or shape is None:
            continue
        if (shape.primary_key or "").lower() != via.key.lower():
            out.append(
                f"tables.{table.name}.privacy_unit: TODO: references: the schema assumes"
                f" {via.table}.{via.key} unique, which the database does not declare (a"
                f" PRIMARY KEY on {via.key} alone); dpproxy trusts it (one {via.key} value on two"
                f" rows puts each {table.name} row that references it in both units): keep it"
                " only if the data's documentation makes it"
            )
    return out


def _notes_of(todos: tuple[Todo, ...]) -> list[str]:
    return [t.path for t in todos if not t.blocking]


def _about(problem: str, source: str, paths: set[str]) -> bool:
    return any(problem.startswith(f"{source}: {p}: ") for p in paths)


def check_schema_file(path: str, shapes: tuple[TableShape, ...] | None = None) -> SchemaReport:
    """:func:`check_schema` on a file; a file that cannot be read is one problem."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        code = "58P01" if isinstance(e, FileNotFoundError) else "58030"
        return SchemaReport(path, None, (f"{path}: {e.strerror}",), (), (code,))
    except UnicodeDecodeError as e:
        return SchemaReport(path, None, (f"{path}: byte {e.start}: not UTF-8",), (), ("ZD004",))
    return check_schema(text, path, shapes)


def pick_tables(
    shapes: tuple[TableShape, ...], wanted: tuple[str, ...], where: str
) -> tuple[TableShape, ...]:
    """The shapes named in ``wanted`` (all when empty); an unknown name is 42P01."""
    from dpproxy.errors import UndefinedTable

    if not shapes:
        raise UndefinedTable(
            f"{where} has no tables", hint="give a database with at least one table or view"
        )
    if not wanted:
        return shapes
    by_name = {s.name.lower(): s for s in shapes}
    missing = [w for w in wanted if w.lower() not in by_name]
    if missing:
        raise UndefinedTable(
            f'table "{missing[0]}" is not in {where}',
            hint="its tables: " + ", ".join(s.name for s in shapes),
        )
    return tuple(by_name[w.lower()] for w in wanted)


def _shell(word: object) -> str:
    """``word`` as one shell word (a glob or a path with a space quoted, a plain path as it is)."""
    import shlex

    return shlex.quote(str(word))


def fit_error(
    catalog: Catalog, shapes: tuple[TableShape, ...], database: str
) -> DPProxyError | None:
    """The error for a schema that does not fit the database ``shapes`` describe, or None.

    Its SQLSTATE and message are the first problem's (42P01 a missing table, 42703 a missing
    column, 42804 a column whose type is not the schema's: the rewritten SQL is total only on
    data of the declared types); ``problems`` lists every one, as ``schema check`` prints them.
    """
    found = check_against(catalog, shapes)
    if not found:
        return None
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    near = re.search(r'did you mean "[^"]*"\?', first.text)  # a name spelled otherwise
    err = _MISMATCH[first.sqlstate](
        f"the schema does not fit the data: {first.path}: {first.text}{more}",
        hint=(f"{near.group(0)} PostgreSQL compares names exactly; " if near else "")
        + f"`dpproxy schema check --database {_shell(database)} {_shell(catalog.source)}` "
        "lists every "
        "problem; fix the schema (or the data) so that they agree",
    )
    err.problems = tuple(  # type: ignore[attr-defined]
        f"{m.path}: {m.text} (SQLSTATE {m.sqlstate})" for m in found
    )
    return err
