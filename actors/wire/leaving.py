"""A send that says when its message has left this process: from then on, this process's death cannot lose it.

Thespian 4.0.1 sends one message at a time to a peer: the next waits, in the sender's memory, for the
previous one's acknowledgement (``TCPTransport._next_XMIT_1``), and so does one whose connection is still
being made.  A message written whole to its connection is the kernel's to deliver even if the sender is
SIGKILLed next.  The stage worker tells its pool a job is over only then (``pegasus.worker.core``).  Under
any other transport (simpleSystemBase) the message is handed over at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thespian.system.transport import TransmitIntent


def send_then(actor: Any, to: Any, message: Any, left: Callable[[], None]) -> None:
    """Send ``message`` to ``to`` as ``actor.send`` does (its dead-letter handling kept), and call ``left()``
    once it has left this process: at once when written whole, else when delivered or failed for good
    (Thespian's callback).  ``left`` may be called twice."""
    ref: Any = getattr(actor, "_myRef", None)
    send_intent = getattr(ref, "_send_intent", None)
    if getattr(ref, "transport", None) is None or send_intent is None:
        actor.send(to, message)
        left()
        return
    intent = TransmitIntent(to, message, onError=getattr(ref, "actor_send_fail", None))
    send_intent(intent.addCallback(lambda result, sent: left(), lambda result, sent: left()))
    serialized = getattr(intent, "serMsg", None)
    if serialized and getattr(intent, "amtSent", 0) >= len(serialized):
        left()
