"""Event types and the Event record.  Names are the seeds' own."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventType(StrEnum):
    # External input (seed 003): creates a task.
    MESSAGE_RECEIVED = "MESSAGE_RECEIVED"
    WEBHOOK_TRIGGERED = "WEBHOOK_TRIGGERED"
    SCHEDULE_FIRED = "SCHEDULE_FIRED"
    # Cognitive machines (seeds 000, 001).
    TASK_CREATED = "TASK_CREATED"
    PERCEIVE_DONE = "PERCEIVE_DONE"
    THINK_DONE = "THINK_DONE"
    PLAN_DONE = "PLAN_DONE"
    ACT_DONE = "ACT_DONE"
    REFLECT_DONE = "REFLECT_DONE"
    REASON_DONE = "REASON_DONE"
    NEED_MORE_INFO = "NEED_MORE_INFO"
    TASK_RESUMED = "TASK_RESUMED"
    TASK_SUSPENDED = "TASK_SUSPENDED"
    TASK_FAILED = "TASK_FAILED"
    TOOL_CALL_COMPLETED = "TOOL_CALL_COMPLETED"
    TOOL_CALL_FAILED = "TOOL_CALL_FAILED"
    STEP_COMPLETED = "STEP_COMPLETED"
    TASK_COMPLETED = "TASK_COMPLETED"
    # Governed lifecycle (seed 002's service methods, T1..T20).
    TASK_APPROVED = "TASK_APPROVED"
    TASK_QUEUED = "TASK_QUEUED"
    TASK_STARTED = "TASK_STARTED"
    EXECUTION_COMPLETED = "EXECUTION_COMPLETED"
    TASK_VERIFIED = "TASK_VERIFIED"
    TASK_DONE = "TASK_DONE"
    TASK_CANCELED = "TASK_CANCELED"
    TASK_BLOCKED = "TASK_BLOCKED"
    GATE_FAILED = "GATE_FAILED"
    TASK_RETRIED = "TASK_RETRIED"
    TASK_UNBLOCKED = "TASK_UNBLOCKED"
    # The post-task reflector (seed 001): after done, never changing the outcome.
    REFLECTION_COMPLETE = "REFLECTION_COMPLETE"
    REFLECTION_FAILED = "REFLECTION_FAILED"


EXTERNAL_INPUT = frozenset(
    {EventType.MESSAGE_RECEIVED, EventType.WEBHOOK_TRIGGERED, EventType.SCHEDULE_FIRED}
)


def new_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Event(BaseModel):
    """Something that happened to a task (or arrived from outside).

    ``payload`` carries the stage result that the event reports (a plan, a
    reflection verdict, an ActionResult, an exit_reason): the state machine reads
    it in its guards and folds it into the task context, so replaying a task's
    events on a fresh machine reproduces the task exactly.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: EventType
    task_id: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    id: str = Field(default_factory=new_id)
    timestamp: datetime = Field(default_factory=utc_now)
    parent_event_id: str | None = None
