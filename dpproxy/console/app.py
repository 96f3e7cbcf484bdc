"""The steward console: a small Starlette application over the budget ledger.

Pages (server-rendered, no JavaScript) and a JSON API under ``/api`` show the accounts with
their spent / reserved / remaining ε and δ, the release log with search and paging, each
release's answer with its 95% intervals as error bars, the ε spent over time per analyst, the
ledger's hash-chain verification and the privacy schema. A steward grants budget, resets an
account and changes group membership from the page; each change is shown for confirmation
first and then made through the same :class:`~dpproxy.accounting.ledger.Ledger` calls as
``dpproxy budget``, so it is logged in the hash chain exactly as the CLI logs it.

Security (``SECURITY.md``):

* **Login.** Only users of the users file whose role is ``steward`` (``dpproxy user add NAME
  --role steward``) log in; analysts are refused (403). The password is checked against the
  user's SCRAM verifier (``server/scram.password_matches``); an unknown user costs the same
  key derivation, so timing does not tell which names exist. The file is read again on every
  request: a steward whose role is removed is logged out at once.
* **Sessions** are signed cookies (``itsdangerous``, a random key per process: a restart logs
  everyone out), ``HttpOnly``, ``SameSite=Strict``, ``Secure`` under TLS.
* **CSRF.** Every change is a POST carrying the session's random token (a hidden form field,
  or the ``X-CSRF-Token`` header for the API), compared in constant time; a missing or wrong
  token is refused (403) and changes nothing. GET never changes anything.
* **Headers.** A Content-Security-Policy without scripts, ``frame-ancestors 'none'``,
  ``nosniff``, ``no-referrer`` and ``Cache-Control: no-store`` on every response.
* **No data.** Nothing here reads the database: only the ledger (budgets, what was asked, and
  the released answers the analysts already received) and the schema's declarations.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from dpproxy.accounting.ledger import Ledger
from dpproxy.catalog.model import Catalog
from dpproxy.console import svg, views
from dpproxy.errors import DPProxyError
from dpproxy.server.scram import make_verifier, parse_verifier, password_matches
from dpproxy.server.users import STEWARD, UserStore
from dpproxy.values import Cost, parse_privacy_number

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.globals["error_bars"] = svg.error_bars
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# An unknown user is checked against this verifier, so a login takes as long either way.
_DUMMY = parse_verifier(make_verifier(secrets.token_urlsafe(16)))


@dataclass
class ConsoleConfig:
    ledger: Ledger
    users: Path
    catalog: Catalog
    tls: bool = False
    schema_path: str | None = None  # with ``database``: the schema page shows schema check's
    database: str | None = None  # findings against the database's metadata (never its rows)


class Forbidden(Exception):
    """A request without a steward session or without the right CSRF token."""


def create_app(config: ConsoleConfig) -> Starlette:
    """The console's ASGI application (``dpproxy console`` serves it with uvicorn)."""

    def steward(request: Request) -> str | None:
        user = request.session.get("user")
        if not isinstance(user, str):
            return None
        if UserStore(config.users).load().role(user) != STEWARD:
            request.session.clear()
            return None
        return user

    def csrf(request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(32)
            request.session["csrf"] = token
        return token

    def page(request: Request, name: str, **context: Any) -> Response:
        context.update(user=request.session.get("user"), csrf=csrf(request), path=request.url.path)
        response = TEMPLATES.TemplateResponse(request, name, context)
        response.headers.update(HEADERS)
        return response

    def json(data: Any, status: int = 200) -> Response:
        response = JSONResponse(data, status_code=status)
        response.headers.update(HEADERS)
        return response

    async def checked(request: Request) -> dict[str, str]:
        """The POSTed form (or JSON body for the API) after the CSRF check."""
        if request.headers.get("content-type", "").startswith("application/json"):
            body = await request.json()
            form = {k: str(v) for k, v in body.items()} if isinstance(body, dict) else {}
            sent = request.headers.get("x-csrf-token", "")
        else:
            data = await request.form()
            form = {k: str(v) for k, v in data.items()}
            sent = form.get("csrf", "")
        token = request.session.get("csrf")
        if not isinstance(token, str) or not secrets.compare_digest(sent, token):
            raise Forbidden("the form has expired or did not come from this console")
        return form

    def need_login(request: Request) -> Response:
        if request.url.path.startswith("/api/"):
            return json({"error": {"message": "log in as a steward first"}}, 401)
        return RedirectResponse("/login", status_code=303)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login.html", error=None)
        try:
            form = await checked(request)
        except Forbidden as e:
            return _status(page(request, "login.html", error=str(e)), 403)
        name, password = form.get("user", ""), form.get("password", "")
        store = UserStore(config.users).load()
        verifier = store.verifier(name) if name in store else None
        ok = password_matches(verifier or _DUMMY, password) and verifier is not None
        if not ok:
            return _status(page(request, "login.html", error="wrong user name or password"), 401)
        if store.role(name) != STEWARD:
            error = f'"{name}" is an analyst: only stewards may use the console'
            return _status(page(request, "login.html", error=error), 403)
        request.session.clear()
        request.session.update(user=name, csrf=secrets.token_urlsafe(32))
        return RedirectResponse("/budgets", status_code=303)

    async def logout(request: Request) -> Response:
        try:
            await checked(request)
        except Forbidden:
            pass
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Any:
        async def run(request: Request) -> Response:
            if steward(request) is None:
                return need_login(request)
            try:
                return await handler(request)
            except Forbidden as e:
                if request.url.path.startswith("/api/"):
                    return json({"error": {"message": str(e)}}, 403)
                return _status(page(request, "error.html", message=str(e)), 403)

        return run

    async def home(request: Request) -> Response:
        return RedirectResponse("/budgets", status_code=303)

    async def budgets(request: Request) -> Response:
        flash = request.session.pop("flash", None)
        return page(request, "budgets.html", data=views.accounts(config.ledger), flash=flash)

    async def releases(request: Request) -> Response:
        q = request.query_params.get("q", "")
        data = views.release_log(config.ledger, q, _int(request.query_params.get("page"), 1))
        return page(request, "log.html", data=data)

    async def release(request: Request) -> Response:
        data = views.release(config.ledger, _int(request.path_params["seq"], 0))
        if data is None:
            return _status(page(request, "error.html", message="no such release"), 404)
        return page(request, "release.html", data=data)

    async def spend(request: Request) -> Response:
        series = views.spend_series(config.ledger)
        return page(request, "spend.html", chart=svg.spend_lines(series), series=series)

    async def verify(request: Request) -> Response:
        return page(request, "verify.html", data=views.verification(config.ledger))

    def schema_data() -> dict[str, Any]:
        data = views.schema(config.catalog)
        data["check"] = views.schema_findings(config.schema_path, config.database)
        return data

    async def schema(request: Request) -> Response:
        return page(request, "schema.html", data=schema_data())

    async def change(request: Request) -> Response:
        form = await checked(request)
        try:
            action = _describe(form, config.ledger)
        except DPProxyError as e:
            return _status(page(request, "error.html", message=e.message), 400)
        if form.get("confirm") != "yes":
            return page(request, "confirm.html", action=action, form=form)
        _apply(form, config.ledger)
        request.session["flash"] = f"done: {action}"
        return RedirectResponse("/budgets", status_code=303)

    async def api_accounts(request: Request) -> Response:
        return json(views.accounts(config.ledger))

    async def api_log(request: Request) -> Response:
        q = request.query_params.get("q", "")
        return json(views.release_log(config.ledger, q, _int(request.query_params.get("page"), 1)))

    async def api_release(request: Request) -> Response:
        data = views.release(config.ledger, _int(request.path_params["seq"], 0))
        return (
            json(data) if data is not None else json({"error": {"message": "no such release"}}, 404)
        )

    async def api_spend(request: Request) -> Response:
        return json(
            {k: [[t, e] for t, e in v] for k, v in views.spend_series(config.ledger).items()}
        )

    async def api_verify(request: Request) -> Response:
        return json(views.verification(config.ledger))

    async def api_schema(request: Request) -> Response:
        return json(schema_data())

    async def api_change(request: Request) -> Response:
        form = await checked(request)
        try:
            action = _describe(form, config.ledger)
            _apply(form, config.ledger)
        except DPProxyError as e:
            return json(
                {"error": {"sqlstate": e.sqlstate, "message": e.message, "hint": e.hint}}, 400
            )
        return json({"done": action, **views.accounts(config.ledger)})

    routes = [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", guarded(home)),
        Route("/budgets", guarded(budgets)),
        Route("/log", guarded(releases)),
        Route("/log/{seq}", guarded(release)),
        Route("/spend", guarded(spend)),
        Route("/verify", guarded(verify)),
        Route("/schema", guarded(schema)),
        Route("/change", guarded(change), methods=["POST"]),
        Route("/api/accounts", guarded(api_accounts)),
        Route("/api/log", guarded(api_log)),
        Route("/api/log/{seq}", guarded(api_release)),
        Route("/api/spend", guarded(api_spend)),
        Route("/api/verify", guarded(api_verify)),
        Route("/api/schema", guarded(api_schema)),
        Route("/api/change", guarded(api_change), methods=["POST"]),
    ]
    middleware = [
        Middleware(
            SessionMiddleware,
            secret_key=secrets.token_urlsafe(32),
            session_cookie="dpproxy_console",
            same_site="strict",
            https_only=config.tls,
            max_age=8 * 3600,
        )
    ]
    return Starlette(routes=routes, middleware=middleware)


def _status(response: Response, code: int) -> Response:
    response.status_code = code
    return response


def _int(text: Any, default: int) -> int:
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return default


def _describe(form: dict[str, str], ledger: Ledger) -> str:
    """What a change does, in words (checked: a bad value raises DPProxyError)."""
    action, name = form.get("action", ""), form.get("principal", "").strip()
    group = form.get("group") == "yes"
    who = f"{'group' if group else 'analyst'} {name}"
    if not name:
        raise _invalid("give the analyst's or group's name")
    if action == "grant":
        eps, delta = _budget(form, ledger, name, group)
        return f"set the total budget of {who} to ε = {float(eps):g}, δ = {float(delta):g}"
    if action == "reset":
        return f"reset what {who} has spent (a new period, by hand)"
    if action in ("add_member", "remove_member"):
        analyst = form.get("analyst", "").strip()
        if not analyst:
            raise _invalid("give the analyst to add or remove")
        verb = "add" if action == "add_member" else "remove"
        return f"{verb} analyst {analyst} {'to' if verb == 'add' else 'from'} group {name}"
    raise _invalid(f"unknown change {action!r}")


def _apply(form: dict[str, str], ledger: Ledger) -> None:
    """Make the change with the ledger's own calls, as ``dpproxy budget`` does."""
    action, name = form["action"], form["principal"].strip()
    group = form.get("group") == "yes"
    if action == "grant":
        eps, delta = _budget(form, ledger, name, group)
        current = ledger.account(name, group=group)
        period = current.period_seconds if current is not None else None
        ledger.grant(name, Cost(eps, delta), group=group, period_seconds=period)
    elif action == "reset":
        ledger.reset(name, group=group)
    elif action == "add_member":
        ledger.add_member(name, form["analyst"].strip())
    else:
        ledger.remove_member(name, form["analyst"].strip())


def _budget(
    form: dict[str, str], ledger: Ledger, name: str, group: bool
) -> tuple[Fraction, Fraction]:
    eps = parse_privacy_number(form.get("epsilon", ""), "epsilon", allow_zero=True)
    text = form.get("delta", "").strip()
    if text:
        delta = parse_privacy_number(text, "delta", allow_zero=True)
        if delta >= 1:
            raise _invalid(f"delta must be below 1, got {text!r}")
    else:
        current = ledger.account(name, group=group)
        delta = current.total.delta if current is not None else ledger.default_budget.delta
    return eps, delta


def _invalid(message: str) -> DPProxyError:
    from dpproxy.errors import InvalidParameter

    return InvalidParameter(message)
