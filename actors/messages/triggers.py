"""The supervisor's schedule timer (the schedule and webhook requests are ``pegasus.requests.triggers``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduleDue:
    """Wakeup payload of the supervisor: a schedule's next slot (or a buffered start's check) is due at ``at``
    (epoch seconds: the time the timer was armed for)."""

    at: float
