"""``dpproxy schema init --dp-bounds`` releasing text columns' domains with DP
(``mechanisms/dp_domains.py``), through the installed command on a CSV file: the domain written,
the ledger charged, ``schema check`` accepting the draft, a query over it, the refusals, and the
claims of schemas/README.md about it."""

from __future__ import annotations

import csv
import random
import re
from fractions import Fraction
from pathlib import Path

import pytest

from dpproxy.mechanisms.dp_domains import threshold
from dpproxy.planning.public import MAX_KEYS
from tests.integration.test_own_data import env, ok, run, sqlstate

__all__ = ["env"]  # the fixture: a user with an empty home

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS_README = " ".join((ROOT / "schemas" / "README.md").read_text().split())
RARE = 30  # units of Rareville: far below τ, so it is left out but for a ~10⁻⁵ chance


def write_town(path: Path, rows: int = 2000) -> None:
    """id, age, sex, city (Lyon/Nice/Paris, and Rareville for RARE units), nick (unique)."""
    rng = random.Random(21)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "age", "sex", "city", "nick"])
        for i in range(1, rows + 1):
            city = "Rareville" if i <= RARE else rng.choice(["Lyon", "Nice", "Paris"])
            w.writerow([i, rng.randint(18, 90), rng.choice(["F", "M"]), city, f"n{i}"])


@pytest.fixture
def town(tmp_path: Path) -> Path:
    write_town(tmp_path / "town.csv")
    return tmp_path


def _spent(ledger: Path) -> tuple[object, list[dict[str, object]]]:
    from dpproxy.accounting.ledger import Ledger
    from dpproxy.values import Cost

    book = Ledger(ledger, "town", Cost(Fraction(10), Fraction(1, 10**5)))
    try:
        entries = [e.body for e in book.entries("steward") if e.kind == "release"]
        return book.spent("steward"), entries
    finally:
        book.close()


def test_a_domain_is_released_charged_and_accepted(town: Path, env: dict[str, str]) -> None:
    from dpproxy.values import Cost

    ledger = town / "ledger.sqlite"
    line = (
        f"dpproxy schema init -d town.csv --dp-bounds --epsilon 1 --delta 1e-6 --unit id "
        f"--ledger {ledger} -o out.yaml"
    )
    p = ok(run(line, town, env))
    assert f"privacy cost: ε=1, δ=0.000001, charged to 'steward' in ledger {ledger}" in p.stderr
    text = (town / "out.yaml").read_text()
    # 4 columns share ε = 1: age's two choices 1/8 each; 3 text columns ε = 1/4, δ = 10⁻⁶/3
    tau = threshold(Fraction(1, 4), Fraction(1, 3 * 10**6))
    note = (
        f"# DP domain (ε = 1/4, δ = 1/3000000, charged to steward): values more than about "
        f"{tau} units hold; rarer ones are missing, and a GROUP BY city leaves out their rows"
    )
    assert RARE < tau // 2 < 600
    assert 'sex: {type: text, nullable: true, domain: ["F", "M"]}' in text
    assert f'city: {{type: text, nullable: true, domain: ["Lyon", "Nice", "Paris"]}}  {note}' in (
        text
    )
    assert "Rareville" not in text  # 30 units: below the threshold
    assert (
        "nick: {type: text, nullable: true}  # TODO domain: no value passed the DP threshold "
        "(ε = 1/4, δ = 1/3000000, charged to steward): too few units per value"
    ) in text  # every nick has one unit
    assert "# DP bounds (ε = 1/8 each, charged to steward): check them" in text
    spent, entries = _spent(ledger)
    assert spent == Cost(Fraction(1), Fraction(1, 10**6))
    (entry,) = entries
    assert entry["query"] == "schema init --dp-bounds town(age; domains: sex, city, nick) unit id"
    assert entry["mechanism"] == "exponential, laplace"
    check = ok(run("dpproxy schema check -d town.csv out.yaml", town, env))
    assert "out.yaml: ok" in check.stdout and "fits the database" in check.stdout
    assert "1 TODO(s) left" in check.stderr and "no value passed the DP threshold" in check.stderr
    # GROUP BY city: exactly the listed values and NULL (nullable); Rareville's rows left out
    q = "dpproxy query -d town.csv -s out.yaml --ledger memory --format csv"
    grouped = ok(run(f"{q} 'SELECT city, COUNT(*) AS n FROM town GROUP BY city'", town, env))
    keys = [r.split(",")[0] for r in grouped.stdout.splitlines()[1:]]
    assert sorted(keys) == ["", "Lyon", "Nice", "Paris"]
    rare = ok(run(f"{q} \"SELECT COUNT(*) AS n FROM town WHERE city = 'Rareville'\"", town, env))
    # other queries still count them: each unit has one row, so the count is RARE plus Laplace
    # noise of scale b = τ/0.9 at the rows-per-unit bound τ drawn with DP (its notice), and
    # |noise| ≤ 16·b but with probability e^-16 (a fixed 15 failed once: τ is sometimes > 1)
    tau = int(re.search(r"chosen with DP: (\d+) row\(s\) per unit", rare.stderr).group(1))  # type: ignore[union-attr]
    assert abs(float(rare.stdout.splitlines()[1]) - RARE) <= 16 * tau / 0.9


def test_bad_options_are_refused_before_anything_is_charged(
    town: Path, env: dict[str, str]
) -> None:
    ledger = town / "ledger.sqlite"
    cmd = f"dpproxy schema init -d town.csv --dp-bounds --unit id --ledger {ledger} -o r.yaml"
    for bad in (
        "--epsilon 0",
        "--epsilon -1",
        "--epsilon 1 --delta 1",
        "--epsilon 1 --delta 2",
        "--epsilon 1 --delta -1e-6",
        "--epsilon 1 --delta abc",
        "--epsilon 1 --delta ''",
        "--delta 1e-6",  # no --epsilon
    ):
        p = run(f"{cmd} {bad}", town, env)
        assert sqlstate(p) == "22023", (bad, p.stderr)
    assert (
        "--delta must be a number in [0, 1), not '1'"
        in run(f"{cmd} -e 1 --delta 1", town, env).stderr
    )
    assert not (town / "r.yaml").exists() and not ledger.exists()


def test_delta_zero_leaves_domains_and_a_text_only_table_gets_one(
    town: Path, env: dict[str, str]
) -> None:
    from dpproxy.values import Cost

    ledger = town / "ledger.sqlite"
    cmd = f"dpproxy schema init -d town.csv --dp-bounds --unit id --ledger {ledger}"
    p = ok(run(f"{cmd} --epsilon 1 --delta 0", town, env))
    assert f"privacy cost: ε=1, charged to 'steward' in ledger {ledger}" in p.stderr
    assert "# DP bounds (ε = 1/2 each, charged to steward)" in p.stdout  # all ε: bounds
    assert "sex: {type: text, nullable: true}  # TODO domain: the public list" in p.stdout
    assert _spent(ledger)[0] == Cost(Fraction(1))
    (town / "sexes.csv").write_text(
        "id,sex\n" + "".join(f"{i},{'FM'[i % 2]}\n" for i in range(400))
    )
    cmd = f"dpproxy schema init -d sexes.csv --dp-bounds --unit id --ledger {ledger} -e 1"
    p = ok(run(cmd, town, env))
    assert 'sex: {type: text, nullable: true, domain: ["F", "M"]}  # DP domain (ε = 1,' in p.stdout
    p = run(f"{cmd} --delta 0", town, env)
    assert sqlstate(p) == "22023" and "nothing to release" in p.stderr


def test_schemas_readme_describes_the_domains() -> None:
    for claim in (
        "`--delta δ` (default 10⁻⁶, the draft's δ per query) equally among the text columns",
        "`--delta 0` leaves the domains as TODOs and gives all of `--epsilon` to the bounds",
        "`--epsilon` must be in [0.001, 100] and `--delta` in [0, 1), else the command stops "
        "with `22023` before anything is charged",
        "at most 10,000 of them",
        "rarer values are missing, and a `GROUP BY` over the column then leaves out the rows "
        "that hold them, while other queries still count those rows",
        "A text column where no value passes keeps its TODO.",
    ):
        assert claim in SCHEMAS_README, claim
    assert MAX_KEYS == 10_000
