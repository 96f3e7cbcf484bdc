"""``dpproxy console``: serve the steward console (``console/app.py``) with uvicorn."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dpproxy.errors import DPProxyError

if TYPE_CHECKING:
    import uvicorn

    from dpproxy.catalog.model import Catalog


@click.command("console")
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="Address of the console (loopback by default; put TLS in front or use --tls-cert "
    "before listening on another interface).",
)
@click.option(
    "-s",
    "--schema",
    "schema_path",
    metavar="FILE",
    help="Privacy schema YAML whose dataset's accounts are shown (default: the demo's).",
)
@click.option(
    "--ledger",
    metavar="FILE",
    help="Budget ledger (default: $DPPROXY_LEDGER, else the file dpproxy serve uses).",
)
@click.option(
    "--users",
    metavar="FILE",
    help="Users file; only users with the steward role log in "
    "(default: $DPPROXY_USERS or ~/.config/dpproxy/users.json).",
)
@click.option(
    "-d",
    "--database",
    metavar="FILE|URL",
    help="Check the schema against this database's metadata on the schema page (as "
    "`dpproxy schema check --database`; no row is read).",
)
@click.option("--tls-cert", metavar="FILE", help="TLS certificate (HTTPS).")
@click.option("--tls-key", metavar="FILE", help="TLS private key.")
def console(
    listen: str,
    schema_path: str | None,
    database: str | None,
    ledger: str | None,
    users: str | None,
    tls_cert: str | None,
    tls_key: str | None,
) -> None:
    """Serve the steward console: budgets with bars, the release log with each answer's
    95% intervals, ε spent over time, the ledger's hash-chain check and the schema; grant,
    reset and group membership from the page (confirmed, logged as `dpproxy budget` logs).
    A JSON API under /api serves the same data. Example:

    \b
        dpproxy user add sam --role steward
        dpproxy console --listen 127.0.0.1:8080
    """
    import uvicorn

    from dpproxy.accounting.ledger import Ledger, default_ledger_path
    from dpproxy.catalog.load import load_catalog
    from dpproxy.console.app import ConsoleConfig, create_app
    from dpproxy.demo import demo_schema_path
    from dpproxy.server.users import default_users_path

    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter("expected HOST:PORT, e.g. 127.0.0.1:8080", param_hint="--listen")
    if bool(tls_cert) != bool(tls_key):
        raise click.BadParameter("give both --tls-cert and --tls-key", param_hint="--tls-cert")
    try:
        catalog = load_catalog(schema_path or demo_schema_path())
        path = Path(ledger) if ledger else default_ledger_path()
        book = Ledger(path, catalog.dataset, catalog.policy.budget)
    except DPProxyError as err:
        click.echo(f"ERROR:  {err.message}  (SQLSTATE {err.sqlstate})", err=True)
        if err.hint:
            click.echo(f"HINT:  {err.hint}", err=True)
        sys.exit(1)
    config = ConsoleConfig(
        book,
        Path(users) if users else default_users_path(),
        catalog,
        tls=bool(tls_cert),
        schema_path=str(schema_path or demo_schema_path()),
        database=database,
    )
    click.echo(f"budget ledger: {path}; users: {config.users}", err=True)
    scheme = "https" if tls_cert else "http"
    click.echo(f"dpproxy console on {scheme}://{host.strip('[]') or '127.0.0.1'}:{port}", err=True)
    uvicorn.run(
        create_app(config),
        host=host.strip("[]") or "127.0.0.1",
        port=int(port),
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        log_level="warning",
        access_log=False,
    )


def embedded_console(
    accountant: object,
    users: Path | None,
    catalog: Catalog,
    listen: str,
    tls_cert: str | None,
    tls_key: str | None,
) -> tuple[uvicorn.Server, str]:
    """The console as a uvicorn server to run inside ``dpproxy serve``'s event loop
    (``serve --console ADDR``), over the same ledger, users file and schema; and its URL.
    Signals stay with ``serve``, which stops the console when it stops."""
    import uvicorn

    from dpproxy.accounting.ledger import Ledger
    from dpproxy.console.app import ConsoleConfig, create_app
    from dpproxy.errors import InvalidParameter

    if not isinstance(accountant, Ledger):
        raise InvalidParameter(
            "the console reads the budget ledger file: --console needs a durable --ledger",
            hint="drop --ledger memory, or give --ledger FILE",
        )
    if users is None:
        raise InvalidParameter(
            "the console needs a users file with a steward in it (--trust lets nobody in there)",
            hint="dpproxy user add NAME --role steward, then --users FILE",
        )
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidParameter(f"--console {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    host = host.strip("[]") or "127.0.0.1"

    class _Embedded(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # serve handles SIGINT/SIGTERM
            yield

    app = create_app(ConsoleConfig(accountant, users, catalog, tls=bool(tls_cert)))
    config = uvicorn.Config(
        app,
        host=host,
        port=int(port),
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        log_level="warning",
        access_log=False,
    )
    return _Embedded(config), f"{'https' if tls_cert else 'http'}://{host}:{port}"
