"""Drafting a privacy schema from table metadata, and checking a schema against the data's
shapes (dpproxy/catalog/draft.py, dpproxy/catalog/check.py): pure, no database."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dpproxy.catalog.check import check_schema
from dpproxy.catalog.draft import (
    ColumnShape,
    TableShape,
    check_against,
    draft_schema,
    find_todos,
    schema_type,
)
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import ColumnType
from dpproxy.values import Cost

SCHEMAS_README = " ".join(
    (Path(__file__).resolve().parents[2] / "schemas" / "README.md").read_text().split()
)

PEOPLE = TableShape(
    "people",
    (
        ColumnShape("id", "BIGINT"),
        ColumnShape("age", "BIGINT"),
        ColumnShape("sex", "VARCHAR"),
        ColumnShape("income", "DOUBLE"),
        ColumnShape("member", "BOOLEAN", nullable=False),
        ColumnShape("born", "DATE"),
        ColumnShape("seen", "TIMESTAMP"),
    ),
)
KEYED = TableShape(
    "visits",
    (ColumnShape("visit_id", "INTEGER", nullable=False), ColumnShape("cost", "DECIMAL(10,2)")),
    primary_key="visit_id",
)


@pytest.mark.parametrize(
    ("sql_type", "expected"),
    [
        ("BIGINT", ColumnType.INTEGER),
        ("integer", ColumnType.INTEGER),
        ("SMALLINT", ColumnType.INTEGER),
        ("UBIGINT", ColumnType.INTEGER),
        ("HUGEINT", None),  # DuckDB casts it to narrower types to compare (draft.py)
        ("UHUGEINT", None),
        ("DECIMAL(38,18)", ColumnType.FLOAT),
        ("DECIMAL(20,0)", ColumnType.INTEGER),
        ("DECIMAL(38,0)", None),
        ("DECIMAL(38,37)", None),
        ("DECIMAL(21,0)", None),
        ("numeric(38,0)", ColumnType.INTEGER),  # PostgreSQL compares numeric exactly
        ("DECIMAL(18,0)", ColumnType.INTEGER),
        ("numeric(10, 2)", ColumnType.FLOAT),
        ("numeric(3,-2)", ColumnType.INTEGER),
        ("numeric(38,0)", ColumnType.INTEGER),
        ("numeric(50,37)", ColumnType.FLOAT),
        # beyond a double's range (PostgreSQL raises converting them): no schema type
        ("numeric", None),
        ("numeric(309,0)", None),
        ("numeric(1000,500)", None),
        ("numeric(400,308)", None),
        ("numeric(39,0)", None),  # beyond REAL's range, which PostgreSQL may unify it with
        ("numeric(50,38)", None),
        ("numeric(3,-400)", None),
        ("DOUBLE", ColumnType.FLOAT),
        ("double precision", ColumnType.FLOAT),
        ("REAL", ColumnType.FLOAT),
        ("VARCHAR", ColumnType.TEXT),
        ("character varying(20)", ColumnType.TEXT),
        ("text", ColumnType.TEXT),
        ("BOOLEAN", ColumnType.BOOLEAN),
        ("DATE", ColumnType.DATE),
        ("TIMESTAMP", None),
        ("BLOB", None),
        ("INTEGER[]", None),
        ("STRUCT(a INTEGER)", None),
    ],
)
def test_schema_type_of_sql_types(sql_type: str, expected: ColumnType | None) -> None:
    assert schema_type(sql_type) is expected


def test_a_draft_without_a_primary_key_marks_the_unit_todo_and_loads_once_it_is_named() -> None:
    text = draft_schema("people", (PEOPLE,), source="people.csv")
    assert "privacy_unit: TODO" in text
    assert "max_rows_per_unit" not in text.replace("# TODO max_rows_per_unit", "")
    # No value is ever taken from the data: no bounds, no domains but the boolean's.
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "lower" not in code and "upper" not in code
    assert text.count("domain:") == text.count("domain: [true, false]") + text.count(
        "# TODO domain"
    )
    report = check_schema(text, "people.yaml")
    assert not report.ok
    assert report.problems == (
        "people.yaml: line 13: tables.people.privacy_unit: TODO: the column naming one person "
        "(the protected individual)",
    )
    fixed = text.replace("privacy_unit: TODO", "privacy_unit: id")
    catalog = parse_catalog(fixed, source="people.yaml")
    table = catalog.tables[0]
    assert table.privacy_unit == "id"
    assert [c.name for c in table.columns] == ["id", "age", "sex", "income", "member", "born"]
    types = {c.name: c.type for c in table.columns}
    assert types == {
        "id": ColumnType.INTEGER,
        "age": ColumnType.INTEGER,
        "sex": ColumnType.TEXT,
        "income": ColumnType.FLOAT,
        "member": ColumnType.BOOLEAN,
        "born": ColumnType.DATE,
    }
    nullable = {c.name: c.nullable for c in table.columns}
    assert nullable["member"] is False and nullable["age"] is True
    assert table.column("member").domain == (True, False)  # type: ignore[union-attr]
    assert all(not c.bounded for c in table.columns)
    assert "# seen: left out, its type TIMESTAMP has no schema type" in text


def test_the_todos_are_listed_with_their_key_paths() -> None:
    text = draft_schema("people", (PEOPLE,), source="people.csv")
    todos = find_todos(text)
    assert [(t.path, t.blocking) for t in todos] == [
        ("tables.people.privacy_unit", True),
        ("tables.people", False),  # max_rows_per_unit
        ("tables.people.columns.id", False),
        ("tables.people.columns.age", False),
        ("tables.people.columns.sex", False),
        ("tables.people.columns.income", False),
    ]
    assert todos[3].text == "lower, upper: public bounds (SUM and AVG need them)"
    assert todos[4].text == "domain: the public list of values, if any"
    # A TODO the steward resolves by editing the line disappears from the list.
    done = text.replace(
        "age: {type: integer, nullable: true}  # TODO lower, upper: public bounds (SUM and AVG "
        "need them)",
        "age: {type: integer, nullable: true, lower: 0, upper: 120}",
    )
    assert "tables.people.columns.age" not in {t.path for t in find_todos(done)}


def test_a_primary_key_becomes_the_unit_with_one_row_per_unit() -> None:
    text = draft_schema("clinic", (KEYED,), source="clinic.duckdb")
    catalog = parse_catalog(text, source="clinic.yaml")
    visits = catalog.table("visits")
    assert visits is not None
    assert visits.privacy_unit == "visit_id"
    assert visits.bound.max_rows == 1
    assert [c.type for c in visits.columns] == [ColumnType.INTEGER, ColumnType.FLOAT]
    assert visits.column("visit_id").nullable is False  # type: ignore[union-attr]
    assert [t.path for t in find_todos(text)] == ["tables.visits.columns.cost"]
    assert check_schema(text, "clinic.yaml", (KEYED,)).ok


SCHEMA = """
version: 1
dataset: people
tables:
  people:
    privacy_unit: id
    columns:
      id: integer
      age: {type: integer, lower: 0, upper: 120}
      income: integer
      sex: text
      zip: text
      score: float
  visits:
    privacy_unit: id
    columns:
      id: integer
"""
DATA = (
    TableShape(
        "People",
        (
            ColumnShape("ID", "BIGINT"),
            ColumnShape("age", "BIGINT"),
            ColumnShape("income", "DOUBLE"),
            ColumnShape("sex", "BIGINT"),
            ColumnShape("score", "INTEGER"),
        ),
    ),
)


def test_every_mismatch_with_the_data_is_reported_at_once_with_its_sqlstate() -> None:
    catalog = parse_catalog(SCHEMA, source="s.yaml")
    found = check_against(catalog, DATA)
    assert [(m.sqlstate, m.path) for m in found] == [
        ("42804", "tables.people.columns.income.type"),
        ("42804", "tables.people.columns.sex.type"),
        ("42703", "tables.people.columns.zip"),
        ("42P01", "tables.visits"),
    ]
    assert found[0].text == (
        "the schema says integer but the database column is DOUBLE; write type: float"
    )
    assert (
        found[1].text
        == "the schema says text but the database column is BIGINT; write type: integer"
    )
    # float over an integer column fits; names match regardless of case.
    report = check_schema(SCHEMA, "s.yaml", DATA)
    assert not report.ok
    assert report.problems[0] == (
        "s.yaml: tables.people.columns.income.type: the schema says integer but the database "
        "column is DOUBLE; write type: float (SQLSTATE 42804)"
    )
    assert len(report.problems) == 4


def test_schema_problems_and_todo_values_are_reported_together() -> None:
    text = SCHEMA.replace(
        "privacy_unit: id\n    columns:\n      id: integer\n      age",
        ("privacy_unit: TODO\n    columns:\n      id: integer\n      age"),
    ).replace("upper: 120", "upper: -1")
    report = check_schema(text, "s.yaml", DATA)
    assert report.problems[0].startswith("s.yaml: line 6: tables.people.privacy_unit: TODO")
    assert "s.yaml: tables.people.columns.age.upper: must be >= lower (0)" in report.problems
    # The loader's own words about the TODO value are not repeated.
    assert not any("'TODO' is not a column" in p for p in report.problems)


def test_a_column_whose_name_is_not_an_identifier_is_left_out_with_a_note() -> None:
    shape = TableShape("t", (ColumnShape("first name", "VARCHAR"), ColumnShape("Age", "BIGINT")))
    text = draft_schema("t", (shape,), source="t.csv")
    assert '# "first name": left out, not a plain identifier' in text
    catalog = parse_catalog(text.replace("privacy_unit: TODO", "privacy_unit: Age"))
    assert [c.name for c in catalog.tables[0].columns] == ["Age"]


def test_the_drafts_policy_is_the_one_schemas_readme_states() -> None:
    assert (
        "The draft's privacy policy is ε = 1 and δ = 10⁻⁶ per query, and a budget of ε = 10 and "
        "δ = 10⁻⁵ per analyst." in SCHEMAS_README
    )
    text = draft_schema("t", (KEYED,), source="t.duckdb")
    policy = parse_catalog(text).policy
    assert policy.epsilon == 1
    assert policy.delta == Fraction(1.0e-6)  # a YAML float: its exact binary value
    assert policy.budget == Cost(Fraction(10), Fraction(1.0e-5))


def test_schemas_readme_describes_what_the_draft_and_the_check_do() -> None:
    for claim in (
        "A single-column primary key becomes the `privacy_unit`, with `max_rows_per_unit: 1`; "
        "a CSV or Parquet file has none, but its DuckDB copy can",
        "A boolean column gets `domain: [true, false]`, which its type implies.",
        "`schema check` lists each one still in the file, with its line and key path, without "
        "failing.",
        "`float` over an integer column fits",
    ):
        assert claim in SCHEMAS_README, claim
    # each claim, against the code (the CLI side is in tests/integration/test_own_data.py)
    assert "privacy_unit: visit_id" in draft_schema("c", (KEYED,), source="c")
    assert "max_rows_per_unit: 1" in draft_schema("c", (KEYED,), source="c")
    boolean = TableShape(
        "b", (ColumnShape("k", "INTEGER", False), ColumnShape("f", "BOOLEAN")), "k"
    )
    assert "f: {type: boolean, nullable: true, domain: [true, false]}" in draft_schema(
        "b", (boolean,), source="b"
    )
    text = draft_schema("people", (PEOPLE,), source="p").replace(
        "privacy_unit: TODO", "privacy_unit: id"
    )
    report = check_schema(text, "p.yaml")
    assert report.ok and len(report.todos) == 4  # max_rows, age, sex, income (not the unit id)
    assert report.todos[1] == (
        "p.yaml: line 17: tables.people.columns.age: TODO: lower, upper: public bounds (SUM and "
        "AVG need them)"
    )
    floats = parse_catalog(SCHEMA.replace("income: integer", "income: float"))
    assert not [m for m in check_against(floats, DATA) if "income" in m.path]


REFERENCES = """
version: 1
dataset: shop
privacy: {epsilon: 1}
tables:
  orders:
    privacy_unit: o_custkey
    columns:
      o_orderkey: integer
      o_custkey: integer
  lineitem:
    privacy_unit: {via: l_orderkey, references: orders.o_orderkey}
    columns:
      l_orderkey: integer
"""


@pytest.mark.parametrize(
    ("key", "noted"),
    [("o_orderkey", False), ("O_ORDERKEY", False), (None, True), ("o_custkey", True)],
)
def test_a_reference_key_the_database_does_not_declare_unique_is_noted(
    key: str | None, noted: bool
) -> None:
    """``references: orders.o_orderkey`` assumes the key unique, which dpproxy does not check:
    ``schema check --database`` notes it (a TODO, not a problem) unless the database declares
    it orders' single-column PRIMARY KEY."""
    columns = (
        ColumnShape("o_orderkey", "BIGINT", False),
        ColumnShape("o_custkey", "BIGINT", False),
    )
    shapes = (
        TableShape("orders", columns, key),
        TableShape("lineitem", (ColumnShape("l_orderkey", "BIGINT", False),)),
    )
    report = check_schema(REFERENCES, "shop.yaml", shapes)
    assert report.ok
    notes = [t for t in report.todos if "privacy_unit: TODO: references" in t]
    assert bool(notes) is noted
    if noted:
        assert notes == [
            "shop.yaml: tables.lineitem.privacy_unit: TODO: references: the schema assumes "
            "orders.o_orderkey unique, which the database does not declare (a PRIMARY KEY on "
            "o_orderkey alone); dpproxy trusts it (one o_orderkey value on two rows puts each "
            "lineitem row that references it in both units): keep it only if the data's "
            "documentation makes it"
        ]


def test_wide_numbers_are_drafted_as_floats_and_the_unit_keeps_no_todo() -> None:
    """A wide number is a float read as a double (its type said beside it); a wide unit is
    left out; a text unit named with ``--unit`` gets no TODO (no domain for a unit)."""
    shape = TableShape(
        "ledger",
        (
            ColumnShape("code", "VARCHAR"),
            ColumnShape("h", "HUGEINT"),
            ColumnShape("n", "numeric"),
            ColumnShape("d", "DECIMAL(38,2)"),
            ColumnShape("k", "UHUGEINT"),
        ),
        None,
    )
    text = draft_schema("l", (shape,), source="l.duckdb", units={"ledger": "code"})
    lines = {line.strip().split(":")[0].strip("# "): line.strip() for line in text.splitlines()}
    assert lines["code"] == "code: {type: text, nullable: true}"
    for name, sql_type in (("h", "HUGEINT"), ("n", "numeric"), ("d", "DECIMAL(38,2)")):
        assert lines[name].startswith(f"{name}: {{type: float, nullable: true}}  # TODO lower")
        assert lines[name].endswith(f"({sql_type}: read as a double)")
    wide_unit = draft_schema("l", (shape,), source="l.duckdb", units={"ledger": "k"})
    assert "# k: left out, its type UHUGEINT is too wide to name a unit exactly" in wide_unit
