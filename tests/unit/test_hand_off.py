"""``direct.hand_off``: a DP statement's job on a worker thread of the server's executor,
its outcome (a value or any exception) back on the loop; a future nobody waits for any more,
or a closed loop, is left alone. Real threads and a real event loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from dpproxy.errors import QueryCanceled
from dpproxy.server.direct import hand_off as _hand_off


def test_the_value_and_the_thread() -> None:
    async def go() -> tuple[str, str]:
        with ThreadPoolExecutor(thread_name_prefix="w") as ex:
            loop = asyncio.get_running_loop()
            return await _hand_off(loop, ex, lambda: ("done", threading.current_thread().name))

    value, thread = asyncio.run(go())
    assert value == "done" and thread.startswith("w") and thread != "MainThread"


@pytest.mark.parametrize("error", [QueryCanceled("stop"), ValueError("bug"), KeyboardInterrupt()])
def test_every_exception_reaches_the_waiting_statement(error: BaseException) -> None:
    def job() -> None:
        raise error

    async def go() -> None:
        with ThreadPoolExecutor() as ex:
            await _hand_off(asyncio.get_running_loop(), ex, job)

    with pytest.raises(type(error)):
        asyncio.run(go())


def test_without_an_executor_the_loop_default_one_runs_it() -> None:
    async def go() -> int:
        return await _hand_off(asyncio.get_running_loop(), None, lambda: 7)

    assert asyncio.run(go()) == 7


def test_a_cancelled_wait_and_a_closed_loop_are_left_alone() -> None:
    started, release = threading.Event(), threading.Event()

    def job() -> int:
        started.set()
        release.wait(30)
        return 1

    ex = ThreadPoolExecutor()
    loop = asyncio.new_event_loop()
    try:
        future = _hand_off(loop, ex, job)
        assert started.wait(30)
        future.cancel()  # the session went away while its statement ran
        loop.run_until_complete(asyncio.sleep(0))
        release.set()
        loop.run_until_complete(asyncio.sleep(0.05))  # the settle finds it cancelled
        assert future.cancelled()
        started.clear()
        release.clear()
        late = _hand_off(loop, ex, job)
        assert started.wait(30)
    finally:
        loop.close()  # the worker then finds no loop to settle on: it must not raise
        release.set()
        ex.shutdown(wait=True)
    assert not late.done()
