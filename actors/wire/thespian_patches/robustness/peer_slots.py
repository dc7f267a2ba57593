"""A send that waits behind another to the same peer takes none of the process's transmit slots.

Thespian hands a process's sends to its TCP layer only while fewer than ``MAX_PENDING_TRANSMITS``
(20) are pending there, counting those parked behind the one in flight to their peer.  Twenty
messages to one peer that never acknowledges (a stopped pool) held every other send of the process
until they failed, a Thespian retry period or two after the peer's death.  Here only the sends holding
a connection count.  docs/thespian-patches.md#peer-slots.
"""

from __future__ import annotations

from typing import Any

from thespian.system.transport import TCPTransport as _tcp
from thespian.system.transport import asyncTransportBase as _async

from actors.wire.thespian_patches.base import Kind, Patch, Target

_CAN_SEND = Target(_async.asyncTransportBase, "_canSendNow", "source 72fb8b87ff6260f2")
PATCH = Patch("peer_slots", Kind.ROBUSTNESS, "peer-slots", (
    _CAN_SEND,
    Target(_async, "MAX_PENDING_TRANSMITS", "value"),
    # counted in _submitTransmit, uncounted in _async_txdone; parked in _waitingTransmits by _scheduleTransmitActual
    Target(_async.asyncTransportBase, "_submitTransmit", "source 280112eaea8f0ba7"),
    Target(_async.asyncTransportBase, "_async_txdone", "source 6ebe5a2578bad834"),
    Target(_tcp.TCPTransport, "_scheduleTransmitActual", "source d162b77006bbfcf3"),
))


def can_send_now(self: Any) -> bool:
    """``asyncTransportBase._canSendNow``, not counting the sends parked without a connection (waiting their
    turn behind another to their peer, or their retry time)."""
    parked = len(getattr(self, "_waitingTransmits", ()))
    return bool(_async.MAX_PENDING_TRANSMITS > self._aTB_numPendingTransmits - parked)


def install() -> None:
    """Only the sends holding a connection count against Thespian's pending-transmit limit."""
    _CAN_SEND.replace(can_send_now, PATCH.name)
