"""When a task actor's reports leave: those of several activations, of several tasks, in one message.

Each message to the supervisor costs both processes a wake-up, so reports are held while messages
already read wait to be handled, or while the last batch is undelivered (Thespian keeps one message
in flight per sender and target), never beyond ``LIMIT``.  A lazy report (a reflection's answer) waits
for a batch that goes anyway, or till the host holds no run.  Held reports go first, in order, before
any other message to the supervisor; one lost with its task actor is as one in flight (docs/durability.md).
"""

from __future__ import annotations

from typing import Any

LIMIT = 16  # reports one message carries at most: a long burst still reports as it goes


class ReportBatch:
    """The policy alone: each call answers the reports to send now, in order, as one message (empty: none)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = max(1, limit)
        self.held: list[Any] = []
        self.due = False  # a report held is not lazy: the batch goes at the next chance
        self.in_flight = 0  # batches sent and not yet delivered (or failed)

    def add(self, reports: tuple[Any, ...] | list[Any], lazy: bool = False) -> tuple[Any, ...]:
        """An activation made ``reports``: held; sent at once when the batch is full.  ``lazy``: they go
        with the next batch that goes anyway (their own message would cost both processes a wake-up)."""
        self.held.extend(reports)
        self.due = self.due or (bool(reports) and not lazy)
        return self._send() if len(self.held) >= self.limit else ()

    def before_other(self) -> tuple[Any, ...]:
        """Another message to the supervisor is about to go: whatever is held goes first."""
        return self._send()

    def handled(self, more_read: bool, idle: bool = True) -> tuple[Any, ...]:
        """A message was handled; ``more_read``: another, already read, waits to be handled; ``idle``: no
        later report is coming to carry lazy ones (the host holds no run), so they go alone."""
        return () if more_read or self.in_flight or not (self.due or idle) else self._send()

    def delivered(self, more_read: bool, idle: bool = True) -> tuple[Any, ...]:
        """A batch sent earlier was delivered (or failed: nothing waits for it any more)."""
        self.in_flight = max(0, self.in_flight - 1)
        return self.handled(more_read, idle)

    def _send(self) -> tuple[Any, ...]:
        if not self.held:
            return ()
        batch, self.held, self.due = tuple(self.held), [], False
        self.in_flight += 1
        return batch
