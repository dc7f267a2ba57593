"""What ``Admission.step`` returns: the commands its carrier (the supervisor actor) carries out, in order.

``Submitted`` and ``MessageAccepted`` answer the request that made them; ``Refused`` is an input that
changed nothing, with the error the request is answered with (Admission never raises).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pegasus.bounds import timer_s
from pegasus.config import Gate
from pegasus.task import TaskSnapshot


@dataclass(frozen=True)
class StartRun:
    task_id: str
    run: int
    snapshot: TaskSnapshot
    generation: str = "1"  # attempt and gate re-runs: part of every idempotency key
    resume_event: str | None = None
    resume_payload: dict[str, Any] = field(default_factory=dict)
    journal: dict[str, dict[str, Any]] = field(default_factory=dict)
    inbox: tuple[tuple[int, str], ...] = ()  # messages for the run to take, (number, text)


@dataclass(frozen=True)
class StopRun:
    task_id: str
    run: int


@dataclass(frozen=True)
class RunEnded:
    """A run is over, whatever ended it: said once per run (its span, actors/telemetry.py).  ``outcome``: the
    state it stopped in (completed, failed, suspended, ...), waiting_for_sub_tasks, canceled, died (its task
    actor), abandoned."""

    task_id: str
    run: int
    machine: str
    metadata: dict[str, Any]
    outcome: str
    exit_reason: str | None = None
    failed: str | None = None  # why, when the run ended in a failure


@dataclass(frozen=True)
class SuspendRun:
    task_id: str
    run: int
    reason: str


@dataclass(frozen=True)
class MessageRun:
    """Give the task's run the messages it has not taken yet, (number, text) each."""

    task_id: str
    run: int
    inbox: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class RunGate:
    task_id: str
    token: int
    gate: Gate


@dataclass(frozen=True)
class TransitionNotice:
    """One transition of one task, for subscribers (sent to them as it is).

    ``machine`` is ``lifecycle`` for the supervisor's view of the task, or the
    task's cognitive machine (``classic`` / ``reason_act``).
    """

    task_id: str
    machine: str
    from_state: str
    to_state: str
    event: str
    timestamp: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WakeAfter:
    seconds: float
    task_id: str

    def __post_init__(self) -> None:  # a delay Thespian can arm whatever came before (pegasus.bounds)
        object.__setattr__(self, "seconds", timer_s(self.seconds))


@dataclass(frozen=True)
class Submitted:
    """A task a submit asked for; ``existing``: its key made it before (nothing else happened)."""

    task_id: str
    machine: str
    priority: int
    lifecycle_state: str
    existing: bool


@dataclass(frozen=True)
class MessageAccepted:
    """A message stored with its number, and when the task sees it."""

    number: int
    delivery: str


@dataclass(frozen=True)
class Refused:
    """The input changed nothing: ``error`` says why (a PegasusError for the client, or the store's failure)."""

    error: Exception


Command = (StartRun | StopRun | RunEnded | SuspendRun | MessageRun | RunGate | TransitionNotice | WakeAfter | Submitted
           | MessageAccepted | Refused)
