"""Fixtures of ``tests/console``: a users file made by the real CLI, ``dpproxy serve`` and
``dpproxy console`` on one ledger (real processes, real sockets), headless chromium.

A missing chromium or Playwright skips the browser test and fails it under CI (``.ci/run``
installs both).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.bi.tools import headless_chromium
from tests.commands import dpproxy_command

STEWARD, STEWARD_PASSWORD = "sam", "steward-pass-1"
ANALYST, ANALYST_PASSWORD = "ana", "analyst-pass-1"


@dataclass
class Stack:
    users: Path
    ledger: Path
    console_url: str
    serve_host: str
    serve_port: int
    procs: list[subprocess.Popen[str]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _add_user(users: Path, name: str, password: str, role: str) -> None:
    subprocess.run(
        [
            *dpproxy_command(),
            "user",
            "--users",
            str(users),
            "add",
            name,
            "--role",
            role,
            "--password-stdin",
        ],
        input=password + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("console")
    users, ledger = tmp / "users.json", tmp / "ledger.sqlite"
    _add_user(users, STEWARD, STEWARD_PASSWORD, "steward")
    _add_user(users, ANALYST, ANALYST_PASSWORD, "analyst")
    env = dict(os.environ, DPPROXY_LEDGER=str(ledger))
    procs: list[subprocess.Popen[str]] = []
    serve_log = tmp / "serve.log"
    with serve_log.open("w") as out:
        procs.append(
            subprocess.Popen(
                [
                    *dpproxy_command(),
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--users",
                    str(users),
                    "--ledger",
                    str(ledger),
                ],
                stdout=subprocess.DEVNULL,
                stderr=out,
                text=True,
                env=env,
            )
        )
    port = _free_port()
    console_log = tmp / "console.log"
    with console_log.open("w") as out:
        procs.append(
            subprocess.Popen(
                [
                    *dpproxy_command(),
                    "console",
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--users",
                    str(users),
                    "--ledger",
                    str(ledger),
                ],
                stdout=subprocess.DEVNULL,
                stderr=out,
                text=True,
                env=env,
            )
        )
    try:
        deadline = time.monotonic() + 120
        serve = None
        while time.monotonic() < deadline:
            serve = serve or re.search(
                r"dpproxy serving on \('([\d.]+)', (\d+)\)", serve_log.read_text()
            )
            up = False
            try:
                up = httpx.get(f"http://127.0.0.1:{port}/login", timeout=2).status_code == 200
            except httpx.HTTPError:
                pass
            if serve and up:
                break
            for p, log in zip(procs, (serve_log, console_log), strict=True):
                if p.poll() is not None:
                    raise AssertionError(f"{p.args} exited:\n{log.read_text()}")
            time.sleep(0.3)
        else:
            raise AssertionError(
                "serve or console did not start:\n"
                + serve_log.read_text()
                + console_log.read_text()
            )
        assert serve is not None
        yield Stack(
            users, ledger, f"http://127.0.0.1:{port}", serve.group(1), int(serve.group(2)), procs
        )
    finally:
        for p in procs:
            _stop(p)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, driven by Playwright."""
    with headless_chromium() as b:
        yield b


@contextlib.contextmanager
def console_process(
    users: Path, ledger: Path, *args: str, verify: Any = True
) -> Iterator[tuple[str, httpx.Response]]:
    """A ``dpproxy console`` process on a free port with ``args``: (its URL, the first answer
    to GET /login, once it answers); stopped afterwards."""
    port = _free_port()
    scheme = "https" if "--tls-cert" in args else "http"
    proc = subprocess.Popen(
        [*dpproxy_command(), "console", "--listen", f"127.0.0.1:{port}", "--users", str(users),
         "--ledger", str(ledger), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        url = f"{scheme}://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                first = httpx.get(url + "/login", verify=verify, timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "no console"
                time.sleep(0.2)
        yield url, first
    finally:
        _stop(proc)
