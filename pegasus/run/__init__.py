"""The task-run core: one run of a task's cognitive machine, ``TaskRun.step(input) -> list[Command]``.

``actors.task_actor`` carries it: it turns messages into inputs and the returned commands into
sends.  No Thespian here, no I/O.
"""

from pegasus.run.commands import Abandon, AskRecall, ChildStep, Command, Log, SendStage, TaskStopped, TaskTransitioned
from pegasus.run.core import EXIT_REASON_BY_KIND, TaskRun
from pegasus.run.inputs import (
    Answered, MemoriesRecalled, MessagesSent, RecallAnswer, RunInput, StageAnswer, Started, Streamed, SuspendAsked,
)
from pegasus.run.snapshot import RunSnapshot, step_key, sub_task_key

__all__ = [
    "EXIT_REASON_BY_KIND", "Abandon", "Answered", "AskRecall", "ChildStep", "Command", "Log", "MemoriesRecalled",
    "MessagesSent", "RecallAnswer", "RunInput", "RunSnapshot", "SendStage", "StageAnswer", "Started", "Streamed",
    "SuspendAsked", "TaskRun", "TaskStopped", "TaskTransitioned", "step_key", "sub_task_key",
]
