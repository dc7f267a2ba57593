"""When the writes of several messages share one commit: the supervisor's reports of one mailbox drain.

The reports Thespian hands the supervisor in one pass of its loop answer no one, so they are written
in one transaction: opened at the first (``Hold``), committed (``Settle``) before any other message,
when none is left, or after ``LIMIT``.  What the handlers send meanwhile leaves only after that
commit, so nothing tells of a transition before it is durable (docs/durability.md); a failed store
rolls the group back and the held sends go all the same.
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


Command = Hold | Settle


class DrainBatch:
    """The policy alone: when to open a group, and when to settle it."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.open = False
        self.count = 0  # reports in the open group

    def before(self, batched: bool, can_hold: bool) -> list[Command]:
        """A message is about to be handled: ``batched`` (a report), ``can_hold`` (a store takes writes)."""
        commands: list[Command] = []
        if self.open and not batched:
            commands.append(self._settle(True))
        if batched and not self.open and can_hold:
            self.open, self.count = True, 0
            commands.append(Hold())
        if self.open:
            self.count += 1
        return commands

    def after(self, next_batched: bool) -> list[Command]:
        """The message was handled; ``next_batched``: the next message already read is a report too."""
        if not self.open or (next_batched and self.count < self.limit):
            return []
        return [self._settle(True)]

    def failed(self) -> list[Command]:
        """The store failed (StoreUnavailable) while the group was open: rolled back."""
        return [self._settle(False)] if self.open else []

    def _settle(self, commit: bool) -> Settle:
        self.open, self.count = False, 0
        return Settle(commit)
