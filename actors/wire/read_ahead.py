"""The messages Thespian's transport has read for an actor and not yet handed to it.

Two carriers decide by them whether what they hold can wait for the next message (the supervisor's
report commit, a task actor's batch of reports).  Thespian 4.0.1 keeps them in its transport's
``_incomingEnvelopes``; under any other transport (simpleSystemBase) there are none.
"""

from __future__ import annotations

from typing import Any


def read_ahead(actor: Any) -> list[Any]:
    """The messages read for ``actor`` and waiting, oldest first."""
    transport = getattr(getattr(actor, "_myRef", None), "transport", None)
    envelopes = getattr(transport, "_incomingEnvelopes", None) or ()
    return [getattr(envelope, "message", None) for envelope in envelopes]
