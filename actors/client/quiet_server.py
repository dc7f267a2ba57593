"""uvicorn's server without its tick: an idle HTTP gateway does not wake (issue 33).

``uvicorn.Server.main_loop`` wakes every 0.1 s to see whether a signal asked it to stop and, once a
second, to date its responses: 600 wake-ups a minute of an idle gateway.  Here the loop waits for the
stop itself (the signal handler wakes it), and each response's ``Date`` is the clock's second when it
is sent.  Written for uvicorn 0.54.0 (pinned in setup.cfg; the source of what it stands in for is
fingerprinted): where uvicorn differs, ``server`` gives uvicorn's own server, after a warning.
Imported only by the gateway process (uvicorn loads with it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from email.utils import formatdate
from types import FrameType

import uvicorn
from uvicorn.server import ServerState

from actors.wire.thespian_patches.base import Target

PINNED = "0.54.0"  # setup.cfg pins the same (tests/actors/client/test_quiet_server.py)
DOCS = "docs/http.md#the-gateways-idle-loop"
TARGETS = (  # uvicorn's code as this module was written for it (actors.wire.thespian_patches.base fingerprints)
    Target(uvicorn.Server, "main_loop", "source afccb353a119333f"),  # replaced
    Target(uvicorn.Server, "on_tick", "source 60ea49b06ccf68c1"),  # what the loop did: date, stop, request cap, notify
    Target(uvicorn.Server, "handle_exit", "source 553276efa26e09ea"),  # extended: wakes the loop
    Target(uvicorn.Server.capture_signals, "__wrapped__", "source e1bbcd4770d1c887"),  # makes handle_exit the handler
    Target(uvicorn.Server, "_serve", "source 4575b7a50adfede8"),  # calls main_loop between startup and shutdown
    Target(ServerState, "__init__", "source 8daf3a9b4e4e4245"),  # default_headers: what the tick set, read per response
)

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


def problem(config: uvicorn.Config) -> str | None:
    """Why ``QuietServer`` cannot stand in for uvicorn's server here, or None."""
    if uvicorn.__version__ != PINNED:
        return f"uvicorn {uvicorn.__version__} is installed; the quiet server is written for {PINNED}"
    for target in TARGETS:
        found = target.problem()
        if found:
            return found
    if config.limit_max_requests is not None or config.callback_notify is not None:
        return "limit_max_requests and callback_notify are the tick's to serve"
    return None


def server(config: uvicorn.Config, warn: Callable[[str], None]) -> uvicorn.Server:
    """A ``QuietServer``, or where it cannot stand in, uvicorn's own after ``warn(why)``: never a broken loop."""
    why = problem(config)
    if why is None:
        return QuietServer(config)
    warn(f"{why} (see {DOCS})")
    return uvicorn.Server(config)
