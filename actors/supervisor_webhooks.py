"""The supervisor's webhooks: add, list, remove, and deliveries checked here, where the secrets are.

A mixin of ``actors.supervisor.Supervisor``.  A delivery comes as its raw body and headers
(``DeliverWebhook``, from ``Client.deliver_webhook``: the HTTP gateway's route); its signature is
checked by ``pegasus.triggers.webhooks`` before anything in the body is read.  A refusal is a Reply with
error_type ``WebhookRefused`` and data ``{status, code}``; a redelivery (the same delivery id, or
the same timestamped signature) answers the task its first delivery made.

Secrets: read from ``--secret-file`` (which must be private to its owner), or made here and written
to ``<state dir>/webhooks/<name>.secret`` (0600) for the user to give the sender; kept in the store
either way (an HMAC is checked with the secret itself, so a hash would not do).  Never logged, never
in a reply.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors import messages as m
from actors.request_handler import DEFERRED, request_handler
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


class Webhooks:
    """Handlers of the supervisor for webhooks (see the module docstring)."""

    admission: Any
    store: Any
    settings: Any
    log: Any
    send: Callable[[Any, Any], None]
    _carry_out: Callable[[list[Any]], None]
    _view: Callable[[str], dict[str, Any]]

    @request_handler
    def receiveMsg_WebhookAdd(self, request: m.WebhookAdd, sender: Any) -> Any:
        name = check_name(request.name, "webhook")
        parse_template(request.text)  # a stray brace is refused now, not at the first delivery
        events = check_events(request.events)
        if request.secret_file is not None:
            secret, secret_file = _read_secret(request.secret_file), request.secret_file
        else:
            secret = secrets.token_hex(32).encode()
            secret_file = str(self._secret_path(name))
        triggers.add_webhook(self.store, name, request.text, secret, secret_file, events)
        if request.secret_file is None:
            write_private(secret_file, secret + b"\n")
        self.log.info("webhook_added", name=name, secret_file=secret_file)
        return self._webhook_view(name)

    @request_handler
    def receiveMsg_WebhookList(self, request: m.WebhookList, sender: Any) -> Any:
        return triggers.webhooks(self.store)

    @request_handler
    def receiveMsg_WebhookRemove(self, request: m.WebhookRemove, sender: Any) -> Any:
        view = self._webhook_view(request.name)
        triggers.remove_webhook(self.store, request.name)
        made = self._secret_path(request.name)
        if view["secret_file"] == str(made):  # the secret made here goes with it; a user's file stays
            made.unlink(missing_ok=True)
        self.log.info("webhook_removed", name=request.name)
        return {"name": request.name, "removed": True}

    @request_handler
    def receiveMsg_DeliverWebhook(self, request: m.DeliverWebhook, sender: Any) -> Any:
        try:
            return self._deliver(request, sender)
        except WebhookRefused as exc:
            self.log.warning("webhook_refused", name=request.name, status=exc.status, code=exc.code)
            self.send(sender, m.Reply(request.request_id, False, data={"status": exc.status, "code": exc.code},
                                      error=str(exc), error_type="WebhookRefused"))
            return DEFERRED

    def _deliver(self, request: m.DeliverWebhook, sender: Any) -> dict[str, Any]:
        try:
            found = triggers.webhook(self.store, request.name)
        except ValueError as exc:  # a row an old version or a bug wrote: this webhook alone is refused
            raise WebhookRefused(409, "quarantined", f"webhook {request.name!r} is {exc}; remove it and add it "
                                                     "again") from None
        if found is None:
            raise WebhookRefused(404, "unknown_webhook", f"no webhook named {request.name!r}")
        runtime = self.settings.runtime
        if len(request.body) > runtime.max_message_bytes:
            raise WebhookRefused(413, "too_large", f"the body is {len(request.body)} bytes; the limit is "
                                                   f"{runtime.max_message_bytes}")
        template, secret, events = found
        delivery = deliver(request.name, template, secret, request.headers, request.body, time.time(), events)
        if isinstance(delivery, NoTask):  # a ping, or an event this hook does not take: 200, no task
            self.log.info("webhook_no_task", name=request.name, github_event=delivery.event)
            return {"task_id": None, "event": delivery.event, "message": delivery.reason}
        try:
            machine, _ = check_task(delivery.text, delivery.metadata, None, runtime)
        except ValueError as exc:
            raise WebhookRefused(400, "bad_body", str(exc)) from None
        with self.store.group():
            record, effects = self.admission.submit(delivery.text, machine, DEFAULT_PRIORITY, delivery.metadata,
                                                    SOURCE, delivery.key, scope=WEBHOOK)
            self._carry_out(effects)
        self.log.info("webhook_delivered" if effects else "webhook_redelivered", name=request.name,
                      task_id=record.task_id)
        return {**self._view(record.task_id), "existing": not effects}

    def _secret_path(self, name: str) -> Path:
        return private_dir(self.settings.state_dir() / "webhooks") / f"{name}.secret"

    def _webhook_view(self, name: str) -> dict[str, Any]:
        for view in triggers.webhooks(self.store):
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
