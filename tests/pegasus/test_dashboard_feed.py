"""The events feed (pegasus.dashboard.feed): one publisher thread, every reader gets each event in order, a reader
too far behind is cut off with ``lagged`` instead of growing without bound."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pegasus.dashboard.feed import Feed


async def _read(feed: Feed, count: int, started: asyncio.Event) -> list[Any]:
    got: list[Any] = []
    reader = feed.events(keepalive_s=5.0)
    started.set()
    async for event in reader:
        got.append(event)
        if len(got) == count or (isinstance(event, dict) and event.get("lagged")):
            break
    await reader.aclose()
    return got


def test_every_reader_gets_every_event_published_from_another_thread() -> None:
    async def scenario() -> tuple[list[Any], list[Any], int]:
        feed = Feed()
        started = [asyncio.Event(), asyncio.Event()]
        readers = [asyncio.create_task(_read(feed, 3, ready)) for ready in started]
        for ready in started:
            await ready.wait()
        while feed.readers < 2:
            await asyncio.sleep(0.001)
        publisher = threading.Thread(target=lambda: [feed.publish({"n": n}) for n in range(3)])
        publisher.start()
        publisher.join()
        one, two = await asyncio.gather(*readers)
        return one, two, feed.readers

    one, two, left = asyncio.run(scenario())
    assert one == two == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert left == 0  # a reader that stops is forgotten


def test_a_reader_that_falls_behind_is_told_and_dropped() -> None:
    async def scenario() -> tuple[list[Any], int]:
        feed = Feed(max_behind=2)
        events = feed.events(keepalive_s=5.0)
        first = asyncio.ensure_future(events.__anext__())
        while feed.readers < 1:
            await asyncio.sleep(0.001)
        for n in range(5):  # published while the reader reads nothing more
            feed.publish({"n": n})
        await asyncio.sleep(0.01)
        got = [await first]
        got += [event async for event in events]
        return got, feed.readers

    got, left = asyncio.run(scenario())
    assert got[-1] == {"lagged": True} and len(got) <= 4 and left == 0
