"""Memory before a stage: a task actor asks the supervisor (where the store is) what to recall, and it
answers.  AskRecall is the task-run core's own command, sent as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.messages.base import _Brief
from pegasus.run.commands import AskRecall as AskRecall  # noqa: F401 - the core's command, sent as it is


@dataclass(frozen=True, repr=False)
class Recalled(_Brief):
    """Supervisor -> task actor: the identity and the memories for the stage waiting on them.
    ``items``: id, kind (fact / episode), title, text, score -- best first.  ``error``: the store could
    not be searched (the stage runs without memories), or the query has no vector (full text alone)."""

    task_id: str
    token: int
    identity: str
    items: tuple[dict[str, Any], ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class RecallVectorDue:
    """Wakeup payload of the supervisor: the recall (task, token) waiting for its query's vector is answered with
    full text alone if the vector has not come (a busy pool, a hung endpoint: the task never waits longer); a
    negative token is a task's memory.search step waiting the same way."""

    task_id: str
    token: int


@dataclass(frozen=True)
class VectorsDue:
    """Wakeup payload of the supervisor: time for the next batch of memory rows without a vector."""
