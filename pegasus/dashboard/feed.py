"""Every task's transitions, fanned out to the open ``/v1/events`` streams (the dashboard's live table).

One subscription to the supervisor (the backend's watcher thread) feeds every stream: ``publish`` is
called from that thread and hands the event to each reader's asyncio queue on the reader's own loop.
A reader that falls ``MAX_BEHIND`` events behind is cut off with a ``lagged`` event rather than
letting its queue grow without bound: the page then reads the list again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

MAX_BEHIND = 1000
LAGGED = object()


class Feed:
    """Readers (asyncio queues, each with its loop) and the one call that gives them an event."""

    def __init__(self, max_behind: int = MAX_BEHIND) -> None:
        self.max_behind = max_behind
        self._readers: dict[asyncio.Queue[Any], asyncio.AbstractEventLoop] = {}
        self._lock = threading.Lock()

    @property
    def readers(self) -> int:
        return len(self._readers)

    def publish(self, event: dict[str, Any]) -> None:
        """Give ``event`` to every reader (from any thread)."""
        with self._lock:
            readers = list(self._readers.items())
        for queue, loop in readers:
            loop.call_soon_threadsafe(self._put, queue, event)

    def _put(self, queue: asyncio.Queue[Any], event: dict[str, Any]) -> None:
        if queue.qsize() >= self.max_behind:
            with self._lock:
                self._readers.pop(queue, None)
            queue.put_nowait(LAGGED)
        else:
            queue.put_nowait(event)

    async def events(self, keepalive_s: float) -> AsyncIterator[dict[str, Any] | None]:
        """This reader's events as they come; None after ``keepalive_s`` without one (time for a comment
        line); ends after LAGGED was yielded as ``{"lagged": True}``."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        with self._lock:
            self._readers[queue] = asyncio.get_running_loop()
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), keepalive_s)
                except asyncio.TimeoutError:
                    yield None
                    continue
                if item is LAGGED:
                    yield {"lagged": True}
                    return
                yield item
        finally:
            with self._lock:
                self._readers.pop(queue, None)
