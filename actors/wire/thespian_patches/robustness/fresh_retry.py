"""A send that failed on a reused idle connection is retried at once, on a new one.

Thespian retries such a failure only after ``TRANSMIT_RETRY_PERIOD``, so a client asking a
replaced supervisor stalled.  This notes in ``_next_XMIT_1`` whether the send took an idle
connection and in ``_next_XMIT_6`` retries it at once; later failures keep Thespian's backoff.
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
