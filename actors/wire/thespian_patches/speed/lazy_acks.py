"""An acknowledgement nothing waits for does not wake Thespian's loop; the next pass reads it.

A message that arrives alone is followed, in its sender, by a whole pass of the loop for its
20-byte acknowledgement.  While nothing waits for it (no transmit queued, no callback but
Thespian's own, no drain), its socket's ``SO_RCVLOWAT`` is one byte above it: a peer's message
behind it or a close still wakes the loop, and every pass that wakes peeks and reads it before
timeouts.  Speed, not robustness.  docs/thespian-patches.md#lazy-acks.
"""

from __future__ import annotations

import socket as _socket
import threading
import types
from typing import Any

from thespian.system import transport as _transport
from thespian.system.transport import TCPTransport as _tcp
from thespian.system.transport import asyncTransportBase as _async

from actors.wire import frames
from actors.wire.thespian_patches.base import Kind, Patch, Target, mark, wrap
from actors.wire.thespian_patches.speed import poll_selector, whole_messages

_T = _tcp.TCPTransport
_BASE = _async.asyncTransportBase
_RUN = Target(_T, "_runWithExpiry", "source 5a6c512c48e9fd0a")
_DONE = Target(_BASE, "_async_txdone", "source 6ebe5a2578bad834")
PATCH = Patch("lazy_acks", Kind.SPEED, "lazy-acks", (
    _RUN, _DONE,
    Target(_tcp, "selectors", "module selectors"),  # poll_selector's PollSet, which this extends
    Target(_BASE, "_submitTransmit", "source 280112eaea8f0ba7"),  # adds _async_txdone to every intent
    Target(_transport, "ResultCallback", "source de56981e0adbd497"),  # the callback chain read here
    Target(_T, "_processIntents", "source ad3cc2f41f844085"),  # a readable intent socket: its ack step
))
ACK_BYTES = len(b"%d>" % frames.CONTROL_BODY) + frames.CONTROL_BODY  # 20: every message frame is longer
_LOWERED = "_pegasus_lazy_acks"  # on the transport: fd -> socket whose SO_RCVLOWAT is ACK_BYTES + 1
_here = threading.local()  # the transport whose loop runs on this thread, and whether it only transmits


def _nothing_waits_on(intent: Any) -> bool:
    """Whether the intent's success calls nothing but Thespian's own count of transmits in flight."""
    link = intent._callbackTo
    while link is not None:
        call = link._successTo
        if call is not None and getattr(call, "__func__", None) is not _DONE.original:
            return False
        link = link._thenTo
    return True


def lazy_acks(transport: Any) -> dict[int, Any]:
    """fd -> socket of each sent message whose acknowledgement nobody waits for (none while draining,
    transmitting only, or with any transmit queued: a queued one may wait for that very socket)."""
    if getattr(_here, "transmit_only", True) or hasattr(transport, "_aborting_run") \
            or transport._waitingTransmits or transport._aTB_queuedPendingTransmits:
        return {}
    return {fd: intent.socket for fd, intent in transport._transmitIntents.items()
            if intent.stage == _T._XMITStepWaitForAck and getattr(intent, "socket", None) is not None
            and _nothing_waits_on(intent)}


def _set_low_water(sock: Any, size: int) -> bool:
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVLOWAT, size)
    except OSError:
        return False  # closed meanwhile: Thespian's own steps meet that
    return True


def _lower(transport: Any, lazy: dict[int, Any]) -> None:
    """Raise SO_RCVLOWAT on the lazy sockets, and back to 1 on the sockets no longer lazy."""
    lowered = transport.__dict__.setdefault(_LOWERED, {})
    for fd, sock in list(lowered.items()):
        if lazy.get(fd) is not sock:
            del lowered[fd]
            if sock.fileno() == fd:
                _set_low_water(sock, 1)
    for fd, sock in lazy.items():
        if fd not in lowered and _set_low_water(sock, ACK_BYTES + 1):
            lowered[fd] = sock


class LazyAckPollSet(poll_selector.PollSet):
    """``PollSet`` whose wait does not end for an acknowledgement nobody waits for; every ended wait
    still reports those that arrived."""

    __slots__ = ()

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        transport = getattr(_here, "transport", None)
        lazy = lazy_acks(transport) if transport is not None else {}
        if transport is not None:
            _lower(transport, lazy)
        ready = super().select(timeout)
        if lazy:
            seen = {key.fd for key, _ in ready}
            ready += [(poll_selector._Ready(fd), self._events[fd]) for fd, sock in lazy.items()
                      if fd not in seen and fd in self._events and whole_messages._has_data(sock)]
        return ready


_SELECTORS = types.SimpleNamespace(DefaultSelector=LazyAckPollSet, EVENT_READ=poll_selector.selectors.EVENT_READ,
                                   EVENT_WRITE=poll_selector.selectors.EVENT_WRITE)


def _as_current(run: Any) -> Any:
    def run_with_lazy_acks(self: Any, incomingHandler: Any) -> Any:
        previous = (getattr(_here, "transport", None), getattr(_here, "transmit_only", True))
        _here.transport = self
        _here.transmit_only = incomingHandler is _transport.TransmitOnly \
            or isinstance(incomingHandler, _transport.TransmitOnly)
        try:
            return run(self, incomingHandler)
        finally:
            _here.transport, _here.transmit_only = previous

    return run_with_lazy_acks


def install() -> None:
    """Acknowledgements nobody waits for are read at the next pass instead of waking the loop."""
    wrap(_RUN, PATCH.name, _as_current)
    _tcp.selectors = mark(_SELECTORS, PATCH.name)  # poll_selector's namespace, with this PollSet
