"""When the supervisor looks at its schedules: one timer, armed for the earliest next slot.  Pure: the clock is
passed in (each input's ``now``), so a test moves time without sleeping.

A look (``Look``, the carrier's: read the schedules, fire what ``pegasus.triggers.schedules.step`` says is due, save
their cursors) answers the earliest next time (``Looked``) or that the store failed (``LookFailed``: again
after ``PROBE_S``).  A wakeup for another time than the one armed last is stale and changes nothing; an
earlier timer still pending is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from pegasus.triggers.schedules import timer_delay
from pegasus.store.health import PROBE_S

LATE_S = 0.002  # a timer fires this much after the slot: never just before it


@dataclass(frozen=True)
class Changed:
    """Look now: the system started, a schedule was added or resumed."""

    now: float
    writable: bool = True


@dataclass(frozen=True)
class Woken:
    """The timer armed for ``at`` fired."""

    at: float
    now: float
    writable: bool = True


@dataclass(frozen=True)
class Looked:
    """A look is over: the earliest next slot (None: no schedule waits for one)."""

    now: float
    wake_at: float | None


@dataclass(frozen=True)
class LookFailed:
    now: float


@dataclass(frozen=True)
class Look:
    """Fire the schedules' due slots as of ``now`` (the carrier's), then step ``Looked`` or ``LookFailed``."""

    now: float


@dataclass(frozen=True)
class Arm:
    """A wakeup in ``delay_s``, handed back as ``Woken(at, ...)``."""

    at: float
    delay_s: float


TimerInput = Changed | Woken | Looked | LookFailed
TimerCommand = Look | Arm


class ScheduleTimer:
    """The schedules' one timer (see the module docstring)."""

    def __init__(self) -> None:
        self.armed: float | None = None  # the time the last armed timer is for

    def step(self, event: TimerInput) -> list[TimerCommand]:
        if isinstance(event, Woken):
            if event.at != self.armed:
                return []  # replaced by an earlier one
            self.armed = None
        if isinstance(event, (Changed, Woken)):
            return [Look(event.now)] if event.writable else self._arm(event.now + PROBE_S, event.now)
        if isinstance(event, LookFailed):
            return self._arm(event.now + PROBE_S, event.now)
        return self._arm(event.wake_at, event.now)

    def _arm(self, wake_at: float | None, now: float) -> list[TimerCommand]:
        if wake_at is None:
            return []
        if self.armed is not None and now < self.armed <= wake_at:
            return []  # an earlier timer is still pending
        self.armed = wake_at
        return [Arm(wake_at, timer_delay(wake_at, now) + LATE_S)]
