"""Load and validate a privacy schema (YAML) into a frozen :class:`Catalog`.

Every problem is collected with its file and key path (``adult.yaml: tables.adult.columns.age.upper:
must be >= lower``) and reported together; a schema with any problem never loads.
The format is documented in ``schemas/README.md``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import yaml

from dpproxy.catalog.model import (
    Catalog,
    Column,
    ColumnType,
    ContributionBound,
    MechanismKind,
    Neighbouring,
    PrivacyPolicy,
    Table,
    UnitPath,
)
from dpproxy.errors import DPProxyError, SchemaError
from dpproxy.values import Cost, check_privacy_parameters

_TOP_KEYS = {"version", "dataset", "privacy", "tables"}
_PRIVACY_KEYS = {
    "neighbouring",
    "epsilon",
    "delta",
    "mechanism",
    "budget",
    "selection_share",
    "truncation_share",
    "truncation_coverage",
}
_TABLE_KEYS = {
    "private",
    "privacy_unit",
    "max_rows_per_unit",
    "max_groups_per_unit",
    "max_rows_per_group_per_unit",
    "unit_unique",
    "columns",
    "description",
    "public_rows",
    "public_max_rows",
}
_COLUMN_KEYS = {
    "type",
    "lower",
    "upper",
    "nullable",
    "domain",
    "description",
    "max_elements",
    "max_length",
}
MAX_LENGTH = 10**9  # characters: PostgreSQL's text holds at most 1 GB


# libyaml's parser when PyYAML was built with it (the wheels are): the pure-Python one takes
# ~20 ms of CPU for the demo's schema, a twentieth of a small ``dpproxy query``. Both parse the
# same YAML 1.1 into the same events; the constructor (safe types only) is the same class.
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return cast(dict[Any, Any], loader.construct_mapping(node))  # a dict already: no copy


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


class _Problems:
    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []

    def add(self, path: str, text: str) -> None:
        self.items.append(f"{self.source}: {path}: {text}")


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a schema file; raise :class:`SchemaError` listing every problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaError(
            f"cannot read schema file {p}: {e.strerror}",
            (f"{p}: {e.strerror}",),
            hint="pass --schema with the path of a privacy schema (see schemas/README.md)",
        ) from e
    except UnicodeDecodeError as e:
        raise SchemaError(
            f"schema file {p} is not UTF-8 text", (f"{p}: byte {e.start}: not UTF-8",)
        ) from e
    return parse_catalog(text, source=str(p))


def parse_catalog(text: str, *, source: str = "<string>") -> Catalog:
    """Validate schema text; see :func:`load_catalog`."""
    try:
        doc = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "document"
        raise SchemaError(
            "the schema is not valid YAML", (f"{source}: {where}: {getattr(e, 'problem', e)}",)
        ) from e
    probs = _Problems(source)
    catalog = _catalog(doc, probs)
    if probs.items or catalog is None:
        n = len(probs.items)
        raise SchemaError(
            f"the privacy schema {source} has {n} problem{'s' if n != 1 else ''}",
            tuple(probs.items),
            hint="; ".join(probs.items[:3]),
        )
    return catalog


def _catalog(doc: Any, probs: _Problems) -> Catalog | None:
    if not isinstance(doc, Mapping):
        probs.add("<root>", "must be a mapping with keys dataset, privacy, tables")
        return None
    _unknown(doc, _TOP_KEYS, "", probs)
    version = doc.get("version", 1)
    if version != 1:
        probs.add("version", f"unsupported schema version {version!r} (this dpproxy reads 1)")
    dataset = doc.get("dataset")
    if not isinstance(dataset, str) or not dataset:
        probs.add("dataset", "required: a non-empty name for the dataset")
        dataset = "?"
    policy = _policy(doc.get("privacy", {}), probs)
    tables_doc = doc.get("tables")
    tables: list[Table] = []
    for name, tdoc in _named_entries(tables_doc, "tables", "table", probs):
        t = _table(name, tdoc, probs)
        if t is not None:
            tables.append(t)
    _check_paths(tables, probs)
    if probs.items:
        return None
    return Catalog(dataset=dataset, tables=tuple(tables), policy=policy, source=probs.source)


def _check_paths(tables: list[Table], probs: _Problems) -> None:
    """``privacy_unit: {via, references}`` must lead, without a cycle, to a table whose unit is
    one of its own columns."""
    by_name = {t.name.lower(): t for t in tables}
    for t in tables:
        seen = {t.name.lower()}
        cur = t
        while cur.unit_via is not None:
            path = f"tables.{cur.name}.privacy_unit.references"
            target = by_name.get(cur.unit_via.table.lower())
            if target is None:
                probs.add(path, f"table {cur.unit_via.table!r} is not in the schema")
                break
            if not target.private:
                probs.add(path, f"table {target.name!r} is public: it has no privacy unit")
                break
            if target.column(cur.unit_via.key) is None:
                probs.add(path, f"{cur.unit_via.key!r} is not a column of {target.name!r}")
                break
            if target.name.lower() in seen:
                probs.add(path, "the references form a cycle: no table holds the unit itself")
                break
            seen.add(target.name.lower())
            cur = target


def _named_entries(doc: Any, path: str, kind: str, probs: _Problems) -> list[tuple[str, Any]]:
    """The (name, definition) pairs of a non-empty mapping with identifier names, distinct
    regardless of case; every violation is reported at ``path.name``."""
    if not isinstance(doc, Mapping) or not doc:
        probs.add(path, f"required: a mapping of {kind} name to {kind} definition")
        return []
    entries: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for name, sub in doc.items():
        if not isinstance(name, str) or not name.isidentifier():
            probs.add(f"{path}.{name}", f"{kind} names must be plain identifiers")
            continue
        if name.lower() in seen:
            probs.add(f"{path}.{name}", f"duplicate {kind} name (names are case-insensitive)")
        seen.add(name.lower())
        entries.append((name, sub))
    return entries


def _unknown(doc: Mapping[str, Any], allowed: set[str], path: str, probs: _Problems) -> None:
    for key in doc:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            probs.add(f"{path}{key}", f"unknown key (known keys: {known})")


def _number(value: Any, path: str, probs: _Problems) -> Fraction | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        probs.add(path, f"must be a number, got {value!r}")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        probs.add(path, "must be finite")
        return None
    try:
        return Fraction(value)
    except (ValueError, ZeroDivisionError):
        probs.add(path, f"must be a number, got {value!r}")
        return None


def _positive_int(value: Any, path: str, probs: _Problems) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        probs.add(path, f"must be a positive integer, got {value!r}")
        return None
    return value


def _policy(doc: Any, probs: _Problems) -> PrivacyPolicy:
    if not isinstance(doc, Mapping):
        probs.add("privacy", "must be a mapping")
        return PrivacyPolicy()
    _unknown(doc, _PRIVACY_KEYS, "privacy.", probs)
    default = PrivacyPolicy()
    rel = doc.get("neighbouring", "add_remove")
    try:
        neighbouring = Neighbouring(rel)
    except ValueError:
        probs.add("privacy.neighbouring", f"must be add_remove or substitute, got {rel!r}")
        neighbouring = default.neighbouring
    mech = doc.get("mechanism", "laplace")
    try:
        mechanism = MechanismKind(mech)
    except ValueError:
        probs.add("privacy.mechanism", f"must be laplace or gaussian, got {mech!r}")
        mechanism = default.mechanism
    eps = _number(doc.get("epsilon", 1), "privacy.epsilon", probs)
    if eps is not None and eps <= 0:
        probs.add("privacy.epsilon", "must be positive")
    delta = _number(doc.get("delta", 0), "privacy.delta", probs)
    if delta is not None and not 0 <= delta < 1:
        probs.add("privacy.delta", "must be in [0, 1)")
    elif eps is not None and eps > 0 and delta is not None:
        try:  # the default (ε, δ) of every query: within what the planner plans with
            check_privacy_parameters(eps, delta)
        except DPProxyError as e:
            probs.add("privacy.epsilon" if "ε" in e.message else "privacy.delta", e.message)
    share = _number(doc.get("selection_share", "1/2"), "privacy.selection_share", probs)
    if share is not None and not 0 < share < 1:
        probs.add("privacy.selection_share", "must be strictly between 0 and 1")
    t_share = _number(doc.get("truncation_share", "1/10"), "privacy.truncation_share", probs)
    if t_share is not None and not 0 < t_share < 1:
        probs.add("privacy.truncation_share", "must be strictly between 0 and 1")
    coverage = _number(
        doc.get("truncation_coverage", "999/1000"), "privacy.truncation_coverage", probs
    )
    if coverage is not None and not 0 < coverage < 1:
        probs.add("privacy.truncation_coverage", "must be strictly between 0 and 1")
    budget = default.budget
    bdoc = doc.get("budget", {})
    if not isinstance(bdoc, Mapping):
        probs.add("privacy.budget", "must be a mapping with epsilon and delta")
    else:
        _unknown(bdoc, {"epsilon", "delta"}, "privacy.budget.", probs)
        beps = _number(bdoc.get("epsilon", 10), "privacy.budget.epsilon", probs)
        bdelta = _number(bdoc.get("delta", "1/100000"), "privacy.budget.delta", probs)
        ok = beps is not None and bdelta is not None
        if beps is not None and beps <= 0:
            probs.add("privacy.budget.epsilon", "must be positive")
            ok = False
        if bdelta is not None and not 0 <= bdelta < 1:
            probs.add("privacy.budget.delta", "must be in [0, 1)")
            ok = False
        if ok:
            assert beps is not None and bdelta is not None
            budget = Cost(beps, bdelta)
    if mechanism is MechanismKind.GAUSSIAN and delta == 0:
        probs.add("privacy.delta", "the gaussian mechanism needs a positive default delta")
    if probs.items:
        return default
    assert eps is not None and delta is not None and share is not None
    assert t_share is not None and coverage is not None
    return PrivacyPolicy(neighbouring, eps, delta, mechanism, budget, share, t_share, coverage)


def _table(name: str, doc: Any, probs: _Problems) -> Table | None:
    path = f"tables.{name}"
    if not isinstance(doc, Mapping):
        probs.add(path, "must be a mapping")
        return None
    _unknown(doc, _TABLE_KEYS, f"{path}.", probs)
    private = doc.get("private", True)
    if not isinstance(private, bool):
        probs.add(f"{path}.private", "must be true or false")
        private = True
    cols_doc = doc.get("columns")
    columns: list[Column] = []
    for cname, cdoc in _named_entries(cols_doc, f"{path}.columns", "column", probs):
        c = _column(cname, cdoc, f"{path}.columns.{cname}", probs)
        if c is not None:
            columns.append(c)
    unit = doc.get("privacy_unit")
    max_rows = _positive_int(doc.get("max_rows_per_unit"), f"{path}.max_rows_per_unit", probs)
    max_groups = _positive_int(doc.get("max_groups_per_unit"), f"{path}.max_groups_per_unit", probs)
    per_group = _positive_int(
        doc.get("max_rows_per_group_per_unit"), f"{path}.max_rows_per_group_per_unit", probs
    )
    via: UnitPath | None = None
    if private:
        if isinstance(unit, Mapping):
            via = _unit_path(unit, f"{path}.privacy_unit", cols_doc, probs)
            unit = None
        elif not isinstance(unit, str) or not unit:
            probs.add(
                f"{path}.privacy_unit",
                "required for a private table: the column identifying the protected individual, "
                "or {via: COLUMN, references: TABLE.KEY} when rows belong to another table's unit",
            )
        elif isinstance(cols_doc, Mapping) and unit not in cols_doc:
            probs.add(f"{path}.privacy_unit", f"{unit!r} is not a column of the table")
        # Without max_rows_per_unit each query chooses its bound with DP (planning/truncation).
        if (max_groups is None) != (per_group is None):
            probs.add(
                f"{path}.max_groups_per_unit",
                "max_groups_per_unit and max_rows_per_group_per_unit go together",
            )
    elif unit is not None or max_rows is not None or max_groups is not None or per_group:
        probs.add(path, "a public table has no privacy_unit or contribution bounds")
    unit_unique = doc.get("unit_unique", False)
    if not isinstance(unit_unique, bool):
        probs.add(f"{path}.unit_unique", "must be true or false")
    elif unit_unique and not (private and isinstance(unit, str)):
        probs.add(f"{path}.unit_unique", "needs a private table with a privacy_unit column")
    public_rows = _positive_int(doc.get("public_rows"), f"{path}.public_rows", probs)
    public_max = _positive_int(doc.get("public_max_rows"), f"{path}.public_max_rows", probs)
    if public_max is not None and public_rows is not None and public_rows > public_max:
        probs.add(
            f"{path}.public_rows",
            f"public_rows ({public_rows}) is above public_max_rows ({public_max})",
        )
    if probs.items:
        return None
    return Table(
        name=name,
        private=private,
        columns=tuple(columns),
        privacy_unit=unit if private and isinstance(unit, str) else None,
        bound=ContributionBound(max_rows, max_groups, per_group),
        public_rows=public_rows,
        public_max_rows=public_max,
        unit_via=via,
        unit_declared_unique=unit_unique is True,
    )


def _unit_path(doc: Mapping[str, Any], path: str, cols: Any, probs: _Problems) -> UnitPath | None:
    _unknown(doc, {"via", "references"}, f"{path}.", probs)
    column, target = doc.get("via"), doc.get("references")
    if not isinstance(column, str) or not column:
        probs.add(f"{path}.via", "required: the column that references the unit's table")
        return None
    if isinstance(cols, Mapping) and column not in cols:
        probs.add(f"{path}.via", f"{column!r} is not a column of the table")
    if not isinstance(target, str) or target.count(".") != 1 or "" in target.split("."):
        probs.add(f"{path}.references", "required: TABLE.KEY, a unique key of a private table")
        return None
    table, key = target.split(".")
    return UnitPath(column, table, key)


def _column(name: str, doc: Any, path: str, probs: _Problems) -> Column | None:
    if isinstance(doc, str):
        doc = {"type": doc}
    if not isinstance(doc, Mapping):
        probs.add(path, "must be a mapping (or a type name)")
        return None
    _unknown(doc, _COLUMN_KEYS, f"{path}.", probs)
    tname = doc.get("type")
    try:
        ctype = ColumnType(tname)
    except ValueError:
        kinds = ", ".join(t.value for t in ColumnType)
        probs.add(f"{path}.type", f"required: one of {kinds}; got {tname!r}")
        return None
    lower = upper = None
    if "lower" in doc or "upper" in doc:
        if not ctype.numeric:
            probs.add(path, f"bounds apply only to numeric columns, not {ctype.value}")
        else:
            lower = _number(doc.get("lower"), f"{path}.lower", probs) if "lower" in doc else None
            upper = _number(doc.get("upper"), f"{path}.upper", probs) if "upper" in doc else None
            if ("lower" in doc) != ("upper" in doc):
                probs.add(path, "give both lower and upper, or neither")
            if lower is not None and upper is not None and lower > upper:
                probs.add(f"{path}.upper", f"must be >= lower ({lower})")
            if ctype is ColumnType.INTEGER:
                for key, v in (("lower", lower), ("upper", upper)):
                    if v is not None and v.denominator != 1:
                        probs.add(f"{path}.{key}", "an integer column needs integer bounds")
    nullable = doc.get("nullable", False)
    if not isinstance(nullable, bool):
        probs.add(f"{path}.nullable", "must be true or false")
        nullable = False
    domain = None
    if "domain" in doc:
        d = doc["domain"]
        if not isinstance(d, list) or not d:
            probs.add(f"{path}.domain", "must be a non-empty list of values")
        else:
            domain = tuple(d)
            for i, v in enumerate(domain):
                if not _domain_value_ok(v, ctype):
                    probs.add(f"{path}.domain[{i}]", f"{v!r} is not a {ctype.value} value")
            if ctype is ColumnType.DATE:
                # Quoted ISO dates as dates: the database returns date values, and a key is
                # matched to its domain value by equality (a string would never match).
                domain = tuple(_as_date(v) for v in domain)
            if len({_domain_key(v) for v in domain}) != len(domain):
                probs.add(f"{path}.domain", "values must be distinct")
    most = _positive_int(doc.get("max_elements"), f"{path}.max_elements", probs)
    if most is not None and ctype is not ColumnType.TEXT:
        probs.add(f"{path}.max_elements", "applies to text columns (split by UNNEST) only")
    longest = _positive_int(doc.get("max_length"), f"{path}.max_length", probs)
    if longest is not None and ctype is not ColumnType.TEXT:
        probs.add(f"{path}.max_length", "applies to text columns only")
    if longest is not None and longest > MAX_LENGTH:
        probs.add(f"{path}.max_length", f"must be at most {MAX_LENGTH}")
    return Column(name, ctype, lower, upper, nullable, domain, most, longest)


def _domain_value_ok(v: object, ctype: ColumnType) -> bool:
    if ctype is ColumnType.TEXT:
        return isinstance(v, str)
    if ctype is ColumnType.INTEGER:
        return isinstance(v, int) and not isinstance(v, bool)
    if ctype is ColumnType.FLOAT:
        return isinstance(v, int | float) and not isinstance(v, bool)
    if ctype is ColumnType.BOOLEAN:
        return isinstance(v, bool)
    if isinstance(v, datetime.date):
        return True
    if isinstance(v, str):
        try:
            datetime.date.fromisoformat(v)
        except ValueError:
            return False
        return True
    return False


def _as_date(v: object) -> object:
    """An ISO date string as a date; anything else (a date, or a bad value already reported
    by :func:`_domain_value_ok`) as it is."""
    if isinstance(v, str):
        try:
            return datetime.date.fromisoformat(v)
        except ValueError:
            return v
    return v


def _domain_key(v: object) -> object:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return (type(v).__name__, v)
    return ("number", Fraction(v))
