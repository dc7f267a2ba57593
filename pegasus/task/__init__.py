"""The pure task core: the three seed state machines, TaskFSM, the task models, and one
constant for each machine, state, stage and pool name (``pegasus.task.names``).

Nothing here does I/O or imports Thespian (tests/pegasus/test_purity.py keeps it so).

Its names are imported on first use (PEP 562): ``pegasus.task.names`` alone costs nothing of the
machines' tables, which a command line that only asks a request never builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:  # the names as a type checker sees them
    from pegasus.task import machines
    from pegasus.task.engine import Machine, build_machine
    from pegasus.task.errors import InvalidStateTransition, InvalidTransitionError, MachineDefinitionError, RetryNotAllowedError, StateEntryGateError, TaskAlreadyInStateError, TaskNotFoundError, TaskStateError, UnknownMachineError
    from pegasus.task.events import Event, EventType
    from pegasus.task.fsm import TaskFSM
    from pegasus.task.names import CognitiveState, LifecycleState, MachineName, PoolName, StageName
    from pegasus.task.models import ActionResult, Plan, PlanStep, PostTaskReflection, Reflection, StateTransition, TaskContext, TaskSnapshot

_HOMES = {
    "pegasus.task.engine": ("Machine", "build_machine"),
    "pegasus.task.errors": ("InvalidStateTransition", "InvalidTransitionError", "MachineDefinitionError",
                            "RetryNotAllowedError", "StateEntryGateError", "TaskAlreadyInStateError",
                            "TaskNotFoundError", "TaskStateError", "UnknownMachineError"),
    "pegasus.task.events": ("Event", "EventType"),
    "pegasus.task.fsm": ("TaskFSM",),
    "pegasus.task.names": ("CognitiveState", "LifecycleState", "MachineName", "PoolName", "StageName"),
    "pegasus.task.models": ("ActionResult", "Plan", "PlanStep", "PostTaskReflection", "Reflection",
                            "StateTransition", "TaskContext", "TaskSnapshot"),
}
__getattr__, __dir__ = lazy.names(__name__, _HOMES, submodules=("machines",))


__all__ = [
    "ActionResult", "CognitiveState", "Event", "EventType", "InvalidStateTransition", "InvalidTransitionError",
    "LifecycleState", "Machine", "MachineDefinitionError", "MachineName", "Plan", "PlanStep", "PoolName",
    "PostTaskReflection", "Reflection", "RetryNotAllowedError", "StageName", "StateEntryGateError",
    "StateTransition", "TaskAlreadyInStateError", "TaskContext", "TaskFSM", "TaskNotFoundError", "TaskSnapshot",
    "TaskStateError", "UnknownMachineError", "build_machine", "machines",
]
