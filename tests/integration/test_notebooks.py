"""pandas and SQLAlchemy over the embedded engine, for real: the ``dpproxy://`` dialect
(registered by entry point), ``pd.read_sql`` without a warning, reflection from the privacy
schema, errors in SQLAlchemy's PEP 249 wrappers, and ``dpproxy.read_sql``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from fractions import Fraction
from importlib.metadata import entry_points
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy
from sqlalchemy import URL, create_engine, func, inspect, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.sql import column, table

import dpproxy
from dpproxy import errors
from dpproxy.sqlalchemy_dialect import DPProxyDialect
from dpproxy.values import Cost

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "adult.yaml"
ADULT_ROWS = 32561


def test_the_dialect_is_registered_by_entry_point() -> None:
    (ep,) = [e for e in entry_points(group="sqlalchemy.dialects") if e.name == "dpproxy"]
    assert ep.load() is DPProxyDialect
    assert sqlalchemy.dialects.registry.load("dpproxy") is DPProxyDialect


def test_pandas_reads_through_the_dialect_without_a_warning(demo_db: Path) -> None:
    engine = create_engine("dpproxy://?cache=off")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = pd.read_sql("SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY sex", engine)
        by_url = pd.read_sql("SELECT COUNT(*) AS n FROM adult", "dpproxy://")
    assert [str(w.message) for w in caught] == []
    assert list(df.columns) == ["sex", "n"] and list(df["sex"]) == ["Female", "Male"]
    assert abs(int(df["n"].sum()) - ADULT_ROWS) < 100
    assert abs(int(by_url["n"][0]) - ADULT_ROWS) < 50
    engine.dispose()


PANDAS_DBAPI_WARNING = "pandas only supports SQLAlchemy connectable"


def _pandas_warnings(sql: str, con: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pd.read_sql(sql, con)
    return [str(w.message) for w in caught]


def test_pandas_warns_about_every_dbapi_connection_but_sqlite3_s(
    demo_db: Path, pg_session_dsn: str
) -> None:
    """docs/python.md: pandas warns about a DB-API connection that is neither sqlite3's nor
    ADBC's, dpproxy's and psycopg's alike (pandas's policy, not something dpproxy does), and the
    engine or the URL string read without a warning. No type is faked and no filter installed."""
    import psycopg

    con = dpproxy.connect(cache="off")
    try:
        ours = _pandas_warnings("SELECT COUNT(*) AS n FROM adult", con)
    finally:
        con.close()
    with psycopg.connect(pg_session_dsn) as pg_con:
        theirs = _pandas_warnings("SELECT 1 AS n", pg_con)
    assert len(ours) == 1 and ours[0].startswith(PANDAS_DBAPI_WARNING), ours
    assert theirs == ours
    engine = create_engine("dpproxy://?cache=off")
    assert _pandas_warnings("SELECT COUNT(*) AS n FROM adult", engine) == []
    assert _pandas_warnings("SELECT COUNT(*) AS n FROM adult", "dpproxy://?cache=off") == []
    engine.dispose()
    doc = " ".join((ROOT / "docs" / "python.md").read_text(encoding="utf-8").split())
    assert "warns about any DB-API connection but sqlite3's and ADBC's, psycopg's too" in doc
    assert 'string `"dpproxy://"` instead' in doc


def test_a_duckdb_file_and_schema_by_url(demo_db: Path) -> None:
    url = f"dpproxy:///{demo_db}?schema={SCHEMA}&analyst=ana&epsilon=0.5&cache=off"
    assert str(demo_db).startswith("/")  # four slashes: an absolute path
    engine = create_engine(url)
    with engine.connect() as con:
        result = con.execute(text("SELECT AVG(age) AS a FROM adult WHERE sex = :s"), {"s": "Male"})
        (avg,) = result.one()
        cursor = result.context.cursor
        assert cursor.privacy_cost == Cost(Fraction(1, 2))
        assert cursor.connection.analyst == "ana"
    assert 30 < avg < 50
    same = create_engine(
        URL.create("dpproxy", database=str(demo_db), query={"schema": str(SCHEMA)})
    )
    with same.connect() as con:
        assert con.execute(text("SELECT COUNT(*) FROM adult")).scalar_one() > 30000
    engine.dispose()
    same.dispose()


def test_core_statements_and_reflection(demo_db: Path) -> None:
    engine = create_engine("dpproxy://")
    insp = inspect(engine)
    assert insp.get_table_names() == ["adult"]
    assert insp.has_table("adult") and not insp.has_table("nowhere")
    cols = {c["name"]: c for c in insp.get_columns("adult")}
    assert isinstance(cols["age"]["type"], sqlalchemy.BigInteger)
    assert isinstance(cols["sex"]["type"], sqlalchemy.Text)
    adult = table("adult", column("age"), column("sex"))
    query = (
        select(adult.c.sex, func.count().label("n")).where(adult.c.age > 30).group_by(adult.c.sex)
    )
    with engine.connect() as con:
        rows = con.execute(query).all()
    assert sorted(r.sex for r in rows) == ["Female", "Male"]
    engine.dispose()


def test_refusals_arrive_as_sqlalchemy_dbapi_errors(demo_db: Path) -> None:
    engine = create_engine("dpproxy://")
    with engine.connect() as con:
        with pytest.raises(sqlalchemy.exc.ProgrammingError) as info:
            con.execute(text("SELECT * FROM adult"))
        assert isinstance(info.value.orig, dpproxy.ProgrammingError)
        assert info.value.orig.sqlstate == "42501"
        with pytest.raises(sqlalchemy.exc.NotSupportedError):
            con.exec_driver_sql("SELECT MODE() WITHIN GROUP (ORDER BY age) FROM adult")
    with pytest.raises(ValueError, match="unknown dpproxy URL parameter"):
        create_engine("dpproxy://?epsilom=1").connect()
    engine.dispose()


def test_read_sql_returns_intervals_and_the_cost(demo_db: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = dpproxy.read_sql(
            "SELECT sex, COUNT(*) AS n, AVG(age) AS age FROM adult GROUP BY sex ORDER BY sex",
            cache="off",
        )
    assert [str(w.message) for w in caught] == []
    assert list(df.columns) == ["sex", "n", "n_low", "n_high", "age", "age_low", "age_high"]
    for name in ("n", "age"):
        assert (df[f"{name}_low"] < df[name]).all() and (df[name] < df[f"{name}_high"]).all()
    assert (df["age_high"] - df["age_low"] < 1).all()  # thousands of rows per group
    assert df.attrs["privacy_cost"] == Cost(Fraction(1)) and df.attrs["epsilon"] == 1.0
    assert df.attrs["remaining_budget"].epsilon == 9 and df.attrs["confidence"] == 0.95


def test_read_sql_on_an_open_connection(demo_db: Path) -> None:
    con = dpproxy.connect(budget_epsilon=2, cache="off")
    df = dpproxy.read_sql("SELECT COUNT(*) AS n FROM adult WHERE age > %s", con, params=(40,))
    assert list(df.columns) == ["n", "n_low", "n_high"] and not con.closed
    assert dpproxy.read_sql("SELECT COUNT(*) FROM adult", con, intervals=False).shape == (1, 1)
    with pytest.raises(dpproxy.OperationalError) as info:  # the budget of 2 is spent
        dpproxy.read_sql("SELECT COUNT(*) FROM adult", con)
    assert info.value.sqlstate == "ZD001"
    with pytest.raises(dpproxy.ProgrammingError):
        dpproxy.read_sql("SELECT * FROM adult", con)
    with pytest.raises(TypeError):
        dpproxy.read_sql("SELECT COUNT(*) FROM adult", con, epsilon=1)
    con.close()


README = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")  # the README's Python API


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_pandas_example_prints_what_it_says(demo_db: Path) -> None:
    """The README's pandas/SQLAlchemy example runs, and prints what its comments say."""
    section = _section("Python API")
    block = section.split("**pandas and SQLAlchemy.**", 1)[1].split("```python\n", 1)[1]
    code = block.split("```", 1)[0]
    printed: list[str] = []
    expected = [
        line.split("# ", 1)[1].split(" ")[0] if "print(" in line else None
        for line in code.splitlines()
    ]
    env = {"dpproxy": dpproxy, "print": lambda *a: printed.append(" ".join(map(str, a)))}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, "README.md", "exec"), env)  # the README's own example
    assert [str(w.message) for w in caught] == []
    claims = [e for e in expected if e is not None]
    assert len(printed) == len(claims) == 3
    for out, claim in zip(printed, claims, strict=True):
        assert out.replace(", ", ",").startswith(claim.rstrip(":").replace(", ", ",")), (out, claim)


def test_readme_error_categories_match_the_code() -> None:
    section = _section("Python API")
    rows = [r for r in section.splitlines() if r.startswith("| `dpproxy.")]
    assert len(rows) == 7
    seen = set()
    for row in rows:
        name = row.split("`dpproxy.", 1)[1].split("`", 1)[0]
        category = getattr(dpproxy, name)
        codes = re.findall(r"\b([0-9A-Z]{2}[0-9A-Z]{3})\b", row.split("|")[2])
        for first, last in re.findall(r"\b(\d\d)xxx–(\d\d)xxx", row):
            codes += [f"{n}000" for n in range(int(first), int(last) + 1)]
        codes += [f"{c}000" for c in re.findall(r"\b(\d\d)xxx\b", row)]
        assert codes, row
        for code in codes:
            assert errors.dbapi_category(code) is category, (code, name)
            seen.add(code)
    assert {"42501", "08001", "ZD001", "0A000", "22000", "23000"} <= seen


def test_orm_aggregates_answer_and_row_reads_are_refused(demo_db: Path) -> None:
    class Base(DeclarativeBase):
        pass

    class Adult(Base):
        __tablename__ = "adult"
        person_id: Mapped[int] = mapped_column(primary_key=True)
        age: Mapped[int]
        sex: Mapped[str]

    engine = create_engine("dpproxy://?cache=off")
    with Session(engine) as session:
        rows = session.execute(
            select(Adult.sex, func.avg(Adult.age)).group_by(Adult.sex).order_by(Adult.sex)
        ).all()
        assert [r[0] for r in rows] == ["Female", "Male"]
        assert all(30 < r[1] < 50 for r in rows)
        n = session.scalar(select(func.count(Adult.person_id)).where(Adult.sex.in_(["Male"])))
        assert n is not None and abs(n - 21790) < 100
        with pytest.raises(sqlalchemy.exc.ProgrammingError) as info:
            session.scalars(select(Adult).limit(3)).all()
        assert info.value.orig.sqlstate == "42501"  # type: ignore[union-attr]
    engine.dispose()


JUPYSQL = """
import sys
# JupySQL imports PySpark, an optional dependency of its own, when it is installed, and fails
# when PySpark cannot load (without pyarrow, PySpark raises an ImportError that is not the
# ModuleNotFoundError JupySQL catches): JupySQL runs here as where PySpark is not installed.
sys.modules["pyspark"] = None
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "sql")
shell.run_line_magic("sql", "dpproxy://")
result = shell.run_cell_magic("sql", "", "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex")
frame = result.DataFrame().sort_values("sex")
print("ROWS", list(frame["sex"]), int(frame["n"].sum()))
"""


def test_jupyter_sql_magic(demo_db: Path) -> None:
    """``%sql dpproxy://`` in IPython with JupySQL, in a fresh interpreter (JupySQL imports
    optional packages that warn on import, which this test session turns into errors)."""
    env = {**os.environ, "PLOOMBER_STATS_ENABLED": "false", "DPPROXY_LEDGER": "memory"}
    p = subprocess.run(
        [sys.executable, "-c", JUPYSQL], capture_output=True, text=True, timeout=180, env=env
    )
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("ROWS "))
    assert line.startswith("ROWS ['Female', 'Male'] ")
    assert abs(int(line.rsplit(" ", 1)[1]) - ADULT_ROWS) < 100
