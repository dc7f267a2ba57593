"""What the task-run core returns: ``TaskRun.step(input) -> list[Command]``.

The commands are plain values; the task actor carries each out (a send, a line
of log, a report in its next batch to the supervisor).  Nothing here knows an
address: a stage request names its pool, a report goes to "the supervisor".
The reports are the task-run conversation's messages themselves
(``actors.messages.task_run`` re-exports them), so they travel without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pegasus.levels import Level
from pegasus.store.journal import StepEnd
from pegasus.streaming import TextDelta
from pegasus.task.models import TaskContext, TaskSnapshot
from pegasus.task.names import StageName


@dataclass(frozen=True)
class SendStage:
    """Ask ``pool`` to run ``stage`` of this run; its answer must carry ``token``.

    ``journal``: an effectful tool step, which its worker has the supervisor journal
    as started before it runs the tool.
    """

    pool: str
    task_id: str
    run: int
    token: int
    stage: str
    machine: str
    context: TaskContext
    step_index: int | None = None
    idempotency_key: str | None = None
    journal: bool = False
    priority: int = 5  # the task's: the pool's order (pegasus.pool.order)

    @property
    def tier(self) -> str | None:
        """The tier its request names: the task's, but a post-task reflection runs on its stage's own
        (None), as when the supervisor sent it."""
        return None if self.stage == StageName.POST_REFLECT else self.context.tier


@dataclass(frozen=True)
class AskRecall:
    """Ask for the identity and the ``k`` memories most relevant to ``query`` (the task actor reads them from
    the store's file when it can, else the supervisor answers); the answer (``inputs.RecallAnswer``) must
    carry ``token``.  The stage waits for it."""

    task_id: str
    run: int
    token: int
    query: str
    k: int


@dataclass(frozen=True)
class TaskTransitioned:
    """Report one transition to the supervisor: the stage that caused it, the checkpoint to
    store and the journalled step it ends, all written together.  ``pid``: the process that
    carried the run.  (A report travels as it is, in the carrier's TaskReports.)"""

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


@dataclass(frozen=True)
class ChildStep:
    """A sub_task step of the plan, for the supervisor to make a child of: ``key`` is the step's
    idempotency key (the child is created once per key), ``params`` its action_params as planned."""

    key: str
    step_index: int
    params: dict[str, Any]


@dataclass(frozen=True)
class TaskStopped:
    """Report the end of the run (suspended, completed or failed) to the supervisor, with
    everything needed to bring the task back.  The carrier is free after it.

    ``children``: the run stopped to wait for these sub-tasks (the task stays acting); the
    supervisor starts them and runs the task again once every one has ended.  ``reflecting``:
    its task actor hands the done task's post-task reflection out itself (``pegasus.run.reflections``)
    and reports the answer (``Reflected``); else the supervisor hands it out.
    """

    task_id: str
    run: int
    state: str
    snapshot: TaskSnapshot
    exit_reason: str | None = None
    children: tuple[ChildStep, ...] = ()
    reflecting: bool = False
    awaited: bool = False  # a sub-task's end: its parent waits for it (never held for time)


@dataclass(frozen=True)
class Reflected:
    """Report the answer to a post-task reflection the task actor handed out (``TaskStopped.reflecting``),
    as the llm pool gave it: the supervisor decides what it comes to and writes it, in the commit of the
    reports it travels with."""

    task_id: str
    ok: bool
    payload: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: str = ""


@dataclass(frozen=True)
class Log:
    """A line for the task's log; ``error`` is the exception to render with it."""

    level: Level
    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None


@dataclass(frozen=True)
class Abandon:
    """This activation cannot go on (its snapshot is unusable, or failing the task failed):
    let the process go, so the supervisor restarts the run from its checkpoint as after a crash."""

    reason: str


Command = SendStage | AskRecall | TaskTransitioned | TaskStopped | Log | Abandon | TextDelta
"""(A TextDelta is passed on to the supervisor at once, as it is: see ``inputs.Streamed``.)"""
