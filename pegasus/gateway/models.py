"""The request bodies of the HTTP API (pydantic): validated before any call, a bad one is a 400 naming the field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pegasus.gateway.errors import ApiError
from pegasus.task.names import CognitiveMachineName


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SubmitBody(Body):
    text: str = Field(min_length=1, description="what the task should do")
    machine: CognitiveMachineName | None = Field(None, description="cognitive machine (default from config)")
    priority: int = Field(5, ge=0, le=1_000_000, description="lower runs first")
    metadata: dict[str, Any] = Field(default_factory=dict, description="kept with the task")


class ReasonBody(Body):
    reason: str | None = Field(None, max_length=4096)


class ResumeBody(Body):
    message: str | None = Field(None, description="the information the task asked for")


class MessageBody(Body):
    text: str = Field(min_length=1, description="a message to the running task")


class ScheduleBody(BaseModel):
    """``pegasus schedule add``'s options; other fields go to ``Client.schedule_add`` as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(min_length=1, max_length=128)
    text: str = Field(min_length=1)
    cron: str | None = None
    every: str | float | None = None  # a duration ("90s", "1h30m") or seconds
    tz: str | None = None
    machine: CognitiveMachineName | None = None
    priority: int | None = Field(None, ge=0, le=1_000_000)
    overlap: str | None = None
    catchup: str | float | None = None


def parse(model: type[Body] | type[ScheduleBody], raw: bytes) -> Any:
    """``raw`` (JSON; empty: no fields) as ``model``; ApiError 400 naming the first bad field."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ApiError(400, "bad_request", f"{where}: {first['msg']}") from None
