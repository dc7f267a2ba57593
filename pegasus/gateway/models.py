"""The request bodies of the HTTP API (pydantic): validated before any call, a bad one is a 400 naming the field."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from pegasus.gateway.errors import ApiError
from pegasus.triggers.schedules import ScheduleError, make_spec
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


Duration = StrictStr | StrictInt | StrictFloat  # "90s", "1h30m", "2d", or seconds


class ScheduleBody(Body):
    """``pegasus schedule add``'s options, checked as the supervisor checks them (``make_spec``: bounds, and a
    next slot within the horizon) so a refusal is a 400 naming the field and stores nothing."""

    name: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    cron: str | None = Field(None, max_length=256, description="a cron expression (5 fields), in tz")
    every: Duration | None = Field(None, description="an interval: 30s, 5m, 1h30m, 2d or seconds (1s to 366d)")
    tz: str | None = Field(None, max_length=64, description="an IANA time zone (default UTC)")
    machine: CognitiveMachineName | None = None
    priority: int | None = Field(None, ge=0, le=1_000_000)
    overlap: str | None = Field(None, description="skip, buffer_one, allow_all or cancel_other")
    catchup: Duration | None = Field(None, description="how old a missed slot may be and still fire (0 to 366d)")

    @model_validator(mode="after")
    def _bounded(self) -> ScheduleBody:
        try:
            make_spec(self.name, self.text, cron=self.cron, every=self.every, tz=self.tz or "UTC",
                      machine=self.machine, priority=5 if self.priority is None else self.priority,
                      overlap=self.overlap or "skip", catchup=self.catchup, now=time.time())
        except ScheduleError as exc:
            raise PydanticCustomError("schedule", str(exc)) from None
        return self


def parse(model: type[Body], raw: bytes) -> Any:
    """``raw`` (JSON; empty: no fields) as ``model``; ApiError 400 naming the first bad field."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ApiError(400, "bad_request", f"{where}: {first['msg']}") from None
