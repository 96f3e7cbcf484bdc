"""The ``dpproxy`` command: a thin layer over the engine (query, explain, schema check)."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from dpproxy import __version__
from dpproxy.config import ConfigGroup
from dpproxy.errors import DPProxyError, InvalidParameter
from dpproxy.output import format_option

_COMMON = [
    click.option(
        "--database",
        "-d",
        metavar="FILE|URL",
        help="DuckDB file, CSV/Parquet files or globs (README: Your own data), postgresql:// "
        "URL or Spark (spark+local[N], spark://HOST:PORT, "
        "sc://HOST:PORT; README: Running on Spark) (default: the bundled Adult demo).",
    ),
    click.option(
        "--schema",
        "-s",
        metavar="FILE",
        help="Privacy schema YAML (default: the demo's schemas/adult.yaml).",
    ),
    click.option(
        "--epsilon",
        "-e",
        metavar="EPS",
        help="ε for this query (default: the schema's privacy.epsilon).",
    ),
    click.option(
        "--delta", metavar="DELTA", help="δ for this query (default: the schema's privacy.delta)."
    ),
    click.option(
        "--mechanism",
        type=click.Choice(["laplace", "gaussian"]),
        help="Noise for sums and counts (default: the schema's).",
    ),
    click.option(
        "--plan",
        type=click.Choice(["gs", "joint", "ptr", "smooth", "exponential", "saa"]),
        help="Force a plan for the aggregates that support it (default: the one with the "
        "lowest predicted error; see `dpproxy explain`). Per-query hints: /*+ dpproxy "
        "mechanism=ptr ptr_bound=0.01 */.",
    ),
]


def _common(f: Any) -> Any:
    for option in reversed(_COMMON):
        f = option(f)
    return f


def _fail(err: DPProxyError, fmt: str = "table") -> NoReturn:
    from dpproxy.output import fail

    fail(err, fmt)


@click.group(cls=ConfigGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dpproxy")
@click.option(
    "--config",
    metavar="FILE",
    expose_value=False,
    help="Settings file (default: $DPPROXY_CONFIG, else ./dpproxy.toml, else "
    "~/.config/dpproxy/dpproxy.toml); keys database, schema, ledger, users, listen, tls_cert, "
    "tls_key, user. Accepted before or after the subcommand.",
)
@click.option(
    "--profile",
    metavar="NAME",
    expose_value=False,
    help="Use the [profile.NAME] table of the settings file (default: $DPPROXY_PROFILE).",
)
def main() -> None:
    """dpproxy: ordinary SQL in, differentially private answers out.

    With no --database/--schema (on the command line or in dpproxy.toml), commands use the
    bundled UCI Adult demo (table `adult`), built into a DuckDB file in your cache directory
    on first use. Budgets are kept in one ledger for every command (--ledger, else
    $DPPROXY_LEDGER, else ~/.local/share/dpproxy/ledger.sqlite). Exit status: 0 success,
    1 an error with a SQLSTATE, 2 a command line that cannot be parsed.
    """


@main.command()
@click.argument("sql", required=False)
@_common
@click.option(
    "--file",
    "-f",
    "sql_file",
    metavar="FILE",
    help="Read the SQL from FILE ('-' for standard input) instead of the argument.",
)
@click.option(
    "--analyst", "-a", default="analyst", show_default=True, help="Whose privacy budget pays."
)
@format_option(
    "Output format; json carries the rows, the privacy cost, the budget left, the ledger and "
    'errors as {"error": {"sqlstate", "message", "hint"}}.'
)
@click.option("--errors/--no-errors", default=False, help="Show each noisy cell's 95% error bound.")
@click.option(
    "--statement-timeout",
    type=click.FloatRange(min=0.001),
    metavar="SECONDS",
    help="PostgreSQL and Spark: cancel the query after this long (SQLSTATE 57014; default "
    "60 s on PostgreSQL, 300 s on Spark).",
)
@click.option(
    "--ledger",
    metavar="FILE|memory",
    help="The SQLite budget ledger shared by every dpproxy command (default: $DPPROXY_LEDGER, "
    "else ~/.local/share/dpproxy/ledger.sqlite); 'memory' keeps budgets for this command only.",
)
@click.option(
    "--cache",
    type=click.Choice(["analyst", "shared", "off"]),
    default="analyst",
    show_default=True,
    help="Answer an identical query again from the ledger at no cost: per analyst, shared "
    "between analysts, or never.",
)
@click.option(
    "--log",
    "log_file",
    metavar="FILE",
    envvar="DPPROXY_LOG",
    help="Append the operator's log (JSON lines, warnings and errors: the cause of a failed "
    "query) to FILE (default: $DPPROXY_LOG, else no log). Never printed: it may quote data.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="warning",
    show_default=True,
    help="Least severe record written to the --log file.",
)
def query(
    sql: str | None,
    database: str | None,
    schema: str | None,
    epsilon: str | None,
    delta: str | None,
    mechanism: str | None,
    plan: str | None,
    sql_file: str | None,
    analyst: str,
    fmt: str,
    errors: bool,
    statement_timeout: float | None,
    ledger: str | None,
    cache: str,
    log_file: str | None,
    log_level: str,
) -> None:
    """Answer one aggregate SQL query with differential privacy (spends budget).

    SQL is one SELECT statement ("-" or -f FILE reads it from standard input or a file); the
    cost is charged to --analyst in the ledger every command shares. DP_INTERVAL_LOW(agg) and
    DP_INTERVAL_HIGH(agg) select the ends of an aggregate's 95% interval, at no extra cost
    (NULL, with a notice on stderr, for the exponential mechanism and smooth sensitivity);
    "EXPLAIN SQL" prints the plan as rows and spends nothing. Example:

    \b
        dpproxy query "SELECT sex, AVG(age) FROM adult GROUP BY sex"
        dpproxy query "SELECT sex, AVG(age), DP_INTERVAL_LOW(AVG(age)),
                       DP_INTERVAL_HIGH(AVG(age)) FROM adult GROUP BY sex"
    """
    from dpproxy.accounting.ledger import ledger_setting
    from dpproxy.dbapi import connect
    from dpproxy.mechanisms import noise
    from dpproxy.output import exhausted_hint, read_sql, report_answer

    noise.ONE_SHOT_PROCESS = True  # this process is ours alone: see noise._without_numpy
    if log_file:
        _operator_log(log_file, log_level)
    text = read_sql(sql, sql_file)
    where = ledger_setting(ledger, durable=True)
    try:
        with connect(
            database,
            schema=schema,
            analyst=analyst,
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            plan=plan,
            statement_timeout=statement_timeout,
            ledger=where,
            cache=cache,
        ) as con:
            cur = con.cursor().execute(text)
            report_answer(cur, analyst, where, fmt, errors)
    except DPProxyError as err:
        _fail(exhausted_hint(err, analyst, where), fmt)


def _operator_log(path: str, level: str = "warning") -> None:
    """Send dpproxy's records at ``level`` and above to ``path`` as JSON lines (the operator's
    log: a failed query's cause is there, never on the terminal)."""
    from dpproxy.logsetup import json_logging

    json_logging(level, path=path)


@main.command()
@click.argument("sql", required=False)
@_common
@click.option(
    "--file",
    "-f",
    "sql_file",
    metavar="FILE",
    help="Read the SQL from FILE ('-' for standard input) instead of the argument.",
)
@format_option(
    "Output format: the plan as text (table), one line per CSV row, or JSON; errors in "
    'json are {"error": {"sqlstate", "message", "hint"}}.'
)
@click.option(
    "--analyst",
    "-a",
    default=None,
    help="Also show this analyst's remaining budget and whether the query was answered "
    "before (then it is free).",
)
@click.option(
    "--ledger",
    metavar="FILE",
    help="The budget ledger to read for --analyst (default: $DPPROXY_LEDGER, else "
    "~/.local/share/dpproxy/ledger.sqlite, the ledger every command shares).",
)
def explain(
    sql: str | None,
    database: str | None,
    schema: str | None,
    epsilon: str | None,
    delta: str | None,
    mechanism: str | None,
    plan: str | None,
    sql_file: str | None,
    fmt: str,
    analyst: str | None,
    ledger: str | None,
) -> None:
    """Show the plan of a query without running it: rewritten SQL, sensitivities,
    mechanisms, noise scales, 95% errors and the ε/δ cost, and for AVG, medians, percentiles
    and other statistics every candidate plan with its predicted error. Spends nothing."""
    from dpproxy.accounting.ledger import MEMORY, ledger_setting
    from dpproxy.dbapi import connect
    from dpproxy.explain import BudgetView, explain_json, explain_text
    from dpproxy.output import print_records, read_sql

    text = read_sql(sql, sql_file)
    try:
        with connect(
            database,
            schema=schema,
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            plan=plan,
            ledger=ledger_setting(ledger, durable=True) if analyst else MEMORY,
        ) as con:
            c = con
            prepared = c.engine.prepare(
                text,
                epsilon=c.epsilon,
                delta=c.delta,
                mechanism=c.mechanism,
                method=c.method,
                analyst=analyst,
            )
            view = None
            if analyst is not None:
                status = c.engine.accountant.status(analyst)
                cached = c.engine.is_cached(
                    text,
                    analyst=analyst,
                    epsilon=c.epsilon,
                    delta=c.delta,
                    mechanism=c.mechanism,
                    method=c.method,
                )
                view = BudgetView(analyst, status.remaining, status.spent, status.tightest, cached)
            render = explain_json if fmt == "json" else explain_text
            out = render(prepared.plan, ";\n".join(prepared.statements), view)
            if fmt == "csv":
                print_records(["QUERY PLAN"], [[line] for line in out.splitlines()], fmt)
            else:
                click.echo(out)
    except DPProxyError as err:
        _fail(err, fmt)


@main.group()
def schema() -> None:
    """Work with privacy schemas (see schemas/README.md)."""


@schema.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--database",
    "-d",
    metavar="FILE|URL",
    help="Also check the schema against this database (DuckDB file, CSV/Parquet files or "
    "globs, postgresql:// URL): every missing table (42P01) or column (42703) and every "
    "type mismatch (42804). Reads metadata only.",
)
@format_option(
    "Output format: table (problems and TODOs on standard error); json (one document: per "
    "file its problems with their SQLSTATEs and its TODOs); csv (one row per finding)."
)
def schema_check(files: tuple[str, ...], database: str | None, fmt: str) -> None:
    """Validate privacy schema FILES and report every problem with its file and key path.

    Lines still marked TODO are listed (a `privacy_unit: TODO` is a problem: the schema
    cannot load until it names a column). Exits 1 if any file has a problem. Example:

    \b
        dpproxy schema check --database people.csv people.yaml
    """
    from dpproxy.catalog.check import check_schema_file

    shapes = None
    if database is not None:
        from dpproxy.backends.opener import describe

        try:
            shapes = describe(database)
        except DPProxyError as err:
            _fail(err, fmt)
    if fmt != "table":
        import json

        from dpproxy.output import print_records

        reports = [check_schema_file(f, shapes) for f in files]
        if fmt == "json":
            doc = {
                "ok": all(r.ok for r in reports),
                "database": database,
                "files": [r.as_json() for r in reports],
            }
            click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            rows = [
                [r.source, kind, item.get("sqlstate", ""), item["message"]]
                for r in reports
                for kind, item in r.findings()
            ]
            print_records(["file", "kind", "sqlstate", "message"], rows, "csv")
        sys.exit(0 if all(r.ok for r in reports) else 1)
    failed = 0
    for f in files:
        report = check_schema_file(f, shapes)
        if not report.ok:
            failed += 1
            click.echo(f"{f}: {len(report.problems)} problem(s)", err=True)
            for p in report.problems:
                click.echo(f"  {p}", err=True)
        elif report.catalog is not None:
            cat = report.catalog
            n_cols = sum(len(t.columns) for t in cat.tables)
            fits = "; fits the database" if shapes is not None else ""
            click.echo(
                f"{f}: ok (dataset {cat.dataset}: {len(cat.tables)} table(s), "
                f"{n_cols} column(s){fits})"
            )
        if report.todos:
            click.echo(f"{f}: {len(report.todos)} TODO(s) left", err=True)
            for t in report.todos:
                click.echo(f"  {t}", err=True)
    if failed:
        sys.exit(1)


@schema.command("init")
@click.option(
    "--database",
    "-d",
    required=True,
    metavar="FILE|URL",
    help="The data: CSV/Parquet files or globs, a DuckDB file, or a postgresql:// URL.",
)
@click.option(
    "--table",
    "-t",
    "tables",
    multiple=True,
    metavar="NAME",
    help="Draft this table only (repeatable; default: every table).",
)
@click.option("--dataset", metavar="NAME", help="The dataset's name (default: the first table's).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the draft here (default: standard output).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing --output file.")
@click.option(
    "--dp-bounds",
    is_flag=True,
    help="Choose each numeric column's bounds with DP (about the 5th and 95th percentiles of "
    "the units' values, from a fixed grid) and each text column's domain (the values enough "
    "units hold), charged to --steward in the ledger; needs --epsilon and one table.",
)
@click.option("--epsilon", "-e", metavar="EPS", help="--dp-bounds: the total ε to spend.")
@click.option(
    "--delta",
    metavar="DELTA",
    help="--dp-bounds: the total δ of the text columns' DP domains (default 1e-6; 0 leaves "
    "them as TODOs).",
)
@click.option(
    "--unit",
    metavar="COLUMN",
    help="The column naming one person, written as the privacy unit (default: the primary "
    "key; --dp-bounds needs one).",
)
@click.option(
    "--steward",
    default="steward",
    show_default=True,
    metavar="NAME",
    help="--dp-bounds: the ledger account that pays.",
)
@click.option(
    "--ledger",
    metavar="FILE",
    help="--dp-bounds: the budget ledger (default: $DPPROXY_LEDGER, else the default file).",
)
def schema_init(
    database: str,
    tables: tuple[str, ...],
    dataset: str | None,
    output: str | None,
    force: bool,
    dp_bounds: bool,
    epsilon: str | None,
    delta: str | None,
    unit: str | None,
    steward: str,
    ledger: str | None,
) -> None:
    """Write a draft privacy schema from a database's metadata: tables, columns, types,
    nullability, and the primary key as the privacy unit when there is one.

    Never reads the data to decide anything: the privacy unit (without a primary key), bounds
    and domains are left as TODOs for you to fill in from the data's documentation;
    `dpproxy schema check` lists them. With --dp-bounds the bounds and the text columns'
    domains are released with DP instead, at a cost recorded in the ledger
    (mechanisms/dp_bounds.py, mechanisms/dp_domains.py). Examples:

    \b
        dpproxy schema init --database people.csv -o people.yaml
        dpproxy schema init -d people.csv --dp-bounds --epsilon 1 --unit id -o people.yaml
    """
    from pathlib import Path

    from dpproxy.backends.opener import describe
    from dpproxy.catalog.check import check_schema, pick_tables
    from dpproxy.catalog.draft import draft_schema

    try:
        chosen = pick_tables(describe(database), tables, database)
    except DPProxyError as err:
        _fail(err)
    if output is not None and Path(output).exists() and not force:
        _fail(InvalidParameter(f"{output} exists", hint="pass --force to overwrite it"))
    lacking = [t.name for t in chosen if unit is not None and t.column(unit) is None]
    if lacking:
        from dpproxy.errors import UndefinedColumn

        _fail(
            UndefinedColumn(
                f'--unit {unit}: no such column in table "{lacking[0]}"',
                hint="name the column identifying one person; --table picks the tables",
            )
        )
    dp = None
    if dp_bounds:
        dp = _dp_bounds(database, chosen, dataset, epsilon, delta, unit, steward, ledger)
    units = {t.name: unit for t in chosen if unit is not None}
    text = draft_schema(
        dataset or chosen[0].name,
        chosen,
        source=database,
        bounds=dp and dp.bounds,
        units=units,
        domains=dp and dp.domains,
    )
    report = check_schema(text, output or "<draft>")
    if output is None:
        click.echo(text, nl=False)
    else:
        Path(output).write_text(text, encoding="utf-8")
    must = len(report.problems)
    click.echo(
        f"wrote {output or 'the draft'}: {len(chosen)} table(s); {must} TODO(s) to replace "
        f"before it loads, {len(report.todos)} to consider; then `dpproxy schema check"
        f" --database {database} {output or 'FILE'}`",
        err=True,
    )


def _dp_bounds(
    database: str,
    chosen: Any,
    dataset: str | None,
    epsilon: str | None,
    delta: str | None,
    unit: str | None,
    steward: str,
    ledger: str | None,
) -> Any:
    """``schema init --dp-bounds``: check the options, open the ledger, release the bounds and
    domains (``backends/steward.py``)."""
    from fractions import Fraction

    from dpproxy.accounting.ledger import MEMORY, Ledger, ledger_setting
    from dpproxy.backends.steward import estimate_bounds, parse_delta, release_record
    from dpproxy.values import Cost

    if epsilon is None or len(chosen) != 1:
        _fail(
            InvalidParameter(
                "--dp-bounds needs --epsilon and exactly one table",
                hint="e.g. --dp-bounds --epsilon 1 --table people (the ε is spent once, in all)",
            )
        )
    try:
        total = Fraction(epsilon)
    except (ValueError, ZeroDivisionError):
        total = Fraction(0)
    if not Fraction(1, 1000) <= total <= 100:
        _fail(
            InvalidParameter(
                f"--epsilon must be a number in [0.001, 100], not {epsilon!r}",
                hint="the total ε spent on all the bounds, e.g. --epsilon 1",
            )
        )
    try:
        dlt = parse_delta(delta)
    except DPProxyError as err:
        _fail(err)
    shape = chosen[0]
    who = unit or shape.primary_key
    if who is None:
        _fail(
            InvalidParameter(
                f'--dp-bounds needs the privacy unit: table "{shape.name}" has no primary key',
                hint="pass --unit COLUMN, the column naming one person",
            )
        )
    where = ledger_setting(ledger, durable=True)
    if where == MEMORY:
        _fail(
            InvalidParameter(
                "--dp-bounds charges a durable ledger, not --ledger memory",
                hint="omit --ledger for the default ledger, or give a file",
            )
        )
    record = release_record(shape, who, dlt)
    try:
        book = Ledger(where, dataset or shape.name, Cost(Fraction(10), Fraction(1, 10**5)))
        try:
            out = estimate_bounds(database, shape, who, total, book, steward, record, delta=dlt)
        finally:
            book.close()
    except DPProxyError as err:
        _fail(err)
    paid = f", δ={out.cost.delta}" if out.cost.delta else ""
    click.echo(f"privacy cost: ε={total}{paid}, charged to {steward!r} in ledger {where}", err=True)
    return out


@main.group()
def demo() -> None:
    """The bundled Adult demo database."""


@demo.command("path")
def demo_path() -> None:
    """Build the demo DuckDB file if needed and print its path and schema path."""
    from dpproxy.demo import demo_database_path, demo_schema_path

    click.echo(f"database: {demo_database_path(progress=True)}")
    click.echo(f"schema:   {demo_schema_path()}")


@demo.command("load")
@click.option(
    "--database",
    "-d",
    required=True,
    metavar="URL",
    help="PostgreSQL URL to load into, e.g. postgresql://USER:PASSWORD@HOST:5432/DBNAME "
    "(a role that may create tables there).",
)
@click.option(
    "--table",
    default="adult",
    show_default=True,
    metavar="NAME",
    help="Table to create, optionally schema-qualified; the demo schema expects adult.",
)
@click.option(
    "--replace/--no-replace",
    default=False,
    show_default=True,
    help="Drop an existing table of that name and load it anew, in the same transaction.",
)
def demo_load(database: str, table: str, replace: bool) -> None:
    """Load the bundled Adult demo (32,561 rows) into a PostgreSQL database.

    Creates the table (person_id PRIMARY KEY and the 15 Adult columns) and copies the rows
    into it in one transaction: a failure leaves the database as it was. An existing table is
    an error unless --replace. The DuckDB demo needs no loading: it is built automatically on
    first use (`dpproxy demo path`). Example:

    \b
        dpproxy demo load --database postgresql://postgres@localhost:5432/demo
    """
    from dpproxy.demo import load_demo_postgres
    from dpproxy.dsn import is_postgres_url, redact_dsn
    from dpproxy.errors import InvalidParameter

    if not is_postgres_url(database):
        _fail(
            InvalidParameter(
                "--database must be a PostgreSQL URL (postgresql://... or postgres://...): "
                "the demo is loaded only into PostgreSQL",
                hint="the DuckDB demo needs no loading: it is built automatically on first use; "
                "`dpproxy demo path` builds it and prints its path",
            )
        )
    try:
        rows = load_demo_postgres(database, table=table, replace=replace, progress=True)
    except DPProxyError as err:
        _fail(err)
    click.echo(f"loaded {rows} rows into {table} at {redact_dsn(database)}")


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter("expected HOST:PORT, e.g. 127.0.0.1:6432")
    return host.strip("[]") or "127.0.0.1", int(port)


@main.command()
@click.option(
    "--database",
    "-d",
    metavar="FILE|URL",
    help="DuckDB file, CSV/Parquet files or globs (README: Your own data), postgresql:// URL "
    "or Spark (spark+local[N], spark://HOST:PORT, "
    "sc://HOST:PORT; README: Running on Spark) (default: the bundled Adult demo).",
)
@click.option(
    "--schema", "-s", metavar="FILE", help="Privacy schema YAML (default: the demo's schema)."
)
@click.option(
    "--listen",
    default="127.0.0.1:6432",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on (loopback by default; 0.0.0.0:6432 for every interface).",
)
@click.option(
    "--users",
    "users_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Users file of SCRAM verifiers (dpproxy user add); default $DPPROXY_USERS or "
    "~/.config/dpproxy/users.json when it exists.",
)
@click.option(
    "--trust/--no-trust",
    default=False,
    help="Let loopback clients in without a password (development only; never remote). "
    "Warns when the listen address is not loopback.",
)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="TLS certificate.")
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    help="TLS private key (mode 0600 or less, as PostgreSQL requires).",
)
@click.option(
    "--require-tls/--allow-plaintext",
    default=None,
    help="Refuse logins without TLS with SQLSTATE 28000 (PostgreSQL's hostssl). The default "
    "whenever --tls-cert is given; --allow-plaintext also lets unencrypted clients in.",
)
@click.option(
    "--max-connections", default=100, show_default=True, type=click.IntRange(1), help="Cap."
)
@click.option(
    "--authentication-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="Disconnect a client that has not logged in this long after connecting.",
)
@click.option(
    "--idle-timeout",
    default=3600.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="Close connections idle this long.",
)
@click.option(
    "--max-message-size",
    default=1 << 20,
    show_default=True,
    type=click.IntRange(1024),
    metavar="BYTES",
    help="Refuse larger protocol messages (SQLSTATE 54000).",
)
@click.option(
    "--statement-timeout",
    type=click.FloatRange(min=0.001),
    metavar="SECONDS",
    help="Cancel DP queries running longer (SQLSTATE 57014, still charged); the PostgreSQL "
    "backend also sets it as its statement_timeout (default there: 60).",
)
@click.option(
    "--ledger",
    metavar="FILE|memory",
    help="The SQLite budget ledger (default: $DPPROXY_LEDGER, else "
    "~/.local/share/dpproxy/ledger.sqlite); budgets and cached answers survive restarts. "
    "'memory' keeps them in this process only.",
)
@click.option(
    "--cache",
    type=click.Choice(["analyst", "shared", "off"]),
    default="analyst",
    show_default=True,
    help="Scope of the answer cache: an identical query is answered again at no cost.",
)
@click.option(
    "--console",
    "console_listen",
    metavar="HOST:PORT",
    help="Also serve the steward console (dpproxy console) here, in this process, over the "
    "same ledger and users file (TLS as --tls-cert/--tls-key).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    envvar="DPPROXY_LOG_LEVEL",
    show_default=True,
    help="Least severe log record written (JSON lines on standard error; default "
    "$DPPROXY_LOG_LEVEL, else info).",
)
def serve(
    database: str | None,
    schema: str | None,
    listen: str,
    users_path: str | None,
    trust: bool,
    tls_cert: str | None,
    tls_key: str | None,
    require_tls: bool | None,
    max_connections: int,
    authentication_timeout: float,
    idle_timeout: float,
    max_message_size: int,
    statement_timeout: float | None,
    ledger: str | None,
    cache: str,
    console_listen: str | None,
    log_level: str,
) -> None:
    """Serve the PostgreSQL wire protocol: psql, drivers and BI tools connect unchanged.

    Every answer is differentially private and charged to the authenticated user's budget;
    row-level reads are refused. With --tls-cert, logins without TLS are refused unless
    --allow-plaintext. Refuses to start (one line, exit 1) when the TLS key or the users file
    is accessible by group or others, or when the budget ledger cannot be written. Each
    answer comes with a NOTICE of its cost and the budget left; EXPLAIN query returns the
    plan (cost, mechanisms, predicted 95% errors) as rows and spends nothing;
    DP_INTERVAL_LOW/HIGH(agg) give error bars. Example:

    \b
        dpproxy user add ana && dpproxy serve --listen 127.0.0.1:6432
        psql "postgresql://ana@127.0.0.1:6432/dpproxy"
    """
    import asyncio
    import logging
    import signal
    from pathlib import Path

    from dpproxy.engine import open_engine
    from dpproxy.server.server import Server, ServerConfig, check_files, event_loop_factory

    if (tls_cert is None) != (tls_key is None):
        _fail(InvalidParameter("give both --tls-cert and --tls-key, or neither"))
    if require_tls and tls_cert is None:
        _fail(InvalidParameter("--require-tls needs --tls-cert and --tls-key"))
    host, port = _listen(listen)
    users: Path | None = Path(users_path) if users_path else None
    if users is not None and not users.is_file():
        _fail(
            InvalidParameter(
                f"users file {users} does not exist",
                hint=f"create it with `dpproxy user --users {users} add NAME`",
            )
        )
    if users is None:
        from dpproxy.server.users import default_users_path

        default = default_users_path()
        users = default if default.exists() else None
    if users is None and not trust:
        _fail(
            InvalidParameter(
                "no users file: nobody could log in",
                hint="create one with `dpproxy user add NAME` (or pass --users FILE); "
                "--trust lets loopback clients in without a password",
            )
        )
    config = ServerConfig(
        host=host,
        port=port,
        users_path=users,
        trust=trust,
        tls_cert=Path(tls_cert) if tls_cert else None,
        tls_key=Path(tls_key) if tls_key else None,
        require_tls=tls_cert is not None if require_tls is None else require_tls,
        max_connections=max_connections,
        authentication_timeout=authentication_timeout,
        idle_timeout=idle_timeout,
        max_message_size=max_message_size,
        statement_timeout=statement_timeout,
    )
    from dpproxy.server.listen import check_listen, listen_error

    try:
        check_files(config)
        check_listen(host, port)  # a busy port: one line before anything slow starts
    except DPProxyError as err:
        _fail(err)
    from dpproxy.logsetup import json_logging

    json_logging(log_level, server=True)
    logger = logging.getLogger("dpproxy")
    try:
        from dpproxy.accounting.ledger import MEMORY, ledger_setting

        where = ledger_setting(ledger, durable=True)
        engine = open_engine(
            database,
            schema,
            progress=False,  # no plain-text line before the JSON log
            statement_timeout=statement_timeout,
            ledger=where,
            cache=cache,
        )
    except DPProxyError as err:
        _fail(err)
    probe = getattr(engine.accountant, "probe", None)  # a durable ledger: can it be written?
    try:
        if probe is not None:
            probe()
    except DPProxyError as err:
        engine.close()
        _fail(err)
    if where == MEMORY:
        logger.warning(
            "--ledger memory: budgets reset when the server stops",
            extra={"event": "ledger", "ledger": MEMORY},
        )
    else:
        logger.info(f"budget ledger: {where}", extra={"event": "ledger", "ledger": where})

    async def run() -> None:
        server = Server(engine, config)
        try:
            await server.start()
        except OSError as e:  # taken since check_listen
            raise listen_error(host, port, e) from None
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        addresses = ", ".join(str(s.getsockname()[:2]) for s in server.sockets)
        event_loop = type(loop).__module__.split(".")[0]  # uvloop when installed, else asyncio
        logger.info(
            f"dpproxy serving on {addresses}",
            extra={"event": "listen", "address": addresses, "loop": event_loop},
        )
        serving = asyncio.ensure_future(server.serve_forever())
        web = None
        if console_listen:
            from dpproxy.console.command import embedded_console

            web, url = embedded_console(
                engine.accountant, users, engine.catalog, console_listen, tls_cert, tls_key
            )
            web_task = asyncio.ensure_future(web.serve())
            logger.info(f"dpproxy console on {url}", extra={"event": "console", "url": url})
        await stop.wait()
        logger.info("shutting down: finishing in-flight queries", extra={"event": "stopping"})
        if web is not None:
            web.should_exit = True
            await web_task
        await server.shutdown()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving

    import contextlib

    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:  # uvloop if installed
            runner.run(run())
    except DPProxyError as err:
        _fail(err)
    finally:
        engine.close()


if __name__ == "__main__":
    main()
