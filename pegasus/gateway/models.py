"""The request bodies of the HTTP API (pydantic): validated before any call, a bad one is a 400 naming the field."""

from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from pegasus.gateway.errors import ApiError
from pegasus.requests import OverlapName, TierName
from pegasus.triggers.schedules import MAX_CATCHUP_S, MAX_EVERY_S, MIN_EVERY_S, NAME, ScheduleError, make_spec
from pegasus.task.names import CognitiveMachineName


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SubmitBody(Body):
    text: str = Field(min_length=1, description="what the task should do")
    machine: CognitiveMachineName | None = Field(None, description="cognitive machine (default from config)")
    tier: TierName | None = Field(None, description='model tier of every model stage: "default" or a name of '
                                  "[llm.tiers] (default: each stage's, [llm.stages]); an unknown one is a 400")
    priority: StrictInt = Field(5, ge=0, le=1_000_000, description="lower runs first")
    metadata: dict[str, Any] = Field(default_factory=dict, description="kept with the task")


class ReasonBody(Body):
    reason: str | None = Field(None, max_length=4096)


class ResumeBody(Body):
    message: str | None = Field(None, description="the information the task asked for")


class MessageBody(Body):
    text: str = Field(pattern=r"\S", description="a message to the running task (not blank)")


# A duration as pegasus.triggers.schedules.parse_duration reads it: "90s", "1h30m", "2d", or seconds (text or a number).
DURATION = r"^\s*([0-9]+(\.[0-9]+)?|([0-9]+(\.[0-9]+)?([mM][sS]|[sSmMhHdDwW]))+)\s*$"
DurationText = Annotated[StrictStr, Field(max_length=64, pattern=DURATION)]
Every = (DurationText | Annotated[StrictInt, Field(ge=MIN_EVERY_S, le=MAX_EVERY_S)]
         | Annotated[StrictFloat, Field(ge=MIN_EVERY_S, le=MAX_EVERY_S)])
Catchup = (DurationText | Annotated[StrictInt, Field(ge=0, le=MAX_CATCHUP_S)]
           | Annotated[StrictFloat, Field(ge=0, le=MAX_CATCHUP_S)])
CRON = r"^\s*\S+(\s+\S+){4}\s*$"  # five fields; what each may hold is the supervisor's check (croniter's)


class ScheduleBody(Body):
    """``pegasus schedule add``'s options, checked as the supervisor checks them (``make_spec``: bounds, and a
    next slot within the horizon) so a refusal is a 400 naming the field and stores nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"oneOf": [  # exactly one of the two
        {"required": ["cron"], "properties": {"cron": {"type": "string"}}},
        {"required": ["every"], "properties": {"every": {"type": ["string", "number"]}}}]})

    name: str = Field(pattern=NAME.pattern)
    text: str = Field(min_length=1)
    cron: str | None = Field(None, max_length=256, pattern=CRON, description="a cron expression (5 fields), in tz")
    every: Every | None = Field(None, description="an interval: 30s, 5m, 1h30m, 2d or seconds (1s to 366d)")
    tz: str | None = Field(None, max_length=64, description="an IANA time zone (default UTC)")
    machine: CognitiveMachineName | None = None
    priority: StrictInt | None = Field(None, ge=0, le=1_000_000)
    overlap: OverlapName | None = Field(None, description="what a slot does while the last one's task runs")
    catchup: Catchup | None = Field(None, description="how old a missed slot may be and still fire (0 to 366d)")

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
