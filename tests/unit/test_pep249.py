"""PEP 249 as psycopg and sqlite3 users expect it: the module globals on the package a user
imports, and every error in the category its SQLSTATE maps to (``errors.DBAPI_CATEGORIES``),
checked on the class tree and on errors raised by the real engine over the demo."""

from __future__ import annotations

import datetime
import importlib
import pkgutil
from pathlib import Path

import pytest

import dpproxy
from dpproxy import dbapi, errors

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = (
    "InterfaceError", "DatabaseError", "DataError", "OperationalError", "IntegrityError",
    "InternalError", "ProgrammingError", "NotSupportedError",
)


def test_package_globals() -> None:
    assert (dpproxy.apilevel, dpproxy.threadsafety, dpproxy.paramstyle) == ("2.0", 1, "pyformat")
    assert dpproxy.Error is errors.DPProxyError
    for name in (*CATEGORIES, "Error", "Warning", "apilevel", "paramstyle", "threadsafety",
                 "STRING", "NUMBER", "DATETIME", "BINARY", "ROWID", "Date", "Time",
                 "Timestamp", "Binary", "DateFromTicks", "TimeFromTicks", "TimestampFromTicks"):
        assert getattr(dpproxy, name) is getattr(dbapi, name), name
        assert name in dpproxy.__all__ and name in dbapi.__all__, name
    assert dpproxy.connect is dbapi.connect
    for name in (*CATEGORIES, "Error", "Warning"):  # PEP 249's optional extension
        assert getattr(dbapi.Connection, name) is getattr(dpproxy, name), name
    assert issubclass(dpproxy.Warning, Exception) and not issubclass(dpproxy.Warning, dpproxy.Error)


def test_the_pep249_tree() -> None:
    assert issubclass(dpproxy.InterfaceError, dpproxy.Error)
    assert issubclass(dpproxy.DatabaseError, dpproxy.Error)
    for name in CATEGORIES[2:]:
        assert issubclass(getattr(dpproxy, name), dpproxy.DatabaseError), name
    assert dpproxy.DateFromTicks(0) == datetime.date.fromtimestamp(0)
    assert dpproxy.TimestampFromTicks(0) == datetime.datetime.fromtimestamp(0)
    assert dpproxy.TimeFromTicks(0) == datetime.datetime.fromtimestamp(0).time()


def _embedded_errors() -> list[type[errors.DPProxyError]]:
    """Every error class a Python API user can receive: all of dpproxy but ``server/`` (whose
    errors go to wire clients, which map SQLSTATEs themselves)."""
    for info in pkgutil.walk_packages(dpproxy.__path__, "dpproxy."):
        if not info.name.startswith(("dpproxy.server", "dpproxy.notebook",
                                     "dpproxy.sqlalchemy_dialect", "dpproxy.__main__")):
            importlib.import_module(info.name)
    found: list[type[errors.DPProxyError]] = []
    todo = errors.DPProxyError.__subclasses__()
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "sqlstate" in cls.__dict__ and not cls.__module__.startswith("dpproxy.server"):
            found.append(cls)
    return found


def test_every_error_is_in_its_sqlstate_category() -> None:
    found = _embedded_errors()
    assert len(found) >= 35
    codes = {cls.sqlstate for cls in found}
    for code in ("42501", "42601", "42P01", "08001", "08006", "53100", "53400", "22023", "0A000",
                 "XX000", "ZD001", "ZD006"):
        assert code in codes, code
    for cls in found:
        category = errors.dbapi_category(cls.sqlstate)
        assert category is not None, f"{cls.__name__} ({cls.sqlstate}) has no PEP 249 category"
        assert issubclass(cls, category), f"{cls.__name__} ({cls.sqlstate}) is not a {category}"


@pytest.mark.parametrize("code,category", [
    ("42501", "ProgrammingError"), ("42P01", "ProgrammingError"), ("42601", "ProgrammingError"),
    ("08001", "OperationalError"), ("08006", "OperationalError"), ("53400", "OperationalError"),
    ("57014", "OperationalError"), ("ZD001", "OperationalError"), ("22003", "DataError"),
    ("23505", "IntegrityError"), ("0A000", "NotSupportedError"), ("XX000", "InternalError"),
])
def test_categories_as_psycopg_users_expect(code: str, category: str) -> None:
    assert errors.dbapi_category(code) is getattr(dpproxy, category)


@pytest.fixture
def con(demo_db: Path) -> dbapi.Connection:
    return dpproxy.connect(cache="off")


@pytest.mark.parametrize("sql,category,code", [
    ("SELECT * FROM adult", "ProgrammingError", "42501"),
    ("SELECT COUNT(*) FROM nowhere", "ProgrammingError", "42P01"),
    ("SELECT COUNT(nope) FROM adult", "ProgrammingError", "42703"),
    ("SELEC COUNT(*) FROM adult", "ProgrammingError", "42601"),
    ("SELECT COUNT(*) FROM adult WHERE age = 'abc'", "DataError", "22P02"),
    ("SELECT COUNT(*) FROM adult WHERE age = 1e400", "DataError", "22003"),
    ("SELECT MODE() WITHIN GROUP (ORDER BY age) FROM adult", "NotSupportedError", "0A000"),
    ("SELECT COUNT(*) FROM adult WHERE sex = %s", "ProgrammingError", "42P02"),
])
def test_refusals_through_the_cursor(
    con: dbapi.Connection, sql: str, category: str, code: str
) -> None:
    cur = con.cursor()
    before = cur.remaining_budget
    with pytest.raises(getattr(dpproxy, category)) as info:
        cur.execute(sql, () if "%s" in sql else None)
    assert info.value.sqlstate == code
    assert isinstance(info.value, dpproxy.DatabaseError)
    assert cur.remaining_budget == before


def test_budget_exhausted_is_operational(demo_db: Path) -> None:
    with dpproxy.connect(budget_epsilon=1, cache="off") as c:
        cur = c.cursor().execute("SELECT COUNT(*) FROM adult")
        with pytest.raises(dpproxy.OperationalError) as info:
            cur.execute("SELECT COUNT(*) FROM adult")
    assert info.value.sqlstate == "ZD001"


def test_unreachable_database_is_operational() -> None:
    with pytest.raises(dpproxy.OperationalError) as info:
        dpproxy.connect("postgresql://postgres@127.0.0.1:1/x", schema=f"{ROOT}/schemas/adult.yaml")
    assert info.value.sqlstate == "08001"


def test_closed_cursor_is_an_interface_error(con: dbapi.Connection) -> None:
    cur = con.cursor()
    cur.close()
    with pytest.raises(dpproxy.InterfaceError) as info:
        cur.execute("SELECT COUNT(*) FROM adult")
    assert info.value.sqlstate == "24000"
    con.close()
    with pytest.raises(dpproxy.InterfaceError):
        con.cursor()


def test_description_type_codes_compare_with_type_objects(con: dbapi.Connection) -> None:
    cur = con.cursor().execute("SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex")
    assert cur.description is not None
    codes = [d[1] for d in cur.description]
    assert codes[0] == dpproxy.STRING and codes[0] != dpproxy.NUMBER
    assert codes[1] == dpproxy.NUMBER and codes[2] == dpproxy.NUMBER
    con.close()
