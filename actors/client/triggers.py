"""``Client``'s schedules and webhooks (a mixin: the methods ask the supervisor like every other).

    client.schedule_add("tidy", text="tidy the workspace", cron="0 3 * * *", tz="Europe/Paris")
    client.webhook_add("gh", 'Review "{pull_request.title}"', secret_file="/home/me/gh.secret")
    client.deliver_webhook("gh", request_headers, raw_body)   # what the HTTP gateway's route calls
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from actors import messages as m
from pegasus.requests import R


class TriggersClient:
    """Schedules and webhooks of ``actors.client.Client`` (see the module docstring)."""

    def ask(self, request: m.Request[R]) -> R:  # Client's
        raise NotImplementedError

    # -- schedules --------------------------------------------------------------------------------
    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule: spec, paused, fired, skipped, last_task, next_time (ISO UTC)."""
        return self.ask(m.ScheduleList())

    def schedule_add(self, name: str, *, text: str, cron: str | None = None, every: str | float | None = None,
                     tz: str = "UTC", machine: Any = None, priority: int = 5, overlap: str = "skip",
                     catchup: str | float | None = None) -> dict[str, Any]:
        """A schedule firing a task with ``text`` at each ``cron`` match in ``tz``, or ``every`` (a duration:
        ``90s``, ``5m``, ``1h30m``, or seconds).  ``overlap``: skip, buffer_one, allow_all or cancel_other;
        ``catchup``: how old a slot missed during downtime may be and still fire (None: 5 minutes).  ScheduleError naming the field
        when a value is out of bounds (docs/schedules.md), before anything is sent; the supervisor checks again."""
        later = {} if catchup is None else {"catchup": catchup}  # the schedules module's default, imported there
        return self.ask(m.ScheduleAdd.of(name, text=text, cron=cron, every=every, tz=tz, machine=machine,
                                          priority=priority, overlap=overlap, **later))

    def schedule_pause(self, name: str) -> dict[str, Any]:
        return self.ask(m.SchedulePause(name=name))

    def schedule_resume(self, name: str) -> dict[str, Any]:
        """Unpause; the slots that passed while paused do not fire."""
        return self.ask(m.ScheduleResume(name=name))

    def schedule_trigger(self, name: str) -> dict[str, Any]:
        """A task now (whatever the overlap policy; cancel_other still cancels the running one): the
        schedule's view with ``task``."""
        return self.ask(m.ScheduleTrigger(name=name))

    def schedule_remove(self, name: str) -> dict[str, Any]:
        return self.ask(m.ScheduleRemove(name=name))

    # -- webhooks ---------------------------------------------------------------------------------
    def webhooks(self) -> list[dict[str, Any]]:
        """Every webhook: name, text, secret_file, created_at (never the secret)."""
        return self.ask(m.WebhookList())

    def webhook_add(self, name: str, text: str, secret_file: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """A webhook whose deliveries make tasks with ``text`` (a template of the JSON body's fields).  The
        secret is read from ``secret_file`` (private to its owner), or made and written to the
        ``secret_file`` the answer names."""
        return self.ask(m.WebhookAdd.of(name, text, secret_file))

    def webhook_remove(self, name: str) -> dict[str, Any]:
        return self.ask(m.WebhookRemove(name=name))

    def deliver_webhook(self, name: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        """A delivery (the raw body and its headers): the task it made, like ``submit``'s answer, or for a
        redelivery the task its first delivery made (``existing`` True).  WebhookRefused(status, code,
        message) when the signature is bad or missing (401 bad_signature), its timestamp too old (401
        replayed), the template names a field the body lacks (400 missing_field), the body is not JSON
        (400 bad_body) or too large (413 too_large), or there is no such webhook (404 unknown_webhook)."""
        return self.ask(m.DeliverWebhook(name=name, headers=dict(headers), body=bytes(body)))
