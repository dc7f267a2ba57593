"""The conversation of schedules and webhooks: client requests to the supervisor, and its schedule timer.

Requests are pydantic models checked again on arrival (``revalidate``), as every client request is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from actors.messages.requests import Request
from pegasus.task.names import CognitiveMachineName

OverlapName = Literal["skip", "buffer_one", "allow_all", "cancel_other"]


class ScheduleAdd(Request):
    """A new schedule (pegasus.schedules.make_spec checks it): exactly one of ``cron`` and ``every``."""

    name: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    cron: str | None = Field(None, max_length=256)
    every: str | None = Field(None, max_length=64)  # a duration; bounds, and a next slot within the horizon, are
    tz: str = Field("UTC", max_length=64)           # make_spec's (the supervisor's and the Client's check)
    machine: CognitiveMachineName | None = None
    priority: int = Field(5, ge=0, le=1_000_000)
    overlap: OverlapName = "skip"
    catchup: str | None = Field(None, max_length=64)  # a duration (pegasus.schedules.parse_duration); None: default

class ScheduleList(Request):
    """Every schedule: its spec, state, counts and next time."""

class ScheduleControl(Request):
    """Pause, resume, trigger (a task now) or remove the schedule ``name``."""

    name: str
    action: Literal["pause", "resume", "trigger", "remove"]

class WebhookAdd(Request):
    """A new webhook: its template, and the file its secret is read from (None: one is made, kept in a private
    file under the state directory)."""

    name: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    secret_file: str | None = None

class WebhookList(Request):
    """Every webhook (never its secret)."""

class WebhookRemove(Request):
    name: str

class DeliverWebhook(Request):
    """A delivery to webhook ``name``: its headers and raw body, checked by the supervisor (which holds the
    secret).  Refused: a Reply with error_type WebhookRefused and data {status, code}."""

    name: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: bytes

@dataclass(frozen=True)
class ScheduleDue:
    """Wakeup payload of the supervisor: a schedule's next slot (or a buffered start's check) is due at ``at``
    (epoch seconds: the time the timer was armed for)."""

    at: float
