"""What Admission is told: one input per ``Admission.step``.

Client requests (submit, approve, cancel, ...), the reports of task actors and
gates, and its own timer.  Inputs carry values only; the clock and the id
factory are Admission's, given at construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pegasus.idempotency import SUBMIT
from pegasus.run.commands import ChildStep
from pegasus.task import TaskSnapshot


@dataclass(frozen=True)
class Submit:
    """A new task (or, with a ``key`` used before in ``scope``, the task it made): answered ``Submitted``."""

    text: str
    machine: str
    priority: int
    metadata: dict[str, Any]
    source: str
    key: str | None = None
    scope: str = SUBMIT
    tier: str | None = None  # every model stage's tier (None: [llm.stages]); the supervisor checked it is known


@dataclass(frozen=True)
class SubmitBatch:
    """Tasks created in order, all or none: every key and the queue's room checked before the first."""

    tasks: tuple[Submit, ...]


@dataclass(frozen=True)
class Approve:
    task_id: str


@dataclass(frozen=True)
class Cancel:
    task_id: str
    reason: str


@dataclass(frozen=True)
class Suspend:
    task_id: str
    reason: str


@dataclass(frozen=True)
class Resume:
    task_id: str
    message: str | None = None


@dataclass(frozen=True)
class Retry:
    task_id: str


@dataclass(frozen=True)
class Message:
    """A message to a task: answered ``MessageAccepted``."""

    task_id: str
    text: str


@dataclass(frozen=True)
class Restore:
    """Every unfinished task from the store (a start, or the store writable again)."""


@dataclass(frozen=True)
class Wake:
    """A retry's back-off (armed by ``WakeAfter``) may have passed."""

    task_id: str


@dataclass(frozen=True)
class Transitioned:
    """A run's cognitive transition, as its task actor reported it."""

    task_id: str
    run: int
    from_state: str
    to_state: str
    event: str
    timestamp: str
    stage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Stopped:
    """A run ended (completed, failed, suspended, or waiting for sub-tasks)."""

    task_id: str
    run: int
    state: str
    snapshot: TaskSnapshot
    exit_reason: str | None = None
    children: tuple[ChildStep, ...] = ()


@dataclass(frozen=True)
class RunLost:
    """A run's task actor died or let it go: restarted from its checkpoint."""

    task_id: str
    run: int
    why: str
    outcome: str = "died"  # its run span's (RunEnded): "abandoned" when the task actor let it go


@dataclass(frozen=True)
class GateAnswered:
    task_id: str
    token: int
    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


Input = (Submit | SubmitBatch | Approve | Cancel | Suspend | Resume | Retry | Message | Restore | Wake | Transitioned
         | Stopped | RunLost | GateAnswered)
