"""pgAdmin 4 (pinned in ``tests/bi/tools.py``, desktop mode) against ``dpproxy serve``, in a
browser.

The server is registered with ``setup.py load-servers`` (as pgAdmin's own deployment tooling
does); everything else happens in headless chromium: connect (the password typed into pgAdmin's
dialog), expand the tree down to the columns of ``adult``, open the Query Tool, run
``SELECT sex, COUNT(*) FROM adult GROUP BY sex`` and see both rows in the result grid.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bi import tools
from tests.bi.tools import DATABASE, PASSWORD, USER, Proxy, missing, screenshot

QUERY = "SELECT sex, COUNT(*) FROM adult GROUP BY sex"
SERVER_NAME = "dpproxy demo"


@pytest.fixture(scope="module")
def pgadmin(tmp_path_factory: pytest.TempPathFactory, proxy: Proxy) -> Iterator[tools.WebTool]:
    work = tmp_path_factory.mktemp("pgadmin")
    servers = work / "servers.json"
    servers.write_text(
        json.dumps(
            {
                "Servers": {
                    "1": {
                        "Name": SERVER_NAME,
                        "Group": "Servers",
                        "Host": proxy.host,
                        "Port": proxy.port,
                        "MaintenanceDB": DATABASE,
                        "Username": USER,
                        "ConnectionParameters": {"sslmode": "disable", "connect_timeout": 10},
                    }
                }
            }
        )
    )
    try:
        tool = tools.start_pgadmin(work, servers)
    except tools.ToolUnavailable as exc:
        missing(f"pgAdmin 4 is unavailable: {exc}")
    yield tool
    tool.stop()


def _node(page: Any, label: str) -> Any:
    """The tree entry labelled exactly ``label``."""
    name = page.locator(".file-name").filter(has_text=re.compile(rf"^{re.escape(label)}$"))
    return page.locator(".file-entry").filter(has=name).first


def _expand(page: Any, label: str) -> None:
    """Expand tree node ``label`` (pgAdmin loads its children, with catalog queries, then)."""
    node = _node(page, label)
    node.wait_for(timeout=60_000)
    toggle = node.locator(".directory-toggle")
    if "open" not in (toggle.get_attribute("class") or ""):
        page.wait_for_timeout(500)  # the tree re-renders while the previous level loads
        toggle.click()
    deadline = time.monotonic() + 60
    while "open" not in (toggle.get_attribute("class") or ""):
        assert time.monotonic() < deadline, f"tree node {label!r} did not open"
        page.wait_for_timeout(200)
    page.wait_for_timeout(500)


def _frame(page: Any, path: str) -> Any:
    """The frame whose URL contains ``path``, once it exists."""
    deadline = time.monotonic() + 60
    while True:
        found = [f for f in page.frames if path in f.url]
        if found:
            return found[-1]
        assert time.monotonic() < deadline, f"no frame {path}: {[f.url for f in page.frames]}"
        page.wait_for_timeout(250)


def test_pgadmin_browse_and_query_tool(
    page: Any, pgadmin: tools.WebTool, proxy: Proxy, tmp_path: Path
) -> None:
    page.goto(pgadmin.url)
    # Expanding the group selects its only server, and pgAdmin asks for the password.
    _expand(page, "Servers")
    password = page.locator(".MuiDialog-root input[type=password]").first
    password.wait_for(timeout=60_000)
    password.fill(PASSWORD)
    password.press("Enter")
    # Once connected, pgAdmin opens the server's node itself (a click meanwhile would start a
    # second, concurrent connect).
    _node(page, "Databases").wait_for(timeout=120_000)
    for label in ("Databases", DATABASE, "Schemas", "public", "Tables", "adult"):
        _expand(page, label)
    _expand(page, "Columns")
    # The tree is virtualised (only visible rows exist): the first columns, and the count.
    for column in ("person_id", "age", "workclass"):
        _node(page, column).wait_for(timeout=60_000)
    assert "(16)" in _node(page, "Columns").inner_text()
    screenshot(page, tmp_path, "pgadmin-columns")

    # The Query Tool on the selected table's database (Tools menu), run with F5.
    _node(page, "adult").click()
    page.get_by_role("button", name="Tools").first.click()
    page.get_by_role("menuitem", name="Query Tool").first.click()
    # The Query Tool lives in an iframe of its own (/sqleditor/panel/...).
    tool = _frame(page, "/sqleditor/panel/")
    editor = tool.locator(".cm-content").first
    editor.wait_for(timeout=60_000)
    editor.click()
    page.keyboard.type(QUERY)
    page.keyboard.press("F5")
    grid = tool.locator("[role=grid]").last
    grid.get_by_text("Female", exact=True).first.wait_for(timeout=60_000)
    grid.get_by_text("Male", exact=True).first.wait_for()
    screenshot(page, tmp_path, "pgadmin-query-tool", keep=True)
