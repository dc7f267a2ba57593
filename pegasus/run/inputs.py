"""What the task-run core is told: one input per ``TaskRun.step``.

Answers are read, never built: ``StageAnswer`` and ``RecallAnswer`` say which attributes
(the carrier's messages are them as they are).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pegasus.streaming import TextDelta


class StageAnswer(Protocol):
    """A stage's outcome as the core reads it (``actors.messages.StageResult`` is one)."""

    @property
    def task_id(self) -> str: ...
    @property
    def token(self) -> int: ...
    @property
    def stage(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def event_type(self) -> str | None: ...
    @property
    def payload(self) -> dict[str, Any]: ...
    @property
    def error(self) -> str | None: ...
    @property
    def error_kind(self) -> str: ...
    @property
    def worker(self) -> dict[str, Any]: ...


class RecallAnswer(Protocol):
    """The supervisor's answer to AskRecall as the core reads it (``actors.messages.Recalled`` is one).
    ``items``: dicts with id, kind (fact / episode), title, text and score."""

    @property
    def task_id(self) -> str: ...
    @property
    def token(self) -> int: ...
    @property
    def identity(self) -> str: ...
    @property
    def items(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def error(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Started:
    """Start (or continue) the run: apply ``resume_event`` first, else run what the state asks for."""

    resume_event: str | None = None
    resume_payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Answered:
    """A stage's answer: applied when it answers the request in flight, else dropped."""

    answer: StageAnswer


@dataclass(frozen=True, slots=True)
class MemoriesRecalled:
    """The supervisor's memories for the stage waiting on them (a stale answer is dropped like a stage's)."""

    answer: RecallAnswer


@dataclass(frozen=True, slots=True)
class Streamed:
    """Streamed text of the stage in flight: passed on to the supervisor (with the run), else dropped.
    Never stored: the stage's result carries the whole reply."""

    delta: TextDelta


@dataclass(frozen=True, slots=True)
class SuspendAsked:
    """A request to suspend; one for a run that is over (it crossed the stop) is ignored."""

    task_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class MessagesSent:
    """Messages for the task, (number, text) each: taken at the next transition (when the stage in
    flight answers).  For a run that is over they are ignored: the supervisor gives them to the next."""

    task_id: str
    entries: tuple[tuple[int, str], ...]


RunInput = Started | Answered | MemoriesRecalled | Streamed | SuspendAsked | MessagesSent
