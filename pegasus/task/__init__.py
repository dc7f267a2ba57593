"""The pure task core: the three seed state machines, TaskFSM, the task models, and one
constant for each machine, state, stage and pool name (``pegasus.task.names``).

Nothing here does I/O or imports Thespian (tests/pegasus/test_purity.py keeps it so).
"""

from pegasus.task import machines
from pegasus.task.engine import Machine, build_machine
from pegasus.task.errors import (
    InvalidStateTransition,
    InvalidTransitionError,
    MachineDefinitionError,
    RetryNotAllowedError,
    StateEntryGateError,
    TaskAlreadyInStateError,
    TaskNotFoundError,
    TaskStateError,
    UnknownMachineError,
)
from pegasus.task.events import Event, EventType
from pegasus.task.fsm import TaskFSM
from pegasus.task.names import CognitiveState, LifecycleState, MachineName, PoolName, StageName
from pegasus.task.models import (
    ActionResult,
    Plan,
    PlanStep,
    PostTaskReflection,
    Reflection,
    StateTransition,
    TaskContext,
    TaskSnapshot,
)

__all__ = [
    "ActionResult", "CognitiveState", "Event", "EventType", "InvalidStateTransition", "InvalidTransitionError",
    "LifecycleState", "Machine", "MachineDefinitionError", "MachineName", "Plan", "PlanStep", "PoolName",
    "PostTaskReflection", "Reflection", "RetryNotAllowedError", "StageName", "StateEntryGateError",
    "StateTransition", "TaskAlreadyInStateError", "TaskContext", "TaskFSM", "TaskNotFoundError", "TaskSnapshot",
    "TaskStateError", "UnknownMachineError", "build_machine", "machines",
]
