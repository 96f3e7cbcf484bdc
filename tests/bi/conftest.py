"""Fixtures of ``tests/bi``: a ``dpproxy serve`` on the demo, headless chromium, screenshots.

A missing piece (Debian's chromium, the ``playwright`` package, a tool environment that cannot
be built) skips the test, and fails it under CI (``CI`` set; ``.ci/run`` installs them all).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bi.tools import PASSWORD, USER, Proxy, headless_chromium
from tests.commands import dpproxy_command


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Proxy]:
    """``dpproxy serve`` on the bundled demo (user ``ana``), its log in a file."""
    tmp = tmp_path_factory.mktemp("bi-serve")
    users = tmp / "users.json"
    subprocess.run(
        [*dpproxy_command(), "user", "--users", str(users), "add", USER, "--password-stdin"],
        input=PASSWORD + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )
    log = tmp / "serve.log"
    env = dict(os.environ, DPPROXY_LOG_LEVEL="INFO")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*dpproxy_command(), "serve", "--listen", "127.0.0.1:0", "--users", str(users)],
            stdout=subprocess.DEVNULL,
            stderr=out,
            text=True,
            env=env,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"dpproxy serving on \('([\d.]+)', (\d+)\)", log.read_text())
        if m:
            break
        if proc.poll() is not None:
            raise AssertionError("dpproxy serve exited:\n" + log.read_text())
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("dpproxy serve did not start:\n" + log.read_text())
    run = Proxy(m.group(1), int(m.group(2)), proc, log)
    yield run
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, driven by Playwright."""
    with headless_chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    pg = context.new_page()
    try:
        yield pg
    finally:
        # Whatever happened, the last state of the page is kept for whoever reads the failure.
        try:
            pg.screenshot(path=str(tmp_path / "last.png"), full_page=False)
        except Exception:  # the page or browser may be gone
            pass
        context.close()
