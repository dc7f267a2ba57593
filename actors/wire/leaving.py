"""A send that says when its message has left this process: from then on, this process's death cannot lose it.

Thespian 4.0.1 sends one message at a time to a peer: the next waits in the sender's memory for the previous
one's acknowledgement (``TCPTransport._next_XMIT_1``); one written whole to its connection is the kernel's to
deliver even if the sender is SIGKILLed next, and the stage worker tells its pool a job is over only then.
``take_arrived_acks`` reads acknowledgements that arrived while the actor's thread was busy, so the next
message to that peer does not wait a pass of the loop behind them (docs/architecture.md).  Each reads Thespian
internals pinned in ``thespian_patches.readers``; the reads that only save time are not made where they differ.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from thespian.system.transport import TransmitIntent

from actors.wire.thespian_patches.base import installed_version
from actors.wire.thespian_patches.readers import ARRIVED_ACKS, WRITTEN_WHOLE
from actors.wire.thespian_patches.speed.whole_messages import has_data


def send_with_callback(actor: Any, to: Any, message: Any, done: Callable[[], None],
                       refused: Callable[[str], None] | None = None) -> Any:
    """Send ``message`` to ``to`` as ``actor.send`` does (its dead-letter handling kept), and call ``done()`` once
    it is delivered or failed for good (Thespian's callback), after ``refused(why)`` if it was refused unsent (larger
    than a frame); the intent, or None where there is no transport to wait for (simpleSystemBase, Thespian
    internals other than 4.0.1's): sent plainly and ``done()`` at once."""
    ref: Any = getattr(actor, "_myRef", None)
    send_intent = getattr(ref, "_send_intent", None)
    if getattr(ref, "transport", None) is None or send_intent is None:
        actor.send(to, message)
        done()
        return None
    intent = TransmitIntent(to, message, onError=getattr(ref, "actor_send_fail", None))

    def _failed(result: Any, sent: Any) -> None:
        why = getattr(sent, "refused", None)  # frame_auth's serializer says so on the intent it refuses
        if refused is not None and why is not None:
            refused(str(why))
        done()

    send_intent(intent.addCallback(lambda result, sent: done(), _failed))
    return intent


def send_then(actor: Any, to: Any, message: Any, left: Callable[[], None]) -> None:
    """``send_with_callback``, with ``left()`` called once the message has left this process: at once when
    written whole (read only on the code ``written_whole`` pins), else when delivered or failed for good.
    ``left`` may be called twice."""
    intent = send_with_callback(actor, to, message, left)
    if intent is None or not whole_readable():
        return
    serialized = getattr(intent, "serMsg", None)
    if serialized and getattr(intent, "amtSent", 0) >= len(serialized):
        left()


@functools.cache
def acks_readable() -> bool:
    """Whether this process's Thespian is the code ``take_arrived_acks`` was written for (checked once)."""
    return ARRIVED_ACKS.problem(installed_version()) is None


@functools.cache
def whole_readable() -> bool:
    """Whether this process's Thespian is the code ``send_then`` reads a written message by (checked once)."""
    return WRITTEN_WHOLE.problem(installed_version()) is None


def take_arrived_acks(actor: Any, to: Any = None) -> int:
    """Read every acknowledgement that has arrived for a message this process sent (to ``to``, or to anyone) and
    waits on, by Thespian's own step, as the loop's next pass would: the connection is free again for the next
    message; the sends' callbacks run at the end of that pass, as ever.  How many were read.  Only Thespian
    4.0.1's TCP transport has them (none is read where its code differs); a transport busy in another thread
    is left alone."""
    if not acks_readable():
        return 0
    transport: Any = getattr(getattr(actor, "_myRef", None), "transport", None)
    intents = getattr(transport, "_transmitIntents", None)
    waiting = getattr(transport, "_XMITStepWaitForAck", None)
    if not intents or waiting is None or not transport._exclusively_processing():
        return 0
    taken = 0
    try:
        for fileno, intent in list(intents.items()):
            sock = getattr(intent, "socket", None)
            if (intents.get(fileno) is intent and intent.stage == waiting and sock is not None
                    and (to is None or intent.targetAddr == to) and has_data(sock)):
                transport._processIntents(fileno)
                taken += 1
    except Exception:  # noqa: BLE001 - the loop's next pass reads what is left, as before
        pass
    finally:
        transport._not_processing()
    return taken
