"""Errors of the task state machines, including the exception types of seed 002.

Seed 002 names TaskStateError (the root), InvalidTransitionError,
TaskNotFoundError, TaskAlreadyInStateError and RetryNotAllowedError.  The seeds
000/001 name InvalidStateTransition; it is the same error as
InvalidTransitionError (one class, two names), so callers of either seed's API
catch what they expect.
"""

from __future__ import annotations

from pegasus.errors import PegasusError


class TaskStateError(PegasusError):
    """Root of every state-machine error (seed 002)."""


class MachineDefinitionError(TaskStateError):
    """A machine table is broken: raised when the machine is built (at import)."""


class UnknownMachineError(TaskStateError):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        super().__init__(f"unknown machine {name!r}; known: {', '.join(known)}")


class InvalidStateTransition(TaskStateError):
    """The event is not allowed in the task's current state.

    The task's state and history are untouched when this is raised.
    """

    def __init__(self, machine: str, state: str, event_type: str, hint: str = "") -> None:
        self.machine = machine
        self.state = state
        self.event_type = event_type
        self.hint = hint
        message = f"{machine}: event {event_type} is not allowed in state {state!r}"
        super().__init__(f"{message} ({hint})" if hint else message)


InvalidTransitionError = InvalidStateTransition


class StateEntryGateError(InvalidStateTransition):
    """A state-entry gate refused the transition (e.g. lifecycle failed without exit_reason)."""


class QueueFull(InvalidStateTransition):
    """No room in the queue for more tasks (``[runtime] max_pending_tasks``): try again later."""


class TaskNotFoundError(TaskStateError):
    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"unknown task {task_id!r}")


class TaskAlreadyInStateError(TaskStateError):
    def __init__(self, task_id: str, state: str) -> None:
        self.task_id = task_id
        self.state = state
        super().__init__(f"task {task_id!r} is already {state!r}")


class RetryNotAllowedError(TaskStateError):
    def __init__(self, task_id: str, reason: str) -> None:
        self.task_id = task_id
        self.reason = reason
        super().__init__(f"task {task_id!r} cannot be retried: {reason}")
