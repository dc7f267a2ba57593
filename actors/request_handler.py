"""How the supervisor answers a client request: validated again, run, and every error a Reply.

A handler returns the Reply's data, or ``DEFERRED`` when it answers later.
Nothing a client sends raises into Thespian (which would re-deliver it and
answer with PoisonMessage).  While the store takes no writes, requests that
would write are refused with what the store health says.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from actors import messages as m
from pegasus.errors import PegasusError
from pegasus.store import StoreUnavailable
from pegasus.store.health import StoreHealth
from pegasus.store.task_ids import full_task_id


class Answering(Protocol):
    """What a request handler needs of the actor it runs in (the supervisor)."""

    admission: Any
    store: Any
    store_health: StoreHealth
    log: Any

    def send(self, target: Any, message: Any) -> None: ...
    def _store_failed(self, error: StoreUnavailable) -> None: ...


Handler = Callable[[Any, Any, Any], Any]


def request_handler(method: Callable[[Any, Any, Any], Any]) -> Handler:
    """Validate a client request, run the handler, answer errors as a Reply.

    The handler returns the Reply's data (or ``DEFERRED`` when it answers later).
    """

    @functools.wraps(method)
    def wrapper(self: Answering, request: m.Request, sender: Any) -> None:
        request_id = str(getattr(request, "request_id", "") or "")
        try:
            request = with_full_task_id(m.revalidate(request), self.store)
            if self.admission is None and not isinstance(request, m.Configure):
                raise PegasusError("the supervisor is not configured yet (start the system with pegasus start)")
            if not self.store_health.writable and isinstance(request, WRITES):
                self.send(sender, m.Reply(request_id, False, error=self.store_health.refusal(),
                                          error_type=type(self.store_health.error).__name__))
                return
            data = method(self, request, sender)
        except StoreUnavailable as exc:  # nothing more is applied until the store takes writes again
            self._store_failed(exc)
            self.send(sender, m.Reply(request_id, False, error=self.store_health.refusal(),
                                      error_type=type(exc).__name__))
            return
        except PegasusError as exc:
            self.send(sender, m.Reply(request_id, False, error=str(exc), error_type=type(exc).__name__))
            return
        except ValueError as exc:
            self.send(sender, m.Reply(request_id, False, error=str(exc), error_type="BadRequest"))
            return
        except Exception as exc:  # noqa: BLE001 - the boundary: never a PoisonMessage
            self.log.exception("request_failed", request=type(request).__name__)
            self.send(sender, m.Reply(request_id, False, error=f"internal error: {exc}", error_type="InternalError"))
            return
        if data is not DEFERRED:
            self.send(sender, m.Reply(request_id, True, data=data))

    return wrapper


def with_full_task_id(request: m.Request[Any], store: Any) -> m.Request[Any]:
    """The request with its ``task_id`` whole when it was given as a unique prefix (issue 31: the 8-character
    ids the dashboard and ``watch`` show); an ambiguous one is refused, listing its matches."""
    task_id = getattr(request, "task_id", None)
    if not isinstance(task_id, str) or store is None:
        return request
    full = full_task_id(store._query, task_id)
    return request if full == task_id else request.model_copy(update={"task_id": full})


DEFERRED = object()
WRITES = (m.Submit, m.SubmitMany, m.Suspend, m.Resume, m.Cancel, m.Approve, m.Retry,  # refused while the store fails
          m.MemoryWrite, m.MemoryForget, m.MemoryImport,
          m.ScheduleAdd, m.ScheduleControl, m.WebhookAdd, m.WebhookRemove, m.DeliverWebhook,
          m.TokenCreate, m.TokenRevoke, m.SendMessage, m.DeleteTask, m.Purge)


