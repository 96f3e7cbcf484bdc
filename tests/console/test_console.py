"""The steward console end to end: ``dpproxy serve`` and ``dpproxy console`` on one ledger,
queries through a real PostgreSQL client, the pages driven in headless chromium, the JSON
API and the security rules checked over real HTTP."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import ssl
from contextlib import closing
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.console.conftest import (
    ANALYST,
    ANALYST_PASSWORD,
    STEWARD,
    STEWARD_PASSWORD,
    Stack,
    console_process,
)

SHOTS = os.environ.get("DPPROXY_CONSOLE_SCREENSHOTS")  # a directory: keep screenshots there
QUERY = "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex"


def _query(stack: Stack, sql: str) -> None:
    url = f"postgresql://{ANALYST}:{ANALYST_PASSWORD}@{stack.serve_host}:{stack.serve_port}/dpproxy"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(sql).fetchall()


def _login(page: Any, stack: Stack, user: str = STEWARD, password: str = STEWARD_PASSWORD) -> None:
    page.goto(stack.console_url + "/login")
    page.fill("input[name=user]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def _remaining(page: Any, principal: str) -> float:
    cell = page.locator(f'tr[data-principal="{principal}"] td.eps-remaining')
    return float(cell.inner_text())


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"console-{name}.png"), full_page=True)


def test_a_steward_watches_the_budget_drop_reads_releases_and_grants(
    stack: Stack, browser: Any
) -> None:
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        _query(stack, QUERY)
        _login(page, stack)
        page.wait_for_url("**/budgets")
        before = _remaining(page, ANALYST)
        _query(stack, "SELECT COUNT(*) FROM adult WHERE age > 40")
        page.reload()
        assert _remaining(page, ANALYST) == pytest.approx(before - 1)
        _shot(page, "budgets")
        # The release log: the analyst's query, its plan and cost; the answer's error bars.
        page.click("header a[href='/log']")
        page.fill("input[name=q]", "GROUP BY sex")
        page.click("form[action='/log'] button")
        page.wait_for_url("**/log?q=*")
        rows = page.locator("#releases tr")
        assert rows.count() == 2  # the header and the one matching release
        assert QUERY in page.locator("#releases").inner_text()
        page.locator("#releases a").first.click()
        assert "Released answer" in page.content()
        assert page.locator("svg.errorbars").count() >= 1
        assert "±" in page.locator("#answer").inner_text()
        _shot(page, "release")
        # Grant from the page: shown for confirmation, then logged.
        page.click("header a[href='/budgets']")
        page.fill("#grant input[name=principal]", ANALYST)
        page.fill("#grant input[name=epsilon]", "25")
        page.click("#grant button")
        assert f"set the total budget of analyst {ANALYST} to ε = 25" in page.inner_text("#action")
        page.click("button:has-text('Confirm')")
        page.wait_for_url("**/budgets")
        assert "done: set the total budget" in page.inner_text(".flash")
        assert _remaining(page, ANALYST) == pytest.approx(25 - 2)
        page.click("header a[href='/spend']")
        assert page.locator("svg.spend").count() == 1
        _shot(page, "spend")
        page.click("header a[href='/verify']")
        assert "Hash chain intact" in page.inner_text("#chain")
        newest = page.locator("#entries tr").nth(1).inner_text()  # the grant, logged
        assert "grant" in newest and ANALYST in newest and "total ε = 25" in newest
    finally:
        context.close()
    # The grant is in the ledger exactly as `dpproxy budget grant` writes it.
    with sqlite3.connect(stack.ledger) as con:
        kind, principal, body = con.execute(
            "SELECT kind, principal, body FROM log ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    assert (kind, principal, Fraction(json.loads(body)["eps"])) == ("grant", ANALYST, 25)


def test_a_broken_hash_chain_is_shown_broken(stack: Stack, browser: Any) -> None:
    with sqlite3.connect(stack.ledger) as con:
        seq, body = con.execute(
            "SELECT seq, body FROM log WHERE kind = 'release' LIMIT 1"
        ).fetchone()
        data = json.loads(body)
        saved = body
        data["eps"] = "0"  # a steward hiding a release's cost
        con.execute("UPDATE log SET body = ? WHERE seq = ?", (json.dumps(data), seq))
    context = browser.new_context()
    page = context.new_page()
    try:
        _login(page, stack)
        page.goto(stack.console_url + "/verify")
        assert "BROKEN" in page.inner_text("#chain")
        _shot(page, "broken")
    finally:
        context.close()
        with sqlite3.connect(stack.ledger) as con:
            con.execute("UPDATE log SET body = ? WHERE seq = ?", (saved, seq))


ROUTES = ["/", "/budgets", "/log", "/log/1", "/spend", "/verify", "/schema"]
API = ["/api/accounts", "/api/log", "/api/log/1", "/api/spend", "/api/verify", "/api/schema"]


def _session(stack: Stack, user: str, password: str) -> tuple[httpx.Client, httpx.Response]:
    c = httpx.Client(base_url=stack.console_url)
    token = re.search(r'name="csrf" value="([^"]+)"', c.get("/login").text)
    assert token is not None
    r = c.post("/login", data={"user": user, "password": password, "csrf": token.group(1)})
    return c, r


def test_nothing_without_a_steward_login(stack: Stack) -> None:
    with httpx.Client(base_url=stack.console_url) as c:
        for route in ROUTES:
            r = c.get(route)
            assert r.status_code == 303 and r.headers["location"] == "/login", route
        for route in API:
            assert c.get(route).status_code == 401, route
        assert c.post("/change", data={"action": "reset", "principal": ANALYST}).status_code == 303
    c, r = _session(stack, ANALYST, ANALYST_PASSWORD)
    with closing(c):
        assert r.status_code == 403 and "only stewards" in r.text
        assert c.get("/api/accounts").status_code == 401
    c, r = _session(stack, STEWARD, "wrong")
    with closing(c):
        assert r.status_code == 401 and c.get("/api/accounts").status_code == 401
    c, r = _session(stack, "nobody", "x")
    with closing(c):
        assert r.status_code == 401


def test_every_change_needs_the_csrf_token(stack: Stack) -> None:
    c, r = _session(stack, STEWARD, STEWARD_PASSWORD)
    with closing(c):
        assert r.status_code == 303
        token = re.search(r'name="csrf" value="([^"]+)"', c.get("/budgets").text)
        assert token is not None
        before = c.get("/api/accounts").json()
        grant = {"action": "grant", "principal": "eve", "epsilon": "99", "confirm": "yes"}
        assert c.post("/change", data=grant).status_code == 403
        assert c.post("/change", data={**grant, "csrf": "forged"}).status_code == 403
        assert c.post("/api/change", json=grant).status_code == 403
        assert c.post("/api/change", json=grant, headers={"X-CSRF-Token": "x"}).status_code == 403
        assert c.get("/api/accounts").json() == before  # nothing changed
        ok = c.post("/api/change", json=grant, headers={"X-CSRF-Token": token.group(1)})
        assert ok.status_code == 200 and ok.json()["done"].startswith("set the total budget")
        bad = c.post(
            "/api/change", json={**grant, "epsilon": "-1"}, headers={"X-CSRF-Token": token.group(1)}
        )
        assert bad.status_code == 400 and bad.json()["error"]["sqlstate"]


def test_headers_and_no_data_on_the_pages(stack: Stack) -> None:
    """Every response carries the security headers; the pages show released values only:
    no row of the demo table (a person's fnlwgt, say) is anywhere."""
    _query(stack, QUERY)
    c, _ = _session(stack, STEWARD, STEWARD_PASSWORD)
    with closing(c):
        for route in [*ROUTES, *API]:
            r = c.get(route, follow_redirects=True)
            assert "script-src" not in r.headers["content-security-policy"]
            assert r.headers["x-frame-options"] == "DENY"
            assert r.headers["cache-control"] == "no-store"
        log = c.get("/api/log", params={"q": "GROUP BY sex"}).json()
        seq = log["releases"][0]["seq"]
        release = c.get(f"/api/log/{seq}").json()
        assert release["answer"]["columns"] == ["sex", "count", "avg"]
        assert all(len(e) == 3 for e in release["answer"]["errors"])
        schema = c.get("/api/schema").json()
        assert schema["dataset"] == "adult" and schema["tables"][0]["privacy_unit"]


def test_log_out_ends_the_session(stack: Stack) -> None:
    c, _ = _session(stack, STEWARD, STEWARD_PASSWORD)
    with closing(c):
        token = re.search(r'name="csrf" value="([^"]+)"', c.get("/budgets").text)
        assert token is not None
        c.post("/logout", data={"csrf": token.group(1)})
        assert c.get("/api/accounts").status_code == 401


def test_the_readme_lists_the_api_routes_the_app_serves() -> None:
    """The README's `/api` list is the app's: every GET route under /api, and POST change."""
    from dpproxy.console.app import ConsoleConfig, create_app

    # the README's "Privacy budgets" section, with "The steward console", is in docs/privacy.md
    doc = Path(__file__).resolve().parents[2] / "docs" / "privacy.md"
    readme = doc.read_text(encoding="utf-8")
    listed = re.search(r"under `/api` \((.*?)\) serves", readme, re.S)
    assert listed is not None
    named = {re.sub(r"\?.*|/SEQ", "", n) for n in re.findall(r"`([a-z/A-Z?=&]+)`", listed.group(1))}
    app = create_app(ConsoleConfig(None, Path("/nonexistent"), None))  # type: ignore[arg-type]
    routes = {
        r.path.removeprefix("/api/").replace("/{seq}", "")
        for r in app.routes
        if getattr(r, "path", "").startswith("/api/")
    }
    assert routes - {"change"} == named - {"POST /api/change"}
    assert "`POST /api/change`" in listed.group(1)


def test_serve_runs_the_console_in_the_same_process(
    stack: Stack, tmp_path: Path, demo_db: Path
) -> None:
    """``serve --console ADDR``: one process answers psql and the console over one ledger;
    a memory ledger has nothing for the console to read and is refused."""
    import subprocess
    import time

    from tests.commands import dpproxy_command
    from tests.console.conftest import _free_port, _stop

    ledger = tmp_path / "ledger.sqlite"
    port = _free_port()
    log = tmp_path / "serve.log"
    base = [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", "--users", str(stack.users)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*base, "--ledger", str(ledger), "--console", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=out,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while "dpproxy console on" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        m = re.search(r"dpproxy serving on \('([\d.]+)', (\d+)\)", log.read_text())
        assert m is not None, log.read_text()
        local = Stack(
            stack.users, ledger, f"http://127.0.0.1:{port}", m.group(1), int(m.group(2)), []
        )
        _query(local, "SELECT COUNT(*) FROM adult")
        c, r = _session(local, STEWARD, STEWARD_PASSWORD)
        with closing(c):
            assert r.status_code == 303
            (ana,) = [
                a for a in c.get("/api/accounts").json()["accounts"] if a["principal"] == ANALYST
            ]
            assert ana["epsilon"]["spent"] == 1.0
    finally:
        _stop(proc)
    refused = subprocess.run(
        [*base, "--ledger", "memory", "--console", f"127.0.0.1:{_free_port()}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1 and "--console needs a durable --ledger" in refused.stderr


def test_the_schema_page_shows_schema_check_against_the_database(
    stack: Stack, tmp_path: Path
) -> None:
    """``console --database``: the schema page and /api/schema carry `schema check`'s findings
    against the data's metadata (a missing column, 42703; a type mismatch, 42804)."""
    (tmp_path / "people.csv").write_text("id,name,age\n1,ann,34\n2,bob,51\n")
    schema = tmp_path / "people.yaml"
    schema.write_text(
        "version: 1\ndataset: people\ntables:\n  people:\n    private: true\n"
        "    privacy_unit: id\n    max_rows_per_unit: 1\n    columns:\n"
        "      id: {type: integer}\n      name: {type: integer}\n"
        "      income: {type: float, lower: 0, upper: 100}\n"
    )
    data = str(tmp_path / "people.csv")
    with console_process(
        stack.users, tmp_path / "ledger.sqlite", "--schema", str(schema), "--database", data
    ) as (url, _):
        c, _ = _session(Stack(stack.users, stack.ledger, url, "", 0, []), STEWARD, STEWARD_PASSWORD)
        with closing(c):
            check = c.get("/api/schema").json()["check"]
            assert not check["ok"]
            text = "\n".join(check["problems"])
            assert "income" in text and "42703" in text
            assert "name" in text and "42804" in text
            assert "42804" in c.get("/schema").text


def test_the_console_over_tls(stack: Stack, tmp_path: Path) -> None:
    """``--tls-cert``/``--tls-key``: HTTPS, and the session cookie is marked Secure."""
    from tests.integration.test_transport import _certificate

    cert, key = _certificate(tmp_path)
    trusted = ssl.create_default_context(cafile=cert)
    trusted.check_hostname = False  # the test certificate names localhost; chain checked
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    with console_process(stack.users, stack.ledger, *tls, verify=trusted) as (url, first):
        assert first.status_code == 200
        cookie = first.headers["set-cookie"].lower()
        assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie
        with pytest.raises(httpx.HTTPError):
            httpx.get(url.replace("https:", "http:") + "/login", timeout=2)  # no plaintext
