"""``dpproxy schema check``: a schema file's problems, its TODOs, and (given the database's
table shapes) every table, column and type the data does not have. Pure: the caller reads the
file and the metadata."""

from __future__ import annotations

from dataclasses import dataclass

from dpproxy.catalog.draft import TableShape, Todo, check_against, find_todos
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Catalog
from dpproxy.errors import SchemaError


@dataclass(frozen=True, slots=True)
class SchemaReport:
    """What ``schema check`` prints about one file. ``problems`` make it fail (exit 1); each
    line names the file and the key path, and a mismatch with the data its SQLSTATE.
    ``todos`` are the comments the draft left (or the steward wrote) that still say TODO."""

    source: str
    catalog: Catalog | None
    problems: tuple[str, ...]
    todos: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


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
    if catalog is not None and shapes is not None:
        problems += [
            f"{source}: {m.path}: {m.text} (SQLSTATE {m.sqlstate})"
            for m in check_against(catalog, shapes)
        ]
    return SchemaReport(source, catalog, tuple(problems), notes)


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
        return SchemaReport(path, None, (f"{path}: {e.strerror}",), ())
    except UnicodeDecodeError as e:
        return SchemaReport(path, None, (f"{path}: byte {e.start}: not UTF-8",), ())
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
