"""The task-run core: one run of a task's cognitive machine, events in, commands out.

``actors.task_actor`` carries it: it turns messages into calls of ``TaskRun``
and the returned commands into sends.  No Thespian here, no I/O.
"""

from pegasus.run.commands import (
    Abandon, AskRecall, ChildStep, Command, Log, RecallAnswer, SendStage, StageAnswer, TaskStopped, TaskTransitioned,
)
from pegasus.run.core import EXIT_REASON_BY_KIND, RunSnapshot, TaskRun, current, delta_of, step_key, sub_task_key

__all__ = [
    "EXIT_REASON_BY_KIND", "Abandon", "AskRecall", "ChildStep", "Command", "Log", "RecallAnswer", "RunSnapshot",
    "SendStage", "StageAnswer", "TaskRun", "TaskStopped", "TaskTransitioned", "current", "delta_of", "step_key",
    "sub_task_key",
]
