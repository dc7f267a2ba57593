"""What a task actor does after a transition: seed 003's dispatch table, as data.

``next_work(machine, state, context)`` says which stage to run next (and on
which pool), or which event the task raises itself (an empty plan finishes
ACTING at once), or nothing (suspended and terminal states wait).  The actor
turns the answer into a message; it has no ``if state == ...`` ladder of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from pegasus.task.events import EventType
from pegasus.task.models import TaskContext


@dataclass(frozen=True)
class RunStage:
    """Ask the ``pool`` for ``stage`` (``step_index`` for act)."""

    stage: str
    pool: str
    step_index: int | None = None


@dataclass(frozen=True)
class RaiseEvent:
    """The task raises this event on itself (no stage work is needed)."""

    event_type: EventType


@dataclass(frozen=True)
class Wait:
    """Nothing to run: the task waits for an outside event (or has ended)."""

    reason: str


Work = RunStage | RaiseEvent | Wait

# (machine, state) -> stage on the llm pool.  ACTING is handled below (tool pool).
_LLM_STAGES = {
    ("classic", "perceiving"): "perceive",
    ("classic", "thinking"): "think",
    ("classic", "planning"): "plan",
    ("classic", "reflecting"): "reflect",
    ("reason_act", "reasoning"): "reason",
}
# What ends ACTING when the plan has no step left to run.
_EMPTY_PLAN_EVENT = {"classic": EventType.ACT_DONE, "reason_act": EventType.STEP_COMPLETED}


def next_work(machine: str, state: str, context: TaskContext) -> Work:
    stage = _LLM_STAGES.get((machine, state))
    if stage is not None:
        return RunStage(stage, "llm")
    if state == "acting":
        step = context.plan.current_step if context.plan is not None else None
        if step is None:
            return RaiseEvent(_EMPTY_PLAN_EVENT[machine])
        return RunStage("act", "tool", step.index)
    if state == "idle":
        return RaiseEvent(EventType.TASK_CREATED)
    return Wait(f"{state}: waiting" if state == "suspended" else f"{state}: ended")
