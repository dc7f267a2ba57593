"""When the writes of several messages share one commit: the supervisor's reports of one mailbox drain.

Reports answer no one, so those Thespian hands over in one pass share a transaction (``Hold``), committed
(``Settle``) before any other message, after ``LIMIT``, or when none is left; a group whose reports sent
nothing lingers (``Linger``) ``[store] commit_linger_ms`` for the next ones (when stages wait each arrives
alone) and its timer settles it.  What the handlers send leaves only after that commit, so nothing tells of
a transition before it is durable (docs/durability.md); a failed store rolls the group back.
"""

from __future__ import annotations

from dataclasses import dataclass

LIMIT = 64  # reports a commit at most: a long drain still commits as it goes


@dataclass(frozen=True)
class Hold:
    """Open the store's group (``Database.hold``) and hold every send until it is settled."""


@dataclass(frozen=True)
class Settle:
    """Commit the group (roll it back when not ``commit``), then send what was held, in order."""

    commit: bool = True


@dataclass(frozen=True)
class Linger:
    """Keep the group open; arm the timer that settles it (``lingered``) in ``seconds``."""

    seconds: float


Command = Hold | Settle | Linger


class DrainBatch:
    """The policy alone: when to open a group, and when to settle it."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.open = False
        self.count = 0  # reports in the open group
        self.armed = False  # a Linger's timer is on its way (one at a time)

    def before(self, batched: bool, can_hold: bool, lingered: bool = False) -> list[Command]:
        """A message is about to be handled: ``batched`` (a report), ``can_hold`` (a store takes writes),
        ``lingered`` (it is the timer a ``Linger`` armed: not batched, so it settles what is open)."""
        if lingered:
            self.armed = False
        commands: list[Command] = []
        if self.open and not batched:
            commands.append(self._settle(True))
        if batched and not self.open and can_hold:
            self.open, self.count = True, 0
            commands.append(Hold())
        if self.open:
            self.count += 1
        return commands

    def after(self, next_batched: bool, sends_held: bool = True, linger_s: float = 0.0) -> list[Command]:
        """The message was handled; ``next_batched``: the next message already read is a report too;
        ``sends_held``: what the group's handlers sent waits for its commit; ``linger_s``: how long a group
        that sent nothing may wait for more (0: not at all)."""
        if not self.open or (next_batched and self.count < self.limit):
            return []
        if not sends_held and self.count < self.limit and linger_s > 0:
            if self.armed:
                return []  # settled by the timer already on its way, sooner
            self.armed = True
            return [Linger(linger_s)]
        return [self._settle(True)]

    def failed(self) -> list[Command]:
        """The store failed (StoreUnavailable) while the group was open: rolled back."""
        return [self._settle(False)] if self.open else []

    def _settle(self, commit: bool) -> Settle:
        self.open, self.count = False, 0
        return Settle(commit)
