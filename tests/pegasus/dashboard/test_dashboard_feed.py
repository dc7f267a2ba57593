"""The events feed (pegasus.dashboard.feed): one publisher thread, every reader gets each event in order from the
moment it is opened, a reader too far behind is cut off with ``lagged`` instead of growing without bound."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pegasus.dashboard.feed import Feed, Reader


async def _read(reader: Reader, count: int) -> list[Any]:
    got: list[Any] = []
    async for event in reader.events(keepalive_s=5.0):
        got.append(event)
        if len(got) == count:
            break
    reader.close()
    return got


def test_every_reader_gets_every_event_published_from_another_thread_once_opened() -> None:
    async def scenario() -> tuple[list[Any], list[Any], int]:
        feed = Feed()
        feed.publish({"n": -1})  # before any reader: nobody gets it
        one, two = feed.open(), feed.open()  # registered now, before anything reads
        publisher = threading.Thread(target=lambda: [feed.publish({"n": n}) for n in range(3)])
        publisher.start()
        publisher.join()
        got = await asyncio.gather(_read(one, 3), _read(two, 3))
        return got[0], got[1], feed.readers

    one, two, left = asyncio.run(scenario())
    assert one == two == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert left == 0  # a closed reader is forgotten


def test_a_reader_that_falls_behind_is_told_and_dropped() -> None:
    async def scenario() -> tuple[list[Any], int]:
        feed = Feed(max_behind=2)
        reader = feed.open()
        for n in range(5):  # published while the reader reads nothing
            feed.publish({"n": n})
        await asyncio.sleep(0.01)
        got = [event async for event in reader.events(keepalive_s=5.0)]
        return got, feed.readers

    got, left = asyncio.run(scenario())
    assert got == [{"n": 0}, {"n": 1}, {"lagged": True}] and left == 0
