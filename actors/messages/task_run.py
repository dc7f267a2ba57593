"""The conversation of a task's run: the supervisor and the task actor that runs it.

Its reports, TaskTransitioned, TaskStopped and Reflected, are the task-run core's own
(``pegasus.run``), sent as the core makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.messages.base import _Brief
from pegasus.config import Settings
from pegasus.run.commands import Reflected as Reflected  # noqa: F401 - reports of the core, sent as they are
from pegasus.run.commands import TaskStopped as TaskStopped  # noqa: F401
from pegasus.run.commands import TaskTransitioned as TaskTransitioned  # noqa: F401


@dataclass(frozen=True, repr=False)
class ConfigureTaskActor(_Brief):
    """Supervisor -> a task actor it created, before its first run: the system's settings, once
    (not in each StartTask: ~40 us to pickle and again to unpickle, per run)."""

    settings: Settings


@dataclass(frozen=True, repr=False)
class StartTask(_Brief):
    """Run (or continue) a task: its snapshot (TaskSnapshot) and what to apply first."""

    snapshot: Any
    run: int
    llm_pool: Any
    tool_pool: Any
    resume_event: str | None = None
    resume_payload: dict[str, Any] = field(default_factory=dict)
    generation: str = "1"
    journal: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_id: str = ""  # the snapshot's (named apart: a run whose snapshot cannot be read is reported by it)
    inbox: tuple[tuple[int, str], ...] = ()  # messages for the run to take at its next transition
    identity: str = ""  # the agent's identity, with recall off (else each recall brings it): every think/reason has it
    awaited: bool = False  # a sub-task: its parent waits for its end, which is then never held for time

@dataclass(frozen=True, repr=False)
class StartTasks(_Brief):
    """Several ``StartTask``s to one task actor in one message, in order (the supervisor's sends of one
    commit: a submit, or the runs that follow the ends in one batch of reports).  Every Thespian message
    costs both processes its receive, MAC check, unpickle and acknowledgement."""

    starts: tuple[StartTask, ...]

@dataclass(frozen=True)
class SuspendTask:
    task_id: str
    reason: str

@dataclass(frozen=True)
class DropTask:
    """Supervisor -> task actor: forget the task's run ``run`` (canceled, or the store failed);
    whatever it still has in flight is dropped when it comes back."""

    task_id: str
    run: int

@dataclass(frozen=True)
class TaskAbandoned:
    """Task actor -> supervisor: the run cannot go on here (its snapshot is unusable, or carrying
    it out raised); the task actor has forgotten it, and the supervisor restarts it from its
    checkpoint as after a crash."""

    task_id: str
    run: int
    reason: str

@dataclass(frozen=True, repr=False)
class TaskReports(_Brief):
    """Task actor -> supervisor: its reports since the last send, in order, in one message.

    ``reports`` holds TaskTransitioned, TaskStopped and Reflected, of one or more tasks' runs
    (each task's in order: ``pegasus.run.report_batch``).  One message per batch instead of one
    per report: every Thespian message costs both processes about half a millisecond of
    CPU here (benchmarks/).
    """

    reports: tuple[Any, ...]
    cpu_s: float = 0.0  # the task actor's process CPU so far: its load, for placing runs (pegasus/run/hosts.py)
    # Held for time by the task actor (many runs waiting): a batch already, so the supervisor's group commits
    # without lingering ``[store] commit_linger_ms`` for more (pegasus/store/drain.py).
    waited: bool = False
