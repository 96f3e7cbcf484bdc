"""``protocol.MessageReader``: typed frontend messages read a chunk at a time, over a real
``asyncio.StreamReader`` fed the bytes a socket would deliver (whole, split anywhere, several
at once), with ``read_message``'s checks."""

from __future__ import annotations

import asyncio
import struct

import pytest

from dpproxy.errors import ProtocolViolation
from dpproxy.server import protocol


def _query(sql: str) -> bytes:
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


SYNC = b"S" + struct.pack("!i", 4)


def _read_all(
    chunks: list[bytes], count: int, max_size: int = 1 << 20
) -> list[tuple[bytes, bytes]]:
    async def go() -> list[tuple[bytes, bytes]]:
        reader = asyncio.StreamReader()
        messages = protocol.MessageReader(reader, max_size)
        out = []

        async def feed() -> None:
            for chunk in chunks:
                reader.feed_data(chunk)
                await asyncio.sleep(0)
            reader.feed_eof()

        feeder = asyncio.ensure_future(feed())
        for _ in range(count):
            kind, payload = await messages.read(5.0)
            out.append((kind, payload.rest()))
        await feeder
        return out

    return asyncio.run(go())


def test_pipelined_messages_in_one_chunk() -> None:
    data = _query("SELECT 1") + SYNC + _query("SELECT 2")
    assert _read_all([data], 3) == [(b"Q", b"SELECT 1\0"), (b"S", b""), (b"Q", b"SELECT 2\0")]


@pytest.mark.parametrize("cut", [1, 3, 5, 6, 12])
def test_a_message_split_anywhere(cut: int) -> None:
    data = _query("SELECT 42") + SYNC
    assert _read_all([data[:cut], data[cut:]], 2) == [(b"Q", b"SELECT 42\0"), (b"S", b"")]


def test_one_byte_at_a_time() -> None:
    data = _query("SELECT 'x'") + SYNC
    chunks = [data[i : i + 1] for i in range(len(data))]
    assert _read_all(chunks, 2) == [(b"Q", b"SELECT 'x'\0"), (b"S", b"")]


def test_a_large_message_across_many_reads() -> None:
    sql = "SELECT '" + "a" * 300_000 + "'"
    assert _read_all([_query(sql)], 1) == [(b"Q", sql.encode() + b"\0")]


def test_too_large_is_refused_from_its_header() -> None:
    header = b"Q" + struct.pack("!i", 2_000)
    with pytest.raises(protocol.MessageTooLarge) as err:
        _read_all([header], 1, max_size=1_000)
    assert err.value.sqlstate == "54000"


def test_invalid_length_is_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation):
        _read_all([b"Q" + struct.pack("!i", 3)], 1)


def test_end_of_stream_mid_message() -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        _read_all([_query("SELECT 1")[:7]], 1)


def test_idle_timeout() -> None:
    async def go() -> None:
        messages = protocol.MessageReader(asyncio.StreamReader(), 1 << 20)
        with pytest.raises(TimeoutError):
            await messages.read(0.05)

    asyncio.run(go())


def test_a_short_wait_after_a_long_one_still_times_out() -> None:
    """One timer per reader: a wait with an earlier deadline than the pending timer's arms its
    own (the long wait's timer would fire far too late)."""

    async def go() -> None:
        reader = asyncio.StreamReader()
        messages = protocol.MessageReader(reader, 1 << 20)
        reader.feed_data(_query("SELECT 1"))
        kind, _ = await messages.read(600.0)
        assert kind == b"Q"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(messages.read(0.05), 30.0)  # the outer bound only if broken

    asyncio.run(go())


def test_a_message_in_time_is_read_after_the_timer_went_back_to_sleep() -> None:
    """The first wait's timer fires during the second wait, whose deadline is later: it waits
    again instead of cancelling, and the message that comes before the second deadline is
    read."""

    async def go() -> None:
        reader = asyncio.StreamReader()
        messages = protocol.MessageReader(reader, 1 << 20)
        loop = asyncio.get_running_loop()
        reader.feed_data(_query("SELECT 1"))
        await messages.read(1.0)  # arms the timer at about t0 + 1.0
        await asyncio.sleep(0.5)
        loop.call_later(0.8, reader.feed_data, _query("SELECT 2"))  # t0 + 1.3 < t0 + 1.5
        kind, payload = await messages.read(1.0)
        assert (kind, payload.rest()) == (b"Q", b"SELECT 2\0")
        with pytest.raises(TimeoutError):  # and the reader still times out afterwards
            await messages.read(0.05)

    asyncio.run(go())


def test_a_cancel_from_outside_is_not_a_timeout() -> None:
    async def go() -> None:
        messages = protocol.MessageReader(asyncio.StreamReader(), 1 << 20)
        task = asyncio.ensure_future(messages.read(600.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())


def test_ready_for_query_messages() -> None:
    for status in "ITE":
        assert protocol.ready_for_query(status) == b"Z" + struct.pack("!i", 5) + status.encode()


def test_a_bound_reader_times_out_the_task_it_was_bound_to() -> None:
    async def go() -> None:
        reader = asyncio.StreamReader()
        messages = protocol.MessageReader(reader, 1 << 20)
        messages.bind(asyncio.current_task())
        reader.feed_data(_query("SELECT 1") + SYNC)
        assert (await messages.read(5.0))[0] == b"Q"
        assert (await messages.read(5.0))[0] == b"S"
        with pytest.raises(TimeoutError):
            await messages.read(0.05)
        reader.feed_data(SYNC)  # and reads on after it
        assert (await messages.read(5.0))[0] == b"S"

    asyncio.run(go())
