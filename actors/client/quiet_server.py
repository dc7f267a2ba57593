"""uvicorn's server without its tick: an idle HTTP gateway does not wake (issue 33).

``uvicorn.Server.main_loop`` wakes every 0.1 s to see whether a signal asked it to stop and, once a
second, to date its responses: 600 wake-ups a minute of an idle gateway.  Here the loop waits for the
stop itself (the signal handler wakes it), and each response's ``Date`` is the clock's second when it
is sent.  Imported only by the gateway process (uvicorn loads with it).
"""

from __future__ import annotations

import asyncio
import time
from email.utils import formatdate
from types import FrameType

import uvicorn
from uvicorn.server import ServerState

_dated: tuple[int, bytes] = (0, b"")


def http_date() -> bytes:
    """The ``Date`` header's value now, made once a second."""
    global _dated
    now = int(time.time())
    if _dated[0] != now:
        _dated = (now, formatdate(now, usegmt=True).encode())
    return _dated[1]


class _DatedState(ServerState):
    """Its ``default_headers`` (which every response reads) dated when read, not by the tick."""

    headers: list[tuple[bytes, bytes]]  # the configured ones (set per server, before any response)
    dated = True

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"date", http_date()), *self.headers] if self.dated else self.headers

    @default_headers.setter
    def default_headers(self, value: list[tuple[bytes, bytes]]) -> None:
        pass  # the tick's own, never called here


class QuietServer(uvicorn.Server):
    """See the module docstring."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        state = self.server_state
        state.__class__ = _DatedState
        state.headers, state.dated = list(self.config.encoded_headers), self.config.date_header  # type: ignore[attr-defined]
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        if not self.should_exit:
            await self._stop.wait()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None and self._stop is not None:  # the loop sleeps in select: woken through its pipe
            self._loop.call_soon_threadsafe(self._stop.set)
