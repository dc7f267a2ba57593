"""A task's open event stream as an HTTP response: a thread follows the task on the stream's own client,
the event loop frames what it hands over (``pegasus.gateway.events``) and sends it.

Closed exactly once whatever ends it -- the task's end, the reader gone (even before the first event),
an error: the follow stops within a second, its client goes back to the pool, its slot is freed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from pegasus.gateway import events
from pegasus.gateway.errors import api_error


class Stream(Protocol):
    """One task's open event stream: subscribed, then its history read."""

    history: dict[str, Any]
    duplicates: int  # transitions received live before the history was read

    def notices(self, stop: threading.Event) -> Iterator[Any]: ...
    def close(self) -> None: ...


class EventStream(StreamingResponse):
    """``text/event-stream`` of one task: the stored transitions after ``after``, the live ones, ``end``."""

    def __init__(self, stream: Stream, task_id: str, after: int, keepalive_s: float,
                 on_close: Callable[[], None]) -> None:
        self.stream, self.task_id, self.after, self.keepalive_s = stream, task_id, after, keepalive_s
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self._on_close: Callable[[], None] | None = on_close
        super().__init__(self._frames(), media_type="text/event-stream",
                         headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.close()

    def close(self) -> None:
        self.stop.set()
        on_close, self._on_close = self._on_close, None
        if on_close is None:
            return
        if self.thread is None:  # never started: nobody else closes the stream
            self.stream.close()
        on_close()

    async def _frames(self) -> AsyncIterator[bytes]:
        numbering = events.Numbering(self.stream.history, self.task_id, self.stream.duplicates)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        done, keepalive = object(), object()

        def pump() -> None:  # in its own thread: the stream's client blocks while it waits
            try:
                for notice in self.stream.notices(self.stop):
                    loop.call_soon_threadsafe(queue.put_nowait, notice)
            except BaseException as exc:  # noqa: BLE001 - told to the reader, which ends the stream
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            finally:
                self.stream.close()
                loop.call_soon_threadsafe(queue.put_nowait, done)

        try:
            for event_id, data in numbering.replay(self.after):
                yield events.frame(data, event=events.TRANSITION, event_id=event_id)
            self.thread = threading.Thread(target=pump, name=f"events-{self.task_id}", daemon=True)
            self.thread.start()
            while True:
                # A timer puts the keep-alive in the queue (cheaper per event than wait_for's task).
                timer = loop.call_later(self.keepalive_s, queue.put_nowait, keepalive)
                item = await queue.get()
                timer.cancel()
                if item is keepalive:
                    yield events.comment("keep-alive")
                elif item is done:
                    yield events.frame({"task_id": self.task_id}, event=events.END)
                    return
                elif isinstance(item, BaseException):
                    yield events.frame(api_error(item).body(), event="error")
                    return
                else:
                    data = events.as_data(item)
                    live_id = numbering.live("to_state" in data)
                    if live_id != 0:
                        yield events.frame(data, event=events.TRANSITION if live_id else events.DELTA,
                                           event_id=live_id)
        finally:
            self.close()
