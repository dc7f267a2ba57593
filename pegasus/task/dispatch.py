"""What comes after a transition: seed 003's dispatch, read from the machine's table.

``next_work(machine, state, context)`` says which stage to run next and on
which pool (the state's ``Runs``), or which event the task raises itself (a new
task starts; ACTING with no step left ends), or nothing (suspended and terminal
states wait).  The task-run core turns the answer into commands; nobody writes
an ``if state == ...`` ladder.
"""

from __future__ import annotations

from dataclasses import dataclass

from pegasus.task import machines
from pegasus.task.engine import Machine
from pegasus.task.events import EventType
from pegasus.task.models import TaskContext


@dataclass(frozen=True)
class RunStage:
    """Ask the ``pool`` for ``stage`` (``step_index``: the plan step, for a stage over steps)."""

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


Next = RunStage | RaiseEvent | Wait


def next_work(machine: Machine | str, state: str, context: TaskContext) -> Next:
    table = machine if isinstance(machine, Machine) else machines.get(machine)
    runs = table.stages.get(state)
    if runs is not None:
        if runs.empty_plan is None:
            return RunStage(runs.stage, runs.pool)
        step = context.plan.current_step if context.plan is not None else None
        if step is None:
            return RaiseEvent(runs.empty_plan)
        return RunStage(runs.stage, runs.pool, step.index)
    event = table.raises.get(state)
    if event is not None:
        return RaiseEvent(event)
    return Wait(f"{state}: waiting" if state == table.suspended else f"{state}: ended")
