"""How the supervisor answers a client request: validated again, its row run, and every error a Reply.

A row returns the Reply's data, or ``DEFERRED`` when it answers later.
Nothing a client sends raises into Thespian (which would re-deliver it and
answer with PoisonMessage).  While the store takes no writes, requests that
would write are refused with what the store health says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.supervisor.context import Context
from actors.supervisor.store import store_failed
from pegasus.errors import PegasusError
from pegasus.store import Store, StoreUnavailable
from pegasus.store.task_ids import full_task_id

Row = Callable[..., object]  # (ctx, request, sender): the Reply's data, or DEFERRED

DEFERRED = object()
WRITES = (m.Submit, m.SubmitMany, m.Suspend, m.Resume, m.Cancel, m.Approve, m.Retry,  # refused while the store fails
          m.MemoryWrite, m.MemoryForget, m.MemoryImport,
          m.ScheduleAdd, m.SchedulePause, m.ScheduleResume, m.ScheduleTrigger, m.ScheduleRemove,
          m.WebhookAdd, m.WebhookRemove, m.DeliverWebhook,
          m.TokenCreate, m.TokenRevoke, m.SendMessage, m.DeleteTask, m.Purge)


def answer(ctx: Context, row: Row, request: m.Request, sender: ActorAddress) -> None:
    """Run ``row`` for ``request`` and send its Reply (an error as a Reply: never raised)."""
    request_id = str(getattr(request, "request_id", "") or "")
    try:
        request = with_full_task_id(m.revalidate(request), ctx.store)
        if ctx.admission is None and not isinstance(request, m.Configure):
            raise PegasusError("the supervisor is not configured yet (start the system with pegasus start)")
        if not ctx.store_health.writable and isinstance(request, WRITES):
            ctx.send(sender, m.Reply(request_id, False, error=ctx.store_health.refusal(),
                                     error_type=type(ctx.store_health.error).__name__))
            return
        data = row(ctx, request, sender)
    except StoreUnavailable as exc:  # nothing more is applied until the store takes writes again
        store_failed(ctx, exc)
        ctx.send(sender, m.Reply(request_id, False, error=ctx.store_health.refusal(), error_type=type(exc).__name__))
        return
    except PegasusError as exc:
        ctx.send(sender, m.Reply(request_id, False, error=str(exc), error_type=type(exc).__name__))
        return
    except ValueError as exc:
        ctx.send(sender, m.Reply(request_id, False, error=str(exc), error_type="BadRequest"))
        return
    except Exception as exc:  # noqa: BLE001 - the boundary: never a PoisonMessage
        ctx.log.exception("request_failed", request=type(request).__name__)
        ctx.send(sender, m.Reply(request_id, False, error=f"internal error: {exc}", error_type="InternalError"))
        return
    if data is not DEFERRED:
        ctx.send(sender, m.Reply(request_id, True, data=data))


def with_full_task_id(request: m.Request[Any], store: Store | None) -> m.Request[Any]:
    """The request with its ``task_id`` whole when it was given as a unique prefix (the 8-character
    ids the dashboard and ``watch`` show); an ambiguous one is refused, listing its matches."""
    task_id = getattr(request, "task_id", None)
    if not isinstance(task_id, str) or store is None:
        return request
    full = full_task_id(store._query, task_id)
    return request if full == task_id else request.model_copy(update={"task_id": full})


def lookup(row: Callable[..., object]) -> Row:
    """A row that needs no sender (it only reads or writes the store) as a request row."""
    return lambda ctx, request, sender: row(ctx, request)

