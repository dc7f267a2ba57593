"""Every task's transitions, fanned out to the open ``/v1/events`` streams (the dashboard's live table).

One subscription to the supervisor (the backend's watcher thread) feeds every stream: ``publish`` is
called from that thread and hands the event to each reader's asyncio queue on the reader's own loop.
A reader is registered (``open``) before its response starts, so nothing published once its stream
is open is missed. A reader that falls ``MAX_BEHIND`` events behind is cut off with a ``lagged``
event rather than letting its queue grow without bound: the page then reads the list again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

MAX_BEHIND = 1000
LAGGED = object()


class Reader:
    """One open stream's queue of events, registered with its feed until ``close``."""

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()

    async def events(self, keepalive_s: float) -> AsyncIterator[dict[str, Any] | None]:
        """The events as they come; None after ``keepalive_s`` without one (time for a comment line);
        ends after LAGGED was yielded as ``{"lagged": True}``."""
        while True:
            try:
                item = await asyncio.wait_for(self.queue.get(), keepalive_s)
            except asyncio.TimeoutError:
                yield None
                continue
            if item is LAGGED:
                yield {"lagged": True}
                return
            yield item

    def close(self) -> None:
        self.feed.forget(self)


class Feed:
    """The open readers and the one call that gives them an event."""

    def __init__(self, max_behind: int = MAX_BEHIND) -> None:
        self.max_behind = max_behind
        self._readers: set[Reader] = set()
        self._lock = threading.Lock()

    @property
    def readers(self) -> int:
        return len(self._readers)

    def open(self) -> Reader:
        """A new reader, registered now (called on its event loop)."""
        reader = Reader(self)
        with self._lock:
            self._readers.add(reader)
        return reader

    def forget(self, reader: Reader) -> None:
        with self._lock:
            self._readers.discard(reader)

    def publish(self, event: dict[str, Any]) -> None:
        """Give ``event`` to every reader (from any thread)."""
        with self._lock:
            readers = list(self._readers)
        for reader in readers:
            reader.loop.call_soon_threadsafe(self._put, reader, event)

    def _put(self, reader: Reader, event: dict[str, Any]) -> None:
        if reader.queue.qsize() >= self.max_behind:
            self.forget(reader)
            reader.queue.put_nowait(LAGGED)
        else:
            reader.queue.put_nowait(event)
