"""When a task actor's stage requests leave: those to one pool made while its last message is undelivered go
together, in one message, once it is delivered.

Thespian sends one message at a time to a peer: a request made meanwhile waited in the sender's memory anyway, and
every pass of its loop looked at each one waiting (at L = 0 a request found ~11 before it to the same pool, ~17 in
all).  A request held here leaves when it would have left (the delivery that frees the connection), with the others
held, so each pool reads, checks and acknowledges one message for them.  A request lost with its task actor is as
one in Thespian's queue; a dead pool's are asked of its replacement (``pegasus.run.host``).
"""

from __future__ import annotations

from typing import Any

LIMIT = 16  # requests one message carries at most: the rest go with the next delivery


class PoolSends:
    """The policy alone, per pool address: each call answers the requests to send now, as one message.  (An
    address may be unhashable, as Thespian's are: they are compared, and a task actor knows two or three pools.)"""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = max(1, limit)
        self.busy: list[Any] = []  # pools with a message sent and not yet delivered (or failed)
        self.held: list[tuple[Any, list[Any]]] = []  # (pool, its requests held, in order), for busy pools

    def add(self, to: Any, request: Any) -> tuple[Any, ...]:
        """A request to ``to``: sent now when nothing to it is in flight, else held (empty)."""
        if to not in self.busy:
            self.busy.append(to)
            return (request,)
        held = next((requests for pool, requests in self.held if pool == to), None)
        if held is None:
            self.held.append((to, [request]))
        else:
            held.append(request)
        return ()

    def delivered(self, to: Any) -> tuple[Any, ...]:
        """The message in flight to ``to`` was delivered, or failed: what is held for it goes now, in order."""
        for index, (pool, requests) in enumerate(self.held):
            if pool == to:
                batch, rest = tuple(requests[:self.limit]), requests[self.limit:]
                if rest:
                    self.held[index] = (pool, rest)
                else:
                    del self.held[index]
                return batch
        self.forget(to)
        return ()

    def forget(self, to: Any) -> None:
        """``to`` is dead: nothing waits for its deliveries, and what is held for it is dropped (asked again)."""
        self.busy = [pool for pool in self.busy if pool != to]
        self.held = [(pool, requests) for pool, requests in self.held if pool != to]
