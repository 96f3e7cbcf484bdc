"""Fast start: each command imports only what it needs (issue 20, item 4).

Each case runs in a fresh interpreter and reports ``sys.modules`` afterwards; the assertions are
on which modules were imported, never on time (``benchmarks/bench_startup.py`` measures the
CPU it saves: ``benchmarks/STARTUP.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "adult.yaml"

# The heavy third-party packages, and the modules of the PostgreSQL-wire server itself.
ENGINE = {"sqlglot", "duckdb", "_duckdb"}
NOISE = {"opendp", "numpy"}
POSTGRES = {"psycopg", "psycopg_pool", "psycopg2"}
NOTEBOOK = {"pandas", "sqlalchemy", "matplotlib", "IPython"}
SERVER = {"dpproxy.server.server", "dpproxy.server.session", "dpproxy.server.protocol",
          "dpproxy.server.catalog"}

_REPORT = """
import json, sys
{body}
mods = sorted(sys.modules)
print("\\n@@" + json.dumps(mods))
"""

_CLI = """
from dpproxy.cli import main
try:
    main({args!r})
except SystemExit as e:
    assert not e.code, e.code
"""


def _modules(body: str) -> set[str]:
    code = _REPORT.format(body=body)
    # budgets in memory: nothing is charged to the user's default ledger file
    env = {**os.environ, "DPPROXY_LEDGER": "memory"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return set(json.loads(p.stdout.rsplit("\n@@", 1)[1]))


def _cli(*args: str) -> set[str]:
    return _modules(_CLI.format(args=list(args)))


def _loaded(modules: set[str], names: set[str]) -> set[str]:
    """Which of ``names`` (packages or modules) ``modules`` holds."""
    return {n for n in names if any(m == n or m.startswith(n + ".") for m in modules)}


def test_import_dpproxy_loads_no_engine() -> None:
    mods = _modules("import dpproxy\n"
                    "assert dpproxy.paramstyle == 'pyformat' and dpproxy.ProgrammingError")
    assert _loaded(mods, ENGINE | NOISE | POSTGRES | NOTEBOOK | SERVER | {"yaml", "click"}) == set()
    assert "dpproxy.dbapi" not in mods and "dpproxy.engine" not in mods


def test_import_dpproxy_alone_loads_the_errors_only() -> None:
    """The PEP 249 attributes (pep249.py, and datetime) are loaded on first use, and neither
    dpproxy/__init__.py nor errors.py imports typing."""
    mods = _modules("import dpproxy\n"
                    "assert 'dpproxy.pep249' not in sys.modules and 'datetime' not in sys.modules\n"
                    "assert 'typing' not in sys.modules\n"
                    "assert dpproxy.Date.today() and dpproxy.Error is dpproxy.DPProxyError\n"
                    "assert 'paramstyle' in dir(dpproxy)")
    assert {"dpproxy.errors", "dpproxy.pep249"} <= mods


def test_help_loads_neither_engine_nor_noise() -> None:
    mods = _cli("--help")
    heavy = ENGINE | NOISE | POSTGRES | NOTEBOOK | SERVER | {"yaml", "asyncio"}
    assert _loaded(mods, heavy) == set()
    assert "dpproxy.engine" not in mods


def test_schema_check_reads_yaml_only() -> None:
    mods = _cli("schema", "check", str(SCHEMA))
    assert "yaml" in mods
    assert _loaded(mods, ENGINE | NOISE | POSTGRES | NOTEBOOK | SERVER) == set()
    assert "dpproxy.engine" not in mods


def test_a_demo_query_loads_duckdb_and_the_samplers_only(demo_db: Path) -> None:
    mods = _cli("query", "SELECT COUNT(*) FROM adult")
    assert {"_duckdb", "sqlglot", "opendp.measurements"} <= mods  # it did run and draw noise
    # DuckDB's engine module alone, not the duckdb package's relation and expression builders
    assert "duckdb" not in mods and "duckdb._relation" not in mods
    assert _loaded(mods, POSTGRES | NOTEBOOK | SERVER) == set()
    # OpenDP's own modules for the samplers, not its prelude and its scikit-learn/polars extras
    assert _loaded(mods, {"opendp.prelude", "opendp.extras", "polars", "sklearn"}) == set()
    # nor numpy, which OpenDP treats as optional (mechanisms/noise._without_numpy)
    assert "numpy" not in mods
    # nor the decorator OpenDP marks deprecated functions with, and the wrapt and asyncio it
    # imports (mechanisms/noise._deprecated_on_demand)
    assert _loaded(mods, {"deprecated", "wrapt", "asyncio"}) == set()
    # nor the other subcommands' modules (config.LAZY_COMMANDS)
    assert {"dpproxy.accounting.budget_cli", "dpproxy.server.users_cli",
            "dpproxy.console.command"}.isdisjoint(mods)
    # nor the plan printer, needed for EXPLAIN only (dbapi, explain_command), nor sqlglot's
    # optimizer passes, needed for queries over public tables only (planning/public.py)
    assert {"dpproxy.explain", "dpproxy.explain_errors", "dpproxy.explain_notes",
            "sqlglot.optimizer.qualify", "sqlglot.optimizer.annotate_types"}.isdisjoint(mods)
    # nor the standard modules only the Gaussian mechanism (statistics), building the demo
    # (gzip), a PostgreSQL hint (shlex) or file globs (glob) need
    assert {"statistics", "gzip", "shlex", "glob"}.isdisjoint(mods)
    # nor what only other query shapes need (imported where they are met): a subquery, UNION
    # ALL or outer join in FROM, a window function, a UNION, a rows-per-unit bound that is not
    # declared, the Spark dialect pass, and an EXPLAIN statement
    assert QUERY_SHAPES.isdisjoint(mods), QUERY_SHAPES & mods
    # nor, for a COUNT, the release of statistics (order statistics, PTR, SAA: release/stats.py)
    assert {"dpproxy.release.stats", "dpproxy.release.local"}.isdisjoint(mods)


# Imported by the queries that have such a shape only (not by the demo's COUNT and grouped AVG).
QUERY_SHAPES = {
    "dpproxy.sql.perunit", "dpproxy.sql.unionrel", "dpproxy.sql.outer", "dpproxy.sql.leftjoin",
    "dpproxy.rewrite.perunit", "dpproxy.rewrite.unionrel", "dpproxy.rewrite.spark",
    "dpproxy.sql.windows", "dpproxy.planning.union_plan", "dpproxy.planning.truncation",
    "dpproxy.explain_command",
}


@pytest.mark.parametrize("sql", [
    "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex",  # a vector of noise per group
    "SELECT MEDIAN(age) FROM adult",  # report-noisy-min over the candidates
])
def test_one_shot_queries_draw_noise_without_numpy(sql: str, demo_db: Path) -> None:
    mods = _modules(
        "import io, contextlib\n"
        "from dpproxy.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        main(['query', '--format', 'json', {sql!r}])\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "rows = json.loads(out.getvalue())['rows']\n"
        "assert rows and all(v is not None for r in rows for v in r.values()), rows\n"
        "assert 'numpy' not in sys.modules\n"
        "import numpy  # hidden only while OpenDP ran: importable afterwards\n"
        "assert numpy.zeros(2).sum() == 0\n"
    )
    assert "numpy" in mods and "opendp.measurements" in mods
    if "GROUP BY" in sql:
        assert QUERY_SHAPES.isdisjoint(mods), QUERY_SHAPES & mods


@pytest.mark.parametrize(("sql", "module"), [
    ("SELECT COUNT(*) FROM (SELECT age FROM adult WHERE age > 30) s", None),
    ("SELECT COUNT(*) FROM (SELECT person_id, COUNT(*) AS n FROM adult GROUP BY person_id) s",
     "dpproxy.sql.perunit"),
    ("SELECT COUNT(*) FROM (SELECT age FROM adult UNION ALL SELECT age FROM adult) s",
     "dpproxy.sql.unionrel"),
    ("SELECT sex, COUNT(*), RANK() OVER (ORDER BY COUNT(*)) FROM adult GROUP BY sex",
     "dpproxy.sql.windows"),
    ("SELECT COUNT(*) FROM adult UNION ALL SELECT COUNT(*) FROM adult",
     "dpproxy.planning.union_plan"),
    ("EXPLAIN SELECT COUNT(*) FROM adult", "dpproxy.explain_command"),
])
def test_a_query_shape_imports_its_module_when_met(sql: str, module: str | None,
                                                   demo_db: Path) -> None:
    """The modules kept out of the demo's queries are imported, where needed, by the queries
    that have their shape, which are answered (through the DB-API)."""
    mods = _modules("import dpproxy\n"
                    "with dpproxy.connect() as con:\n"
                    f"    rows = con.cursor().execute({sql!r}).fetchall()\n"
                    "assert rows\n")
    if module is not None:
        assert module in mods


def test_one_shot_query_leaves_opendp_deprecations_intact(demo_db: Path) -> None:
    """After a one-shot query imported OpenDP without ``deprecated.sphinx``, the function OpenDP
    marks deprecated still warns when called and still works, and the module imports as is."""
    mods = _modules(
        "import io, contextlib, warnings\n"
        "from dpproxy.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['query', 'SELECT COUNT(*) FROM adult'])\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "assert 'deprecated.sphinx' not in sys.modules and 'wrapt' not in sys.modules\n"
        "import opendp.domains as d, opendp.measurements as m, opendp.metrics as mt\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    noisy_max = m.make_report_noisy_max_gumbel(\n"
        "        d.vector_domain(d.atom_domain(T=float, nan=False)), mt.linf_distance(T=float),\n"
        "        scale=1.0)\n"
        "assert [w.category for w in caught] == [DeprecationWarning], caught\n"
        "assert 'make_noisy_max' in str(caught[0].message)\n"
        "assert noisy_max([0.0, 1000.0, 0.0]) == 1\n"
        "import deprecated.sphinx\n"
        "assert deprecated.sphinx.__file__ and callable(deprecated.sphinx.deprecated)\n"
    )
    assert "wrapt" in mods


def test_library_processes_let_opendp_see_numpy(demo_db: Path) -> None:
    """Outside the one-shot command (a notebook, the server) OpenDP is imported as usual, so a
    caller using OpenDP directly keeps its numpy types."""
    mods = _modules("import dpproxy\n"
                    "with dpproxy.connect() as con:\n"
                    "    con.cursor().execute('SELECT COUNT(*) FROM adult').fetchall()\n"
                    "import opendp.typing\n"
                    "import numpy\n"
                    "assert numpy.int64 in opendp.typing._ELEMENTARY_TYPES\n")
    assert "numpy" in mods


@pytest.mark.parametrize("body", [
    "import dpproxy\ndpproxy.connect().close()",
    "from dpproxy.cli import main\n"
    "try:\n    main(['explain', 'SELECT AVG(age) FROM adult'])\n"
    "except SystemExit as e:\n    assert not e.code",
])
def test_no_noise_no_opendp(body: str, demo_db: Path) -> None:
    """Opening the demo, and explaining a query, draw no noise: OpenDP is not imported."""
    mods = _modules(body)
    assert "_duckdb" in mods
    assert _loaded(mods, NOISE | POSTGRES | NOTEBOOK | SERVER) == set()


def test_read_sql_loads_pandas_but_not_sqlalchemy(demo_db: Path) -> None:
    mods = _modules("import dpproxy\n"
                    "df = dpproxy.read_sql('SELECT COUNT(*) FROM adult')\nassert len(df) == 1")
    assert "pandas" in mods
    assert _loaded(mods, POSTGRES | {"sqlalchemy", "matplotlib"} | SERVER) == set()


@pytest.mark.postgres
def test_a_postgres_query_loads_psycopg_not_duckdb(pg_dsn: str) -> None:
    """psycopg is imported for the PostgreSQL backend only, and DuckDB is not needed there."""
    from dpproxy.demo import load_demo_postgres

    load_demo_postgres(pg_dsn)
    from psycopg.conninfo import conninfo_to_dict

    c = conninfo_to_dict(pg_dsn)
    auth = f"{c['user']}:{c['password']}" if c.get("password") else c["user"]
    url = f"postgresql://{auth}@{c['host']}:{c.get('port', 5432)}/{c['dbname']}"
    mods = _cli("query", "-d", url, "-s", str(ROOT / "dpproxy" / "data" / "adult.yaml"),
                "SELECT COUNT(*) FROM adult")
    assert {"psycopg", "sqlglot", "opendp.measurements"} <= mods
    assert _loaded(mods, {"duckdb", "_duckdb"} | NOTEBOOK | SERVER) == set()


_GC_AT_EXIT = """
import atexit, gc, sys
from dpproxy import config
# registered first, so it runs last: after the freeze an own process registers at exit
atexit.register(lambda: print("\\n@@gc", config.OWN_PROCESS, gc.isenabled(),
                              gc.get_freeze_count() > 0, file=sys.stderr))
sys.argv = ["dpproxy", *{args!r}]
from dpproxy.cli import main
main()
"""


def _gc_at_exit(*args: str) -> tuple[str, str]:
    env = {**os.environ, "DPPROXY_LEDGER": "memory"}
    p = subprocess.run([sys.executable, "-c", _GC_AT_EXIT.format(args=list(args))],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, p.stderr.rsplit("\n@@gc ", 1)[1].strip()


def test_the_command_line_marks_its_own_process(demo_db: Path) -> None:
    """``dpproxy ...`` (``main()`` reading the process's arguments) marks the process as the
    command's own (config.own_process), freezes the heap at exit, and answers as before."""
    out, state = _gc_at_exit("query", "--format", "json", "SELECT COUNT(*) FROM adult")
    assert state == "True True True"
    assert json.loads(out)["rows"][0]["count"] is not None
    out, state = _gc_at_exit("explain", "SELECT COUNT(*) FROM adult")
    assert state == "True True True" and "COUNT" in out


@pytest.mark.parametrize("command", ["query", "explain"])
def test_an_own_process_freezes_the_imports_of_a_query(command: str, demo_db: Path) -> None:
    """In the command's own process, what ``query``/``explain`` imported is frozen
    (config.command_imports) before the query runs, and the collector is enabled again."""
    _modules(
        "import gc, io, contextlib\n"
        "from dpproxy import config\n"
        "from dpproxy.cli import main\n"
        "config.own_process()\n"
        "assert gc.get_freeze_count() == 0\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main([{command!r}, 'SELECT COUNT(*) FROM adult'])\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "assert gc.get_freeze_count() > 0 and gc.isenabled()\n"
        "assert 'dpproxy.engine' in sys.modules\n"
    )


def test_a_command_run_in_a_callers_process_freezes_nothing(demo_db: Path) -> None:
    """``main([...])`` (a caller's process, click's CliRunner): nothing of the caller's heap is
    frozen, and the collector's state is the caller's, enabled or disabled."""
    for before in ("gc.enable()", "gc.disable()"):
        mods = _modules(
            f"import gc, io, contextlib\n{before}\nwas = gc.isenabled()\n"
            "from dpproxy.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        main(['query', 'SELECT COUNT(*) FROM adult'])\n"
            "    except SystemExit as e:\n"
            "        assert not e.code, e.code\n"
            "assert gc.get_freeze_count() == 0 and gc.isenabled() == was\n"
            "from dpproxy import config\n"
            "assert not config.OWN_PROCESS\n"
        )
        assert "dpproxy.config" in mods


def test_command_imports_defers_collection_and_restores_the_collector() -> None:
    import gc

    from dpproxy.config import command_imports

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with command_imports():
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.disable()
    try:
        with command_imports():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
