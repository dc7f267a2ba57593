"""The timers of the guardian and the supervisor (wakeup payloads)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartDue:
    """Wakeup payload of the guardian: start supervisor generation ``generation + 1`` now."""

    generation: int

@dataclass(frozen=True)
class RetryDue:
    """Wakeup payload of the supervisor: a retried task's backoff has passed."""

    task_id: str

@dataclass(frozen=True)
class StoreProbe:
    """Wakeup payload of the supervisor: try a write to learn whether the store takes writes again."""

@dataclass(frozen=True)
class TaskActorsDue:
    """Wakeup payload of the supervisor: a task actor may have been idle long enough to retire."""
