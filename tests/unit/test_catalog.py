"""The privacy-schema loader: valid schemas load into frozen objects, bad ones never load.

Every test writes a real YAML file and loads it with :func:`load_catalog`, then checks the
``file: key.path: issue`` lines of the :class:`SchemaError`.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from dpproxy.catalog.load import load_catalog, parse_catalog
from dpproxy.catalog.model import (
    Catalog,
    Column,
    ColumnType,
    ContributionBound,
    MechanismKind,
    Neighbouring,
    PrivacyPolicy,
    Table,
)
from dpproxy.errors import SchemaError
from dpproxy.values import Cost

REPO = Path(__file__).resolve().parents[2]

BASE: dict[str, Any] = {
    "version": 1,
    "dataset": "shop",
    "privacy": {
        "neighbouring": "add_remove",
        "epsilon": 1,
        "delta": "1e-6",
        "mechanism": "laplace",
        "budget": {"epsilon": 10, "delta": "1e-5"},
        "selection_share": 0.5,
    },
    "tables": {
        "people": {
            "private": True,
            "privacy_unit": "id",
            "max_rows_per_unit": 1,
            "columns": {
                "id": {"type": "integer"},
                "age": {"type": "integer", "lower": 0, "upper": 120},
                "sex": {"type": "text", "domain": ["F", "M"]},
            },
        },
    },
}

PEOPLE = "tables.people"
AGE = "tables.people.columns.age"


def write(tmp_path: Path, doc: Any, name: str = "schema.yaml") -> Path:
    """Write ``doc`` (a string, or data dumped as YAML) to a file and return its path."""
    path = tmp_path / name
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path) -> tuple[str, ...]:
    """Load ``path``, expecting a SchemaError, and return its problems."""
    with pytest.raises(SchemaError) as info:
        load_catalog(path)
    assert info.value.sqlstate == "ZD004"
    assert info.value.problems, "a SchemaError must list at least one problem"
    return info.value.problems


def assert_reports(problems: tuple[str, ...], path: Path, key: str) -> None:
    """Some problem is exactly about ``key`` in file ``path``."""
    prefix = f"{path}: {key}: "
    assert any(p.startswith(prefix) for p in problems), f"no {prefix!r} in {problems}"


def mutated(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    """A deep copy of ``BASE`` with ``change`` applied."""
    doc = copy.deepcopy(BASE)
    change(doc)
    return doc


def people(doc: dict[str, Any]) -> dict[str, Any]:
    """The ``people`` table of a schema document."""
    table: dict[str, Any] = doc["tables"]["people"]
    return table


def cols(doc: dict[str, Any]) -> dict[str, Any]:
    """The columns of the ``people`` table."""
    columns: dict[str, Any] = people(doc)["columns"]
    return columns


# ---------------------------------------------------------------------------- valid schemas


def test_valid_schema_loads_into_frozen_objects(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    cat = load_catalog(path)
    assert isinstance(cat, Catalog)
    assert cat.dataset == "shop"
    assert cat.source == str(path)
    assert cat.policy == PrivacyPolicy(
        neighbouring=Neighbouring.ADD_REMOVE,
        epsilon=Fraction(1),
        delta=Fraction(1, 10**6),
        mechanism=MechanismKind.LAPLACE,
        budget=Cost(Fraction(10), Fraction(1, 10**5)),
        selection_share=Fraction(1, 2),
    )
    assert cat.tables == (
        Table(
            name="people",
            private=True,
            columns=(
                Column("id", ColumnType.INTEGER),
                Column("age", ColumnType.INTEGER, Fraction(0), Fraction(120)),
                Column("sex", ColumnType.TEXT, domain=("F", "M")),
            ),
            privacy_unit="id",
            bound=ContributionBound(max_rows=1),
        ),
    )
    table = cat.table("PEOPLE")  # table lookup is case-insensitive
    assert table is not None and table.column("age") is not None
    age = table.column("age")
    assert age is not None and age.bounded and isinstance(age.lower, Fraction)
    assert cat.table("nobody") is None
    for obj, field in ((cat, "dataset"), (table, "name"), (age, "lower"), (cat.policy, "epsilon")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)
    assert isinstance(cat.tables, tuple) and isinstance(table.columns, tuple)
    assert isinstance(table.columns[2].domain, tuple)


def test_minimal_schema_gets_the_documented_defaults(tmp_path: Path) -> None:
    text = """
dataset: d
tables:
  t:
    privacy_unit: id
    max_rows_per_unit: 3
    columns:
      id: integer          # shorthand: a bare type name
      score: {type: float, lower: -1.5, upper: 2.5}
      ok: {type: boolean, nullable: true}
      day: date
"""
    cat = load_catalog(write(tmp_path, text))
    assert cat.policy == PrivacyPolicy()
    assert cat.policy.neighbouring is Neighbouring.ADD_REMOVE
    assert cat.policy.epsilon == 1 and cat.policy.delta == 0
    assert cat.policy.mechanism is MechanismKind.LAPLACE
    assert cat.policy.budget == Cost(Fraction(10), Fraction(1, 10**5))
    assert cat.policy.selection_share == Fraction(1, 2)
    (t,) = cat.tables
    assert t.private is True
    assert [c.type for c in t.columns] == [
        ColumnType.INTEGER,
        ColumnType.FLOAT,
        ColumnType.BOOLEAN,
        ColumnType.DATE,
    ]
    assert t.column("score") == Column("score", ColumnType.FLOAT, Fraction(-3, 2), Fraction(5, 2))
    assert t.column("ok") == Column("ok", ColumnType.BOOLEAN, nullable=True)
    assert t.bound == ContributionBound(max_rows=3)
    assert t.bound.rows_total() == 3


def test_group_bounds_public_tables_and_exact_numbers(tmp_path: Path) -> None:
    text = """
version: 1
dataset: d
privacy:
  neighbouring: substitute
  mechanism: gaussian
  epsilon: "1/3"        # strings are read exactly
  delta: "1e-7"
  budget: {epsilon: 3, delta: "1/1000"}
  selection_share: 0.25
tables:
  visits:
    privacy_unit: user_id
    max_groups_per_unit: 4
    max_rows_per_group_per_unit: 2
    columns:
      user_id: integer
      shop: {type: text, nullable: true, domain: [a, b]}
      n: {type: integer, domain: [1, 2, 3]}
  shops:
    private: false
    description: a public lookup table
    columns:
      shop: {type: text, description: the shop name}
"""
    cat = load_catalog(write(tmp_path, text))
    assert cat.policy.neighbouring is Neighbouring.SUBSTITUTE
    assert cat.policy.mechanism is MechanismKind.GAUSSIAN
    assert cat.policy.epsilon == Fraction(1, 3)
    assert cat.policy.delta == Fraction(1, 10**7)
    assert cat.policy.budget == Cost(Fraction(3), Fraction(1, 1000))
    assert cat.policy.selection_share == Fraction(1, 4)
    visits, shops = cat.tables
    assert visits.bound == ContributionBound(max_groups=4, max_rows_per_group=2)
    assert visits.bound.rows_total() == 2
    assert visits.column("shop") == Column(
        "shop", ColumnType.TEXT, nullable=True, domain=("a", "b")
    )
    assert visits.column("n") == Column("n", ColumnType.INTEGER, domain=(1, 2, 3))
    assert shops.private is False and shops.privacy_unit is None
    assert shops.bound == ContributionBound()


def test_parse_catalog_names_the_given_source() -> None:
    cat = parse_catalog(yaml.safe_dump(BASE), source="inline.yaml")
    assert cat.source == "inline.yaml"
    with pytest.raises(SchemaError) as info:
        parse_catalog("dataset: d\n", source="inline.yaml")
    assert info.value.problems == (
        "inline.yaml: tables: required: a mapping of table name to table definition",
    )


def test_the_demo_schema_loads(tmp_path: Path) -> None:
    cat = load_catalog(REPO / "schemas" / "adult.yaml")
    assert cat.dataset == "adult"
    table = cat.table("adult")
    assert table is not None and table.private and table.privacy_unit == "person_id"
    assert table.bound == ContributionBound(max_rows=1)
    assert len(table.columns) == 16
    assert {c.name for c in table.columns if c.nullable} == {
        "workclass",
        "occupation",
        "native_country",
    }
    for c in table.columns:
        if c.type is ColumnType.TEXT:
            assert c.domain, c.name
        elif c.name != "person_id":
            assert c.type is ColumnType.INTEGER and c.bounded, c.name


def test_the_readme_example_loads(tmp_path: Path) -> None:
    readme = (REPO / "schemas" / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL)
    assert blocks, "schemas/README.md has no yaml example"
    datasets = [load_catalog(write(tmp_path, block)).dataset for block in blocks]
    assert datasets[0] == "adult" and all(datasets)


# ---------------------------------------------------------------------------- bad documents


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param("dataset: [unclosed\n", "line 2", id="not-yaml-flow"),  # at end of input
        pytest.param("dataset: a: b\n", "line 1", id="not-yaml-colon"),
        pytest.param("dataset: d\n  tables: x\n bad", "line 2", id="not-yaml-indent"),
        pytest.param("- a\n- b\n", "<root>", id="a-list"),
        pytest.param("just a string\n", "<root>", id="a-scalar"),
        pytest.param("", "<root>", id="empty-file"),
        pytest.param("# only a comment\n", "<root>", id="only-comment"),
    ],
)
def test_documents_that_are_not_schema_mappings(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    assert_reports(problems_of(path), path, key)


@pytest.mark.parametrize(
    "name",
    ["missing.yaml", "a-directory"],
)
def test_unreadable_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name == "a-directory":
        path.mkdir()
    problems = problems_of(path)
    assert problems[0].startswith(f"{path}: ")


# ---------------------------------------------------------------------------- one problem each

# (id, change to BASE, key path that must be reported)
CASES: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    # top level
    ("missing-dataset", lambda d: d.pop("dataset"), "dataset"),
    ("empty-dataset", lambda d: d.update(dataset=""), "dataset"),
    ("dataset-not-string", lambda d: d.update(dataset=3), "dataset"),
    ("missing-tables", lambda d: d.pop("tables"), "tables"),
    ("empty-tables", lambda d: d.update(tables={}), "tables"),
    ("tables-a-list", lambda d: d.update(tables=["people"]), "tables"),
    ("unknown-top-key", lambda d: d.update(tabels={}), "tabels"),
    ("bad-version", lambda d: d.update(version=2), "version"),
    ("bad-table-name", lambda d: d["tables"].update({"my-table": people(d)}), "tables.my-table"),
    ("duplicate-table", lambda d: d["tables"].update(People=people(d)), "tables.People"),
    ("table-not-mapping", lambda d: d["tables"].update(people=["id"]), PEOPLE),
    # privacy
    ("privacy-not-mapping", lambda d: d.update(privacy="strict"), "privacy"),
    ("unknown-privacy-key", lambda d: d["privacy"].update(epsilom=1), "privacy.epsilom"),
    ("epsilon-zero", lambda d: d["privacy"].update(epsilon=0), "privacy.epsilon"),
    ("epsilon-negative", lambda d: d["privacy"].update(epsilon=-1), "privacy.epsilon"),
    ("epsilon-text", lambda d: d["privacy"].update(epsilon="lots"), "privacy.epsilon"),
    ("epsilon-bool", lambda d: d["privacy"].update(epsilon=True), "privacy.epsilon"),
    ("epsilon-inf", lambda d: d["privacy"].update(epsilon=float("inf")), "privacy.epsilon"),
    ("epsilon-list", lambda d: d["privacy"].update(epsilon=[1]), "privacy.epsilon"),
    ("epsilon-too-large", lambda d: d["privacy"].update(epsilon=5000), "privacy.epsilon"),
    ("epsilon-too-small", lambda d: d["privacy"].update(epsilon="1e-12"), "privacy.epsilon"),
    ("delta-too-small", lambda d: d["privacy"].update(delta="1e-305"), "privacy.delta"),
    ("delta-one", lambda d: d["privacy"].update(delta=1), "privacy.delta"),
    ("delta-negative", lambda d: d["privacy"].update(delta=-0.1), "privacy.delta"),
    ("delta-text", lambda d: d["privacy"].update(delta="tiny"), "privacy.delta"),
    ("neighbouring", lambda d: d["privacy"].update(neighbouring="bounded"), "privacy.neighbouring"),
    ("mechanism", lambda d: d["privacy"].update(mechanism="exponential"), "privacy.mechanism"),
    (
        "gaussian-delta-zero",
        lambda d: d["privacy"].update(mechanism="gaussian", delta=0),
        "privacy.delta",
    ),
    (
        "gaussian-delta-default",
        lambda d: (d["privacy"].pop("delta"), d["privacy"].update(mechanism="gaussian")),
        "privacy.delta",
    ),
    ("share-zero", lambda d: d["privacy"].update(selection_share=0), "privacy.selection_share"),
    ("share-one", lambda d: d["privacy"].update(selection_share=1), "privacy.selection_share"),
    ("budget-not-mapping", lambda d: d["privacy"].update(budget=10), "privacy.budget"),
    ("unknown-budget-key", lambda d: d["privacy"]["budget"].update(rho=1), "privacy.budget.rho"),
    (
        "budget-epsilon-zero",
        lambda d: d["privacy"]["budget"].update(epsilon=0),
        "privacy.budget.epsilon",
    ),
    (
        "budget-epsilon-text",
        lambda d: d["privacy"]["budget"].update(epsilon="all"),
        "privacy.budget.epsilon",
    ),
    ("budget-delta-one", lambda d: d["privacy"]["budget"].update(delta=1), "privacy.budget.delta"),
    # table
    ("unknown-table-key", lambda d: people(d).update(max_row=1), f"{PEOPLE}.max_row"),
    ("private-not-bool", lambda d: people(d).update(private="yes"), f"{PEOPLE}.private"),
    ("no-privacy-unit", lambda d: people(d).pop("privacy_unit"), f"{PEOPLE}.privacy_unit"),
    ("unit-not-string", lambda d: people(d).update(privacy_unit=1), f"{PEOPLE}.privacy_unit"),
    (
        "unit-not-a-column",
        lambda d: people(d).update(privacy_unit="user"),
        f"{PEOPLE}.privacy_unit",
    ),
    (
        "via-not-a-column",
        lambda d: people(d).update(privacy_unit={"via": "nope", "references": "people.age"}),
        f"{PEOPLE}.privacy_unit.via",
    ),
    (
        "via-unknown-table",
        lambda d: people(d).update(privacy_unit={"via": "age", "references": "nobody.id"}),
        f"{PEOPLE}.privacy_unit.references",
    ),
    (
        "via-bad-reference",
        lambda d: people(d).update(privacy_unit={"via": "age", "references": "nobody"}),
        f"{PEOPLE}.privacy_unit.references",
    ),
    (
        "via-cycle",
        lambda d: people(d).update(privacy_unit={"via": "age", "references": "people.age"}),
        f"{PEOPLE}.privacy_unit.references",
    ),
    (
        "via-unknown-key",
        lambda d: people(d).update(privacy_unit={"via": "age", "references": "people.x", "k": 1}),
        f"{PEOPLE}.privacy_unit.k",
    ),
    (
        "max-elements-on-a-number",
        lambda d: cols(d)["age"].update(max_elements=3),
        f"{AGE}.max_elements",
    ),
    (
        "max-elements-zero",
        lambda d: cols(d)["sex"].update(max_elements=0),
        f"{PEOPLE}.columns.sex.max_elements",
    ),
    (
        "max-length-on-a-number",
        lambda d: cols(d)["age"].update(max_length=3),
        f"{AGE}.max_length",
    ),
    (
        "max-length-zero",
        lambda d: cols(d)["sex"].update(max_length=0),
        f"{PEOPLE}.columns.sex.max_length",
    ),
    (
        "max-length-beyond-a-text",
        lambda d: cols(d)["sex"].update(max_length=10**10),
        f"{PEOPLE}.columns.sex.max_length",
    ),
    (
        "truncation-share-one",
        lambda d: d["privacy"].update(truncation_share=1),
        "privacy.truncation_share",
    ),
    (
        "truncation-coverage-zero",
        lambda d: d["privacy"].update(truncation_coverage=0),
        "privacy.truncation_coverage",
    ),
    (
        "max-rows-zero",
        lambda d: people(d).update(max_rows_per_unit=0),
        f"{PEOPLE}.max_rows_per_unit",
    ),
    (
        "max-rows-fraction",
        lambda d: people(d).update(max_rows_per_unit=1.5),
        f"{PEOPLE}.max_rows_per_unit",
    ),
    (
        "max-rows-bool",
        lambda d: people(d).update(max_rows_per_unit=True),
        f"{PEOPLE}.max_rows_per_unit",
    ),
    (
        "max-groups-alone",
        lambda d: people(d).update(max_groups_per_unit=2),
        f"{PEOPLE}.max_groups_per_unit",
    ),
    (
        "rows-per-group-alone",
        lambda d: people(d).update(max_rows_per_group_per_unit=2),
        f"{PEOPLE}.max_groups_per_unit",
    ),
    (
        "max-groups-negative",
        lambda d: people(d).update(max_groups_per_unit=-1, max_rows_per_group_per_unit=1),
        f"{PEOPLE}.max_groups_per_unit",
    ),
    ("public-with-unit", lambda d: people(d).update(private=False), PEOPLE),
    ("columns-missing", lambda d: people(d).pop("columns"), f"{PEOPLE}.columns"),
    ("columns-empty", lambda d: people(d).update(columns={}), f"{PEOPLE}.columns"),
    (
        "bad-column-name",
        lambda d: cols(d).update({"two words": "text"}),
        f"{PEOPLE}.columns.two words",
    ),
    (
        "duplicate-column",
        lambda d: cols(d).update(AGE={"type": "integer"}),
        f"{PEOPLE}.columns.AGE",
    ),
    # column
    ("column-not-mapping", lambda d: cols(d).update(age=["integer"]), AGE),
    ("unknown-column-key", lambda d: cols(d)["age"].update(lowr=0), f"{AGE}.lowr"),
    ("bad-type", lambda d: cols(d)["age"].update(type="string"), f"{AGE}.type"),
    ("missing-type", lambda d: cols(d)["age"].pop("type"), f"{AGE}.type"),
    ("bad-type-shorthand", lambda d: cols(d).update(age="int"), f"{AGE}.type"),
    ("lower-above-upper", lambda d: cols(d)["age"].update(lower=121), f"{AGE}.upper"),
    ("only-lower", lambda d: cols(d)["age"].pop("upper"), AGE),
    ("only-upper", lambda d: cols(d)["age"].pop("lower"), AGE),
    ("bounds-on-text", lambda d: cols(d)["sex"].update(lower=0, upper=1), f"{PEOPLE}.columns.sex"),
    (
        "bounds-on-boolean",
        lambda d: cols(d).update(ok={"type": "boolean", "lower": 0, "upper": 1}),
        f"{PEOPLE}.columns.ok",
    ),
    ("fractional-lower-on-integer", lambda d: cols(d)["age"].update(lower=0.5), f"{AGE}.lower"),
    ("fractional-upper-on-integer", lambda d: cols(d)["age"].update(upper="241/2"), f"{AGE}.upper"),
    ("lower-not-number", lambda d: cols(d)["age"].update(lower="young"), f"{AGE}.lower"),
    ("upper-bool", lambda d: cols(d)["age"].update(upper=True), f"{AGE}.upper"),
    ("upper-null", lambda d: cols(d)["age"].update(upper=None), f"{AGE}.upper"),
    ("upper-nan", lambda d: cols(d)["age"].update(upper=float("nan")), f"{AGE}.upper"),
    ("nullable-not-bool", lambda d: cols(d)["age"].update(nullable="yes"), f"{AGE}.nullable"),
    (
        "domain-not-list",
        lambda d: cols(d)["sex"].update(domain="F,M"),
        f"{PEOPLE}.columns.sex.domain",
    ),
    ("domain-empty", lambda d: cols(d)["sex"].update(domain=[]), f"{PEOPLE}.columns.sex.domain"),
    (
        "domain-wrong-type-text",
        lambda d: cols(d)["sex"].update(domain=["F", 1]),
        f"{PEOPLE}.columns.sex.domain[1]",
    ),
    (
        "domain-null-value",
        lambda d: cols(d)["sex"].update(domain=[None, "F"]),
        f"{PEOPLE}.columns.sex.domain[0]",
    ),
    (
        "domain-wrong-type-integer",
        lambda d: cols(d)["age"].update(domain=[1, "2"]),
        f"{AGE}.domain[1]",
    ),
    ("domain-bool-in-integer", lambda d: cols(d)["age"].update(domain=[True]), f"{AGE}.domain[0]"),
    (
        "domain-int-in-boolean",
        lambda d: cols(d).update(ok={"type": "boolean", "domain": [1, 0]}),
        f"{PEOPLE}.columns.ok.domain[0]",
    ),
    (
        "domain-duplicates",
        lambda d: cols(d)["sex"].update(domain=["F", "M", "F"]),
        f"{PEOPLE}.columns.sex.domain",
    ),
]


@pytest.mark.parametrize(("change", "key"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_bad_input_is_rejected_with_its_key_path(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], key: str
) -> None:
    path = write(tmp_path, mutated(change), name="bad.yaml")
    problems = problems_of(path)
    assert_reports(problems, path, key)
    for p in problems:
        assert p.startswith(f"{path}: "), p


def test_bad_input_cases_are_otherwise_valid(tmp_path: Path) -> None:
    """The base document of the cases above loads, so each case fails for its own change."""
    assert load_catalog(write(tmp_path, BASE)).dataset == "shop"


def test_problem_text_is_specific(tmp_path: Path) -> None:
    path = write(tmp_path, mutated(lambda d: cols(d)["age"].update(lower=121)), "adult.yaml")
    assert problems_of(path) == (f"{path}: {AGE}.upper: must be >= lower (121)",)
    path = write(tmp_path, mutated(lambda d: d["privacy"].update(epsilom=1)), "typo.yaml")
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}: privacy.epsilom: unknown key (known keys: budget, ")


def test_error_message_counts_problems_and_hints(tmp_path: Path) -> None:
    path = write(tmp_path, mutated(lambda d: d.pop("dataset")), "one.yaml")
    with pytest.raises(SchemaError) as info:
        load_catalog(path)
    assert info.value.message == f"the privacy schema {path} has 1 problem"
    assert info.value.hint is not None and "dataset" in info.value.hint


# ---------------------------------------------------------------------------- many problems


def test_several_problems_are_reported_at_once(tmp_path: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        d["colour"] = "blue"
        d["privacy"].update(epsilon=0, mechanism="exponential", neighbouring="bounded")
        d["privacy"]["budget"].update(delta=2)
        people(d).pop("privacy_unit")
        people(d).update(max_groups_per_unit=2, max_rows_per_unit=0)
        cols(d)["age"].update(lower=200, shape="round")
        cols(d)["sex"].update(domain=["F", "F"], lower=0, upper=1)
        cols(d)["score"] = {"type": "integer", "lower": 0.5, "upper": 2}
        cols(d)["kind"] = {"type": "complex"}
        d["tables"]["extra"] = {"private": True, "columns": {"x": "text"}}

    path = write(tmp_path, mutated(change), "many.yaml")
    problems = problems_of(path)
    expected = [
        "colour",
        "privacy.epsilon",
        "privacy.mechanism",
        "privacy.neighbouring",
        "privacy.budget.delta",
        f"{PEOPLE}.privacy_unit",
        f"{PEOPLE}.max_rows_per_unit",
        f"{PEOPLE}.max_groups_per_unit",
        f"{AGE}.upper",
        f"{AGE}.shape",
        f"{PEOPLE}.columns.sex",
        f"{PEOPLE}.columns.sex.domain",
        f"{PEOPLE}.columns.score.lower",
        f"{PEOPLE}.columns.kind.type",
        "tables.extra.privacy_unit",
    ]
    for key in expected:
        assert_reports(problems, path, key)
    assert all(p.startswith(f"{path}: ") for p in problems)
    with pytest.raises(SchemaError) as info:
        load_catalog(path)
    assert info.value.message == f"the privacy schema {path} has {len(problems)} problems"


# ---------------------------------------------------------------------------- known gaps
# Regressions for loader bugs found while writing these tests.


def test_half_bounds_are_reported_alongside_other_problems(tmp_path: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        d["dataset"] = ""
        cols(d)["age"].pop("upper")

    path = write(tmp_path, mutated(change))
    problems = problems_of(path)
    assert_reports(problems, path, "dataset")
    assert_reports(problems, path, AGE)


def test_both_budget_problems_are_reported(tmp_path: Path) -> None:
    path = write(tmp_path, mutated(lambda d: d["privacy"]["budget"].update(epsilon=0, delta=2)))
    problems = problems_of(path)
    assert_reports(problems, path, "privacy.budget.epsilon")
    assert_reports(problems, path, "privacy.budget.delta")


def test_non_utf8_file_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(yaml.safe_dump(BASE).encode() + b"# caf\xe9\n")
    assert any("UTF-8" in p for p in problems_of(path))


def test_repeated_yaml_keys_are_rejected(tmp_path: Path) -> None:
    text = yaml.safe_dump(BASE, sort_keys=False).replace(
        "      sex:", "      age:\n        type: text\n      sex:"
    )
    path = write(tmp_path, text)
    assert any("duplicate key 'age'" in p for p in problems_of(path))


def test_date_domain_accepts_yaml_dates(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        yaml.safe_dump(BASE).replace(
            "      sex:", "      day:\n        type: date\n        domain: [2024-01-01]\n      sex:"
        ),
    )
    table = load_catalog(path).tables[0]
    day = table.column("day")
    assert day is not None and day.domain is not None and len(day.domain) == 1


def test_a_private_table_may_leave_its_bound_to_each_query(tmp_path: Path) -> None:
    """Without max_rows_per_unit the bound is chosen with DP per query (planning/truncation)."""
    doc = mutated(lambda d: people(d).pop("max_rows_per_unit"))
    table = load_catalog(write(tmp_path, doc)).table("people")
    assert table is not None and not table.bound.declared
