"""``dpproxy query`` and ``dpproxy explain``: one statement, answered or planned."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dpproxy.cli.common import cli_fail, common_options, operator_log, sql_file_option
from dpproxy.config import command_imports
from dpproxy.errors import DPProxyError
from dpproxy.output import format_option

if TYPE_CHECKING:
    from dpproxy.explain import BudgetView
    from dpproxy.values import Cost


@click.command()
@click.argument("sql", required=False)
@common_options
@sql_file_option
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
    with command_imports():
        from dpproxy.accounting.ledger import ledger_setting
        from dpproxy.dbapi import connect
        from dpproxy.mechanisms import noise
        from dpproxy.output import exhausted_hint, read_sql, report_answer

    noise.ONE_SHOT_PROCESS = True  # this process is ours alone: see noise._without_numpy
    if log_file:
        operator_log(log_file, log_level)
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
        cli_fail(exhausted_hint(err, analyst, where), fmt)


@click.command()
@click.argument("sql", required=False)
@common_options
@sql_file_option
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
    with command_imports():
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
            prepared = c.engine.canonical().prepare(
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
            if fmt == "json":
                out = _with_amounts(out, prepared.plan.cost, view)
            if fmt == "csv":
                print_records(["QUERY PLAN"], [[line] for line in out.splitlines()], fmt)
            else:
                click.echo(out)
    except DPProxyError as err:
        cli_fail(err, fmt)


def _with_amounts(doc: str, cost: Cost, view: BudgetView | None) -> str:
    """``explain --format json`` with ``query``'s decimal strings beside the plan's doubles:
    ``privacy_cost`` (the plan's cost, rounded up where rounded) and, with ``--analyst``,
    ``budget_left`` (rounded down), as ``output.cost_json`` writes them for ``query``."""
    import json

    from dpproxy.output import cost_json

    data = json.loads(doc)
    data["privacy_cost"] = cost_json(cost)
    if view is not None:
        data["budget_left"] = cost_json(view.remaining, up=False)
    return json.dumps(data, indent=2, ensure_ascii=False)
