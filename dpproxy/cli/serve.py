"""``dpproxy serve``: the PostgreSQL wire protocol in front of the engine."""

from __future__ import annotations

import click

from dpproxy.cli.common import cli_fail
from dpproxy.errors import DPProxyError, InvalidParameter


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter("expected HOST:PORT, e.g. 127.0.0.1:6432")
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command()
@click.option(
    "--database",
    "-d",
    metavar="FILE|URL",
    help="DuckDB file, CSV/Parquet files or globs (README: Your own data), postgresql:// URL "
    "or Spark (spark+local[N], spark://HOST:PORT, "
    "sc://HOST:PORT; docs/spark.md) (default: the bundled Adult demo).",
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
        cli_fail(InvalidParameter("give both --tls-cert and --tls-key, or neither"))
    if require_tls and tls_cert is None:
        cli_fail(InvalidParameter("--require-tls needs --tls-cert and --tls-key"))
    host, port = _listen(listen)
    users: Path | None = Path(users_path) if users_path else None
    if users is not None and not users.is_file():
        cli_fail(
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
        cli_fail(
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
        cli_fail(err)
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
        cli_fail(err)
    probe = getattr(engine.accountant, "probe", None)  # a durable ledger: can it be written?
    try:
        if probe is not None:
            probe()
    except DPProxyError as err:
        engine.close()
        cli_fail(err)
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
        names = [s.getsockname()[:2] for s in server.sockets]
        addresses = ", ".join(str(n) for n in names)  # the message: ('127.0.0.1', 6432)
        event_loop = type(loop).__module__.split(".")[0]  # uvloop when installed, else asyncio
        logger.info(
            f"dpproxy serving on {addresses}",
            extra={
                "event": "listen",
                "address": ", ".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in names),
                "loop": event_loop,
            },
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
        cli_fail(err)
    finally:
        engine.close()
