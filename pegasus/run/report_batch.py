"""When a task actor's reports leave: those of several activations, of several tasks, in one message.

Each message to the supervisor costs both processes a wake-up, so reports are held while messages already
read wait, or while the last batch is undelivered, never beyond ``LIMIT`` reports or ``max_bytes``; a lazy report
(a reflection's answer) waits for a batch that goes anyway.  While many runs wait for their stages, holdable reports (a
transition, a run's end no one waits on) also wait until ``hold_s`` after the batch before, going with the first
message handled after that; a bounded one asks for a timer (``wake_after``) so that it never waits much longer
when no message comes.  A report lost with its task actor is as one in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

LIMIT = 48  # reports one message carries at most: a long burst still reports as it goes


class ReportBatch:
    """The policy alone: each call answers the reports to send now, in order, as one message (empty: none)."""

    def __init__(self, limit: int = LIMIT, hold_s: float = 0.0, holdable: Callable[[Any], bool] = lambda report: False,
                 bounded: Callable[[Any], bool] = lambda report: False, bound_s: float = 0.0,
                 max_bytes: int = 0) -> None:
        self.limit = max(1, limit)
        self.max_bytes = max_bytes  # the reports' bytes (as the caller sizes them) a batch carries at most; 0: any
        self.held_bytes = 0
        self.hold_s, self.holdable = hold_s, holdable
        self.bounded, self.bound_s = bounded, bound_s
        self.bounding = False  # a report held is bounded: while it waits for time, a timer is on its way
        self.timer = False  # a timer asked for (``wake_after``) has not yet fired (``woken``)
        self.arm = False  # a bounded report now waits for time and no timer is on its way
        self.armed_at = -math.inf  # when ``arm`` was last set: the timer on its way was asked then
        self.waited = False  # a report held now waited for time: the batch is one already (``sent_waited``)
        self.sent_waited = False  # whether the batch ``_send`` answered last had waited for time
        self.held: list[Any] = []
        self.due = False  # a report held is not lazy: the batch goes at the next chance
        self.urgent = False  # a report held is not holdable: no hold_s wait
        self.in_flight = 0  # batches sent and not yet delivered (or failed)
        self.left_at = -math.inf  # when the last batch left (the caller's clock)

    def room_for(self, size: int) -> tuple[Any, ...]:
        """Before reports of ``size`` bytes join: what is held goes first if together they would pass ``max_bytes``."""
        if self.max_bytes and self.held and self.held_bytes + size > self.max_bytes:
            return self._send()
        return ()

    def add(self, reports: tuple[Any, ...] | list[Any], lazy: bool = False, size: int = 0) -> tuple[Any, ...]:
        """An activation made ``reports`` (``size`` bytes): held; sent at once when the batch is full, in number or
        in bytes.  ``lazy``: they go with the next batch that goes anyway (their own message would cost both
        processes a wake-up)."""
        self.held.extend(reports)
        self.held_bytes += size
        self.due = self.due or (bool(reports) and not lazy)
        self.urgent = self.urgent or (not lazy and not all(self.holdable(report) for report in reports))
        self.bounding = self.bounding or any(self.bounded(report) for report in reports)
        full = len(self.held) >= self.limit or (self.max_bytes and self.held_bytes >= self.max_bytes)
        return self._send() if full else ()

    def drop(self, which: Callable[[Any], bool]) -> None:
        """Forget the held reports ``which`` picks (their bytes stay counted: the batch only closes sooner)."""
        self.held = [report for report in self.held if not which(report)]

    def before_other(self) -> tuple[Any, ...]:
        """Another message to the supervisor is about to go: whatever is held goes first."""
        return self._send()

    def handled(self, more_read: bool, idle: bool = True, now: float | None = None) -> tuple[Any, ...]:
        """A message was handled; ``more_read``: another, already read, waits to be handled; ``idle``: no
        later report is coming to carry lazy ones (the host holds no run), so they go alone.  ``now``: the
        clock, given while a message is sure to come soon (many runs wait for stages): holdable reports
        then wait until ``hold_s`` after the batch before left."""
        if more_read or self.in_flight or not (self.due or idle):
            return ()
        if now is not None and not idle and not self.urgent and now < self.left_at + self.hold_s:
            if self.timer and now > self.armed_at + 2 * self.bound_s:  # never fired: Thespian can drop a due
                self.timer = False  # wakeup (its transmit-only drain), which would leave every later hold unbounded
            self.arm, self.waited = self.bounding and not self.timer, True
            self.armed_at = now if self.arm else self.armed_at
            return ()
        return self._send(now)

    def delivered(self, more_read: bool, idle: bool = True, now: float | None = None) -> tuple[Any, ...]:
        """A batch sent earlier was delivered (or failed: nothing waits for it any more)."""
        self.in_flight = max(0, self.in_flight - 1)
        return self.handled(more_read, idle, now)

    def wake_after(self) -> float | None:
        """Seconds after which the caller is to call ``woken`` and then ``handled``, when a bounded report has
        just been held for time and no timer is on its way (one at a time: Thespian's cannot be canceled)."""
        if not self.arm:
            return None
        self.arm, self.timer = False, True
        return self.bound_s

    def woken(self) -> None:
        """The timer ``wake_after`` asked for fired: the ``handled`` that follows sends what is due, or asks again."""
        self.timer = False

    def _send(self, now: float | None = None) -> tuple[Any, ...]:
        self.arm = False
        if not self.held:
            return ()
        batch, self.held, self.due, self.urgent, self.bounding = tuple(self.held), [], False, False, False
        self.held_bytes = 0
        self.sent_waited, self.waited = self.waited, False
        self.in_flight += 1
        if now is not None:
            self.left_at = now
        return batch
