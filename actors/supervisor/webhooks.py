"""The supervisor's webhooks: add, list, remove, and deliveries checked here, where the secrets are.

A delivery comes as its raw body and headers (``DeliverWebhook``); ``pegasus.triggers.webhooks``
checks its signature before anything in the body is read, and a redelivery answers the task its
first delivery made.  Secrets are read from a private ``--secret-file`` or made here (0600 under
``<state dir>/webhooks/``), kept in the store (an HMAC needs the secret itself), never logged or
replied (docs/schedules.md).
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from pathlib import Path
from typing import Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.supervisor.commands import carry_out, stepped
from actors.supervisor.context import Context, Rows
from actors.supervisor.replies import DEFERRED
from actors.supervisor.views import task_view
from pegasus.admission import Submitted
from pegasus.admission import inputs as i
from pegasus.errors import PegasusError, WebhookRefused
from pegasus.files import private_dir, write_private
from pegasus.idempotency import WEBHOOK
from pegasus.triggers.schedules import check_name
from pegasus.store import triggers
from pegasus.submission import check_task
from pegasus.task.events import EventType
from pegasus.triggers.webhooks import NoTask, check_events, deliver, parse_template

SOURCE = EventType.WEBHOOK_TRIGGERED.value  # a delivered task's source
MAX_SECRET_BYTES = 4096
DEFAULT_PRIORITY = 5


class WebhookNotFound(PegasusError):
    """No webhook of that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no webhook named {name!r}")


def webhook_add(ctx: Context, request: m.WebhookAdd) -> Any:
    name = check_name(request.name, "webhook")
    parse_template(request.text)  # a stray brace is refused now, not at the first delivery
    events = check_events(request.events)
    if request.secret_file is not None:
        secret, secret_file = _read_secret(request.secret_file), request.secret_file
    else:
        secret = secrets.token_hex(32).encode()
        secret_file = str(_secret_path(ctx, name))
    triggers.add_webhook(ctx.configured[1], name, request.text, secret, secret_file, events)
    if request.secret_file is None:
        write_private(secret_file, secret + b"\n")
    ctx.log.info("webhook_added", name=name, secret_file=secret_file)
    return _webhook_view(ctx, name)


def webhook_list(ctx: Context, request: m.WebhookList) -> Any:
    return triggers.webhooks(ctx.configured[1])


def webhook_remove(ctx: Context, request: m.WebhookRemove) -> Any:
    view = _webhook_view(ctx, request.name)
    triggers.remove_webhook(ctx.configured[1], request.name)
    made = _secret_path(ctx, request.name)
    if view["secret_file"] == str(made):  # the secret made here goes with it; a user's file stays
        made.unlink(missing_ok=True)
    ctx.log.info("webhook_removed", name=request.name)
    return {"name": request.name, "removed": True}


def deliver_webhook(ctx: Context, request: m.DeliverWebhook, sender: ActorAddress) -> Any:
    try:
        return _deliver(ctx, request)
    except WebhookRefused as exc:
        ctx.log.warning("webhook_refused", name=request.name, status=exc.status, code=exc.code)
        ctx.send(sender, m.Reply(request.request_id, False, data={"status": exc.status, "code": exc.code},
                                 error=str(exc), error_type="WebhookRefused"))
        return DEFERRED


REQUESTS: Rows = {m.WebhookAdd: webhook_add, m.WebhookList: webhook_list, m.WebhookRemove: webhook_remove}
FROM_SENDER: Rows = {m.DeliverWebhook: deliver_webhook}


def _deliver(ctx: Context, request: m.DeliverWebhook) -> dict[str, Any]:
    settings, store, _ = ctx.configured
    try:
        found = triggers.webhook(store, request.name)
    except ValueError as exc:  # a row an old version or a bug wrote: this webhook alone is refused
        raise WebhookRefused(409, "quarantined", f"webhook {request.name!r} is {exc}; remove it and add it "
                                                 "again") from None
    if found is None:
        raise WebhookRefused(404, "unknown_webhook", f"no webhook named {request.name!r}")
    runtime = settings.runtime
    if len(request.body) > runtime.max_message_bytes:
        raise WebhookRefused(413, "too_large", f"the body is {len(request.body)} bytes; the limit is "
                                               f"{runtime.max_message_bytes}")
    template, secret, events = found
    delivery = deliver(request.name, template, secret, request.headers, request.body, time.time(), events)
    if isinstance(delivery, NoTask):  # a ping, or an event this hook does not take: 200, no task
        ctx.log.info("webhook_no_task", name=request.name, github_event=delivery.event)
        return {"task_id": None, "event": delivery.event, "message": delivery.reason}
    try:
        machine, _ = check_task(delivery.text, delivery.metadata, None, runtime)
    except ValueError as exc:
        raise WebhookRefused(400, "bad_body", str(exc)) from None
    with store.group():
        commands = stepped(ctx, i.Submit(delivery.text, machine, DEFAULT_PRIORITY, delivery.metadata, SOURCE,
                                         delivery.key, WEBHOOK))
        carry_out(ctx, commands)
    made = next(c for c in commands if isinstance(c, Submitted))
    ctx.log.info("webhook_redelivered" if made.existing else "webhook_delivered", name=request.name,
                 task_id=made.task_id)
    return {**task_view(ctx, made.task_id), "existing": made.existing}


def _secret_path(ctx: Context, name: str) -> Path:
    assert ctx.settings is not None
    return private_dir(ctx.settings.state_dir() / "webhooks") / f"{name}.secret"


def _webhook_view(ctx: Context, name: str) -> dict[str, Any]:
    for view in triggers.webhooks(ctx.configured[1]):
        if view["name"] == name:
            return view
    raise WebhookNotFound(name)


def _read_secret(path: str) -> bytes:
    """The secret in ``path``: an absolute path to a file of this user's that no one else may read."""
    if not os.path.isabs(path):
        raise ValueError(f"secret file {path!r}: give an absolute path")
    try:
        with open(path, "rb") as file:
            info = os.fstat(file.fileno())
            secret = file.read(MAX_SECRET_BYTES + 1).strip()
    except OSError as exc:
        raise ValueError(f"cannot read secret file {path}: {exc.strerror}") from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise ValueError(f"secret file {path} may be read by others (mode {stat.S_IMODE(info.st_mode):o}): "
                         f"chmod 600 {path}")
    if not secret or len(secret) > MAX_SECRET_BYTES:
        raise ValueError(f"secret file {path} must hold a secret of 1 to {MAX_SECRET_BYTES} bytes")
    return secret
