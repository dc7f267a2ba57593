"""The requests about schedules and webhooks (the supervisor's schedule timer is in ``actors.messages``)."""

from __future__ import annotations

import os
import time
from typing import Any, Literal

from pydantic import Field

from pegasus.requests.base import Request, View, Views
from pegasus.triggers.schedules import DEFAULT_CATCHUP_S, make_spec
from pegasus.task.names import CognitiveMachineName

OverlapName = Literal["skip", "buffer_one", "allow_all", "cancel_other"]


class ScheduleAdd(Request[View]):
    """A new schedule (pegasus.triggers.schedules.make_spec checks it): exactly one of ``cron`` and ``every``."""

    name: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    cron: str | None = Field(None, max_length=256)
    every: str | None = Field(None, max_length=64)  # a duration; bounds, and a next slot within the horizon, are
    tz: str = Field("UTC", max_length=64)           # make_spec's (the supervisor's and the Client's check)
    machine: CognitiveMachineName | None = None
    priority: int = Field(5, ge=0, le=1_000_000)
    overlap: OverlapName = "skip"
    catchup: str | None = Field(None, max_length=64)  # a duration (pegasus.triggers.schedules.parse_duration); None: default

    @classmethod
    def of(cls, name: str, *, text: str, cron: str | None = None, every: str | float | None = None, tz: str = "UTC",
           machine: Any = None, priority: int = 5, overlap: str = "skip",
           catchup: str | float = DEFAULT_CATCHUP_S) -> ScheduleAdd:
        """From the options as a person gives them (durations as text or seconds), checked by ``make_spec``
        first: ScheduleError naming the field, before anything is sent (the supervisor checks again)."""
        make_spec(name, text, cron=cron, every=every, tz=tz, machine=machine, priority=priority, overlap=overlap,
                  catchup=catchup, now=time.time())
        return cls(name=name, text=text, cron=cron, every=None if every is None else str(every), tz=tz,
                   machine=machine, priority=priority, overlap=overlap, catchup=str(catchup))  # type: ignore[arg-type]

class ScheduleList(Request[Views]):
    """Every schedule: its spec, state, counts and next time."""

class SchedulePause(Request[View]):
    """Pause the schedule ``name``: its slots do not fire."""

    name: str

class ScheduleResume(Request[View]):
    """Unpause the schedule ``name``; the slots that passed while paused do not fire."""

    name: str

class ScheduleTrigger(Request[View]):
    """A task of the schedule ``name`` now, whatever its overlap policy: its view with ``task``."""

    name: str

class ScheduleRemove(Request[View]):
    """Remove the schedule ``name`` (a quarantined one too)."""

    name: str

class WebhookAdd(Request[View]):
    """A new webhook: its template, and the file its secret is read from (None: one is made, kept in a private
    file under the state directory)."""

    name: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    secret_file: str | None = None
    events: list[str] = Field(default_factory=list, max_length=100)  # GitHub events it takes (none: every one)

    @classmethod
    def of(cls, name: str, text: str, secret_file: str | os.PathLike[str] | None = None,
           events: list[str] | None = None) -> WebhookAdd:
        """With ``secret_file`` made absolute here, where it was named (the supervisor may run elsewhere)."""
        path = None if secret_file is None else os.path.abspath(os.path.expanduser(secret_file))
        return cls(name=name, text=text, secret_file=path, events=list(events or []))

class WebhookList(Request[Views]):
    """Every webhook (never its secret)."""

class WebhookRemove(Request[View]):
    name: str

class DeliverWebhook(Request[View]):
    """A delivery to webhook ``name``: its headers and raw body, checked by the supervisor (which holds the
    secret).  Refused: a Reply with error_type WebhookRefused and data {status, code}."""

    name: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: bytes
