"""Thespian's TCP loop selects with one ``poll`` call, not a new epoll set per pass.

The TCPTransport module (only it) gets a ``selectors`` whose DefaultSelector is a bare
``select.poll`` (``PollSet``).  docs/thespian-patches.md#poll-selector.
"""

from __future__ import annotations

import math
import select
import selectors
import types
from typing import Any

from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target

_SELECTORS = Target(_tcp, "selectors", "module selectors")
PATCH = Patch("poll_selector", Kind.SPEED, "poll-selector", (
    _SELECTORS,
    Target(_tcp.TCPTransport, "_runWithExpiry", "source 5a6c512c48e9fd0a"),  # the loop that uses it
    Target(_tcp.TCPTransport, "_check_fd", "source fb16f5f8733983b1"),  # its only other user
))


class _Ready:
    """The part of a ``selectors.SelectorKey`` Thespian's loop reads: ``fd``."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd


class PollSet:
    """``selectors.PollSelector`` as far as Thespian's loop uses one, without its per-fd bookkeeping.

    ``PollSelector.register`` (a ``SelectorKey`` and two dicts per fd) cost ~0.9 us per socket,
    ~50 us a pass for a stage worker with ~55 open sockets; this is ~0.15 us.  ``select``
    reports what PollSelector reports (``(key, events)`` with ``key.fd``; a hang-up or error
    counts as readable and writable, masked by what was registered), and so does its timeout.
    """

    __slots__ = ("_poll", "_events")

    def __init__(self) -> None:
        self._poll = select.poll()
        self._events: dict[int, int] = {}

    def register(self, fileobj: Any, events: int) -> None:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd in self._events:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")  # as PollSelector
        self._events[fd] = events
        self._poll.register(fd, (select.POLLIN if events & selectors.EVENT_READ else 0)
                            | (select.POLLOUT if events & selectors.EVENT_WRITE else 0))

    def select(self, timeout: float | None = None) -> list[tuple[_Ready, int]]:
        wait = None if timeout is None else 0 if timeout <= 0 else math.ceil(timeout * 1e3)
        ready = []
        for fd, event in self._poll.poll(wait):
            events = (selectors.EVENT_WRITE if event & ~select.POLLIN else 0) \
                | (selectors.EVENT_READ if event & ~select.POLLOUT else 0)
            ready.append((_Ready(fd), events & self._events.get(fd, 0)))
        return ready

    def close(self) -> None:
        self._events.clear()


_POLL_SELECTORS = types.SimpleNamespace(DefaultSelector=PollSet, EVENT_READ=selectors.EVENT_READ,
                                        EVENT_WRITE=selectors.EVENT_WRITE)


def install() -> None:
    """Thespian's TCP transport selects with one ``poll`` call per pass of its loop."""
    _SELECTORS.replace(_POLL_SELECTORS, PATCH.name)
