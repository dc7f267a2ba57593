"""The conversation of a task's run: the supervisor and the task actor that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.messages.base import _Brief
from pegasus.config import Settings
from pegasus.store.journal import StepEnd


@dataclass(frozen=True, repr=False)
class StartTask(_Brief):
    """Run (or continue) a task: its snapshot (TaskSnapshot) and what to apply first."""

    snapshot: Any
    run: int
    llm_pool: Any
    tool_pool: Any
    settings: Settings
    resume_event: str | None = None
    resume_payload: dict[str, Any] = field(default_factory=dict)
    generation: str = "1"
    journal: dict[str, dict[str, Any]] = field(default_factory=dict)

@dataclass(frozen=True)
class SuspendTask:
    task_id: str
    reason: str

@dataclass(frozen=True, repr=False)
class TaskTransitioned(_Brief):
    """Task actor -> supervisor: one cognitive transition (and the stage that caused it)."""

    task_id: str
    run: int
    from_state: str
    to_state: str
    event: str
    timestamp: str
    stage: dict[str, Any] | None = None
    checkpoint: tuple[str, bytes] | None = None
    journal_finish: StepEnd | None = None
    pid: int = 0

@dataclass(frozen=True, repr=False)
class TaskReports(_Brief):
    """Task actor -> supervisor: its reports since the last send, in order, in one message.

    ``reports`` holds TaskTransitioned and TaskStopped.  One
    message per batch instead of one per report: every Thespian message costs
    both processes about half a millisecond of CPU here (benchmarks/).
    """

    task_id: str
    run: int
    reports: tuple[Any, ...]

@dataclass(frozen=True, repr=False)
class TaskStopped(_Brief):
    """Task actor -> supervisor: the cognitive machine is suspended, completed or failed.

    The actor is free after sending this (the supervisor gives it another run or
    retires it); ``snapshot`` is everything needed to bring the task back.
    """

    task_id: str
    run: int
    state: str
    snapshot: Any
    exit_reason: str | None = None
