"""Bounds proved by the rows of a read-only DuckDB file (``backends/scanned.py``): the SQL
that runs leaves out clamps that change nothing, EXPLAIN shows the same SQL whatever the
rows, and the answers are the same numbers.

On real DuckDB files, opened by real backends: which columns are marked, that the SQL
without the clamp returns exactly the rows of the SQL with it (in bounds, on the bounds, NULL),
that no writer can change the file while the backend holds it (the trust the mark rests on),
and that nothing an analyst sees (EXPLAIN in all three forms, the answer's shape, a refusal)
tells a file with a value outside the bounds from one without.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import dpproxy
from dpproxy.backends.duckdb import DuckDBBackend
from dpproxy.backends.opener import open_database
from dpproxy.catalog.load import parse_catalog
from dpproxy.catalog.model import Column
from dpproxy.engine import Engine

SECRET = 0x5CA

SCHEMA = """\
version: 1
dataset: scanned
privacy: {neighbouring: add_remove, epsilon: 1, delta: 1.0e-6}
tables:
  t:
    private: true
    privacy_unit: pid
    public_rows: 1000000
    columns:
      pid: {type: integer}
      g: {type: integer, lower: 0, upper: 3, domain: [0, 1, 2, 3]}
      age: {type: integer, nullable: true, lower: 0, upper: 100}
      score: {type: float, nullable: true, lower: 0, upper: 1}
"""

QUERIES = (
    "SELECT SUM(age) FROM t",
    "SELECT AVG(age), COUNT(age) FROM t",
    "SELECT VAR_SAMP(age), STDDEV_POP(age) FROM t",
    "SELECT g, SUM(age), AVG(age) FROM t GROUP BY g",
    "SELECT AVG(age) FROM t WHERE g > 1",
    "SELECT COUNT(DISTINCT age), SUM(age) FROM t",
)


def _database(
    path: Path,
    ages: list[int | None],
    *,
    view: bool = False,
    scores: list[float | None] | None = None,
) -> Path:
    """A file of ``t``: one row per age, with ``scores`` (default (i mod 10)/10, in bounds)."""
    if scores is None:
        scores = [(i % 10) / 10 for i in range(len(ages))]
    with duckdb.connect(str(path)) as con:
        name = "stored" if view else "t"
        con.execute(
            f"CREATE TABLE {name}(pid INTEGER PRIMARY KEY, g INTEGER, age INTEGER, score DOUBLE)"
        )
        if ages:
            con.executemany(
                f"INSERT INTO {name} VALUES (?, ?, ?, ?)",
                [(i, i % 4, a, sc) for i, (a, sc) in enumerate(zip(ages, scores, strict=True))],
            )
        if view:
            con.execute("CREATE VIEW t AS SELECT * FROM stored")
    return path


def _engine(path: Path) -> Engine:
    return Engine(parse_catalog(SCHEMA), DuckDBBackend(path))


def _age(e: Engine) -> tuple[bool, bool]:
    t = e.catalog.table("t")
    assert t is not None
    col = t.column("age")
    assert col is not None
    return col.in_bounds, col.scanned


IN_BOUNDS = [(i * 37) % 101 for i in range(500)] + [0, 100, None, None]


@pytest.mark.parametrize(
    ("ages", "scanned"),
    [
        (IN_BOUNDS, True),
        ([], True),  # no row at all: none outside
        ([None, None], True),  # NULL is no value outside the bounds (the clamp keeps it NULL)
        ([*IN_BOUNDS, 101], False),
        ([*IN_BOUNDS, -1], False),
        ([2**31 - 1], False),
    ],
)
def test_which_rows_prove_the_bounds(ages: list[int | None], scanned: bool, tmp_path: Path) -> None:
    e = _engine(_database(tmp_path / "d.duckdb", ages))
    try:
        assert _age(e) == (False, scanned)  # no CHECK constraint: in_bounds stays False
        score = e.catalog.table("t").column("score")  # type: ignore[union-attr]
        assert score is not None and score.scanned  # its values (i mod 10)/10 lie in [0, 1]
        run = e.prepare("SELECT SUM(age) FROM t", secret=SECRET).sql
        shown = e.canonical().prepare("SELECT SUM(age) FROM t", secret=SECRET).sql
        assert run is not None and shown is not None
        assert "CASE WHEN age < 0" in shown  # EXPLAIN's SQL keeps the clamp, always
        assert ("CASE WHEN age < 0" not in run) is scanned
        assert (run == shown) is not scanned
    finally:
        e.close()


def test_stale_statistics_do_not_matter(tmp_path: Path) -> None:
    """A value outside the bounds deleted again: DuckDB's zone maps may still admit it, the
    query reads the rows and finds none."""
    path = _database(tmp_path / "s.duckdb", [*IN_BOUNDS, 5000])
    with duckdb.connect(str(path)) as con:
        con.execute("DELETE FROM t WHERE age = 5000")
        con.execute("CHECKPOINT")
    e = _engine(path)
    try:
        assert _age(e) == (False, True)
    finally:
        e.close()


def test_a_view_or_a_file_of_rows_is_never_marked(tmp_path: Path) -> None:
    e = _engine(_database(tmp_path / "v.duckdb", IN_BOUNDS, view=True))
    try:
        assert _age(e) == (False, False)  # a view: its rows could come from anywhere
    finally:
        e.close()
    csv = tmp_path / "t.csv"
    csv.write_text(
        "pid,g,age,score\n" + "".join(f"{i},{i % 4},{i % 90},0.5\n" for i in range(50)),
        encoding="utf-8",
    )
    schema = tmp_path / "s.yaml"
    schema.write_text(SCHEMA, encoding="utf-8")
    backend = open_database(str(csv))  # an in-memory DuckDB over a view of the file
    e = Engine(parse_catalog(SCHEMA), backend)
    try:
        assert _age(e) == (False, False)
    finally:
        e.close()


def test_the_sql_that_runs_gives_the_rows_of_the_canonical_sql(tmp_path: Path) -> None:
    """On 20 random files in bounds (values on both bounds and NULLs among them) every query's
    two statements return the same rows, exactly."""
    rng = random.Random(20261127)
    for n in range(20):
        ages = [rng.choice([0, 100, None, rng.randint(0, 100)]) for _ in range(rng.randint(0, 60))]
        e = _engine(_database(tmp_path / f"r{n}.duckdb", ages))
        try:
            assert _age(e) == (False, True)
            for sql in QUERIES:
                run = e.prepare(sql, secret=SECRET).sql
                shown = e.canonical().prepare(sql, secret=SECRET).sql
                assert run is not None and shown is not None
                assert "CASE WHEN age < 0" in shown and "CASE WHEN age < 0" not in run, sql
                a, b = e.backend.execute(run), e.backend.execute(shown)
                assert a.columns == b.columns
                assert sorted(a.rows, key=repr) == sorted(b.rows, key=repr), (sql, ages)
        finally:
            e.close()


def _explains(path: Path, schema: Path, sql: str) -> tuple[str, str, str]:
    with dpproxy.connect(str(path), schema=str(schema)) as con:
        text = con.cursor().explain(sql)
        cur = con.cursor()
        cur.execute("EXPLAIN " + sql)
        statement = "\n".join(r[0] for r in cur.fetchall())
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpproxy",
            "explain",
            "--database",
            str(path),
            "--schema",
            str(schema),
            sql,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return text, statement, cli


def test_nothing_the_analyst_sees_tells_the_files_apart(tmp_path: Path) -> None:
    """Two files that differ in one person's value, inside the bounds or not: EXPLAIN (the
    DB-API's, the SQL statement's, the CLI's) shows the same text, the answers have the same
    shape, and a query refused on one is refused alike on the other."""
    schema = tmp_path / "s.yaml"
    schema.write_text(SCHEMA, encoding="utf-8")
    inside = _database(tmp_path / "in.duckdb", [*IN_BOUNDS, 40])
    outside = _database(tmp_path / "out.duckdb", [*IN_BOUNDS, 400])
    for sql in QUERIES:
        a, b = _explains(inside, schema, sql), _explains(outside, schema, sql)
        assert a == b, sql
        assert "CASE WHEN age < 0" in a[0]
    refused = "SELECT MAX(age) FROM t WHERE age > (SELECT 1)"
    assert _shapes(inside, schema, QUERIES, refused) == _shapes(outside, schema, QUERIES, refused)


def _shapes(path: Path, schema: Path, queries: tuple[str, ...], refused: str | None = None) -> list:
    """What an analyst sees of the answers but the numbers: the columns, the count of rows
    and their lengths per query; and the SQLSTATE of ``refused``."""
    with dpproxy.connect(str(path), schema=str(schema), budget_epsilon=1000) as con:
        cur = con.cursor()
        got: list = []
        for sql in queries:
            cur.execute(sql)
            rows = cur.fetchall()
            got.append(([d[0] for d in cur.description], len(rows), [len(r) for r in rows]))
        if refused is not None:
            with pytest.raises(dpproxy.DatabaseError) as error:
                cur.execute(refused)
            got.append(getattr(error.value, "sqlstate", None))
    return got


def test_no_one_can_write_the_file_while_the_backend_holds_it(tmp_path: Path) -> None:
    """The trust the mark rests on: DuckDB's lock keeps every writer out, in another process
    and in this one, for as long as the backend is open."""
    path = _database(tmp_path / "w.duckdb", IN_BOUNDS)
    e = _engine(path)
    try:
        assert _age(e) == (False, True)
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import duckdb; duckdb.connect({str(path)!r}).execute("
                "'INSERT INTO t VALUES (9999, 0, 5000, 0)')",
            ],
            capture_output=True,
            text=True,
        )
        assert other.returncode != 0 and "lock" in other.stderr.lower(), other.stderr
        with pytest.raises(duckdb.Error):
            duckdb.connect(str(path))  # read-write, in this process
    finally:
        e.close()
    with duckdb.connect(str(path)) as con:  # closed: writable again, and nothing changed
        assert con.execute("SELECT MAX(age) FROM t").fetchone() == (100,)


def test_a_query_duckdb_cannot_answer_proves_nothing(tmp_path: Path) -> None:
    """``_in_bounds`` fails closed: a DuckDB error (here a table that is not there) leaves the
    column unmarked instead of reaching the caller."""
    from dpproxy.backends.scanned import _in_bounds

    table = parse_catalog(SCHEMA).table("t")
    assert table is not None
    with duckdb.connect(str(tmp_path / "none.duckdb")) as con:
        assert _in_bounds(con, table, "age", lambda n: f'"{n}"') is False
        con.execute("CREATE TABLE t(pid INTEGER, g INTEGER, age INTEGER, score DOUBLE)")
        assert _in_bounds(con, table, "age", lambda n: f'"{n}"') is True


# ------------------------------------------------------------------ float columns

FLOAT_QUERIES = (
    "SELECT SUM(score) FROM t",
    "SELECT AVG(score), VAR_POP(score) FROM t",
    "SELECT g, SUM(score * 2 + age), AVG(score) FROM t GROUP BY g",
    "SELECT SUM(score / 4 + 1) FROM t WHERE age > 10",
)
CLAMP = "CASE WHEN CAST(score AS DOUBLE) < 0"


def _score_column(e: Engine) -> Column:
    col = e.catalog.table("t").column("score")  # type: ignore[union-attr]
    assert col is not None
    return col


def _score(e: Engine) -> bool:
    return _score_column(e).scanned


@pytest.mark.parametrize(
    ("scores", "scanned"),
    [
        ([0.0, 1.0, 0.5, None, 1e-300, -0.0], True),  # the bounds themselves, NULL, tiny, -0
        ([None, None], True),
        ([0.5, float("nan")], False),  # NaN: unclamped, it would fail the fixed-point cast
        ([0.5, float("inf")], False),
        ([0.5, float("-inf")], False),
        ([0.5, 1.0000000000000002], False),  # the next double above the bound
        ([0.5, -5e-324], False),  # the smallest negative double
    ],
)
def test_which_rows_prove_a_float_column(
    scores: list[float | None], scanned: bool, tmp_path: Path
) -> None:
    """A float column is marked only when no row makes either comparison of its clamp true
    and none is NaN (``rewrite/noop_clamps.clamp_conditions``); the SQL that runs then has no
    clamp for it, the SQL EXPLAIN shows always has."""
    e = _engine(_database(tmp_path / "f.duckdb", [1] * len(scores), scores=scores))
    try:
        assert _score(e) is scanned
        for sql in FLOAT_QUERIES:
            run = e.prepare(sql, secret=SECRET).sql
            shown = e.canonical().prepare(sql, secret=SECRET).sql
            assert run is not None and shown is not None
            assert CLAMP in shown, sql
            assert (CLAMP not in run) is scanned, sql
    finally:
        e.close()


def test_float_sql_that_runs_gives_the_rows_of_the_canonical_sql(tmp_path: Path) -> None:
    """On 20 random files whose scores lie in [0, 1] (the bounds, NULLs, subnormals, -0
    among them), every float query's two statements return the same rows, exactly; and a
    value outside in one more file leaves the clamp in."""
    rng = random.Random(20261128)
    pick = [0.0, 1.0, -0.0, None, 5e-324, 0.1, 1 - 2**-53]
    for n in range(20):
        size = rng.randint(0, 60)
        scores = [rng.choice([*pick, rng.random()]) for _ in range(size)]
        ages = [rng.randint(0, 100) for _ in range(size)]
        e = _engine(_database(tmp_path / f"f{n}.duckdb", ages, scores=scores))
        try:
            assert _score(e) is True
            for sql in FLOAT_QUERIES:
                run = e.prepare(sql, secret=SECRET).sql
                shown = e.canonical().prepare(sql, secret=SECRET).sql
                assert run is not None and shown is not None and CLAMP not in run
                a, b = e.backend.execute(run), e.backend.execute(shown)
                assert a.columns == b.columns
                assert sorted(a.rows, key=repr) == sorted(b.rows, key=repr), (sql, scores)
        finally:
            e.close()


def test_a_float_value_outside_tells_nothing_to_the_analyst(tmp_path: Path) -> None:
    """Two files that differ in one person's score, inside [0, 1] or NaN: the same EXPLAIN
    in all three forms, and answers of the same shape."""
    schema = tmp_path / "s.yaml"
    schema.write_text(SCHEMA, encoding="utf-8")
    scores = [(i % 10) / 10 for i in range(len(IN_BOUNDS))]
    inside = _database(tmp_path / "in.duckdb", IN_BOUNDS, scores=[*scores[:-1], 0.25])
    nan = _database(tmp_path / "nan.duckdb", IN_BOUNDS, scores=[*scores[:-1], float("nan")])
    for sql in FLOAT_QUERIES[:2]:
        a, b = _explains(inside, schema, sql), _explains(nan, schema, sql)
        assert a == b, sql
        assert CLAMP in a[0]
    assert _shapes(inside, schema, FLOAT_QUERIES) == _shapes(nan, schema, FLOAT_QUERIES)


@pytest.mark.parametrize("which", ["clamp", "magnitude"])
def test_a_float_query_duckdb_cannot_answer_proves_nothing(which: str, tmp_path: Path) -> None:
    """Both float scans fail closed: a DuckDB error (no table; a text that does not cast to
    DOUBLE) leaves the clamp (``_clamp_is_identity``: False) and the taming
    (``least_nonzero``: 0.0) in the SQL."""
    from dpproxy.backends.scanned import _clamp_is_identity, least_nonzero

    scan = _clamp_is_identity if which == "clamp" else least_nonzero
    table = parse_catalog(SCHEMA).table("t")
    assert table is not None
    with duckdb.connect(str(tmp_path / "none.duckdb")) as con:
        assert not scan(con, table, "score", lambda n: f'"{n}"')
        con.execute("CREATE TABLE t(pid INTEGER, g INTEGER, age INTEGER, score VARCHAR)")
        con.execute("INSERT INTO t VALUES (1, 0, 1, 'x')")  # CAST('x' AS DOUBLE) fails
        assert not scan(con, table, "score", lambda n: f'"{n}"')


# ------------------------------------------------------------------ the taming of float leaves

TAME = "ABS(CAST(score AS DOUBLE)) < 1e-"  # rewrite/floats.py's first branch
TAMED_QUERIES = FLOAT_QUERIES[2:]  # score under arithmetic


def _text_scores(path: Path, scores: list[float | None], ages: list[int]) -> Path:
    """A file of ``t`` whose scores are inserted as text cast to DOUBLE, which stores -0.0 as
    such (a float parameter would not)."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t(pid INTEGER PRIMARY KEY, g INTEGER, age INTEGER, score DOUBLE)")
        for i, (sc, age) in enumerate(zip(scores, ages, strict=True)):
            text = None if sc is None else repr(sc)
            con.execute("INSERT INTO t VALUES (?, ?, ?, CAST(? AS DOUBLE))", [i, i % 4, age, text])
    return path


def _same_rows(e: Engine, sql: str) -> tuple[str, str]:
    """The SQL that runs and the SQL EXPLAIN shows for ``sql``, after checking that both
    return the same rows, exactly."""
    run = e.prepare(sql, secret=SECRET).sql
    shown = e.canonical().prepare(sql, secret=SECRET).sql
    assert run is not None and shown is not None
    a, b = e.backend.execute(run), e.backend.execute(shown)
    assert a.columns == b.columns
    assert sorted(a.rows, key=repr) == sorted(b.rows, key=repr), sql
    return run, shown


@pytest.mark.parametrize(
    ("scores", "least"),
    [
        ([0.5, 0.25, 1.0, None], 0.25),
        ([0.0, 0.0, None, 0.75], 0.75),  # +0.0 is mapped to the same +0.0
        ([0.0, None], float("inf")),  # no non-zero value at all
        ([0.5, 1e-300], 1e-300),  # below every 1e-L the taming can use (L ≤ 150)
        ([0.5, 5e-324], 5e-324),
        ([0.5, -0.0], 0.0),  # -0.0 would become +0.0: unproved
        ([0.5, float("nan")], 0.0),  # not scanned at all: the clamp proof failed
    ],
)
def test_which_rows_leave_the_taming_out(
    scores: list[float | None], least: float, tmp_path: Path
) -> None:
    """``Column.least_nonzero`` is the least non-zero magnitude (0.0 when a row holds -0.0 or
    the column is not proved within its bounds); the SQL that runs leaves out the taming of a
    float leaf exactly when no row takes one of its branches but +0.0, while the SQL EXPLAIN
    shows always has it."""
    e = _engine(_text_scores(tmp_path / "m.duckdb", scores, [1] * len(scores)))
    try:
        assert _score_column(e).least_nonzero == least
        left_out = least >= 1e-150  # L ≤ 150: a bound of the taming these queries use
        for sql in TAMED_QUERIES:
            run, shown = _same_rows(e, sql)
            assert TAME in shown, sql
            assert (TAME not in run) is left_out, sql
    finally:
        e.close()


def test_sql_without_the_taming_gives_the_rows_of_the_canonical_sql(tmp_path: Path) -> None:
    """On 20 random files in bounds, half of them holding a tiny value or -0.0: the SQL that
    runs leaves out the taming exactly on the others, and returns the canonical SQL's rows,
    exactly, for every query whose float leaf is tamed."""
    rng = random.Random(20261128 + 1)
    for n in range(20):
        size = rng.randint(1, 60)
        scores: list[float | None] = [
            rng.choice([0.0, 1.0, None, 0.1, 1 - 2**-53, rng.random()]) for _ in range(size)
        ]
        tiny = n % 2 == 1
        if tiny:
            scores[rng.randrange(size)] = rng.choice([-0.0, 5e-324, 1e-200, 2.0**-600])
        ages = [rng.randint(0, 100) for _ in range(size)]
        e = _engine(_text_scores(tmp_path / f"r{n}.duckdb", scores, ages))
        try:
            for sql in TAMED_QUERIES:
                run, _ = _same_rows(e, sql)
                assert (TAME in run) is tiny, (sql, scores)
        finally:
            e.close()


def test_a_tiny_value_tells_nothing_to_the_analyst(tmp_path: Path) -> None:
    """Two files that differ in one person's score, 0.25 or 1e-300 (which keeps the taming in
    the SQL that runs): the same EXPLAIN in all three forms, and answers of the same shape."""
    schema = tmp_path / "s.yaml"
    schema.write_text(SCHEMA, encoding="utf-8")
    scores = [(i % 10) / 10 for i in range(len(IN_BOUNDS))]
    plain = _database(tmp_path / "plain.duckdb", IN_BOUNDS, scores=[*scores[:-1], 0.25])
    tiny = _database(tmp_path / "tiny.duckdb", IN_BOUNDS, scores=[*scores[:-1], 1e-300])
    for sql in TAMED_QUERIES:
        a, b = _explains(plain, schema, sql), _explains(tiny, schema, sql)
        assert a == b, sql
        assert TAME in a[0]
    assert _shapes(plain, schema, TAMED_QUERIES) == _shapes(tiny, schema, TAMED_QUERIES)
