"""A send that failed on a reused idle connection is retried at once, on a new one.

A send reuses the idle connection to its target when there is one.  When that connection
turns out dead (the peer died or closed it), Thespian 4.0.1 schedules the retry
``TRANSMIT_RETRY_PERIOD`` later -- 35 s -- before it connects afresh and learns the peer is
gone (``DeadTarget``): a client asking a supervisor that was just replaced waited 35 s.  This
notes in ``TCPTransport._next_XMIT_1`` whether the send took an idle connection, and in
``_next_XMIT_6`` retries such a failure within 1 ms; later failures keep Thespian's backoff.
Without it a send to a replaced peer stalls 35 s: robustness.  Why, and the upstream proposal:
docs/thespian-patches.md#fresh-retry.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from thespian.system import timing as _timing
from thespian.system import transport as _transport
from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target

_CONNECT = Target(_tcp.TCPTransport, "_next_XMIT_1", "source f25e978fdce5d56d")
_RETRY = Target(_tcp.TCPTransport, "_next_XMIT_6", "source c4e0df7fdb0cd54b")
PATCH = Patch("fresh_retry", Kind.ROBUSTNESS, "fresh-retry", (
    _CONNECT, _RETRY,
    Target(_tcp, "opsKey", "source 1ad106fc6f32233f"),  # how _openSockets is keyed
    Target(_transport.TransmitIntent, "retry", "source a3a026474ade3b69"),  # sets the _retryTime replaced here
))
_REUSED = "_pegasus_reused_connection"
# 1 ms, not 0: the loop computes its select timeout with filter(None, delays), which drops a
# zero delay, and would then sleep until some other event (up to the whole run time).
_FRESH_RETRY = timedelta(milliseconds=1)
_connect, _retry = _CONNECT.original, _RETRY.original


def _connect_step(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_1``, noting whether the send takes an idle connection."""
    if hasattr(self, "_openSockets") and _tcp.opsKey(intent.targetAddr) in self._openSockets:
        intent.__dict__[_REUSED] = True
    return _connect(self, intent)


def _retry_step(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_6``; a send that failed on a reused connection is retried at once."""
    reused = intent.__dict__.pop(_REUSED, False)
    result = _retry(self, intent)
    if reused and result is True and hasattr(intent, "_retryTime"):
        intent._retryTime = _timing.ExpirationTimer(_FRESH_RETRY)
    return result


def install() -> None:
    """A send that failed on a reused idle connection is retried at once, on a new one."""
    _CONNECT.replace(_connect_step, PATCH.name)
    _RETRY.replace(_retry_step, PATCH.name)
