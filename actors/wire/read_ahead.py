"""The messages Thespian's transport has read for an actor and not yet handed to it.

Two carriers decide by them whether what they hold can wait for the next message (the supervisor's
report commit, a task actor's batch of reports).  Thespian 4.0.1 keeps them in its transport's
``_incomingEnvelopes``, pinned in ``thespian_patches.readers`` (``read_ahead``); where that code differs,
and under any other transport (simpleSystemBase), none is read: what is held goes at once.
"""

from __future__ import annotations

import functools
from typing import Any

from actors.wire.thespian_patches.base import installed_version
from actors.wire.thespian_patches.readers import READ_AHEAD


def read_ahead(actor: Any) -> list[Any]:
    """The messages read for ``actor`` and waiting, oldest first."""
    transport = getattr(getattr(actor, "_myRef", None), "transport", None)
    envelopes = getattr(transport, "_incomingEnvelopes", None)
    if not envelopes or not envelopes_readable():
        return []
    return [getattr(envelope, "message", None) for envelope in envelopes]


@functools.cache
def envelopes_readable() -> bool:
    """Whether this process's Thespian is the code ``read_ahead`` was written for (checked once)."""
    return READ_AHEAD.problem(installed_version()) is None
